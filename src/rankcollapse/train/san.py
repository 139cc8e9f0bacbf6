"""Trainable self-attention networks of Dong et al. 2021, built on `rankcollapse.nets.ToyNet`.

`SAN` is the network of the path-effectiveness experiments (Sec. 5): an embedding (token
embedding plus optional learned positions, or a two-layer MLP on point coordinates), a ToyNet
body with skip connections, post-LayerNorm and no MLP (float32), and a classifier on each token:

    X^0 = embed(inputs),   X^L = ToyNet(X^0),   logits = plain_norm(X^L) W_c + b_c

`plain_norm` is the non-affine LayerNorm (no gain, no bias). It is part of the model in training
and in evaluation because the authors' path evaluation normalises the sum of the kept paths with
it before classifying: with it inside the model, the classifier sees normalised states in both,
and `restricted_logits` with every layer `FULL` is exactly `forward`.

`CircleNet` is the step map of the circle toy (Sec. 6): points -> linear -> LayerNorm -> one
post-LN attention block (2 heads; + MLP block) -> linear -> points, with the "skip" variant adding
its input points to its output.

`train_san` trains a model with `rankcollapse.train.loop.train`, keyed in a checkpoint store by
the full config and the data, so the same settings reuse the weights and others never do.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import torch
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from torch import Tensor, nn

from rankcollapse.errors import ConfigError
from rankcollapse.nets import NetConfig, ToyNet
from rankcollapse.paths.sampling import path_restricted_forward, plain_layer_norm
from rankcollapse.train.loop import CheckpointStore, TrainConfig, check_store, checkpoint_key, train

NORM_EPS = 1e-5


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
    n_layers: int = Field(6, ge=1)
    """Attention layers."""
    n_heads: int = Field(2, ge=1)
    """Heads per layer."""
    d_model: int = Field(48, ge=2)
    """Width of the token states."""
    seed: int = Field(0, ge=0)
    """Seed of every initial weight."""

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as err:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'SANConfig'}: "
                f"{e['msg'].removeprefix('Value error, ')}"
                for e in err.errors()
            )
            raise ConfigError(f"invalid SANConfig: {problems}.") from None

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
    """Embedding -> ToyNet (skip, post-LN, no MLP, float32) -> plain norm -> classifier.

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
        if config.inputs == "tokens":
            self.embedding: nn.Module = nn.Embedding(config.vocab_size, d)
            with torch.no_grad():
                nn.init.normal_(self.embedding.weight, generator=generator)
        else:
            self.embedding = nn.Sequential(
                _init_linear(nn.Linear(2, d), generator),
                nn.ReLU(),
                _init_linear(nn.Linear(d, d), generator),
            )
        positions = torch.randn(config.n_positions, d, generator=generator)
        self.positions = nn.Parameter(positions) if config.n_positions else None
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
        return x

    def classify(self, states: Tensor) -> Tensor:
        """Logits of every token from already normalised states (..., n, d_model)."""
        return self.classifier(states)

    def forward(self, inputs: Tensor) -> Tensor:
        """Logits (b, n, n_classes) of the full model."""
        output = self.body(self.embed(inputs)).output
        return self.classify(plain_layer_norm(output, eps=NORM_EPS))

    def restricted_logits(self, inputs: Tensor, routes: Tensor) -> Tensor:
        """Logits (n_groups, b, n, n_classes) of the model restricted to each group of routes.

        `routes` (n_groups, n_routes, n_layers), e.g. from `sample_paths`; see
        `rankcollapse.paths.sampling` for the evaluation (the authors' `--no_sub_path` mode).
        """
        summed = path_restricted_forward(self.body, self.embed(inputs), routes, normalise=True)
        return self.classify(summed)


CircleVariant = Literal["pure", "skip", "mlp"]


