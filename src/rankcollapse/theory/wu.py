"""Wu et al. 2024's exponential bounds for masked attention (Thm 1, Cor 1), and measured rates.

- Thm 1 (no LayerNorm): for a quasi-strongly connected mask of radius r, if every allowed
  attention weight stays >= eps, then mu(X^t) <= C (1 - eps^r)^{t/r}.
- Cor 1 (LayerNorm, orthogonal W_V, all initial cosines >= 0): with n center nodes the factor
  is (1 - n eps^{2r}) over 2r layers: mu(X^t) <= C (1 - n eps^{2r})^{t/(2r)}.

The bounds are upper bounds: the measured rate (slope of log mu against layer) is at least as
steep when the theorem applies. They get flatter as the radius grows and eps shrinks, which is
the paper's argument that local masks slow collapse. The theorem names its constant C without
a closed form; `thm1_log_bound` computes one from the proof's route (sqrt(N - 1), the value-map
products and mu(X^0)) with eps the smallest allowed weight seen up to each layer, so that the
bound can be tested at every layer with nothing fitted.
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
        for (r1, s1), (r2, s2) in itertools.combinations(zip(radii, slopes, strict=True), 2)
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
    factor = min(n_centers * eps ** (2 * r), math.nextafter(1.0, 0.0))  # log1p(-1) is -inf
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


def thm1_log_bound(
    eps: np.ndarray, r: int, n_tokens: int, value_norms: np.ndarray | None = None
) -> np.ndarray:
    """log(B_t / mu(X^0)), t = 0..len(eps): Thm 1's bound with its constants computed, not fitted.

    B_t = sqrt(N - 1) K_t (1 - eps_t^r)^floor(t / r) mu(X^0), where
    - eps_t = min(eps[:t]): the smallest allowed attention weight of layers 1..t (eps[l - 1] is
      layer l's), the theorem's eps for the network cut after layer t (t = 0: no contraction;
      so a small eps at a late layer loosens the bound at every later layer, as in the theorem);
    - K_t = max(value_norms[:t + 1]), value_norms[s] = ||W_V^0 ... W_V^{s-1}||_2 (1 at s = 0):
      A3's bound on the value-map products, over the layers up to t (all 1 when omitted, as for
      orthogonal value maps);
    - N = n_tokens, r the mask's radius.

    Wu et al. 2024 (arXiv 2405.18781), Sec. 4, Thm 1, state mu(X^t) <= C (1 - eps^r)^{t/r} with
    "a constant C" under A1 (self-loops), A2 (bounded W_Q, W_K) and A3 (bounded products of the
    W_V). The stored copies of the paper searched for this module hold its abstract and
    introduction only, so C is derived here along the route of the theorem's proof (products of
    row-stochastic matrices with a center column). Write X^t = P_t X^0 V_t, P_t = A^{t-1} ... A^0
    (row-stochastic), V_t = W_V^0 ... W_V^{t-1}, and D(X) = max_ij ||x_i - x_j|| (rows).
    1. Rows of P Y are convex combinations of rows of Y: D(P Y) <= tau(P) D(Y), with
       tau(P) = 1 - min_ij sum_k min(P_ik, P_jk) the ergodicity coefficient of a stochastic
       matrix (Seneta, Non-negative Matrices and Markov Chains, 1981, Ch. 3).
    2. A center node c reaches every token in <= r steps and A1 gives self-loops, so each
       product Q of r consecutive attention matrices has Q_ic >= eps^r for every i:
       tau(Q) <= 1 - eps^r (this is the step that makes the rate (1 - eps^r)^{1/r}).
    3. D(X V) <= ||V||_2 D(X); a row-constant bias changes no difference of rows.
    4. 2 N mu(X)^2 = sum_ij ||x_i - x_j||^2 gives mu <= sqrt((N - 1) / 2) D and D <= sqrt(2) mu.
    So mu(X^t) <= sqrt(N - 1) ||V_t||_2 (1 - eps^r)^floor(t/r) mu(X^0). The theorem's form
    C (1 - eps^r)^{t/r} follows with C = sqrt(N - 1) K mu(X^0) (1 - eps^r)^{-(r-1)/r}; the form
    tested here is the proof's, tighter between multiples of r and equal at them.

    Example:
        >>> np.round(np.exp(thm1_log_bound(np.array([0.5, 0.5, 0.1]), 1, 5)), 4).tolist()
        [2.0, 1.0, 0.5, 1.458]
        >>> np.round(np.exp(thm1_log_bound(np.full(3, 0.5), 2, 2)), 4).tolist()
        [1.0, 1.0, 0.75, 0.75]
    """
    eps = np.minimum.accumulate(np.asarray(eps, dtype=np.float64))
    t = np.arange(len(eps) + 1)
    blocks = t // r
    eps_t = np.concatenate([[0.0], eps])  # t = 0 has no block, so eps_0 never enters
    log_k = np.zeros(len(t))
    if value_norms is not None:
        norms = np.asarray(value_norms, dtype=np.float64)
        if len(norms) != len(t):
            raise InputError(
                f"value_norms has {len(norms)} entries; pass one per layer 0..{len(eps)} "
                f"({len(t)}), the first being 1 (no value map yet)."
            )
        log_k = np.log(np.maximum.accumulate(norms))
    contraction = blocks * np.array([r * rate_no_norm(e, r) for e in eps_t])
    return 0.5 * math.log(max(n_tokens - 1, 1)) + log_k + contraction


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
