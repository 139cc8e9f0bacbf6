"""Toy attention networks in plain torch (float64 by default, deterministic by seed)."""

from rankcollapse.nets.config import NetConfig
from rankcollapse.nets.layers import MLP, Block, SelfAttention, Skip
from rankcollapse.nets.rank_attention import (
    RankAttention,
    RankEncoder,
    StackedRankAttention,
    UnitNorm,
)
from rankcollapse.nets.toy import ToyNet, Trace, random_tokens
from rankcollapse.nets.variants import TOY_VARIANTS, toy_config

__all__ = [
    "MLP",
    "TOY_VARIANTS",
    "Block",
    "NetConfig",
    "RankAttention",
    "RankEncoder",
    "SelfAttention",
    "Skip",
    "StackedRankAttention",
    "ToyNet",
    "Trace",
    "UnitNorm",
    "random_tokens",
    "toy_config",
]
