"""Bounds and constructions from the three papers."""

__all__: list[str] = []
