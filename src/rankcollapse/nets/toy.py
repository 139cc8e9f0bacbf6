"""`ToyNet`: one configurable attention network in plain torch, and the `Trace` it returns.

    X^0 = x,   X^l = Block_l(X^{l-1})  for l = 1..n_layers     (see `Block` for one layer)

It covers the networks of Dong et al. 2021 (pure SAN, + skip, + MLP, + LayerNorm) and of
Wu et al. 2024 (masked SAN, unit-sphere LayerNorm, temperature). For path decompositions,
layer l is `net.layers[l - 1]`: its `attn.head_matrices()` are the W_h = W_V,h W_O,h,
`attn.bias_term()` the row-constant bias, `skip.scale` the factor on the identity head, and
`forward(x, return_attention=True).attention[l - 1]` the P_h of that forward pass.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from rankcollapse.errors import InputError
from rankcollapse.masks import bias_of
from rankcollapse.nets.config import NetConfig
from rankcollapse.nets.layers import MLP, Block, MLPBlock, SelfAttention, Skip, make_norm
from rankcollapse.sizes import check_size

DTYPES = {"float64": torch.float64, "float32": torch.float32}


@dataclass
class Trace:
    """What one forward pass went through.

    states: n_layers + 1 tensors (b, n, d_model); index 0 is the input, index l the output
        of layer l.
    attention: per layer, (b, n_heads, n, n) attention matrices (rows = queries), or None
        when not requested.
    """

    states: list[Tensor]
    attention: list[Tensor] | None = None

    @property
    def output(self) -> Tensor:
        """The last state, (b, n, d_model)."""
        return self.states[-1]


class ToyNet(nn.Module):
    """The toy attention network of `NetConfig` (defaults: a pure single-head SAN).

    Weights are drawn once, in `__init__`, from a generator seeded by `config.seed`; all are
    `nn.Parameter`s, so the network trains like any module. With `shared_weights`, one block
    is reused at every layer (`net.layers` lists it n_layers times).

    Example:
        >>> net = ToyNet(NetConfig(n_layers=2, d_model=8))
        >>> trace = net(random_tokens(3, 5, 8, seed=0), return_attention=True)
        >>> len(trace.states), tuple(trace.output.shape), tuple(trace.attention[0].shape)
        (3, (3, 5, 8), (3, 1, 5, 5))
    """

    def __init__(self, config: NetConfig) -> None:
        super().__init__()
        self.config = config
        self.dtype = DTYPES[config.dtype]
        self.d_qk = config.d_qk or config.d_model // config.n_heads
        self.d_v = config.d_v or config.d_model // config.n_heads
        self.d_mlp = config.d_mlp or 4 * config.d_model
        self.temperature = config.temperature or self.d_qk
        self.init_std = config.init_std or 1 / math.sqrt(config.d_model)
        generator = torch.Generator().manual_seed(config.seed)
        n_blocks = 1 if config.shared_weights else config.n_layers
        blocks = [self._make_block(generator) for _ in range(n_blocks)]
        self.blocks = nn.ModuleList(blocks)
        self.layers: list[Block] = [blocks[l % n_blocks] for l in range(config.n_layers)]

    def _make_block(self, generator: torch.Generator) -> Block:
        c = self.config
        attn = SelfAttention(
            d_model=c.d_model,
            n_heads=c.n_heads,
            d_qk=self.d_qk,
            d_v=self.d_v,
            temperature=self.temperature,
            attention=c.attention,
            init_std=self.init_std,
            value_init=c.value_init,
            out_proj=c.out_proj,
            bias=c.bias,
            dtype=self.dtype,
            generator=generator,
        )
        skip = Skip({"off": 0.0, "on": 1.0, "scaled": c.skip_scale}[c.skip])
        mlp_block: nn.Module = nn.Identity()
        if c.mlp:
            mlp = MLP(
                d_model=c.d_model,
                d_mlp=self.d_mlp,
                activation=c.activation,
                init_std=self.init_std,
                bias=c.bias,
                dtype=self.dtype,
                generator=generator,
            )
            mlp_block = MLPBlock(mlp, Skip(1.0 if c.mlp_skip else 0.0), *self._norms())
        return Block(attn, skip, *self._norms(), mlp_block)

    def _norms(self) -> tuple[nn.Module, nn.Module]:
        """(norm_in, norm_out) of one sub-block: the norm sits where `config.norm` says."""
        c = self.config
        norm = make_norm(c.norm_kind, c.d_model, c.norm_eps, c.bias, self.dtype)
        return (
            norm if c.norm == "pre" else nn.Identity(),
            norm if c.norm == "post" else nn.Identity(),
        )

    def mask_bias(self, n_tokens: int, device: torch.device | None = None) -> Tensor:
        """The additive mask (0 allowed, -inf elsewhere) for `n_tokens` tokens: (n, n)."""
        return bias_of(self.config.mask.build(n_tokens), self.dtype).to(device)

    def forward(self, x: Tensor, *, return_attention: bool = False) -> Trace:
        """Run every layer on `x` (b, n, d_model), cast to the network's dtype.

        Returns the `Trace` of states (and attention matrices if `return_attention`).
        """
        x = self._check_input(x)
        mask_bias = self.mask_bias(x.shape[-2], x.device)
        states = [x]
        attention: list[Tensor] | None = [] if return_attention else None
        for block in self.layers:
            x, probs = block(x, mask_bias)
            states.append(x)
            if attention is not None:
                attention.append(probs)
        return Trace(states, attention)

    def _check_input(self, x: Tensor) -> Tensor:
        d_model = self.config.d_model
        if not isinstance(x, Tensor) or x.ndim != 3 or x.shape[-1] != d_model:
            shape = tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__
            raise InputError(
                f"ToyNet takes tokens of shape (batch, n_tokens, {d_model}), got {shape}; "
                "add a batch axis with x[None] or match d_model."
            )
        if not x.is_floating_point():
            raise InputError(f"ToyNet takes float tokens, got dtype {x.dtype}.")
        return x.to(self.dtype)


def random_tokens(
    batch: int, n_tokens: int, d_model: int, *, seed: int, dtype: torch.dtype = torch.float64
) -> Tensor:
    """Standard Gaussian tokens of shape (batch, n_tokens, d_model), deterministic by `seed`;
    each size within its bound (`rankcollapse.sizes`: batch as n_samples).

    Example:
        >>> random_tokens(2, 3, 4, seed=0).equal(random_tokens(2, 3, 4, seed=0))
        True
    """
    check_size("n_samples", batch, shown="batch")
    check_size("n_tokens", n_tokens)
    check_size("d_model", d_model)
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(batch, n_tokens, d_model, generator=generator, dtype=dtype)
