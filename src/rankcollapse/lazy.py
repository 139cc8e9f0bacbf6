"""Package namespaces that import a submodule when one of its names is first used (PEP 562).

`from rankcollapse.plot import band_plot` then loads `plot.curves` alone, not every figure's
dependencies (torch and scipy through the bounds): what a command or a worker imports grows
with what it uses, not with the package. A function named `deferred` goes further: until its
submodule is loaded, the name gives a stand-in that imports the submodule at its first call, so
a module that imports a figure function at its top (every experiment) loads matplotlib only
when it draws (a stored run, a worker that runs units: never). `lazy_module("pandas")` does
the same for a library a module uses in its functions only: a fully stored `rankcollapse run`
then never imports pandas or numpy (their import is most of its time).
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Callable, Collection, Mapping
from typing import Any


def lazy_names(
    package: str, names: Mapping[str, str], deferred: Collection[str] = ()
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """`__getattr__` and `__dir__` for `package`, whose public `names` (name -> submodule) are
    imported from `package.submodule` on first use and then kept in its namespace (a name
    the submodule lacks is the submodule itself, e.g. `plot.style`). A function in `deferred`
    whose submodule is not loaded yet is a `Deferred` stand-in (not kept), loaded at its call.

    A function must not share its submodule's name: once the submodule is imported (by a
    doctest's collection, say), the package holds the module under that name.

    Example:
        >>> getattr_, _ = lazy_names("json", {"JSONDecodeError": "decoder"})
        >>> getattr_("JSONDecodeError").__name__
        'JSONDecodeError'
    """

    def __getattr__(name: str) -> Any:  # the submodule's function or class
        if name not in names:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module_name = f"{package}.{names[name]}"
        if name in deferred and module_name not in sys.modules:
            return Deferred(module_name, name)
        module = importlib.import_module(module_name)
        value = getattr(module, name, module)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *names})

    return __getattr__, __dir__


class Deferred:
    """The function `name` of `module`, imported at its first call (or first look at its
    attributes: `__doc__`, `__wrapped__` for `inspect.signature`).

    Example:
        >>> decoder = Deferred("json.decoder", "JSONDecoder")
        >>> decoder().decode("[1]"), decoder.__name__
        ([1], 'JSONDecoder')
        >>> import pickle; pickle.loads(pickle.dumps(decoder))
        <deferred json.decoder.JSONDecoder>
    """

    def __init__(self, module: str, name: str) -> None:
        self._module, self._name = module, name

    @property
    def __wrapped__(self) -> Callable[..., Any]:
        value = getattr(importlib.import_module(self._module), self._name)
        # kept in the package, as `lazy_names` keeps it (over a submodule of the same name)
        setattr(sys.modules[self._module.rpartition(".")[0]], self._name, value)
        return value

    @property
    def __doc__(self) -> str | None:  # type: ignore[override]
        return self.__wrapped__.__doc__

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.__wrapped__(*args, **kwargs)

    def __getattr__(self, attribute: str) -> Any:
        if attribute.startswith("_") and attribute not in ("__name__", "__qualname__"):
            raise AttributeError(attribute)  # (un)pickling asks for such names: not forwarded
        return getattr(self.__wrapped__, attribute)

    def __repr__(self) -> str:
        return f"<deferred {self._module}.{self._name}>"


class LazyModule(types.ModuleType):
    """The module `name`, imported at the first look at one of its attributes (`pd.DataFrame`);
    every look goes to the module itself, so a name set on it later is seen."""

    def __getattr__(self, attribute: str) -> Any:
        return getattr(importlib.import_module(self.__name__), attribute)

    def __repr__(self) -> str:
        return f"<lazy module {self.__name__!r}>"


def lazy_module(name: str) -> Any:
    """`name` as it is (imported already), else a `LazyModule` that imports it when used. For
    type checkers, import it under `TYPE_CHECKING` and bind this in the `else` branch:

        if TYPE_CHECKING:
            import pandas as pd
        else:
            pd = lazy_module("pandas")

    Example:
        >>> colorsys = lazy_module("colorsys")
        >>> colorsys.rgb_to_hsv(1.0, 0.0, 0.0)
        (0.0, 1.0, 1.0)
    """
    return sys.modules.get(name) or LazyModule(name)
