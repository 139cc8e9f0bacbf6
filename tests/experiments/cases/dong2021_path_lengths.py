"""dong2021-path-lengths states checks only: no finding, no case."""

CASES: dict = {}
CHECKS_ONLY = "the path counts are closed-form arithmetic on (L, H) (Dong et al. 2021, Sec. 3)"
