"""Equilibria of masked attention with LayerNorm: Wu et al. 2024, Theorem 3 and the 2-D example.

The dynamics are the paper's, with a fixed causal uniform attention (W_Q = W_K = 0, so every
query spreads its weight equally over the tokens it may see):

    X^{t+1} = LN(A X^t W_V),   A_ij = 1 / i for j <= i (1-based), 0 otherwise,

where LN divides each token (row) by its Euclidean norm (no centring, no gain: the paper's
LayerNorm, Sec. 3; docs/wu2024.md). With `norm=False` the same map without LN: X^{t+1} = A X^t W_V.

Theorem 3: with N = d and W_V = I + w J (J = ones on the superdiagonal), w >= N, there are
equilibria of every rank k = 1..N. For rank k, the first m = N - k + 1 tokens equal e_d,
token m + 1 is (0, ..., 0, -m/w, +-sqrt(1 - m^2/w^2)) and every further token continues the
chain X_{i+1} (I - W_V) = X_i: X_{i+1, j} = -X_{i, j+1} / w for j < d, the last coordinate
fixed up to sign by unit norm. Why this is a fixed point: the first m tokens give
(sum of tokens 1..m+1) W_V = m e_d + x_{m+1} W_V = x_{m+1}, and the chain keeps
(sum of tokens 1..i) W_V = x_i for every i > m, so LN(A X W_V) returns every token unchanged.

2-D counterexample (N = d = 2, W_V = [[1, w], [0, 1]], w > 1): with token 1 at (0, 1), token 2
converges to B = (-1/w, -sqrt(1 - 1/w^2)) from the open arc running counter-clockwise from
angle arccos(-1/w) (an unstable fixed point) to 270 degrees (where A X W_V vanishes), and onto
token 1 from everywhere else. Without LN the same weights collapse.

Reference: Wu, Ajorlou, Wang, Jegelka, Jadbabaie 2024 (arXiv 2405.18781), Thm 3 and the
2-D counterexample; docs/wu2024.md.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
import torch
from torch import Tensor

from rankcollapse.errors import ConfigError


def _check_theorem3(n_tokens: int, d_model: int, w: float) -> None:
    if n_tokens != d_model:
        raise ConfigError(
            f"Theorem 3 needs as many tokens as dimensions, got n_tokens={n_tokens} and "
            f"d_model={d_model}; pass n_tokens == d_model (e.g. both {max(n_tokens, d_model)})."
        )
    if n_tokens < 2:
        raise ConfigError(f"Theorem 3 needs n_tokens >= 2, got {n_tokens}; pass 2 or more.")
    if not w >= n_tokens:
        raise ConfigError(
            f"Theorem 3 needs w >= N, got w={w} with N={n_tokens}; pass w >= {n_tokens} "
            f"(the value matrix is I + w J)."
        )


def theorem3_value_matrix(d_model: int, w: float) -> Tensor:
    """The value matrix W_V = I + w J of Theorem 3 (J: ones on the superdiagonal), float64.

    Example:
        >>> theorem3_value_matrix(2, 3.0)
        tensor([[1., 3.],
                [0., 1.]], dtype=torch.float64)
    """
    return torch.eye(d_model, dtype=torch.float64) + w * torch.diag(
        torch.ones(d_model - 1, dtype=torch.float64), 1
    )


def causal_uniform_attention(n_tokens: int) -> Tensor:
    """Row-stochastic causal attention with W_Q = W_K = 0: A_ij = 1/i for j <= i, float64.

    Example:
        >>> causal_uniform_attention(2)
        tensor([[1.0000, 0.0000],
                [0.5000, 0.5000]], dtype=torch.float64)
    """
    a = torch.tril(torch.ones(n_tokens, n_tokens, dtype=torch.float64))
    return a / a.sum(dim=-1, keepdim=True)


def unit_norm(x: Tensor) -> Tensor:
    """Wu's LayerNorm: each token divided by its Euclidean norm (no centring, no gain)."""
    return x / torch.linalg.vector_norm(x, dim=-1, keepdim=True)


def attention_step(x: Tensor, w_v: Tensor, *, norm: bool = True) -> Tensor:
    """One layer X -> LN(A X W_V) with causal uniform A (`norm=False`: A X W_V), x (..., n, d).

    Example:
        >>> x = torch.tensor([[0.0, 1.0], [1.0, 0.0]], dtype=torch.float64)
        >>> attention_step(x, theorem3_value_matrix(2, 2.0))
        tensor([[0.0000, 1.0000],
                [0.3162, 0.9487]], dtype=torch.float64)
    """
    return _step(x, causal_uniform_attention(x.shape[-2]), w_v, norm)


def _step(x: Tensor, a: Tensor, w_v: Tensor, norm: bool) -> Tensor:
    y = a @ x @ w_v
    return unit_norm(y) if norm else y


def trajectory(x: Tensor, w_v: Tensor, n_layers: int, *, norm: bool = True) -> Tensor:
    """States X^0..X^L of the map `attention_step`, stacked: shape (n_layers + 1, ..., n, d).

    All leading (batch) dimensions run in one pass per layer.
    """
    a = causal_uniform_attention(x.shape[-2])
    states = [x]
    for _ in range(n_layers):
        states.append(_step(states[-1], a, w_v, norm))
    return torch.stack(states)


def fixed_point_residual(x: Tensor, w_v: Tensor) -> Tensor:
    """Largest absolute entry of LN(A X W_V) - X per state, shape (...): 0 at an equilibrium."""
    return (attention_step(x, w_v) - x).abs().amax(dim=(-2, -1))


