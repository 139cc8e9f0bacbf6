"""Dong et al. 2021's bounds on the residual of pure attention (Thm 2.2, Cor 2.3, 3.1, 3.2).

With r_l = ||res(X^l)||_{1,inf} (composite norm sqrt(||.||_1 ||.||_inf)):

- Thm 2.2 (one head, no skip, no MLP): r_l <= c r_{l-1}^3 per layer, c = 4 gamma beta / sqrt(d_qk),
  beta >= ||W_QK||_1 ||W_V||_{1,inf}; unrolled, r_L <= c^{(3^L - 1)/2} r_0^{3^L}.
- Cor 2.3 (H heads): c -> H c, beta the largest over heads (W_V,h read as W_h = W_V,h W_O,h).
- Cor 3.2 (MLP of Lipschitz constant lambda after each layer): c -> lambda H c.
- Cor 3.1 (skips): no such bound; a skip network with zero value weights keeps r_L = r_0.

The bound says something only while sqrt(c) r_0 < 1 (`informative`): then the unrolled bound
falls doubly exponentially; otherwise it grows and says nothing.

gamma: the paper's constant from its softmax perturbation argument (it bounds how far
softmax(1 r^T + E) moves from softmax(r) for small E; the argument holds while the entries of E
stay within the range where exp(x) <= 1 + 2x). Its closed form is in the paper's appendix, which
this code does not reproduce: we use gamma = 1 unless told otherwise, and every result states
the gamma it used. The bound c r^3 grows with gamma, so a bound that holds with gamma = 1 holds
for every gamma >= 1 on the same inputs (and fewer inputs are informative with a larger gamma).

Token-wise MLP, lambda: for f(x) = act(x W_1 + b_1) W_2 + b_2 with |act'| <= a, the residual
of f(X) about f(x) obeys ||.||_1 <= a ||W_1||_1 ||W_2||_1 ||res||_1 and likewise for ||.||_inf,
so lambda = a ||W_1||_{1,inf} ||W_2||_{1,inf} bounds it in the composite norm.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd
import torch
from torch import Tensor

from rankcollapse.errors import ConfigError
from rankcollapse.frames import check_frame
from rankcollapse.metrics import composite_norm, dtype_floor, res_comp, res_comp_rel
from rankcollapse.nets import NetConfig, ToyNet
from rankcollapse.nets.layers import MLPBlock

#: Largest slope of each MLP activation (GELU's is 1.1289 at x ~ 0.75).
ACTIVATION_SLOPE = {"relu": 1.0, "tanh": 1.0, "gelu": 1.1289}


def norm_1(w: Tensor) -> Tensor:
    """||W||_1: largest absolute column sum (..., p, q) -> (...)."""
    return w.abs().sum(-2).amax(-1)


def norm_inf(w: Tensor) -> Tensor:
    """||W||_inf: largest absolute row sum (..., p, q) -> (...)."""
    return w.abs().sum(-1).amax(-1)


@dataclass(frozen=True)
class DongConstants:
    """The constants of one layer's cubic bound r_l <= c r_{l-1}^3 (c already includes H, lambda)."""

    beta: float  # max over heads of ||W_QK,h||_1 ||W_h||_{1,inf}
    d_qk: float  # the softmax scale's d_qk (1/sqrt(d_qk))
    n_heads: int
    lipschitz: float  # lambda of the MLP after the layer (1 without one)
    gamma: float

    @property
    def c(self) -> float:
        return self.lipschitz * self.n_heads * 4 * self.gamma * self.beta / math.sqrt(self.d_qk)


