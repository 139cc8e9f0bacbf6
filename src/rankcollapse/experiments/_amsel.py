"""What the trained Amsel et al. 2024 experiments share: the training fields of their configs
and the step from a trained model to its tidy rows.

`TrainingConfig` holds the optimiser, schedule, stopping rule and scoring (the fields of
`rankcollapse.train.TrainSettings` an experiment sets); `EncoderConfig` adds the width and MLP
of the `RankEncoder` experiments (amsel2024-encoder, amsel2024-depth). An experiment whose
default differs redeclares that field in its own `Config`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from rankcollapse.experiments._registry import Unit

if TYPE_CHECKING:
    from rankcollapse.train import GridResult, TrainSettings


class TrainingConfig(BaseModel):
    """Seeds, optimiser steps, schedule, stopping rule and held-out scoring."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    seeds: list[int] = Field(default_factory=lambda: [0], min_length=1)
    """Seeds of initialisation and data."""
    steps: int = Field(600, ge=1, le=1_000_000)
    """Optimiser steps at most (a run may stop earlier on a plateau)."""
    batch_size: int = Field(64, ge=1, le=65536)
    """Fresh samples per step."""
    lr: float = Field(0.01, gt=0, le=1)
    """Peak learning rate (the paper's 0.01; lower it if deeper models collapse to 0)."""
    warmup: int = Field(100, ge=0)
    """Linear warm-up steps."""
    patience: int = Field(8, ge=1)
    """Curve points (of 50 steps) without 1% improvement before a run stops."""
    eval_samples: int = Field(2048, ge=64, le=1_000_000)
    """Held-out samples of the final error."""

    def train_settings(self) -> TrainSettings:
        """These fields as `TrainSettings` (betas, log interval, eval seed: its defaults)."""
        from rankcollapse.train import TrainSettings

        return TrainSettings(
            steps=self.steps,
            batch_size=self.batch_size,
            lr=self.lr,
            warmup=self.warmup,
            patience=self.patience,
            eval_samples=self.eval_samples,
        )


class EncoderConfig(TrainingConfig):
    """The training fields and the width and MLP of a `RankEncoder`."""

    d_model: int = Field(8, ge=2, le=4096)
    """Token width d."""
    d_ff: int = Field(128, ge=1, le=16384)
    """MLP width (the paper: 2048)."""


def training_rows(result: GridResult) -> pd.DataFrame:
    """The loss-curve rows, then the final scores (step NaN), of one training run."""
    return pd.concat([result.curves, result.final.assign(step=float("nan"))], ignore_index=True)


def train_encoder_unit(
    config: EncoderConfig, unit: Unit, *, n_points: int, width_multiplier: int = 1
) -> pd.DataFrame:
    """Train the `RankEncoder` of `unit` (n_heads, n_layers, seed) on the farthest-point task
    with `n_points` points per set; its rows start with the unit's columns, in unit order."""
    from rankcollapse.nets import RankEncoder
    from rankcollapse.tasks import NeighbourTask
    from rankcollapse.train import train_encoder

    model = RankEncoder(
        config.d_model,
        n_heads=unit["n_heads"],
        n_layers=unit["n_layers"],
        d_ff=config.d_ff,
        width_multiplier=width_multiplier,
        seed=unit["seed"],
    )
    task = NeighbourTask(config.d_model, n_points, target="farthest")
    result = train_encoder(model, task, config.train_settings(), seed=unit["seed"])
    frame = training_rows(result)
    for key, value in reversed(unit.items()):
        frame.insert(0, key, value)
    return frame
