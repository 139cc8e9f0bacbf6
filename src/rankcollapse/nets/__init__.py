"""Toy attention networks in plain torch (float64 by default, deterministic by seed)."""

from rankcollapse.nets.config import NetConfig
from rankcollapse.nets.layers import MLP, Block, SelfAttention, Skip
from rankcollapse.nets.lm import CausalLM
from rankcollapse.nets.rank_attention import RankAttention, StackedRankAttention
from rankcollapse.nets.rank_encoder import GainUnitNorm, RankEncoder, StackedRankEncoder
from rankcollapse.nets.toy import ToyNet, Trace, random_tokens
from rankcollapse.nets.trainable import SAN, CircleNet, SANConfig, plain_layer_norm
from rankcollapse.nets.variants import TOY_VARIANTS, toy_config

__all__ = [
    "MLP",
    "SAN",
    "TOY_VARIANTS",
    "Block",
    "CausalLM",
    "CircleNet",
    "GainUnitNorm",
    "NetConfig",
    "RankAttention",
    "RankEncoder",
    "SANConfig",
    "SelfAttention",
    "Skip",
    "StackedRankAttention",
    "StackedRankEncoder",
    "ToyNet",
    "Trace",
    "plain_layer_norm",
    "random_tokens",
    "toy_config",
]
