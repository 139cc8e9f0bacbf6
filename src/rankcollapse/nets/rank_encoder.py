"""The off-the-shelf encoder of Amsel, Yehudai, Bruna 2024 (arXiv 2407.16153), Sec. 7.

torch's own `TransformerEncoderLayer`s, post-norm with both norms replaced by the unit
normalisation x -> g x / ||x|| (one learnable gain g), ReLU MLP, no dropout, raw unit vectors
in and out (no embedding, no head). H heads per layer have query-key rank d / H (torch ties
them); the width multiplier m puts m attention modules side by side per layer, averaged.
Optional scratch dimensions (Sec. 6, Thm 5's construction): P extra coordinates appended to
every token, holding a one-hot of its position, so the layers run at width d + P and heads
have rank (d + P) / H; the output is the first d coordinates.
"""

from __future__ import annotations

from typing import cast

import torch
from torch import Tensor, nn

from rankcollapse.errors import ConfigError


class GainUnitNorm(nn.Module):
    """x -> g x / ||x|| with one learnable scalar gain g (Amsel et al. 2024, Sec. 7: their
    replacement for LayerNorm; `nets.layers.UnitNorm` is the same without the gain).

    A LayerNorm before the first attention centres each key and stalls the full-rank model.

    Example:
        >>> GainUnitNorm()(torch.tensor([[3.0, 4.0]])).detach()
        tensor([[0.6000, 0.8000]])
    """

    def __init__(self) -> None:
        super().__init__()
        self.gain = nn.Parameter(torch.ones(()))

    def forward(self, x: Tensor) -> Tensor:
        return self.gain * x / x.norm(dim=-1, keepdim=True).clamp_min(1e-12)


class AveragedAttention(nn.Module):
    """m parallel `nn.MultiheadAttention` modules, averaged: m H heads at rank d / H."""

    def __init__(self, d_model: int, n_heads: int, width_multiplier: int) -> None:
        super().__init__()
        self.modules_ = nn.ModuleList(
            nn.MultiheadAttention(d_model, n_heads, dropout=0.0, batch_first=True)
            for _ in range(width_multiplier)
        )

    def forward(self, query: Tensor, key: Tensor, value: Tensor, **kwargs) -> tuple[Tensor, None]:
        kwargs["need_weights"] = False
        outputs = [attn(query, key, value, **kwargs)[0] for attn in self.modules_]
        return torch.stack(outputs).mean(0), None


class UnitNormEncoderLayer(nn.TransformerEncoderLayer):
    """torch's post-norm encoder layer with both norms replaced by `GainUnitNorm`, no dropout."""

    def __init__(self, d_model: int, n_heads: int, d_ff: int, width_multiplier: int) -> None:
        super().__init__(d_model, n_heads, d_ff, dropout=0.0, batch_first=True)
        # torch annotates these as LayerNorm and MultiheadAttention; its slow path (`forward`
        # below) only calls them, so any module with their call signature fits
        self.norm1, self.norm2 = GainUnitNorm(), GainUnitNorm()  # type: ignore[assignment]
        if width_multiplier > 1:
            self.self_attn = AveragedAttention(  # type: ignore[assignment]
                d_model, n_heads, width_multiplier
            )

    def forward(
        self,
        src: Tensor,
        src_mask: Tensor | None = None,
        src_key_padding_mask: Tensor | None = None,
        is_causal: bool = False,
    ) -> Tensor:  # torch's slow path; its fused kernel wants LayerNorm
        x = self.norm1(src + self._sa_block(src, src_mask, src_key_padding_mask, is_causal))
        return self.norm2(x + self._ff_block(x))


