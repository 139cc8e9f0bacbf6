"""The one check of the tidy frames that figures and rates read (layer, metric, value, ...),
and of the column names they take: pandas only, so that a drawing process or a report never
loads torch for it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rankcollapse.errors import InputError

if TYPE_CHECKING:
    import pandas as pd


def check_frame(
    frame: pd.DataFrame,
    columns: Sequence[str],
    numbers: Sequence[str],
    how: str,
    *,
    empty: bool = False,
) -> None:
    """Refuse (InputError) a frame that lacks one of `columns`, has no rows (unless `empty`:
    a table of no curves), or holds anything but numbers (NaN and Inf count as numbers) in
    one of `numbers`; each message ends with `how` to get a frame that fits.

    Example:
        >>> import pandas as pd
        >>> check_frame(pd.DataFrame({"layer": [0]}), ["layer", "value"], [], "pass a curve")
        Traceback (most recent call last):
        rankcollapse.errors.InputError: the frame has no column(s) ['value'] (columns: ['layer']); pass a curve.
    """
    from pandas.api.types import is_bool_dtype, is_numeric_dtype

    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise InputError(
            f"the frame has no column(s) {missing} (columns: {list(frame.columns)}); {how}."
        )
    if frame.empty:
        if empty:
            return
        raise InputError(f"the frame has no rows; {how}.")
    for column in numbers:
        kind = frame[column].dtype
        if not is_numeric_dtype(kind) or is_bool_dtype(kind):
            raise InputError(
                f"column {column!r} holds {kind} values, not numbers; convert it "
                f"(pandas.to_numeric) or {how}."
            )


def as_names(names: str | Sequence[str]) -> list[str]:
    """Names given as one string or several, as a list (a string is one name, never read
    letter by letter).

    Example:
        >>> as_names("model"), as_names(("model", "variant"))
        (['model'], ['model', 'variant'])
    """
    return [names] if isinstance(names, str) else list(names)
