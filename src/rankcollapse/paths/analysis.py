"""Per-length tables: how big each length's component is, how much of the output it carries,
and how collapsed it is; and the products of attention matrices along paths ("chained
attention").

Rows are tidy: `length` (the bias term has length `BIAS` = -1), `sample`, `metric`, `value`,
`at_floor`.
"""

from __future__ import annotations

import pandas as pd
import torch
from torch import Tensor

from rankcollapse.metrics import dtype_floor, measure_states, metrics_frame
from rankcollapse.paths.decompose import LengthDecomposition
from rankcollapse.paths.sampling import SKIP, sample_paths

BIAS = -1  # `length` of the bias term in tables

#: Collapse metrics computed on every non-zero component by default.
COMPONENT_METRICS = ("res_comp_rel", "mu_rel", "stable_rank")


def _size_rows(part: Tensor, output: Tensor, length: int) -> pd.DataFrame:
    """norm = ||C||_F; norm_ratio = ||C||_F / ||out||_F; share = <C, out> / ||out||_F^2."""
    out_sq = output.pow(2).sum((-2, -1))
    values = {
        "norm": part.norm(dim=(-2, -1)).cpu(),
        "norm_ratio": (part.norm(dim=(-2, -1)) / out_sq.sqrt()).cpu(),
        "share": ((part * output).sum((-2, -1)) / out_sq).cpu(),
    }
    return pd.DataFrame(
        [
            {"length": length, "sample": s, "metric": name, "value": float(v[s]), "at_floor": False}
            for name, v in values.items()
            for s in range(part.shape[0])
        ]
    )


def length_frame(
    result: LengthDecomposition,
    *,
    metrics: tuple[str, ...] | list[str] = COMPONENT_METRICS,
    source_dtype: torch.dtype = torch.float64,
) -> pd.DataFrame:
    """Each length's component (and the bias term): size, share of the output, collapse metrics.

    `share` is the component's projection on the output, <C_k, X^L> / ||X^L||_F^2: the shares of
    all lengths and the bias term add up to 1. Collapse metrics (names of
    `rankcollapse.metrics`) are computed on components that are not identically zero
    (a pure SAN has nothing at lengths below L); `source_dtype` is the dtype that produced the
    attention and weights, for the floor flags.

    Example:
        >>> parts = torch.stack([torch.eye(3)[None], 2 * torch.eye(3)[None]]).double()
        >>> frame = length_frame(LengthDecomposition(parts, torch.zeros(1, 3, 3).double()),
        ...                      metrics=["stable_rank"])
        >>> frame.query("metric == 'share'")["value"].round(4).tolist()
        [0.3333, 0.6667, 0.0]
    """
    output = result.output
    frames = []
    parts = [*result.components, result.bias]
    for length, part in zip([*range(len(result.components)), BIAS], parts, strict=True):
        frames.append(_size_rows(part, output, length))
        nonzero = part.abs().amax((-2, -1)) > 0
        if metrics and bool(nonzero.all()):
            values = measure_states(part, metrics=list(metrics), source_dtype=source_dtype)
            frames.append(metrics_frame(values, length=length))
    return pd.concat(frames, ignore_index=True)


def exact_error_frame(result: LengthDecomposition, reference: Tensor) -> pd.DataFrame:
    """How exact the decomposition is: rows (length BIAS, sample, "exact_error", value).

    Formula: max |sum of components + bias - reference| / max |reference| per sample, with
    `reference` (b, n, d) the real network's output; float64 rounding for an exact one.

    Example:
        >>> parts = torch.ones(2, 1, 2, 2, dtype=torch.float64)
        >>> exact_error_frame(LengthDecomposition(parts, torch.zeros(1, 2, 2).double()),
        ...                   2 * torch.ones(1, 2, 2).double())["value"].tolist()
        [0.0]
    """
    error = (result.output - reference).abs().amax((-2, -1)) / reference.abs().amax((-2, -1))
    return pd.DataFrame(
        {
            "length": BIAS,
            "sample": range(len(error)),
            "metric": "exact_error",
            "value": error.tolist(),
            "at_floor": False,
        }
    )


