"""The presets every experiment has (a light module: the command line reads it at start-up)."""

PRESETS: tuple[str, ...] = ("quick", "paper")
"""quick: minutes on a laptop, small sizes; paper: the sizes of the paper's experiment."""
DEFAULT_PRESET = "quick"
