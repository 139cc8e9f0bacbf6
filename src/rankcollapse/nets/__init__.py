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

__all__ = [
    "MLP",
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
]