class RankEncoder(nn.Module):
    """The off-the-shelf encoder of Sec. 7: unit vectors in, unit-scale vectors out.

    n_layers torch encoder layers, H heads of rank d / H each, `width_multiplier` m parallel
    attention modules per layer (m = 1, 8, 64 give d^2, d^2.5, d^3 query-key parameters at
    d = 64); no embedding, no head. With `positions` = P > 0, token i enters as [x_i; e_i]
    (e_i the i-th unit vector of R^P: Thm 5's scratch dimensions), the layers have width
    d + P and H heads of rank (d + P) / H, and the output keeps the first d coordinates.

    Example:
        >>> RankEncoder(8, n_heads=2, n_layers=1, d_ff=16, seed=0)(torch.randn(3, 5, 8)).shape
        torch.Size([3, 5, 8])
        >>> scratch = RankEncoder(8, n_heads=12, n_layers=1, d_ff=16, positions=4)
        >>> scratch.d_qk, scratch(torch.randn(3, 4, 8)).shape  # rank-1 heads at width 12
        (1, torch.Size([3, 4, 8]))
    """

    def __init__(
        self,
        d_model: int,
        *,
        n_heads: int,
        n_layers: int,
        d_ff: int = 2048,
        width_multiplier: int = 1,
        positions: int = 0,
        seed: int = 0,
    ) -> None:
        super().__init__()
        width = d_model + positions
        if positions < 0 or n_heads < 1 or width % n_heads:
            raise ConfigError(
                f"n_heads={n_heads} must divide the width d_model + positions = {width} "
                f"(torch's heads have rank width / H; positions={positions} >= 0); pass a "
                f"divisor of {width}."
            )
        if n_layers < 1 or width_multiplier < 1 or d_ff < 1:
            raise ConfigError(
                f"n_layers={n_layers}, width_multiplier={width_multiplier}, d_ff={d_ff}: "
                "each must be >= 1."
            )
        self.n_heads, self.d_qk, self.d_model, self.positions = (
            n_heads,
            width // n_heads,
            d_model,
            positions,
        )
        with torch.random.fork_rng():
            torch.manual_seed(seed)  # torch's layers draw from the global generator
            self.layers = nn.ModuleList(
                UnitNormEncoderLayer(width, n_heads, d_ff, width_multiplier)
                for _ in range(n_layers)
            )

    def forward(self, x: Tensor) -> Tensor:
        if self.positions:
            n = x.shape[-2]
            if n > self.positions:
                raise ConfigError(
                    f"{n} tokens but {self.positions} position dimensions; build the encoder "
                    f"with positions >= {n}."
                )
            onehot = torch.eye(n, self.positions, dtype=x.dtype, device=x.device)
            x = torch.cat([x, onehot.expand(*x.shape[:-1], self.positions)], dim=-1)
        for layer in self.layers:
            x = layer(x)
        return x[..., : self.d_model]


