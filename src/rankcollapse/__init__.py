"""rankcollapse: measure, explain and reproduce rank collapse in attention networks."""

import os
import sys

_NAME = "rankcollapse-"
_SUFFIX = ".dist-info"


def _version() -> str:
    """The installed version, read from the name of the distribution's metadata folder
    (`rankcollapse-0.1.0.dist-info`, PEP 427) in the first entry of sys.path that holds one, as
    `importlib.metadata.version` finds it; importing importlib.metadata (email, zipfile) would
    take about 50 ms of every command's start-up. A source tree without installation: 0.0.0."""
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:  # a zip file, a missing folder
            continue
        for name in names:
            if name.startswith(_NAME) and name.endswith(_SUFFIX):
                return name[len(_NAME) : -len(_SUFFIX)]
    return "0.0.0"


__version__ = _version()

__all__ = ["__version__"]