def layer_constants(
    w_q: Tensor,
    w_k: Tensor,
    w_vo: Tensor,
    *,
    d_qk: float,
    gamma: float = 1.0,
    lipschitz: float = 1.0,
) -> DongConstants:
    """Constants of one multi-head layer from its weights.

    Args:
        w_q, w_k: per-head query and key weights, shape (h, d, d_qk).
        w_vo: per-head value-output products W_h = W_V,h W_O,h, shape (h, d, d).
        d_qk: the softmax scale is 1 / sqrt(d_qk).
        gamma: the paper's softmax constant (stated with every result).
        lipschitz: lambda of an MLP applied after the layer (Cor 3.2), 1 without one.

    Example:
        >>> eye = torch.eye(2, dtype=torch.float64)[None]
        >>> layer_constants(eye, eye, eye, d_qk=4.0).c
        2.0
    """
    if gamma <= 0 or lipschitz <= 0 or d_qk <= 0:
        raise ConfigError(
            f"gamma, lipschitz and d_qk must be positive, got gamma={gamma}, "
            f"lipschitz={lipschitz}, d_qk={d_qk}."
        )
    w_qk = w_q @ w_k.transpose(-1, -2)  # (h, d, d)
    beta = (norm_1(w_qk) * composite_norm(w_vo)).max()
    return DongConstants(float(beta), float(d_qk), int(w_q.shape[0]), float(lipschitz), gamma)


def mlp_lipschitz(w_in: Tensor, w_out: Tensor, activation: str) -> float:
    """lambda = a ||W_1||_{1,inf} ||W_2||_{1,inf}: Lipschitz constant of a token-wise MLP on residuals.

    Example:
        >>> mlp_lipschitz(torch.eye(3, dtype=torch.float64), torch.eye(3, dtype=torch.float64), "relu")
        1.0
    """
    if activation not in ACTIVATION_SLOPE:
        raise ConfigError(
            f"no known slope for activation '{activation}'; known: {', '.join(ACTIVATION_SLOPE)}."
        )
    return float(ACTIVATION_SLOPE[activation] * composite_norm(w_in) * composite_norm(w_out))


def informative(c: float, r0: float) -> bool:
    """Whether the unrolled bound shrinks: sqrt(c) r_0 < 1 (Dong et al. after Thm 2.2).

    Example:
        >>> informative(4.0, 0.4), informative(4.0, 0.6)
        (True, False)
    """
    return math.sqrt(c) * r0 < 1


def log10_unrolled_bound(c: float, r0: float, n_layers: int) -> float:
    """log10 of c^{(3^L - 1)/2} r_0^{3^L}, computed in logs (the value itself under/overflows).

    Example:
        >>> log10_unrolled_bound(1.0, 0.1, 2)
        -9.0
    """
    power = 3**n_layers
    if r0 == 0:
        return -math.inf
    return (power - 1) / 2 * math.log10(c) + power * math.log10(r0)


def log10_stepwise_bound(cs: list[float], r0: float) -> list[float]:
    """log10 of the bound chained layer by layer with per-layer constants: b_l = c_l b_{l-1}^3.

    Returns L + 1 values, index 0 = log10 r_0. Equals `log10_unrolled_bound` when all c_l agree.

    Example:
        >>> log10_stepwise_bound([1.0, 1.0], 0.1)
        [-1.0, -3.0, -9.0]
    """
    logs = [math.log10(r0) if r0 > 0 else -math.inf]
    for c in cs:
        logs.append(math.log10(c) + 3 * logs[-1])
    return logs


def log10_one_step_bounds(cs: list[float], measured: list[float]) -> list[float]:
    """log10 of c_l r_{l-1}^3 with the measured r_{l-1}: the per-layer (cubic) bound, l = 1..L.

    Example:
        >>> log10_one_step_bounds([10.0], [0.1, 0.0005])
        [-2.0]
    """
    return [
        math.log10(c) + 3 * math.log10(r) if r > 0 else -math.inf
        for c, r in zip(cs, measured[:-1], strict=True)
    ]


def toy_constants(net: ToyNet, *, gamma: float = 1.0) -> list[DongConstants]:
    """Per-layer constants of a toy network from its weights (Thm 2.2, Cor 2.3, Cor 3.2).

    lambda is the MLP's (`mlp_lipschitz`) when the network has an MLP without its own skip,
    else 1. The scale d_qk is the network's softmax temperature.
    """
    config = net.config
    constants = []
    for block in net.layers:
        lipschitz = 1.0
        if isinstance(block.mlp_block, MLPBlock) and not config.mlp_skip:  # config.mlp
            mlp = block.mlp_block.mlp
            lipschitz = mlp_lipschitz(mlp.w_1.detach(), mlp.w_2.detach(), config.activation)
        attn = block.attn
        constants.append(
            layer_constants(
                attn.w_q.detach(),
                attn.w_k.detach(),
                attn.head_matrices().detach(),
                d_qk=net.temperature,
                gamma=gamma,
                lipschitz=lipschitz,
            )
        )
    return constants


