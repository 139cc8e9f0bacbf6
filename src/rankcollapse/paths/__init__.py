"""Path decompositions of attention networks (Dong et al. 2021, Sec. 3)."""

__all__: list[str] = []
