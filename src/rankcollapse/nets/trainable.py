"""Trainable self-attention networks of Dong et al. 2021, built on `ToyNet`.

`SAN` is the network of the path-effectiveness experiments (Sec. 5), built like the authors' SAN
(twistedcubic/attention-rank-collapse, modeling_san.py): an embedding, a ToyNet body with skip
connections, post-LayerNorm and no MLP (float32), and a classifier on each token:

    X^0 = Dropout(LN(E(inputs) W_e + b_e)),   X^L = ToyNet(X^0),
    logits = Dropout(plain_layer_norm(X^L)) W_c + b_c

E is a token table plus optional learned positions, or for points a two-layer GELU MLP, and LN
the affine LayerNorm of the authors' embedding. Dropout (rate `dropout`, the authors' 0.1) acts in
their four places: the embedding, the attention probabilities, the attention output before the
skip-add, and the classifier input; it is active in training mode only (`model.eval()` turns it
off, and every evaluation runs in eval mode).

`plain_layer_norm` is the LayerNorm without gain or bias. It is part of the model in training and
in evaluation because the authors' path evaluation normalises the sum of the kept paths with it
before classifying (`rankcollapse.paths.path_restricted_forward`): with it inside the model, the
classifier sees normalised states in both.

`CircleNet` is the step map of the circle toy (Sec. 6): points -> linear -> LayerNorm -> one
post-LN attention block (2 heads; + MLP block) -> linear -> points; its "san+skip" variant adds
its input points to its output (skip="step") or, as the authors did, leaves the skip to the data
and the rollout (skip="authors").
"""

from __future__ import annotations

import math
from typing import Any, Literal

import torch
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from torch import Tensor, nn

from rankcollapse.errors import ConfigError, invalid_config
from rankcollapse.nets.config import NetConfig
from rankcollapse.nets.toy import ToyNet
from rankcollapse.seeds import Seed
from rankcollapse.sizes import DModel, NHeads, NLayers

NORM_EPS = 1e-5


def plain_layer_norm(x: Tensor, *, eps: float = NORM_EPS) -> Tensor:
    """LayerNorm without gain or bias: each token centred and scaled to unit variance.

    Example:
        >>> plain_layer_norm(torch.tensor([[1.0, 3.0]]), eps=0.0)
        tensor([[-1.,  1.]])
    """
    return nn.functional.layer_norm(x, x.shape[-1:], eps=eps)


class SANConfig(BaseModel):
    """The trainable SAN of the path-effectiveness experiments."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    inputs: Literal["tokens", "points"]
    """Token ids (embedded by a lookup table) or planar points (embedded by a 2-layer MLP)."""
    n_classes: int = Field(ge=2)
    """Classes of the per-token classifier."""
    vocab_size: int | None = Field(None, ge=2)
    """Token ids 0..vocab_size-1 (inputs = "tokens" only)."""
    n_positions: int = Field(0, ge=0)
    """Learned position embeddings for sequences up to this length; 0 = no positions."""
    n_layers: NLayers = 6
    """Attention layers."""
    n_heads: NHeads = 2
    """Heads per layer."""
    d_model: DModel = Field(48, ge=2)
    """Width of the token states."""
    dropout: float = Field(0.1, ge=0, lt=1)
    """Training-time dropout rate in the authors' four places (0: none; off in eval mode)."""
    seed: Seed = 0
    """Seed of every initial weight."""

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as err:
            raise invalid_config("SANConfig", err, SANConfig.model_fields) from None

    @model_validator(mode="after")
    def _vocabulary_matches_inputs(self) -> SANConfig:
        if (self.inputs == "tokens") != (self.vocab_size is not None):
            raise ValueError(
                f"inputs={self.inputs!r} with vocab_size={self.vocab_size}: token inputs need "
                "vocab_size, point inputs take none"
            )
        if self.d_model % self.n_heads:
            raise ValueError(
                f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}; "
                "pick a width that splits evenly into heads"
            )
        return self


def _init_linear(layer: nn.Linear, generator: torch.Generator) -> nn.Linear:
    """Gaussian weights of std 1/sqrt(fan_in) from `generator`, zero bias (no global RNG)."""
    with torch.no_grad():
        nn.init.normal_(layer.weight, std=1 / math.sqrt(layer.in_features), generator=generator)
        nn.init.zeros_(layer.bias)
    return layer