class CircleNet(nn.Module):
    """The step map of the circle toy, as in the authors' code: points (b, 2, 2) -> next points.

        f(X) = LN(Y + SA(Y)) W_r + b_r,   Y = LN(X W_e + b_e)      (2 heads, post-LN)
        pure:  X_next = f(X)
        skip:  X_next = X + f(X)       the skip connection around the recurrent step
        mlp:   f with the transformer MLP block after the attention, LN(Z + MLP(Z)) (GELU,
               hidden width d_model, the authors' intermediate_size)

    Quirk (kept from the authors' SAN): the attention block itself is the BERT block
    LN(Y + SA(Y)), skip inside; the point embedding and read-out make each step one layer of a
    network in the plane, and "skip" adds the identity across those steps (recurrent applications
    of f are layers of a network without skips; of X + f(X), with them).
    """

    def __init__(
        self, variant: CircleVariant, *, d_model: int = 32, n_heads: int = 2, seed: int = 0
    ) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(seed)
        self.variant = variant
        self.embed = _init_linear(nn.Linear(2, d_model), generator)
        self.embed_norm = nn.LayerNorm(d_model, eps=NORM_EPS)
        self.layer = ToyNet(
            NetConfig(
                n_layers=1,
                n_heads=n_heads,
                d_model=d_model,
                skip="on",
                norm="post",
                mlp=variant == "mlp",
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
        return points + self.step(points) if self.variant == "skip" else self.step(points)


def accuracy(logits: Tensor, targets: Tensor) -> Tensor:
    """Share of tokens whose arg-max class is the target: logits (..., b, n, C), targets (b, n).

    Returns a float64 tensor of shape (...) (one accuracy per leading index).

    Example:
        >>> accuracy(torch.tensor([[[2.0, 0.0], [0.0, 1.0]]]), torch.tensor([[0, 0]]))
        tensor(0.5000, dtype=torch.float64)
    """
    return (logits.argmax(dim=-1) == targets).double().mean(dim=(-2, -1))


@dataclass
class TrainedModel:
    """A trained model, its per-step training losses, and whether it came from the store."""

    model: nn.Module
    losses: list[float]
    reused: bool
    key: str


def train_model(
    model: nn.Module,
    model_config: dict[str, Any],
    inputs: Tensor,
    targets: Tensor,
    train_config: TrainConfig,
    *,
    store: CheckpointStore | None = None,
) -> TrainedModel:
    """Train `model` (built from `model_config`) on the data, or load it from `store`.

    The checkpoint key covers everything that determines the weights: `model_config` (which must
    describe the model completely, seed included), `train_config` and the data's bytes. A stored
    checkpoint is used only when its full config is equal to this one.

    Example:
        >>> from rankcollapse.train.loop import MemoryStore
        >>> config = SANConfig(inputs="points", n_classes=2, n_layers=1, d_model=4)
        >>> x, y = torch.randn(8, 5, 2), torch.randint(2, (8, 5))
        >>> store = MemoryStore()
        >>> first = train_model(SAN(config), config.model_dump(), x, y, TrainConfig(steps=2),
        ...                     store=store)
        >>> again = train_model(SAN(config), config.model_dump(), x, y, TrainConfig(steps=2),
        ...                     store=store)
        >>> first.reused, again.reused, first.losses == again.losses
        (False, True, True)
    """
    check_store(store)
    full_config = {
        "model": {"class": type(model).__name__, **model_config},
        "train": train_config.model_dump(),
        "data": checkpoint_key({}, inputs, targets),
    }
    key = checkpoint_key(full_config)
    stored = store.load(key, full_config) if store is not None else None
    if stored is not None:
        model.load_state_dict(stored["state"])
        model.eval()
        return TrainedModel(model, list(stored["losses"]), True, key)
    losses = train(model, inputs, targets, train_config)
    if store is not None:
        state = {name: value.detach().clone() for name, value in model.state_dict().items()}
        store.save(key, full_config, {"state": state, "losses": losses})
    return TrainedModel(model, losses, False, key)
