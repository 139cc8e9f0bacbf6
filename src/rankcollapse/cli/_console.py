"""The one place that owns the terminal."""

from rich.console import Console

console = Console(stderr=False, soft_wrap=True)
