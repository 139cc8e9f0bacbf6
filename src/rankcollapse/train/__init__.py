"""Training loops for the learning experiments."""

__all__: list[str] = []
