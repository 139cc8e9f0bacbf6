"""Wu et al. 2024's exponential bounds for masked attention (Thm 1, Cor 1), and measured rates.

- Thm 1 (no LayerNorm): for a quasi-strongly connected mask of radius r, if every allowed
  attention weight stays >= eps, then mu(X^t) <= C (1 - eps^r)^{t/r}.
- Cor 1 (LayerNorm, orthogonal W_V, all initial cosines >= 0): with n center nodes the factor
  is (1 - n eps^{2r}) over 2r layers: mu(X^t) <= C (1 - n eps^{2r})^{t/(2r)}.

The bounds are upper bounds: the measured rate (slope of log mu against layer) is at least as
steep when the theorem applies. They get flatter as the radius grows and eps shrinks, which is
the paper's argument that local masks slow collapse. C is not given by the theorem in closed
form; the curves here take C = mu(X^0), which we state wherever a curve is drawn.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from rankcollapse.errors import InputError
from rankcollapse.masks import center_nodes, radius


@dataclass(frozen=True)
class MaskGraph:
    """The graph facts of a mask that enter the bounds."""

    radius: int
    centers: list[int]

    @property
    def n_centers(self) -> int:
        return len(self.centers)


def mask_graph(m: Tensor) -> MaskGraph:
    """Radius and center nodes of a mask (edge j -> i when query i may attend to key j).

    Example:
        >>> from rankcollapse.masks import causal
        >>> mask_graph(causal(4))
        MaskGraph(radius=1, centers=[0])
    """
    return MaskGraph(radius(m), center_nodes(m))


def min_allowed_weight(attention: list[Tensor] | Tensor, m: Tensor) -> float:
    """eps: the smallest attention weight on an allowed edge, over all layers, samples and heads.

    Args:
        attention: per-layer tensors (..., n, n), or one stacked tensor.
        m: the boolean mask (n, n) of allowed edges.

    Example:
        >>> a = torch.tensor([[1.0, 0.0], [0.25, 0.75]])
        >>> from rankcollapse.masks import causal
        >>> min_allowed_weight([a], causal(2))
        0.25
    """
    layers = [attention] if isinstance(attention, Tensor) else list(attention)
    if not layers:
        raise InputError("no attention matrices given; pass at least one layer's (..., n, n).")
    return min(float(a.to(torch.float64)[..., m].min()) for a in layers)


def rate_no_norm(eps: float, r: int) -> float:
    """Per-layer log rate of Thm 1's bound: log(1 - eps^r) / r (natural log, <= 0).

    Example:
        >>> round(rate_no_norm(0.5, 1), 4)
        -0.6931
    """
    return math.log1p(-(eps**r)) / r


def rate_unit_norm(eps: float, r: int, n_centers: int) -> float:
    """Per-layer log rate of Cor 1's bound: log(1 - n eps^{2r}) / (2r) (clipped to a valid log).

    Example:
        >>> round(rate_unit_norm(0.5, 1, 1), 4)
        -0.1438
    """
    factor = min(n_centers * eps ** (2 * r), 1.0 - 1e-300)
    return math.log1p(-factor) / (2 * r)


def bound_curve(mu0: float, rate: float, n_layers: int) -> np.ndarray:
    """C exp(rate t) for t = 0..n_layers with C = mu0 (the stated choice of C).

    Example:
        >>> bound_curve(2.0, math.log(0.5), 2).tolist()
        [2.0, 1.0, 0.5]
    """
    return mu0 * np.exp(rate * np.arange(n_layers + 1))


def fitted_rate(mu: np.ndarray, *, floor: float = 0.0) -> float:
    """Slope of a least-squares line through (t, log mu_t), over layers with mu_t > floor.

    Returns nan when fewer than two layers are above the floor.

    Example:
        >>> round(fitted_rate(np.array([1.0, 0.5, 0.25, 0.125])), 4)
        -0.6931
    """
    mu = np.asarray(mu, dtype=np.float64)
    t = np.arange(len(mu))
    keep = mu > floor
    if keep.sum() < 2:
        return math.nan
    return float(np.polyfit(t[keep], np.log(mu[keep]), 1)[0])
