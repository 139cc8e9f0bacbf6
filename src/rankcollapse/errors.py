"""Exception types. Every error a user can cause is a `RankCollapseError` (a `ValueError`)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class RankCollapseError(ValueError):
    """Base class: bad input, with a message that says what was wrong and how to fix it."""


class InputError(RankCollapseError):
    """A tensor, mask, text or file that cannot be measured (shape, NaN/Inf, too short, empty)."""


class ConfigError(RankCollapseError):
    """A config key, value or option that is not allowed."""


class UnknownNameError(RankCollapseError):
    """A name (model, metric, mask, experiment, variant, architecture, task) that is not known."""


class UnitError(RankCollapseError):
    """A unit of work of an experiment failed; wraps the original error with its context."""


class OutputError(RankCollapseError):
    """An output file or folder that cannot be written (read-only, full, not a folder)."""


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """' Did you mean 'x'?' for the closest known name, or '' when nothing is close."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f" Did you mean '{close[0]}'?" if close else ""


def unknown_name(kind: str, name: str, known: Iterable[str], extra: str = "") -> UnknownNameError:
    """The standard error for an unknown name: lists the known ones and suggests the closest.

    Example:
        >>> str(unknown_name("metric", "mu_rell", ["mu", "mu_rel"]))
        "unknown metric 'mu_rell'. Known: mu, mu_rel. Did you mean 'mu_rel'?"
    """
    known = list(known)
    listed = ", ".join(known) + (f", {extra}" if extra else "")
    return UnknownNameError(f"unknown {kind} '{name}'. Known: {listed}.{did_you_mean(name, known)}")