class StackedRankEncoder(nn.Module):
    """U `RankEncoder`s of one shape (e.g. differing only by seed) as one module.

    Every weight of the U encoders is stacked on a leading axis, so a layer is a few batched
    products for all of them and one attention call over U x B sets; one optimiser step then
    trains them all. Unit u computes what `encoders[u]` computes (torch's encoder layer:
    x -> g_1 N(x + MHA(x)), then g_2 N(x + W_2 relu(W_1 x + b_1) + b_2), N(x) = x / ||x||), up
    to float rounding, and the gradient of one unit's loss reaches only its own weights.
    `width_multiplier` must be 1.

    Example:
        >>> encoders = [RankEncoder(8, n_heads=2, n_layers=1, d_ff=16, seed=s) for s in (0, 1)]
        >>> x = torch.randn(2, 3, 5, 8)
        >>> gap = StackedRankEncoder(encoders)(x)[1] - encoders[1](x[1])
        >>> bool(gap.abs().max() < 1e-5)
        True
    """

    PARTS = (  # (name here, name in torch's encoder layer)
        ("in_w", "self_attn.in_proj_weight"),
        ("in_b", "self_attn.in_proj_bias"),
        ("out_w", "self_attn.out_proj.weight"),
        ("out_b", "self_attn.out_proj.bias"),
        ("ff1_w", "linear1.weight"),
        ("ff1_b", "linear1.bias"),
        ("ff2_w", "linear2.weight"),
        ("ff2_b", "linear2.bias"),
        ("gain1", "norm1.gain"),
        ("gain2", "norm2.gain"),
    )

    def __init__(self, encoders: list[RankEncoder]) -> None:
        super().__init__()
        first = encoders[0] if encoders else None
        shapes = {(e.d_model, e.positions, e.n_heads, len(e.layers)) for e in encoders}
        averaged = any(
            isinstance(layer.self_attn, AveragedAttention) for e in encoders for layer in e.layers
        )
        if first is None or len(shapes) > 1 or averaged:
            raise ConfigError(
                f"StackedRankEncoder stacks encoders of one shape and width multiplier 1; got "
                f"{len(encoders)} encoder(s) of shapes (d_model, positions, n_heads, n_layers) "
                f"{sorted(shapes)}{' with averaged attention' if averaged else ''}; group them by shape."
            )
        self.n_units, self.d_model, self.positions = len(encoders), first.d_model, first.positions
        self.n_heads = first.n_heads
        self.layers = nn.ModuleList()
        for index in range(len(first.layers)):
            states = [e.layers[index].state_dict() for e in encoders]
            layer = nn.ParameterDict(
                {
                    name: nn.Parameter(torch.stack([s[key] for s in states]).detach().clone())
                    for name, key in self.PARTS
                }
            )
            self.layers.append(layer)

    def unstack_into(self, encoders: list[RankEncoder]) -> None:
        """Copy unit u's weights into `encoders[u]` (the encoders this was built from)."""
        with torch.no_grad():
            for index, layer in enumerate(self._stacked_layers()):
                for u, encoder in enumerate(encoders):
                    target = encoder.layers[index].state_dict()
                    for name, key in self.PARTS:
                        target[key].copy_(layer[name][u])

    def forward(self, x: Tensor) -> Tensor:
        """x (U, B, n, d), unit u's sets in x[u] -> (U, B, n, d)."""
        if self.positions:
            n = x.shape[-2]
            if n > self.positions:
                raise ConfigError(
                    f"{n} tokens but {self.positions} position dimensions; build the encoders "
                    f"with positions >= {n}."
                )
            onehot = torch.eye(n, self.positions, dtype=x.dtype, device=x.device)
            x = torch.cat([x, onehot.expand(*x.shape[:-1], self.positions)], dim=-1)
        units, batch, n, width = x.shape
        x = x.reshape(units, batch * n, width)  # (U, B n, W)
        for layer in self._stacked_layers():
            x = _gain_norm(x + self._attention(layer, x, batch), layer["gain1"])
            hidden = torch.relu(torch.baddbmm(layer["ff1_b"][:, None], x, layer["ff1_w"].mT))
            x = _gain_norm(
                x + torch.baddbmm(layer["ff2_b"][:, None], hidden, layer["ff2_w"].mT),
                layer["gain2"],
            )
        return x.reshape(units, batch, n, width)[..., : self.d_model]

    def _stacked_layers(self) -> list[nn.ParameterDict]:
        """`self.layers`: one ParameterDict per layer (`nn.ModuleList` types them as Module)."""
        return cast("list[nn.ParameterDict]", list(self.layers))

    def _attention(self, layer: nn.ParameterDict, x: Tensor, batch: int) -> Tensor:
        """torch's multi-head attention of every unit: (U, B n, W) -> (U, B n, W)."""
        units, rows, width = x.shape
        n, heads = rows // batch, self.n_heads
        qkv = torch.baddbmm(layer["in_b"][:, None], x, layer["in_w"].mT)  # (U, B n, 3 W)
        qkv = qkv.view(units * batch, n, 3, heads, width // heads)
        out = head_attention(qkv, accelerator=x.device.type != "cpu")
        return torch.baddbmm(
            layer["out_b"][:, None], out.reshape(units, rows, width), layer["out_w"].mT
        )


def head_attention(qkv: Tensor, *, accelerator: bool) -> Tensor:
    """softmax(q k^T / sqrt(r)) v per head: qkv (..., n, 3, H, r) -> (..., n, H, r).

    Rank-1 heads on the CPU (`accelerator` false) are written out with the heads on the last
    axis (scores q_i k_j as a broadcast product): torch's CPU kernel took 2.2 x as long,
    forward and backward, for 16 rank-1 heads on 768 sets of 8 tokens (22 ms against 10 ms,
    one thread, 2026-11-29). Otherwise torch's fused kernel, on an accelerator with the head
    size padded by zero columns to a multiple of 8 (zeros add exact zeros to every score and
    output, and rank-1 heads then take the fused kernels).

    Example:
        >>> def gap(qkv, accelerator):  # against torch's kernel, heads of size r = 1 and 2
        ...     q, k, v = qkv.permute(2, 0, 3, 1, 4)
        ...     plain = torch.nn.functional.scaled_dot_product_attention(q, k, v).transpose(1, 2)
        ...     return float((head_attention(qkv, accelerator=accelerator) - plain).abs().max())
        >>> qkv = [torch.randn(2, 5, 3, 4, r) for r in (1, 2)]
        >>> max(gap(t, accelerator) for t in qkv for accelerator in (False, True)) < 1e-6
        True
    """
    size = qkv.shape[-1]
    if size == 1 and not accelerator:
        q, k, v = qkv[..., 0].unbind(-2)  # (..., n, H) each
        weights = torch.softmax(q[..., :, None, :] * k[..., None, :, :], dim=-2)  # (.., i, j, H)
        return (weights * v[..., None, :, :]).sum(-2)[..., None]
    q, k, v = qkv.movedim(-3, 0).transpose(-2, -3)  # (..., H, n, r) each
    extra = -size % 8 if accelerator else 0
    if extra:
        q, k, v = (torch.nn.functional.pad(t, (0, extra)) for t in (q, k, v))
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=size**-0.5)
    return out[..., :size].transpose(-2, -3)


def _gain_norm(x: Tensor, gain: Tensor) -> Tensor:
    """`GainUnitNorm` of every unit: gain (U,) times x / ||x|| over the last axis."""
    return gain[:, None, None] * x / x.norm(dim=-1, keepdim=True).clamp_min(1e-12)
