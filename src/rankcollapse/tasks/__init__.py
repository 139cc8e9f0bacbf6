"""Data generators for the learning experiments (seeded streams, trivial baselines)."""

__all__: list[str] = []
