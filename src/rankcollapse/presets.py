"""The presets every experiment has (a light module: the command line reads it at start-up)."""

PRESETS: tuple[str, ...] = ("quick", "paper")
"""quick: minutes on a laptop, small sizes; paper: the sizes of the paper's experiment."""
EXTRA_PRESETS: tuple[str, ...] = ("cpu",)
"""Presets some experiments have. cpu: where `quick` cannot train the arms past their gates,
the settings that do within about half an hour on a 2-core CPU, so the findings decide."""
PRESET_NAMES: tuple[str, ...] = PRESETS + EXTRA_PRESETS
"""Every preset name an experiment may declare (what --preset accepts)."""
DEFAULT_PRESET = "quick"
