"""Constructions and closed forms of Amsel, Yehudai, Bruna 2024 (arXiv 2407.16153).

- Fact 1: one full-rank head with W_K^T W_Q = t I and M = I computes a softmax-weighted
  average that tends to the nearest neighbour as the temperature t grows; with hardmax it is
  exact. For the farthest-point target (the nearest neighbour of -x_i) use W_K^T W_Q = -t I.
- Thm 2: random rank-r heads (random r-dimensional query-key subspaces, hardmax) with output
  maps M_h fitted by least squares; their error levels off well above 0 as H grows.
- Closed forms for N = 2 orthonormal points and a uniform query: the full-rank head at
  temperature t, and one random rank-1 hardmax head with its best scalar output weight.

Errors are computed, not trained: the callers draw the samples (rankcollapse.tasks).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from scipy import integrate
from torch import Tensor

from rankcollapse.errors import ConfigError
from rankcollapse.nets.rank_attention import RankAttention, check_rank_heads, rank_attention


@dataclass(frozen=True)
class Construction:
    """A hand-built (not trained) attention layer with a readable name and its parameters."""

    name: str
    layer: RankAttention
    params: dict[str, float | int | str] = field(default_factory=dict)


def full_rank_head(
    d_model: int,
    temperature: float,
    *,
    target: str = "nearest",
    hard: bool = False,
    dtype: torch.dtype = torch.float64,
) -> Construction:
    """One head with W_Q = sqrt(t) I, W_K = +-sqrt(t) I (sign - for "farthest") and M = I.

    Example:
        >>> head = full_rank_head(2, 100.0).layer
        >>> x = torch.tensor([[[1.0, 0.0], [0.0, 1.0]]], dtype=torch.float64)
        >>> head(torch.tensor([[[0.6, 0.8]]], dtype=torch.float64), x).detach().round(decimals=6)
        tensor([[[0., 1.]]], dtype=torch.float64)
    """
    check_rank_heads(d_model, d_model, 1)
    if not temperature > 0:
        raise ConfigError(f"temperature={temperature}; pass a temperature t > 0.")
    if target not in ("nearest", "farthest"):
        raise ConfigError(f"unknown target '{target}'. Known: nearest, farthest.")
    eye = torch.eye(d_model, dtype=dtype).unsqueeze(0)  # (1, d, d)
    sign = -1.0 if target == "farthest" else 1.0
    scale = math.sqrt(temperature)
    layer = RankAttention.from_weights(scale * eye, sign * scale * eye, eye.clone(), hard=hard)
    kind = "hardmax" if hard else f"t={temperature:g}"
    return Construction(
        f"full-rank head ({kind})",
        layer,
        {"d_qk": d_model, "n_heads": 1, "temperature": temperature},
    )


def random_low_rank_heads(
    d_model: int, d_qk: int, n_heads: int, *, seed: int, dtype: torch.dtype = torch.float64
) -> Construction:
    """H hardmax heads, each scoring <P_h y, P_h x_j> on a random r-dimensional subspace.

    W_Q,h = W_K,h = an orthonormal basis (rows) of a uniformly random r-dimensional subspace;
    M_h = I / H until `fit_output_maps` fits them.

    Example:
        >>> heads = random_low_rank_heads(6, 1, 4, seed=0).layer
        >>> heads.w_q.shape, heads.hard
        (torch.Size([4, 1, 6]), True)
    """
    check_rank_heads(d_model, d_qk, n_heads)
    g = torch.Generator().manual_seed(seed)
    gaussian = torch.randn(n_heads, d_model, d_qk, generator=g, dtype=torch.float64)
    basis = torch.linalg.qr(gaussian).Q.transpose(-1, -2).to(dtype)  # (H, r, d), orthonormal rows
    w_o = torch.eye(d_model, dtype=dtype).expand(n_heads, d_model, d_model) / n_heads
    layer = RankAttention.from_weights(basis, basis.clone(), w_o.clone(), hard=True)
    name = f"{n_heads} random rank-{d_qk} heads"
    return Construction(name, layer, {"d_qk": d_qk, "n_heads": n_heads, "seed": seed})


def rank_one_vote(construction: Construction, queries: Tensor, x: Tensor) -> Tensor:
    """The majority vote of the rank-1 hardmax heads of `construction`: each head picks a
    point, and an argmax over the pick counts (computed directly, not by an attention layer)
    returns the point most of them chose (the voting idea behind Amsel et al. 2024, Sec. 6,
    Thm 5, whose second layer is attention).

    Formula: head h picks j_h = argmax_j (u_h . y)(u_h . x_j) (its rank-1 score); the output is
    x_{j*} with j* = argmax_j #{h : j_h = j} (ties: the first). For N = 2, head h agrees with
    the nearest neighbour with probability 1 - angle(y, x_1 - x_2) / pi > 1/2 over random u_h,
    so the majority of H heads is right except for an exponentially small (in H) share.

    Args:
        construction: rank-1 heads (`random_low_rank_heads(d, 1, H, ...)`).
        queries: (b, q, d); x: (b, n, d).

    Example:
        >>> heads = random_low_rank_heads(3, 1, 5, seed=0)
        >>> x = torch.eye(3, dtype=torch.float64)[None, :2]  # two points
        >>> rank_one_vote(heads, x[:, :1], x).tolist()  # the query is the first point
        [[[1.0, 0.0, 0.0]]]
    """
    u = construction.layer.w_q.detach()[:, 0].to(x.dtype)  # (H, d): each head's direction
    scores = (
        torch.einsum("bqd,hd->bqh", queries, u)[..., None]
        * torch.einsum("bnd,hd->bhn", x, u)[:, None]
    )  # (b, q, H, n)
    picks = torch.nn.functional.one_hot(scores.argmax(-1), x.shape[1])  # (b, q, H, n)
    winner = picks.sum(-2).argmax(-1)  # (b, q)
    return torch.gather(x, 1, winner[..., None].expand(*winner.shape, x.shape[-1]))


def fit_output_maps(
    construction: Construction,
    x: Tensor,
    queries: Tensor,
    target: Tensor,
    *,
    ridge: float = 1e-9,
    chunk: int = 4096,
) -> Construction:
    """The least-squares value-output maps M_1..M_H for fixed query-key weights.

    The layer is linear in the maps: f = sum_h M_h z_h with z_h = sum_j a_hj x_j the head's
    attention-weighted input, so [M_1 .. M_H] solves one linear least-squares problem
    (normal equations in float64, accumulated over chunks, a tiny ridge for stability).

    Args:
        x: fit sets (b, n, d); queries: (b, q, d); target: (b, q, d).
    """
    layer = construction.layer
    h, d = layer.n_heads, layer.d_model
    gram = torch.zeros(h * d, h * d, dtype=torch.float64)
    cross = torch.zeros(h * d, d, dtype=torch.float64)
    eye = torch.eye(d, dtype=layer.w_q.dtype).expand(h, d, d)
    with torch.no_grad():
        for start in range(0, x.shape[0], chunk):
            part = slice(start, start + chunk)
            z = rank_attention(queries[part], x[part], layer.w_q, layer.w_k, eye, hard=layer.hard)
            z = z.movedim(-3, -2).reshape(-1, h * d).double()  # (samples, H d): [z_1 .. z_H]
            gram += z.T @ z
            cross += z.T @ target[part].reshape(-1, d).double()
    scale = gram.diagonal().mean().clamp_min(1e-300)
    solution = torch.linalg.solve(gram + ridge * scale * torch.eye(h * d, dtype=gram.dtype), cross)
    w_o = solution.reshape(h, d, d).transpose(-1, -2)  # f = sum_h M_h z_h, so M_h = block^T
    fitted = RankAttention.from_weights(
        layer.w_q.detach(), layer.w_k.detach(), w_o.to(layer.w_q.dtype), hard=layer.hard
    )
    return Construction(f"{construction.name}, fitted", fitted, dict(construction.params))


def qk_parameters(d_model: int, d_qk: int, n_heads: int) -> int:
    """Query-key parameters of a layer: H * 2 r d (full rank, one head: 2 d^2).

    Example:
        >>> qk_parameters(16, 1, 16), qk_parameters(16, 16, 1)
        (512, 512)
    """
    return n_heads * 2 * d_qk * d_model


_HALVES = ((0.0, math.pi / 2), (math.pi / 2, math.pi))


def _sphere_coordinate_mean(fn, d_model: int) -> float:
    """E[fn(z)] for z = <e, y>, y uniform on S^{d-1}: z = cos(theta), density ~ sin^{d-2}."""
    if d_model < 2:
        raise ConfigError(f"d_model={d_model}; the closed forms need d_model >= 2.")
    weight = lambda theta: math.sin(theta) ** (d_model - 2)
    total = integrate.quad(weight, 0, math.pi)[0]
    integrand = lambda theta: fn(math.cos(theta)) * weight(theta)
    # split at z = 0, where the large-temperature integrands concentrate
    value = sum(integrate.quad(integrand, a, b, limit=200)[0] for a, b in _HALVES)
    return value / total


def full_rank_error_two_points(d_model: int, temperature: float) -> float:
    """Relative MSE of the full-rank head at temperature t, N = 2 orthonormal points.

    Formula: with a = <x_1, y>, b = <x_2, y>, the head outputs p x_1 + (1 - p) x_2,
        p = sigmoid(t (a - b)), so ||f - f*||^2 = 2 sigmoid(-t |a - b|)^2, and
        a - b = sqrt(2) z with z the coordinate of a uniform y along a unit vector:
        error = 2 E[sigmoid(-sqrt(2) t |z|)^2].
    Reference: Amsel, Yehudai, Bruna 2024, Fact 1 and the N = 2 setting of Thm 2.

    Example:
        >>> round(full_rank_error_two_points(8, 0.0), 6)
        0.5
    """
    s = math.sqrt(2) * temperature
    sigmoid_minus = lambda a: math.exp(-a) / (1 + math.exp(-a))
    return _sphere_coordinate_mean(lambda z: 2 * sigmoid_minus(s * abs(z)) ** 2, d_model)


def random_rank_one_error_two_points(d_model: int) -> float:
    """Relative MSE of one random rank-1 hardmax head with its best scalar output weight, N = 2.

    Formula: the head picks the wrong point with probability p = E[arccos|z|] / pi (Grothendieck:
        sign<u, y> and sign<v, y> differ with probability angle(u, v) / pi); with output
        alpha x_{j_h}, the error 1 - 2 alpha (1 - p) + alpha^2 is least at alpha = 1 - p:
        error = 1 - (1 - p)^2, which tends to 1 (the trivial error) as d grows.
    Reference: Amsel, Yehudai, Bruna 2024, Thm 2 setting (N = 2 orthonormal points).

    Example:
        >>> round(random_rank_one_error_two_points(2), 6)
        0.4375
    """
    p = _sphere_coordinate_mean(lambda z: math.acos(min(abs(z), 1.0)), d_model) / math.pi
    return 1 - (1 - p) ** 2
