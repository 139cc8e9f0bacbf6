"""The parts of the toy network, named after the math: norms, `Skip`, `SelfAttention`, `MLP`,
`Block`. Tokens are rows; weights act on the right (`x @ w`), as in the papers' X W_V.

Every weight is drawn in `__init__` from the generator it is handed, so a network is
deterministic by its seed and never touches torch's global random state.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn
from torch.nn import functional as F


def _gaussian(generator: torch.Generator, std: float, *shape: int, dtype: torch.dtype) -> Tensor:
    return nn.init.normal_(torch.empty(shape, dtype=dtype), std=std, generator=generator)


def _orthogonal(generator: torch.Generator, rows: int, cols: int, dtype: torch.dtype) -> Tensor:
    """A (rows, cols) matrix with orthonormal rows or columns (whichever are fewer)."""
    return nn.init.orthogonal_(torch.empty(rows, cols, dtype=dtype), generator=generator)


def _register_bias(
    module: nn.Module, name: str, trainable: bool, *shape: int, dtype: torch.dtype
) -> None:
    """A zero bias: a parameter when biases are on, else a constant zero (a buffer)."""
    zeros = torch.zeros(shape, dtype=dtype)
    if trainable:
        module.register_parameter(name, nn.Parameter(zeros))
    else:
        module.register_buffer(name, zeros)


# Norms act on each token (row) separately. Each is a per-token scale (a left diagonal
# factor D) applied to a right-hand map, which is what a path decomposition freezes.


class UnitNorm(nn.Module):
    """Wu et al.'s LayerNorm: each token divided by its Euclidean norm (no centring, no gain)."""

    def token_scale(self, x: Tensor) -> Tensor:
        """1 / ||x_i||, shape (..., n, 1); a zero token stays zero."""
        return 1 / x.norm(dim=-1, keepdim=True).clamp_min(torch.finfo(x.dtype).tiny)

    def forward(self, x: Tensor) -> Tensor:
        return x * self.token_scale(x)


class RMSNorm(nn.Module):
    """x_i / sqrt(mean_k x_ik^2 + eps) * gain (no centring)."""

    def __init__(self, d_model: int, eps: float, dtype: torch.dtype) -> None:
        super().__init__()
        self.eps = eps
        self.gain = nn.Parameter(torch.ones(d_model, dtype=dtype))

    def token_scale(self, x: Tensor) -> Tensor:
        return torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)

    def forward(self, x: Tensor) -> Tensor:
        return x * self.token_scale(x) * self.gain


class LayerNorm(nn.Module):
    """(x_i - mean_k x_ik) / sqrt(var_k x_ik + eps) * gain + beta (beta = 0 without biases)."""

    beta: Tensor  # a parameter, or a zero buffer without biases (`_register_bias`)

    def __init__(self, d_model: int, eps: float, bias: bool, dtype: torch.dtype) -> None:
        super().__init__()
        self.eps = eps
        self.gain = nn.Parameter(torch.ones(d_model, dtype=dtype))
        _register_bias(self, "beta", bias, d_model, dtype=dtype)

    def token_scale(self, x: Tensor) -> Tensor:
        return torch.rsqrt(x.var(dim=-1, keepdim=True, unbiased=False) + self.eps)

    def forward(self, x: Tensor) -> Tensor:
        centred = x - x.mean(dim=-1, keepdim=True)
        return centred * self.token_scale(x) * self.gain + self.beta


def make_norm(kind: str, d_model: int, eps: float, bias: bool, dtype: torch.dtype) -> nn.Module:
    """The norm module named by `NetConfig.norm_kind`."""
    if kind == "unit":
        return UnitNorm()
    if kind == "rmsnorm":
        return RMSNorm(d_model, eps, dtype)
    return LayerNorm(d_model, eps, bias, dtype)


class Skip(nn.Module):
    """skip(x, y) = scale * x + y: scale 0 (off), 1 (on) or `skip_scale` (scaled).

    In a path decomposition the skip is one more head with P = I and W = scale * I.
    """

    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale

    def forward(self, x: Tensor, y: Tensor) -> Tensor:
        return self.scale * x + y


def _softmax(scores: Tensor, mask_bias: Tensor | float) -> Tensor:
    return torch.softmax(scores + mask_bias, dim=-1)


def hardmax(scores: Tensor) -> Tensor:
    """One-hot on the argmax of the last axis (the first one on ties): the zero-temperature
    limit of softmax.

    Example:
        >>> hardmax(torch.tensor([[0.1, 2.0, -1.0]]))
        tensor([[0., 1., 0.]])
    """
    winner = scores.argmax(dim=-1)
    return F.one_hot(winner, scores.shape[-1]).to(scores.dtype)


