"""rankcollapse: measure, explain and reproduce rank collapse in attention networks."""

import os
import sys

_SUFFIX = ".dist-info"


def installed_versions(*names: str) -> dict[str, str]:
    """{name: version} of the distributions among `names` that are installed, each read from
    the name of its metadata folder (`rankcollapse-0.1.0.dist-info`, PEP 427; names compared
    case- and separator-blind) in the first entry of sys.path that holds one, as
    `importlib.metadata.version` finds it; importing importlib.metadata (email, zipfile) would
    take about 50 ms of every command's start-up. A name without such a folder is left out.

    Example:
        >>> installed_versions("no-such-distribution")
        {}
    """
    wanted = {_normal(name): name for name in names}
    found: dict[str, str] = {}
    for entry in sys.path:
        if set(wanted.values()) <= found.keys():
            break
        try:
            folders = os.listdir(entry or ".")
        except OSError:  # a zip file, a missing folder
            continue
        for folder in folders:
            if folder.endswith(_SUFFIX):
                name, _, version = folder[: -len(_SUFFIX)].partition("-")
                found.setdefault(wanted.get(_normal(name), ""), version)
                found.pop("", None)
    return found


def _normal(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


# a source tree without installation: 0.0.0
__version__ = installed_versions("rankcollapse").get("rankcollapse", "0.0.0")

__all__ = ["__version__", "installed_versions"]
