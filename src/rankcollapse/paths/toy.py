"""Freeze a `ToyNet` at one input, for the exact path decompositions of `paths.decompose`.

The attention matrices P_h are those of the network's own forward pass (`return_attention`);
norm scales and MLP gates are frozen from the real activations (see `paths.frozen`).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from rankcollapse.nets import ToyNet
from rankcollapse.nets.layers import MLP, LayerNorm, MLPBlock, RMSNorm, UnitNorm
from rankcollapse.paths.frozen import FrozenAttention, FrozenMLP, FrozenNet, FrozenNorm, Sublayer

# act'(0) of each toy activation, used only where a pre-activation is exactly 0.
_SLOPE_AT_ZERO = {nn.ReLU: 0.0, nn.GELU: 0.5, nn.Tanh: 1.0}


def _norm(module: nn.Module) -> FrozenNorm | None:
    if isinstance(module, LayerNorm):
        return FrozenNorm(module.token_scale, centre=True, gain=module.gain, shift=module.beta)
    if isinstance(module, RMSNorm):
        return FrozenNorm(module.token_scale, centre=False, gain=module.gain)
    if isinstance(module, UnitNorm):
        return FrozenNorm(module.token_scale, centre=False)
    return None  # nn.Identity: no norm at this position


def _mlp(mlp: MLP) -> FrozenMLP:
    return FrozenMLP(
        w_in=mlp.w_1,
        w_out=mlp.w_2,
        activation=mlp.act,
        b_in=mlp.b_1,
        b_out=mlp.b_2,
        slope_at_zero=_SLOPE_AT_ZERO[type(mlp.act)],
    )


@torch.no_grad()
def freeze_toy(net: ToyNet, x: Tensor) -> FrozenNet:
    """The network frozen at input `x` (b, n, d_model): one attention sublayer per layer, and one
    MLP sublayer after it when the network has MLPs.

    Example:
        >>> from rankcollapse.nets import NetConfig, random_tokens
        >>> net = ToyNet(NetConfig(n_layers=3, n_heads=2, d_model=8, skip="on"))
        >>> frozen = freeze_toy(net, random_tokens(1, 4, 8, seed=0))
        >>> len(frozen.sublayers), frozen.n_layers
        (3, 3)
    """
    trace = net(x, return_attention=True)  # checks x
    x = trace.states[0]
    sublayers = []
    for block, probs in zip(net.layers, trace.attention, strict=True):
        attn = block.attn
        branch = FrozenAttention(probs, attn.w_v, attn.w_o, attn.b_v, attn.b_o)
        sublayers.append(
            Sublayer(branch, block.skip.scale, _norm(block.norm_in), _norm(block.norm_out))
        )
        if isinstance(block.mlp_block, MLPBlock):
            mlp_block = block.mlp_block
            sublayers.append(
                Sublayer(
                    _mlp(mlp_block.mlp),
                    mlp_block.skip.scale,
                    _norm(mlp_block.norm_in),
                    _norm(mlp_block.norm_out),
                )
            )
    return FrozenNet(x, sublayers, reference=trace.output)
