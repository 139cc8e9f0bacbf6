"""dong2021-path-lengths states checks only (closed-form counts on L and H): no finding, no case."""

CASES: dict = {}