def bound_frame(
    net: ToyNet, x: Tensor, *, gamma: float = 1.0, allow_skip: bool = False
) -> pd.DataFrame:
    """Measured r_l against the bounds, per layer and sample, for a toy network on input x.

    Rows (layer, sample, metric, value, at_floor): `r` (measured ||res(X^l)||_{1,inf},
    mean-centred), `log10_r`, `res_comp_rel` (r_l / ||X^l||_{1,inf}), `log10_one_step`
    (c_l r_{l-1}^3 from the measured r_{l-1}), `log10_unrolled` (the chained bound from r_0),
    and per sample `informative` (sqrt(c) r_0 < 1 with c the largest c_l) and `c` (that c).
    `at_floor` marks measured values whose relative residual sits at the floor of the
    network's dtype: rounding, not a residual the bound speaks about. The network must have
    no skip (Cor 3.1: no bound exists with skips) and no norm (the theorems have none);
    `allow_skip=True` computes the pure-SAN bound from the same weights for a network with an
    attention skip anyway, to show that it escapes it.
    """
    config = net.config
    skip = config.skip != "off" and not allow_skip
    if skip or config.norm != "none" or (config.mlp and config.mlp_skip):
        raise ConfigError(
            f"Dong et al.'s bounds hold for networks without skips or norms (got skip="
            f"'{config.skip}', norm='{config.norm}', mlp_skip={config.mlp_skip if config.mlp else '-'}"
            "); use skip='off', norm='none' and, with an MLP, mlp_skip=False."
        )
    with torch.no_grad():
        states = net(x).states
    r = torch.stack([res_comp(s) for s in states]).tolist()  # (L + 1, b)
    relative = torch.stack([res_comp_rel(s) for s in states])
    at_floor = (relative <= dtype_floor(net.dtype)).tolist()
    rel = relative.tolist()
    cs = [k.c for k in toy_constants(net, gamma=gamma)]
    c = max(cs)
    rows = []
    for sample in range(len(r[0])):
        measured = [r_l[sample] for r_l in r]
        one_step = [math.nan, *log10_one_step_bounds(cs, measured)]
        chained = log10_stepwise_bound(cs, measured[0])
        for layer, value in enumerate(measured):
            log_r = math.log10(value) if value > 0 else -math.inf
            floored = at_floor[layer][sample]
            for metric, number, flag in (
                ("r", value, floored),
                ("log10_r", log_r, floored),
                ("res_comp_rel", rel[layer][sample], floored),
                ("log10_one_step", one_step[layer], False),
                ("log10_unrolled", chained[layer], False),
            ):
                rows.append((layer, sample, metric, number, flag))
        rows.append((0, sample, "informative", float(informative(c, measured[0])), False))
        rows.append((0, sample, "c", c, False))
    return pd.DataFrame(rows, columns=["layer", "sample", "metric", "value", "at_floor"])


BOUND_ROWS = ["variant", "seed", "sample", "layer", "metric", "value", "at_floor"]
BOUND = "pass bound_frame's rows with variant and seed columns, as dong2021-bounds stores them"


