"""`CausalLM`: a small GPT-2-shaped language model around the toy network's blocks.

    X^0 = E[ids] + P[:n],   X^L = ToyNet(X^0) (causal mask),   logits = LN_f(X^L) W_u + b_u

The blocks are `ToyNet` blocks, so what differs between two models is exactly what their
`NetConfig`s say (the attention skip, the norm position, the softmax temperature); GPT-2 itself
is the config with skip "on", norm "pre", a GELU MLP of width 4 d_model and the causal mask.
Token and position embeddings are drawn N(0, 1) from the config's seed, as in the project's
trainable SAN; the final norm and the read-out are the same in every model.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from rankcollapse.errors import ConfigError, InputError
from rankcollapse.nets.config import NetConfig
from rankcollapse.nets.layers import make_norm
from rankcollapse.nets.toy import DTYPES, ToyNet


class CausalLM(nn.Module):
    """Token ids (b, n) -> next-token logits (b, n, vocab_size); `body.blocks` are its blocks.

    Example:
        >>> net = NetConfig(n_layers=2, d_model=8, n_heads=2, mask="causal", dtype="float32")
        >>> CausalLM(net, vocab_size=16, n_positions=6)(torch.randint(16, (3, 6))).shape
        torch.Size([3, 6, 16])
    """

    def __init__(self, net: NetConfig, *, vocab_size: int, n_positions: int) -> None:
        super().__init__()
        if net.mask != "causal":
            raise ConfigError(f"a causal language model needs mask='causal', got {net.mask!r}.")
        generator = torch.Generator().manual_seed(net.seed)
        dtype = DTYPES[net.dtype]
        self.embedding = nn.Parameter(
            torch.randn(vocab_size, net.d_model, generator=generator, dtype=dtype)
        )
        self.positions = nn.Parameter(
            torch.randn(n_positions, net.d_model, generator=generator, dtype=dtype)
        )
        self.body = ToyNet(net)
        self.final_norm = make_norm("layernorm", net.d_model, net.norm_eps, True, dtype)
        self.readout = nn.Linear(net.d_model, vocab_size, dtype=dtype)
        with torch.no_grad():
            nn.init.normal_(self.readout.weight, std=net.d_model**-0.5, generator=generator)
            nn.init.zeros_(self.readout.bias)

    def forward(self, ids: Tensor) -> Tensor:
        n = ids.shape[-1]
        if n > len(self.positions):
            raise InputError(
                f"sequences of {n} tokens but the model has {len(self.positions)} "
                "positions; build it with n_positions >= the length."
            )
        x = self.embedding[ids] + self.positions[:n]
        return self.readout(self.final_norm(self.body(x).output))
