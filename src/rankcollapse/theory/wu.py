"""Wu et al. 2024's exponential bounds for masked attention (Thm 1, Cor 1), and measured rates.

- Thm 1 (no LayerNorm): for a quasi-strongly connected mask of radius r, if every allowed
  attention weight stays >= eps, then mu(X^t) <= C (1 - eps^r)^{t/r}.
- Cor 1 (LayerNorm, orthogonal W_V, all initial cosines >= 0): with n center nodes the factor
  is (1 - n eps^{2r}) over 2r layers: mu(X^t) <= C (1 - n eps^{2r})^{t/(2r)}.

The bounds are upper bounds: the measured rate (slope of log mu against layer) is at least as
steep when the theorem applies. They get flatter as the radius grows and eps shrinks, which is
the paper's argument that local masks slow collapse. C is not given by the theorem in closed
form: `bound_excess` fits it on the first r layers and tests the layers after them.

The proof only needs eps within each block of r consecutive layers (the product of r attention
matrices has a center column with entries >= eps^r, so it contracts the token spread by
1 - eps^r); `block_log_bound` uses the eps of each block, measured from the attention weights
the network actually produced, which gives a bound as steep as the theorem allows.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from rankcollapse.errors import InputError
from rankcollapse.masks import MaskSpec, center_nodes, is_quasi_strongly_connected, radius


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


def mask_radius(spec: MaskSpec, n_tokens: int) -> float:
    """Radius of a mask's graph at `n_tokens` tokens; inf when it has no center node (then
    Thm 1 does not apply).

    Example:
        >>> from rankcollapse.masks import parse_mask_spec as spec
        >>> mask_radius(spec("window:1"), 16), mask_radius(spec("causal_window:1"), 16)
        (8.0, 15.0)
        >>> mask_radius(spec("dilated:1:2"), 16)
        inf
    """
    m = spec.build(n_tokens)
    return float(radius(m)) if is_quasi_strongly_connected(m) else math.inf


def radius_concordance(radii: list[float], slopes: list[float]) -> float:
    """Fraction of mask pairs of different finite radius whose collapse follows the radius:
    the larger radius has the larger (flatter) slope. NaN when no such pair or a slope is NaN.

    Example:
        >>> radius_concordance([1, 1, 16, 31], [-5.0, -0.7, -0.01, -0.2])
        0.8
    """
    pairs = [
        (r1 - r2) * (s1 - s2) > 0
        for (r1, s1), (r2, s2) in itertools.combinations(zip(radii, slopes), 2)
        if r1 != r2 and math.isfinite(r1) and math.isfinite(r2)
    ]
    if not pairs or any(math.isnan(s) for s in slopes):
        return math.nan
    return float(np.mean(pairs))


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


def layer_eps(attention: list[Tensor], m: Tensor) -> np.ndarray:
    """eps_l: the smallest allowed attention weight of each layer (over samples and heads).

    Example:
        >>> from rankcollapse.masks import causal
        >>> a = torch.tensor([[1.0, 0.0], [0.25, 0.75]])
        >>> layer_eps([a, 0.5 * causal(2).double() + 0.5 * torch.eye(2)], causal(2)).tolist()
        [0.25, 0.5]
    """
    return np.array([min_allowed_weight(a, m) for a in attention])


def block_log_bound(eps: np.ndarray, r: int) -> np.ndarray:
    """log B_t, t = 0..len(eps): Thm 1's contraction with eps measured per block of r layers.

    Formula: log B_t = sum over the complete blocks b < floor(t / r) of log(1 - eps_b^r),
    eps_b = min of eps over the layers b r + 1 .. (b + 1) r (eps[l - 1] is layer l's).

    Example:
        >>> np.round(np.exp(block_log_bound(np.array([0.5, 0.5, 0.1]), 1)), 4).tolist()
        [1.0, 0.5, 0.25, 0.225]
        >>> np.exp(block_log_bound(np.array([0.5, 0.25, 0.5]), 2)).tolist()
        [1.0, 1.0, 0.9375, 0.9375]
    """
    eps = np.asarray(eps, dtype=np.float64)
    log_b = np.zeros(len(eps) + 1)
    for t in range(r, len(eps) + 1, r):
        log_b[t:] += math.log1p(-(eps[t - r : t].min() ** r))
    return log_b


def bound_excess(log_mu: np.ndarray, log_bound: np.ndarray, r: int) -> float:
    """How far log mu rises above the bound C B_t after the first r layers (<= 0: it holds).

    C = max over t <= r of mu_t / B_t, the smallest constant for which the bound holds on the
    first r layers; the result is max over r < t < len(log_mu) of log mu_t - log C - log B_t.
    NaN when no layer after the first r is given (nothing to test).

    Example:
        >>> log_b = block_log_bound(np.full(4, 0.5), 1)  # halves every layer
        >>> bound_excess(np.log([1.0, 0.5, 0.2, 0.1]), log_b, 1) <= 0
        True
        >>> round(bound_excess(np.log([1.0, 0.5, 0.4, 0.1]), log_b, 1), 4)  # 0.4 > 0.25
        0.47
    """
    log_mu = np.asarray(log_mu, dtype=np.float64)
    if len(log_mu) <= r + 1:
        return math.nan
    log_c = np.max(log_mu[: r + 1] - log_bound[: r + 1])
    return float(np.max(log_mu[r + 1 :] - log_c - log_bound[r + 1 : len(log_mu)]))


def speed_ratio(fast: float, slow: float) -> tuple[float, str]:
    """(fast / slow, "") for two collapse rates (slopes < 0), else (NaN, the reason).

    A ratio of slopes means "how many times faster" only when both curves shrink; a growing
    curve (slope >= 0) or a missing rate has no collapse speed to compare.

    Example:
        >>> speed_ratio(-2.0, -0.5)
        (4.0, '')
        >>> speed_ratio(-2.0, 0.25)
        (nan, 'not both collapse rates (slopes -2 and 0.25): no speed ratio')
    """
    if not (fast < 0 and slow < 0):  # also False for NaN
        reason = f"not both collapse rates (slopes {fast:.3g} and {slow:.3g}): no speed ratio"
        return math.nan, reason
    return fast / slow, ""