def theorem3_equilibrium(n_tokens: int, d_model: int, w: float, signs: Sequence[int]) -> Tensor:
    """The Theorem 3 equilibrium of rank k = len(signs), shape (N, N), float64.

    `signs[0]` flips the whole state (the map is odd, so -X is an equilibrium too);
    `signs[j]` for j >= 1 is the sign of the last coordinate of token m + j (before that
    flip), m = N - k + 1. Each of the 2^k sign choices gives a distinct equilibrium.

    Example:
        >>> theorem3_equilibrium(2, 2, 2.0, [1, -1])
        tensor([[ 0.0000,  1.0000],
                [-0.5000, -0.8660]], dtype=torch.float64)
    """
    _check_theorem3(n_tokens, d_model, w)
    k = len(signs)
    if not 1 <= k <= n_tokens or any(s not in (-1, 1) for s in signs):
        raise ConfigError(
            f"signs must be 1 to {n_tokens} entries of +1 or -1 (one per unit of rank), "
            f"got {list(signs)}; e.g. [1, -1] for a rank-2 equilibrium."
        )
    m = n_tokens - k + 1
    x = torch.zeros(n_tokens, d_model, dtype=torch.float64)
    x[:m, -1] = 1.0
    for i in range(m, n_tokens):
        if i == m:
            x[i, -2] = -m / w
        else:
            x[i, :-1] = -x[i - 1, 1:] / w
        x[i, -1] = signs[i - m + 1] * math.sqrt(1.0 - float(x[i, :-1].square().sum()))
    return signs[0] * x


def theorem3_equilibria(n_tokens: int, d_model: int, w: float, rank: int) -> list[Tensor]:
    """All 2^rank equilibria of the given rank, in the order of `itertools.product` of signs.

    Example:
        >>> len(theorem3_equilibria(4, 4, 4.0, 3))
        8
    """
    _check_theorem3(n_tokens, d_model, w)
    if not 1 <= rank <= n_tokens:
        raise ConfigError(f"rank must be in 1..{n_tokens} (N = d), got {rank}.")
    return [
        theorem3_equilibrium(n_tokens, d_model, w, signs)
        for signs in itertools.product((1, -1), repeat=rank)
    ]


def theorem3_stable_rank_bound(n_tokens: int, w: float) -> float:
    """Upper bound on the stable rank of a full-rank equilibrium: N / (N - (N-1)/w^2).

    Example:
        >>> round(theorem3_stable_rank_bound(4, 4.0), 6)
        1.04918
    """
    return n_tokens / (n_tokens - (n_tokens - 1) / w**2)


def _check_counterexample(w: float) -> None:
    if not w > 1:
        raise ConfigError(
            f"the 2-D counterexample needs w > 1, got w={w}; pass e.g. w=2 "
            f"(W_V = [[1, w], [0, 1]])."
        )


def counterexample_point_b(w: float) -> Tensor:
    """The non-collapsed fixed point of token 2: B = (-1/w, -sqrt(1 - 1/w^2)), float64."""
    _check_counterexample(w)
    return torch.tensor([-1.0 / w, -math.sqrt(1.0 - 1.0 / w**2)], dtype=torch.float64)


def counterexample_basin_arc(w: float) -> tuple[float, float]:
    """The basin of B in degrees: the open arc counter-clockwise from arccos(-1/w) to 270.

    Example:
        >>> counterexample_basin_arc(2.0)
        (120.00000000000001, 270.0)
    """
    _check_counterexample(w)
    return math.degrees(math.acos(-1.0 / w)), 270.0


def ring_inputs(n_angles: int, first_token: Sequence[float] = (0.0, 1.0)) -> tuple[Tensor, Tensor]:
    """Starting states for the 2-D example: token 1 fixed, token 2 on a ring of angles.

    Angles are (i + 1/2) 360 / n_angles degrees, so no start sits exactly on a fixed point
    or on 270 degrees (where A X W_V vanishes for token 1 at (0, 1)).

    Returns:
        angles in degrees, shape (n_angles,), and states of shape (n_angles, 2, 2).
    """
    if n_angles < 4:
        raise ConfigError(f"n_angles must be >= 4 for a ring, got {n_angles}.")
    first = unit_norm(torch.tensor(first_token, dtype=torch.float64))
    angles = (torch.arange(n_angles, dtype=torch.float64) + 0.5) * (360.0 / n_angles)
    radians = torch.deg2rad(angles)
    x = torch.empty(n_angles, 2, 2, dtype=torch.float64)
    x[:, 0] = first
    x[:, 1, 0] = torch.cos(radians)
    x[:, 1, 1] = torch.sin(radians)
    return angles, x


def long_frame(values: dict[str, Tensor], **ids: object) -> pd.DataFrame:
    """Tidy rows (ids..., sample, metric, value) of per-sample tensors of equal length; an id
    is a scalar or a per-sample tensor.

    Example:
        >>> long_frame({"rank": torch.tensor([1, 2])}, n_tokens=3).values.tolist()
        [[3, 0, 'rank', 1.0], [3, 1, 'rank', 2.0]]
    """
    frames = []
    for metric, tensor in values.items():
        value = tensor.double().cpu().numpy()
        columns = {k: (v.cpu().numpy() if isinstance(v, Tensor) else v) for k, v in ids.items()}
        frames.append(
            pd.DataFrame(
                {**columns, "sample": np.arange(len(value)), "metric": metric, "value": value}
            )
        )
    return pd.concat(frames, ignore_index=True)


def layer_grid(n_layers: int) -> np.ndarray:
    """Every layer up to 10, then about 30 log-spaced layers up to `n_layers`.

    Example:
        >>> layer_grid(12).tolist()
        [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]
    """
    grid = np.concatenate([np.arange(min(n_layers, 10) + 1), np.geomspace(10, n_layers, 30)])
    return np.unique(np.round(grid).astype(int))
