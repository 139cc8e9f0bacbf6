"""A network frozen at one input: every sublayer is linear in its input plus a constant.

Dong et al.'s path decomposition needs each layer to be linear in the residual stream. Attention
is linear in its values once its probabilities P_h are frozen from the forward pass; a norm is
linear once its per-token scale (a left diagonal factor) is frozen, its centring and gain being
right factors and its shift a constant; an MLP is linear once its activation gate is frozen
(act(z) = g * z with g = act(z) / z per element, or the SiLU gate of a gated MLP). With these
frozen, the output is exactly  sum over paths (linear terms in the input) + one bias term.

What is frozen, exactly (for the given input, from the real forward pass):
- attention probabilities P_h of every head (taken from the model's own forward pass);
- every norm's per-token scale 1 / sigma_i (LayerNorm: sqrt(var_i + eps); RMSNorm:
  sqrt(mean_i(x^2) + eps); unit: ||x_i||), computed from the total activation at that point;
- every MLP's activation gate, computed from the total pre-activation.
Scales and gates are computed from the running total of all components, which equals the real
activation (checked against the model's output by the callers' tests to float64 precision).

A path goes through the skip (if any) or one branch of each sublayer: a head of an attention
sublayer, or the MLP of an MLP sublayer (in a parallel block, a head or the MLP). Its length counts attention heads only (Dong's
definition), so an MLP never changes a path's length.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import Tensor


@dataclass(frozen=True)
class FrozenNorm:
    """A norm with its per-token scale frozen: y_i = s_i * centre(x_i) * gain + shift.

    `token_scale` maps the real activation (..., n, d) to the per-token scale s (..., n, 1)
    (the norm module's own formula: 1 / sqrt(var + eps) for LayerNorm, 1 / sqrt(mean square +
    eps) for RMSNorm, 1 / ||x_i|| for Wu's unit norm); `centre` subtracts each token's mean.
    """

    token_scale: Callable[[Tensor], Tensor]
    centre: bool
    gain: Tensor | None = None  # (d,)
    shift: Tensor | None = None  # (d,)

    def linear(self, x: Tensor, scale: Tensor) -> Tensor:
        """The linear part: centring and gain on the right, the frozen scale on the left."""
        if self.centre:
            x = x - x.mean(-1, keepdim=True)
        y = x * scale
        return y * self.gain if self.gain is not None else y

    def constant(self) -> Tensor | None:
        return self.shift


@dataclass(frozen=True)
class FrozenAttention:
    """Multi-head attention with frozen probabilities: sum_h P_h U W_V,h W_O,h + constant.

    Value and output projections are kept factored (W_V,h then W_O,h), so applying all heads
    costs what the real layer's value path costs.
    """

    probs: Tensor  # (b, h, n, n)
    w_v: Tensor  # (h, d, d_v)
    w_o: Tensor  # (h, d_v, d)
    b_v: Tensor | None = None  # (h, d_v)
    b_o: Tensor | None = None  # (d,)
    counts: ClassVar[bool] = True  # a head adds 1 to a path's length

    @property
    def n_branches(self) -> int:
        return self.probs.shape[1]

    def gate(self, u: Tensor) -> None:
        return None  # attention has nothing to freeze beyond its probabilities

    def linear(self, u: Tensor, gate: None = None) -> Tensor:
        """sum_h P_h u W_V,h W_O,h for u of shape (..., b, n, d)."""
        values = torch.einsum("...bnd,hde->...bhne", u, self.w_v)  # (..., b, h, n, d_v)
        mixed = self.probs @ values
        return torch.einsum("...bhne,hed->...bnd", mixed, self.w_o)

    def branch(self, u: Tensor, index: int, gate: None = None) -> Tensor:
        """One head: P_h u W_V,h W_O,h."""
        return self.probs[:, index] @ (u @ self.w_v[index] @ self.w_o[index])

    def constant(self, gate: None = None) -> Tensor:
        """The biases' contribution, sum_h P_h 1 (b_V,h W_O,h) + b_O: row-constant."""
        d = self.w_o.shape[-1]
        out = torch.zeros(*self.probs.shape[:1], self.probs.shape[-2], d, dtype=self.w_o.dtype)
        if self.b_v is not None:
            per_head = torch.einsum("he,hed->hd", self.b_v, self.w_o)
            out = out + torch.einsum("bhn,hd->bnd", self.probs.sum(-1), per_head)
        return out + self.b_o if self.b_o is not None else out