def _hardmax(scores: Tensor, mask_bias: Tensor | float) -> Tensor:
    """One-hot on the highest allowed score (the first one on ties)."""
    return hardmax(scores + mask_bias)


def _uniform(scores: Tensor, mask_bias: Tensor | float) -> Tensor:
    """Equal weight on every allowed key: the mask's rows normalised to sum to 1."""
    return torch.softmax(torch.zeros_like(scores) + mask_bias, dim=-1)


ATTENTION_KINDS = {"softmax": _softmax, "hardmax": _hardmax, "uniform": _uniform}


class SelfAttention(nn.Module):
    """Multi-head self-attention (Dong, Cordonnier, Loukas 2021, arXiv 2103.03404, Sec. 2).

        P_h   = rowwise( (X W_Q,h + 1 b_Q,h^T)(X W_K,h + 1 b_K,h^T)^T / sqrt(d_QK) + M )
        SA(X) = sum_h P_h (X W_V,h + 1 b_V,h^T) W_O,h + 1 b_O^T
              = sum_h P_h X W_h + 1 b^T,   W_h = W_V,h W_O,h,   b = sum_h W_O,h^T b_V,h + b_O

    where `rowwise` is softmax, hardmax or uniform, M is the additive mask bias (0 allowed,
    -inf elsewhere) and d_QK is the temperature (default: the head's d_qk). The second line
    holds because every P_h is row-stochastic.

    Parameters (weights on the right of the tokens):
        w_q, w_k: (n_heads, d_model, d_qk); w_v: (n_heads, d_model, d_v);
        w_o: (n_heads, d_v, d_model), the slice of the output projection of each head (a fixed
            block of the identity, not a parameter, when `out_proj` is off);
        b_q, b_k: (n_heads, d_qk); b_v: (n_heads, d_v); b_o: (d_model,) (zero constants, not
            parameters, when biases are off; b_o also when `out_proj` is off).
    """

    # parameters, or zero buffers without biases (`_register_bias`)
    b_q: Tensor
    b_k: Tensor
    b_v: Tensor
    b_o: Tensor
    w_o: Tensor

    def __init__(
        self,
        *,
        d_model: int,
        n_heads: int,
        d_qk: int,
        d_v: int,
        temperature: float,
        attention: str,
        init_std: float,
        value_init: str,
        out_proj: bool,
        bias: bool,
        dtype: torch.dtype,
        generator: torch.Generator,
    ) -> None:
        super().__init__()
        self.scale = 1 / math.sqrt(temperature)
        self.weights = ATTENTION_KINDS[attention]
        self.w_q = nn.Parameter(_gaussian(generator, init_std, n_heads, d_model, d_qk, dtype=dtype))
        self.w_k = nn.Parameter(_gaussian(generator, init_std, n_heads, d_model, d_qk, dtype=dtype))
        if value_init == "orthogonal":
            w_v = torch.stack([_orthogonal(generator, d_model, d_v, dtype) for _ in range(n_heads)])
            w_o = _orthogonal(generator, n_heads * d_v, d_model, dtype)
        else:
            w_v = _gaussian(generator, init_std, n_heads, d_model, d_v, dtype=dtype)
            w_o = _gaussian(generator, init_std, n_heads * d_v, d_model, dtype=dtype)
        self.w_v = nn.Parameter(w_v)
        if out_proj:
            self.w_o = nn.Parameter(w_o.reshape(n_heads, d_v, d_model))
        else:  # heads concatenated: head h writes coordinates h*d_v .. (h+1)*d_v - 1
            self.register_buffer("w_o", torch.eye(d_model, dtype=dtype).reshape(n_heads, d_v, -1))
        _register_bias(self, "b_q", bias, n_heads, d_qk, dtype=dtype)
        _register_bias(self, "b_k", bias, n_heads, d_qk, dtype=dtype)
        _register_bias(self, "b_v", bias, n_heads, d_v, dtype=dtype)
        _register_bias(self, "b_o", bias and out_proj, d_model, dtype=dtype)
        # Applied to P before it weighs the values; the SAN sets an `nn.Dropout` (training only).
        self.probs_dropout: nn.Module = nn.Identity()

    def attention(self, x: Tensor, mask_bias: Tensor | None = None) -> Tensor:
        """P_h for input `x` (b, n, d_model): shape (b, n_heads, n, n), rows sum to 1.

        `x` is what the attention sees (after the pre-norm, if any); `mask_bias` (n, n) is
        `rankcollapse.masks.to_bias(mask)`, None for the complete mask.
        """
        q = torch.einsum("bnd,hdk->bhnk", x, self.w_q) + self.b_q[:, None, :]
        k = torch.einsum("bnd,hdk->bhnk", x, self.w_k) + self.b_k[:, None, :]
        scores = q @ k.transpose(-1, -2) * self.scale  # (b, h, n, n)
        return self.weights(scores, 0.0 if mask_bias is None else mask_bias)

    def head_matrices(self) -> Tensor:
        """W_h = W_V,h W_O,h for every head: shape (n_heads, d_model, d_model)."""
        return self.w_v @ self.w_o

    def bias_term(self) -> Tensor:
        """b = sum_h W_O,h^T b_V,h + b_O, the row-constant term of SA(X): shape (d_model,)."""
        return torch.einsum("hv,hvd->d", self.b_v, self.w_o) + self.b_o

    def forward(self, x: Tensor, mask_bias: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """SA(x) (b, n, d_model) and the attention P (b, n_heads, n, n) it used."""
        probs = self.attention(x, mask_bias)
        values = torch.einsum("bnd,hdv->bhnv", x, self.w_v) + self.b_v[:, None, :]
        mixed = self.probs_dropout(probs) @ values
        return torch.einsum("bhnv,hvd->bnd", mixed, self.w_o) + self.b_o, probs


class MLP(nn.Module):
    """Token-wise MLP: act(x W_1 + b_1) W_2 + b_2."""

    b_1: Tensor  # a parameter, or a zero buffer without biases (`_register_bias`)
    b_2: Tensor

    def __init__(
        self,
        *,
        d_model: int,
        d_mlp: int,
        activation: str,
        init_std: float,
        bias: bool,
        dtype: torch.dtype,
        generator: torch.Generator,
    ) -> None:
        super().__init__()
        self.act = {"relu": nn.ReLU(), "gelu": nn.GELU(), "tanh": nn.Tanh()}[activation]
        self.w_1 = nn.Parameter(_gaussian(generator, init_std, d_model, d_mlp, dtype=dtype))
        self.w_2 = nn.Parameter(_gaussian(generator, init_std, d_mlp, d_model, dtype=dtype))
        _register_bias(self, "b_1", bias, d_mlp, dtype=dtype)
        _register_bias(self, "b_2", bias, d_model, dtype=dtype)

    def forward(self, x: Tensor) -> Tensor:
        return self.act(x @ self.w_1 + self.b_1) @ self.w_2 + self.b_2


class MLPBlock(nn.Module):
    """x -> norm_out(skip(x, MLP(norm_in(x)))), norms by position as in `Block`."""

    def __init__(self, mlp: MLP, skip: Skip, norm_in: nn.Module, norm_out: nn.Module) -> None:
        super().__init__()
        self.mlp, self.skip, self.norm_in, self.norm_out = mlp, skip, norm_in, norm_out

    def forward(self, x: Tensor) -> Tensor:
        return self.norm_out(self.skip(x, self.mlp(self.norm_in(x))))


class Block(nn.Module):
    """One layer: attention sub-block, then (optionally) the MLP sub-block.

        x' = norm_out( skip(x, SA(norm_in(x))) ),   skip(x, y) = s x + y
        x'' = MLPBlock(x')                           (identity when the MLP is off)

    norm_in is the norm for norm = "pre" (identity otherwise), norm_out for "post"; s = 0, 1
    or skip_scale for skip = off, on, scaled. `branch_dropout` (identity unless a trainable
    network sets a dropout) acts on SA(.) before the skip-add, `attn.probs_dropout` on P.
    """

    def __init__(
        self,
        attn: SelfAttention,
        skip: Skip,
        norm_in: nn.Module,
        norm_out: nn.Module,
        mlp_block: nn.Module,
    ) -> None:
        super().__init__()
        self.attn, self.skip, self.norm_in, self.norm_out = attn, skip, norm_in, norm_out
        self.mlp_block = mlp_block
        # Applied to SA(.) before the skip-add; the SAN sets an `nn.Dropout` (training only).
        self.branch_dropout: nn.Module = nn.Identity()

    def forward(self, x: Tensor, mask_bias: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """The block's output (b, n, d_model) and its attention (b, n_heads, n, n)."""
        y, probs = self.attn(self.norm_in(x), mask_bias)
        x = self.norm_out(self.skip(x, self.branch_dropout(y)))
        return self.mlp_block(x), probs
