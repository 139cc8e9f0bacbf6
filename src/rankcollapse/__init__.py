"""rankcollapse: measure, explain and reproduce rank collapse in attention networks."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("rankcollapse")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0"

__all__ = ["__version__"]
