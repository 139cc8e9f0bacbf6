"""Exception types. Every error a user can cause is a `RankCollapseError` (a `ValueError`)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # kept out of `rankcollapse --version`
    from pydantic import ValidationError


class RankCollapseError(ValueError):
    """Base class: bad input, with a message that says what was wrong and how to fix it."""


class InputError(RankCollapseError):
    """A tensor, mask, text or file that cannot be measured (shape, NaN/Inf, too short, empty)."""


class NonFiniteError(InputError):
    """States or attention holding NaN/Inf (an overflowed network): nothing can be measured."""


class ConfigError(RankCollapseError):
    """A config key, value or option that is not allowed."""


class UnknownNameError(RankCollapseError):
    """A name (model, metric, mask, experiment, variant, architecture, task) that is not known."""


class UnitError(RankCollapseError):
    """A unit of work of an experiment failed; wraps the original error with its context."""


class OutputError(RankCollapseError):
    """An output file or folder that cannot be written (read-only, full, not a folder)."""


def install_extra(extra: str) -> str:
    """The one command that installs an optional extra; the package is installed from its
    checkout, so the command is run there.

    Example:
        >>> install_extra("wandb")
        'pip install -e ".[wandb]"'
    """
    return f'pip install -e ".[{extra}]"'


def missing_extra(what: str, extra: str, instead: str) -> ConfigError:
    """The one error for an optional extra that is not installed.

    Example:
        >>> print(missing_extra("WandbLog", "wandb", "log to a CsvLog"))
        WandbLog needs the wandb extra, which is not installed; install it with pip install -e ".[wandb]" (in the checkout), or log to a CsvLog.
    """
    return ConfigError(
        f"{what} needs the {extra} extra, which is not installed; install it with "
        f"{install_extra(extra)} (in the checkout), or {instead}."
    )


_COMMAND_LINE: ContextVar[bool] = ContextVar("command_line", default=False)


@contextmanager
def command_line_words() -> Iterator[None]:
    """Inside this block (a command of the CLI) `option` spells options as flags."""
    token = _COMMAND_LINE.set(True)
    try:
        yield
    finally:
        _COMMAND_LINE.reset(token)


def option(name: str, value: object = True) -> str:
    """An option as the caller writes it, for the "how to fix it" of an error: a keyword
    argument from Python (`n_tokens=32`, `random_tokens=True`), a flag on the command line
    (`--n-tokens 32`, `--random-tokens`; inside `command_line_words`). A str value is a
    placeholder, written as it is; None names the option alone.

    Example:
        >>> option("n_tokens", 32), option("random_tokens"), option("mask", None)
        ('n_tokens=32', 'random_tokens=True', 'mask=')
        >>> with command_line_words():
        ...     option("n_tokens", 32), option("random_tokens"), option("mask", None)
        ('--n-tokens 32', '--random-tokens', '--mask')
    """
    if _COMMAND_LINE.get():
        flag = "--" + name.replace("_", "-")
        return flag if value is True or value is None else f"{flag} {value}"
    return f"{name}=" if value is None else f"{name}={value}"


def closest(name: str, known: Iterable[str]) -> str | None:
    """The known name closest to `name` (difflib similarity >= 0.6), or None."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return close[0] if close else None


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """' Did you mean 'x'?' for the closest known name, or '' when nothing is close."""
    near = closest(name, known)
    return f" Did you mean '{near}'?" if near else ""


def unknown_name(kind: str, name: str, known: Iterable[str], extra: str = "") -> UnknownNameError:
    """The standard error for an unknown name: lists the known ones and suggests the closest.

    Example:
        >>> str(unknown_name("metric", "mu_rell", ["mu", "mu_rel"]))
        "unknown metric 'mu_rell'. Known: mu, mu_rel. Did you mean 'mu_rel'?"
    """
    known = list(known)
    listed = ", ".join(known) + (f", {extra}" if extra else "")
    return UnknownNameError(f"unknown {kind} '{name}'. Known: {listed}.{did_you_mean(name, known)}")


def invalid_config(what: str, err: ValidationError, keys: Iterable[str]) -> ConfigError:
    """The one message for a pydantic validation error: every problem, each naming its key.

    Example:
        >>> from pydantic import BaseModel, ConfigDict, Field, ValidationError
        >>> class Cfg(BaseModel):
        ...     model_config = ConfigDict(extra="forbid")
        ...     n_layers: int = Field(2, ge=1)
        >>> try:
        ...     Cfg(n_layers=0, n_layer=3)
        ... except ValidationError as err:
        ...     print(invalid_config("Cfg", err, Cfg.model_fields))
        invalid Cfg: n_layers: Input should be greater than or equal to 1 (got 0); Cfg has no key 'n_layer'. Did you mean 'n_layers'? Keys: n_layers.
    """
    keys = list(keys)
    problems = []
    for e in err.errors():
        key = ".".join(map(str, e["loc"]))
        if e["type"] == "extra_forbidden":
            problems.append(
                f"{what} has no key '{key}'.{did_you_mean(key, keys)} Keys: " + ", ".join(keys)
            )
        else:
            message = e["msg"].removeprefix("Value error, ").rstrip(".")
            given = e.get("input")
            quoted = isinstance(given, str) and repr(given) in message  # the check quoted it
            if key and not quoted:  # a number is always named: "0" is in "... >= 10"
                message += f" (got {given!r})"
            # a model-level check names its keys itself; its input is the whole config
            problems.append(f"{key}: {message}" if key else message)
    return ConfigError(f"invalid {what}: " + "; ".join(problems) + ".")
