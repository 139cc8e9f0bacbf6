"""The one place that owns the terminal: results to stdout, errors and progress to stderr."""

from rich.console import Console

console = Console(soft_wrap=True)
err_console = Console(stderr=True, soft_wrap=True)
