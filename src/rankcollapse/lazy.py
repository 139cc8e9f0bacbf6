"""Package namespaces that import a submodule when one of its names is first used (PEP 562).

`from rankcollapse.plot import band_plot` then loads `plot.curves` alone, not every figure's
dependencies (torch and scipy through the bounds): what a command or a worker imports grows
with what it uses, not with the package.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(
    package: str, names: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """`__getattr__` and `__dir__` for `package`, whose public `names` (name -> submodule) are
    imported from `package.submodule` on first use and then kept in its namespace (a name
    the submodule lacks is the submodule itself, e.g. `plot.style`).

    A name equal to its submodule's (`plot.heatmap`, the function of `plot/heatmap.py`) must
    not be imported as a module first (`import rankcollapse.plot.heatmap`): the package would
    then hold the module under that name.

    Example:
        >>> getattr_, _ = lazy_names("json", {"JSONDecodeError": "decoder"})
        >>> getattr_("JSONDecodeError").__name__
        'JSONDecodeError'
    """

    def __getattr__(name: str) -> Any:  # the submodule's function or class
        if name not in names:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = importlib.import_module(f"{package}.{names[name]}")
        value = getattr(module, name, module)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *names})

    return __getattr__, __dir__