class SAN(nn.Module):
    """Embedding (+ LN, dropout) -> ToyNet (skip, post-LN, no MLP, float32, dropout) -> plain
    norm -> dropout -> classifier (module docstring).

    Example:
        >>> config = SANConfig(inputs="tokens", vocab_size=10, n_classes=10, n_positions=8,
        ...                    n_layers=2, d_model=8)
        >>> SAN(config)(torch.randint(10, (3, 8))).shape
        torch.Size([3, 8, 10])
    """

    def __init__(self, config: SANConfig) -> None:
        super().__init__()
        self.config = config
        generator = torch.Generator().manual_seed(config.seed)
        d = config.d_model
        if config.vocab_size is not None:  # inputs == "tokens" (the config's validator)
            self.embedding: nn.Module = nn.Embedding(config.vocab_size, d)
            with torch.no_grad():
                nn.init.normal_(self.embedding.weight, generator=generator)
        else:
            self.embedding = nn.Sequential(_init_linear(nn.Linear(2, d), generator), nn.GELU())
        positions = torch.randn(config.n_positions, d, generator=generator)
        self.positions = nn.Parameter(positions) if config.n_positions else None
        self.embed_linear = _init_linear(nn.Linear(d, d), generator)
        self.embed_norm = nn.LayerNorm(d, eps=NORM_EPS)
        self.body = ToyNet(
            NetConfig(
                n_layers=config.n_layers,
                n_heads=config.n_heads,
                d_model=d,
                skip="on",
                norm="post",
                bias=True,
                dtype="float32",
                seed=config.seed,
            )
        )
        self.dropout = nn.Dropout(config.dropout)  # embedding and classifier input
        for block in self.body.layers:  # one block per layer (no shared weights)
            block.attn.probs_dropout = nn.Dropout(config.dropout)
            block.branch_dropout = nn.Dropout(config.dropout)
        self.classifier = _init_linear(nn.Linear(d, config.n_classes), generator)

    def embed(self, inputs: Tensor) -> Tensor:
        """X^0: (b, n, d_model) from token ids (b, n) or points (b, n, 2)."""
        x = self.embedding(inputs)
        if self.positions is not None:
            n = x.shape[1]
            if n > len(self.positions):
                raise ConfigError(
                    f"sequences of {n} tokens but the SAN has {len(self.positions)} positions; "
                    "build it with n_positions >= the sequence length."
                )
            x = x + self.positions[:n]
        return self.dropout(self.embed_norm(self.embed_linear(x)))

    def classify(self, states: Tensor) -> Tensor:
        """Logits of every token from already normalised states (..., n, d_model)."""
        return self.classifier(self.dropout(states))

    def forward(self, inputs: Tensor) -> Tensor:
        """Logits (b, n, n_classes) of the full model."""
        return self.classify(plain_layer_norm(self.body(self.embed(inputs)).output))


CircleVariant = Literal["san", "san+skip", "san+mlp"]


class CircleNet(nn.Module):
    """The step map of the circle toy, as in the authors' code: points (b, 2, 2) -> next points.

        f(X) = LN(Y + SA(Y)) W_r + b_r,   Y = LN(X W_e + b_e)      (2 heads, post-LN)
        san:       X_next = f(X)
        san+skip:  skip="step":    X_next = X + f(X), the skip around the recurrent step (the
                                   project's redesign);
                   skip="authors": the module is f alone; the skip lives in the data (trained
                                   on X_i + X_{i-B}, `tasks.previous_pair_inputs`) and in the
                                   rollout (a running sum, `tasks.rollout(accumulate=True)`),
                                   as in the authors' run_circle.py
        san+mlp:   f with the transformer MLP block after the attention, LN(Z + MLP(Z)) (GELU,
                   hidden width d_model, the authors' intermediate_size)

    Quirk (kept from the authors' SAN): the attention block itself is the BERT block
    LN(Y + SA(Y)), skip inside; the point embedding and read-out make each step one layer of a
    network in the plane, and "san+skip" adds the identity across those steps (recurrent applications
    of f are layers of a network without skips; of X + f(X), with them).
    """

    def __init__(
        self,
        variant: CircleVariant,
        *,
        d_model: int = 32,
        n_heads: int = 2,
        seed: int = 0,
        skip: Literal["step", "authors"] = "step",
    ) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(seed)
        self.variant = variant
        self.adds_input = variant == "san+skip" and skip == "step"
        self.embed = _init_linear(nn.Linear(2, d_model), generator)
        self.embed_norm = nn.LayerNorm(d_model, eps=NORM_EPS)
        self.layer = ToyNet(
            NetConfig(
                n_layers=1,
                n_heads=n_heads,
                d_model=d_model,
                skip="on",
                norm="post",
                mlp=variant == "san+mlp",
                d_mlp=d_model,
                activation="gelu",
                mlp_skip=True,
                norm_eps=NORM_EPS,
                bias=True,
                dtype="float32",
                seed=seed,
            )
        )
        self.readout = _init_linear(nn.Linear(d_model, 2), generator)

    def step(self, points: Tensor) -> Tensor:
        """f(points): the layer's output in the plane, (b, 2, 2)."""
        return self.readout(self.layer(self.embed_norm(self.embed(points))).output)

    def forward(self, points: Tensor) -> Tensor:
        """The next points (b, 2, 2)."""
        return points + self.step(points) if self.adds_input else self.step(points)