def log_ratios(frame: pd.DataFrame, *, window: float = 0.1) -> pd.DataFrame:
    """Per-layer log ratios log rho_l / log rho_{l-1} of `bound_frame` rows (3 for a cubic step).

    rho = res_comp_rel; only steps with rho_{l-1} < `window` (logs of values near 1 are too
    close to 0 to divide) and both values above the floor. `frame` carries `variant` and
    `seed` columns besides `bound_frame`'s; returns rows (variant, seed, ratio).
    Reference: Dong et al. 2021, Thm 2.2 (r_l <= c r_{l-1}^3).
    """
    check_frame(frame, BOUND_ROWS, ["layer", "value"], BOUND, empty=True)
    rel = frame[frame["metric"] == "res_comp_rel"].sort_values("layer")
    rows = []
    for (variant, seed, _), seq in rel.groupby(["variant", "seed", "sample"]):
        value, floor = seq["value"].to_numpy(), seq["at_floor"].to_numpy(dtype=bool)
        for l in range(1, len(value)):
            if value[l - 1] < window and not floor[l] and not floor[l - 1]:
                rows.append((variant, seed, math.log(value[l]) / math.log(value[l - 1])))
    return pd.DataFrame(rows, columns=["variant", "seed", "ratio"])


def bound_margins(frame: pd.DataFrame) -> pd.DataFrame:
    """log10 bound - log10 measured r_l per informative sequence and layer l >= 1 above the floor.

    `frame`: `bound_frame` rows with `variant` and `seed` columns; returns rows (variant, seed,
    sample, layer, one_step, unrolled), in decades (>= 0 where the bound holds).
    """
    check_frame(frame, BOUND_ROWS, ["layer", "value"], BOUND, empty=True)
    keys = ["variant", "seed", "sample"]
    informative = frame[frame["metric"] == "informative"].set_index(keys)["value"]
    rows = frame[frame["metric"].isin(["log10_r", "log10_one_step", "log10_unrolled"])]
    floor = rows[rows["metric"] == "log10_r"].set_index([*keys, "layer"])["at_floor"]
    wide = rows.pivot_table(index=[*keys, "layer"], columns="metric", values="value")
    keep = ~floor.reindex(wide.index).astype(bool).to_numpy(copy=True)
    keep &= wide.index.get_level_values("layer").to_numpy() > 0
    keep &= informative.reindex(wide.index.droplevel("layer")).to_numpy() == 1.0
    wide = wide[keep]
    return pd.DataFrame(
        {
            "one_step": wide["log10_one_step"] - wide["log10_r"],
            "unrolled": wide["log10_unrolled"] - wide["log10_r"],
        }
    ).reset_index()


def informative_inputs(z: Tensor, c: float, levels: list[float]) -> Tensor:
    """Inputs X = 1 z_0^T + s Z at given levels sqrt(c) r_0 of the bound (< 1: informative).

    `z` (b, n + 1, d): token 0 of each sequence is the common point, tokens 1..n the spread
    Z; the scale s of each sequence is chosen so that sqrt(c) ||res(X)||_{1,inf} = level
    exactly. Returns (len(levels) * b, n, d): sequence i has level levels[i // b].

    Example:
        >>> from rankcollapse.nets import random_tokens
        >>> x = informative_inputs(random_tokens(2, 4, 3, seed=0), 16.0, [0.5, 0.9])
        >>> [round(4 * v, 12) for v in res_comp(x).tolist()]
        [0.5, 0.5, 0.9, 0.9]
    """
    spread = 1 / (math.sqrt(c) * res_comp(z[:, 1:]))  # (b,): residuals scale with the spread
    scaled = z[:, 1:] * spread[:, None, None]
    return torch.cat([z[:, :1] + level * scaled for level in levels])


def skip_network_without_collapse(
    n_layers: int, n_heads: int, d_model: int, *, seed: int = 0
) -> ToyNet:
    """Cor 3.1's construction: a network with skips whose residual never shrinks.

    Skip connections on and every value matrix zero: each layer is X + SA(X) = X + 0, so
    X^L = X^0 and r_L = r_0 at any depth, whatever the attention does.

    Example:
        >>> from rankcollapse.nets import random_tokens
        >>> net = skip_network_without_collapse(8, 2, 4)
        >>> x = random_tokens(1, 5, 4, seed=0)
        >>> bool(torch.equal(net(x).output, x))
        True
    """
    net = ToyNet(
        NetConfig(n_layers=n_layers, n_heads=n_heads, d_model=d_model, skip="on", seed=seed)
    )
    with torch.no_grad():
        for block in net.layers:
            block.attn.w_v.zero_()
    return net