@dataclass(frozen=True)
class FrozenMLP:
    """A token-wise MLP with its activation gate frozen: (g * (u W_in)) W_out + constant.

    Plain MLP act(u W_in + b_in) W_out + b_out: g = act(z) / z with z the total pre-activation.
    Gated MLP (Llama) act(u W_gate) * (u W_in) W_out: g = act(u W_gate) from the total input.
    """

    w_in: Tensor  # (d, m)
    w_out: Tensor  # (m, d)
    activation: Callable[[Tensor], Tensor]
    b_in: Tensor | None = None
    b_out: Tensor | None = None
    w_gate: Tensor | None = None  # (d, m): gated MLP
    b_gate: Tensor | None = None
    slope_at_zero: float = 0.5  # act'(0), used where z == 0 exactly (GELU, ReLU's convention)
    counts: ClassVar[bool] = False  # an MLP never changes a path's length

    @property
    def n_branches(self) -> int:
        return 1

    def gate(self, u: Tensor) -> Tensor:
        """The frozen per-element gate g (..., n, m) from the real MLP input u."""
        if self.w_gate is not None:
            pre = u @ self.w_gate
            return self.activation(pre + self.b_gate if self.b_gate is not None else pre)
        z = u @ self.w_in + (self.b_in if self.b_in is not None else 0.0)
        zero = z == 0
        safe = torch.where(zero, torch.ones_like(z), z)
        return torch.where(zero, torch.full_like(z, self.slope_at_zero), self.activation(z) / safe)

    def linear(self, u: Tensor, gate: Tensor) -> Tensor:
        return (gate * (u @ self.w_in)) @ self.w_out

    def branch(self, u: Tensor, index: int, gate: Tensor) -> Tensor:
        return self.linear(u, gate)

    def constant(self, gate: Tensor) -> Tensor:
        out = torch.zeros(*gate.shape[:-1], self.w_out.shape[-1], dtype=self.w_out.dtype)
        if self.b_in is not None:
            out = out + (gate * self.b_in) @ self.w_out
        return out + self.b_out if self.b_out is not None else out


@dataclass(frozen=True)
class Sublayer:
    """x -> norm_out( skip * x + norm_branch(branch(norm_in(x))) + parallel(x) ).

    Norms are optional and skip 0 means none. `norm_branch` normalises the branch output before
    the add (Gemma 2's sandwich norms, OLMo 2); `parallel` is a second branch reading the same x
    (GPT-NeoX's parallel residual: x + A(N1(x)) + M(N2(x))), its own skip and `norm_out` unused.
    """

    branch: FrozenAttention | FrozenMLP
    skip: float = 0.0
    norm_in: FrozenNorm | None = None  # pre-LN
    norm_out: FrozenNorm | None = None  # post-LN
    norm_branch: FrozenNorm | None = None  # sandwich: on the branch output, before the add
    parallel: Sublayer | None = None


@dataclass(frozen=True)
class FrozenNet:
    """A network frozen at input `x` (b, n, d): sublayers in order, attention ones carrying P_h.

    `reference` is the real network's output for `x` (from its own forward pass), against which
    every decomposition can be checked.
    """

    x: Tensor
    sublayers: list[Sublayer]
    reference: Tensor | None = None

    @property
    def n_layers(self) -> int:
        return sum(isinstance(s.branch, FrozenAttention) for s in self.sublayers)

    def attention(self) -> list[Tensor]:
        """The frozen attention probabilities per attention layer, each (b, h, n, n)."""
        return [s.branch.probs for s in self.sublayers if isinstance(s.branch, FrozenAttention)]