def attention_products(attention: list[Tensor], routes: Tensor) -> Tensor:
    """P_path = P^L_{h_L} ... P^1_{h_1} for each route (SKIP: the identity at that layer).

    Args:
        attention: per layer, (b, h, n, n) attention probabilities.
        routes: (n_paths, L) long, a head index or SKIP per layer.

    Returns:
        (n_paths, b, n, n) float64 products (row-stochastic, like every factor).

    Example:
        >>> a = torch.tensor([[[[0.5, 0.5], [0.0, 1.0]]]])  # (1, 1, 2, 2)
        >>> attention_products([a, a], torch.tensor([[0, 0], [SKIP, 0]]))[:, 0].tolist()
        [[[0.25, 0.75], [0.0, 1.0]], [[0.5, 0.5], [0.0, 1.0]]]
    """
    b, _, n, _ = attention[0].shape
    eye = torch.eye(n, dtype=torch.float64, device=attention[0].device)
    product = eye.repeat(routes.shape[0], b, 1, 1)
    for layer, probs in enumerate(attention):
        through = (routes[:, layer] != SKIP).nonzero().flatten()  # only these paths move
        chosen = probs.to(torch.float64)[:, routes[through, layer]].transpose(0, 1)
        product[through] = chosen @ product[through]  # (paths through, b, n, n)
    return product


def rank1_distance(p: Tensor) -> Tensor:
    """Relative distance of P to its best rank-1 approximation: ||P - P_1||_F / ||P||_F.

    Formula: sqrt(sum_{i >= 2} s_i^2) / sqrt(sum_i s_i^2), s the singular values of P.
    Reference: Dong, Cordonnier, Loukas 2021, Sec. 3 (products of attention along paths).

    Example:
        >>> round(rank1_distance(torch.eye(2, dtype=torch.float64)).item(), 6)
        0.707107
    """
    s = torch.linalg.svdvals(p.to(torch.float64))
    return s[..., 1:].norm(dim=-1) / s.norm(dim=-1)


def products_frame(
    attention: list[Tensor],
    *,
    n_paths: int,
    seed: int,
    source_dtype: torch.dtype = torch.float64,
) -> pd.DataFrame:
    """Rank-1 distance of P_path for `n_paths` uniformly sampled paths of each length 1..L.

    Rows: length, path, sample, metric ("rank1_dist"), value, at_floor (value at the floor of
    `source_dtype`, the dtype that produced the attention).
    """
    n_layers, n_heads = len(attention), attention[0].shape[1]
    floor = dtype_floor(source_dtype)
    rows = []
    for length in range(1, n_layers + 1):
        routes = sample_paths(n_layers, n_heads, length, n_paths, seed=seed + length)[0]
        distance = rank1_distance(attention_products(attention, routes)).cpu()  # (paths, b)
        for path, sample in torch.cartesian_prod(
            torch.arange(distance.shape[0]), torch.arange(distance.shape[1])
        ).tolist():
            value = float(distance[path, sample])
            rows.append((length, path, sample, "rank1_dist", value, value <= floor))
    return pd.DataFrame(rows, columns=["length", "path", "sample", "metric", "value", "at_floor"])


def length_summary(frame: pd.DataFrame, *, by: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per-length means, median rank1_dist) of `length_frame` and `products_frame` rows.

    `frame` holds both kinds of rows and a `by` column naming the network. The means table has
    one row per (by, length >= 0) and a column per share, norm_ratio and res_comp_rel; the
    medians table one row per `by` and a column per path length.
    """
    lengths = frame[frame["length"] >= 0]
    means = (
        lengths[lengths["metric"].isin(["share", "norm_ratio", "res_comp_rel"])]
        .pivot_table(index=[by, "length"], columns="metric", values="value", aggfunc="mean")
        .reset_index()
    )
    products = frame[frame["metric"] == "rank1_dist"]
    return means, products.groupby([by, "length"])["value"].median().unstack()
