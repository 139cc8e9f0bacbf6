"""A matrix as an image with a colour bar, in the project's style (no I/O)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.colors import LogNorm, Normalize
from matplotlib.figure import Figure

from rankcollapse.plot.style import COLUMN_WIDTH, DPI, context, fractions_in


def heatmap(
    matrix: np.ndarray,
    *,
    xlabels: Sequence | None = None,
    ylabels: Sequence | None = None,
    xlabel: str = "",
    ylabel: str = "",
    title: str | None = None,
    cbar_label: str = "",
    log: bool = False,
    vmin: float | None = None,
    vmax: float | None = None,
) -> Figure:
    """A matrix as an image with a colour bar (log colour scale when `log`).

    Pass `vmin`/`vmax` for a fixed colour range (e.g. [0, largest possible rank]), so one
    flat colour never reads as a large difference.

    Example:
        >>> len(heatmap(np.eye(3), title="identity").axes)  # the image and its colour bar
        2
    """
    matrix = _checked(matrix)
    n_rows, n_cols = matrix.shape
    width = COLUMN_WIDTH if n_cols <= 16 else 2 * COLUMN_WIDTH
    height = min(max(2.2, 0.22 * n_rows + 1.0), 7.0)
    with context():
        fig = Figure(figsize=(width, height), layout="constrained", dpi=DPI)
        ax = fig.subplots()
        ax.grid(False)
        norm = LogNorm(vmin, vmax) if log else Normalize(vmin, vmax)
        image = ax.imshow(matrix, aspect="auto", origin="upper", norm=norm, interpolation="nearest")
        fig.colorbar(image, ax=ax, label=fractions_in(cbar_label))
        for labels, axis, set_ticks in ((xlabels, 1, ax.set_xticks), (ylabels, 0, ax.set_yticks)):
            if labels is not None:
                step = max(1, -(-matrix.shape[axis] // 16))  # at most 16 labels per axis
                positions = range(0, matrix.shape[axis], step)
                set_ticks(list(positions), [str(list(labels)[i]) for i in positions])
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        if title:
            fig.suptitle(fractions_in(title))
    return fig


def _checked(matrix: np.ndarray) -> np.ndarray:
    """`matrix` as a float array, refused (InputError) unless it is 2-D, non-empty and numeric."""
    from rankcollapse.errors import InputError

    try:
        values = np.asarray(matrix, dtype=float)
    except (TypeError, ValueError) as err:
        raise InputError(
            f"heatmap takes a matrix of numbers; this one holds others ({err})."
        ) from None
    if values.ndim != 2 or values.size == 0:
        raise InputError(
            f"heatmap takes a non-empty 2-D matrix (rows x columns); got shape {values.shape}."
        )
    return values
