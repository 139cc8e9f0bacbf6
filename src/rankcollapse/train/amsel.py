"""Training for the learning experiments of Amsel, Yehudai, Bruna 2024 (arXiv 2407.16153,
Sec. 7): the config fields they share, the stock-encoder loop, and when a run has converged.

- `TrainingConfig`: seeds, optimiser, schedule, stopping rule, scoring and device, the fields
  of `TrainSettings` an experiment sets; `EncoderConfig` adds the width and MLP of a
  `RankEncoder`. An experiment whose default differs redeclares that field in its own config.
- `train_encoder`: one self-attention model on the farthest-point target, the schedule,
  stopping rule and scores of `train_grid`; `train_farthest_encoder` builds the `RankEncoder`.
- `tail_change`: how much the loss still fell over the last part of a run (a plateau test).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch
from pydantic import BaseModel, ConfigDict, Field

from rankcollapse.devices import Device
from rankcollapse.errors import ConfigError
from rankcollapse.nets.rank_encoder import RankEncoder, StackedRankEncoder
from rankcollapse.seeds import Seed
from rankcollapse.sizes import BatchSize, DModel
from rankcollapse.tasks.neighbours import NeighbourTask, linear_baseline, relative_mse
from rankcollapse.train.grid import (
    CPU,
    GridResult,
    StackedAdamW,
    TrainSettings,
    mean_squared_errors,
)


class TrainingConfig(BaseModel):
    """Seeds, optimiser steps, schedule, stopping rule, held-out scoring and device."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    seeds: list[Seed] = Field(default_factory=lambda: [0], min_length=1)
    """Seeds of initialisation and data."""
    steps: int = Field(600, ge=1, le=1_000_000)
    """Optimiser steps at most (a run may stop earlier on a plateau)."""
    batch_size: BatchSize = 64
    """Fresh samples per step."""
    lr: float = Field(0.01, gt=0, le=1)
    """Peak learning rate (the paper's 0.01; lower it if deeper models collapse to 0)."""
    warmup: int = Field(100, ge=0)
    """Linear warm-up steps."""
    patience: int = Field(8, ge=1)
    """Curve points (of 50 steps) without 1% improvement before a run stops."""
    eval_samples: int = Field(2048, ge=64, le=1_000_000)
    """Held-out samples of the final error."""
    device: Device = torch.device("cpu")
    """Where to train: cpu, cuda, mps, or auto (an accelerator when one is visible)."""

    def train_settings(self) -> TrainSettings:
        """These fields as `TrainSettings` (betas, log interval, eval seed: its defaults)."""
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

    d_model: DModel = Field(8, ge=2, le=4096)
    """Token width d."""
    d_ff: int = Field(128, ge=1, le=16384)
    """MLP width (the paper: 2048)."""


def training_rows(result: GridResult) -> pd.DataFrame:
    """The loss-curve rows, then the final scores (step NaN), of one training run."""
    return pd.concat([result.curves, result.final.assign(step=float("nan"))], ignore_index=True)


def tail_change(curve: Sequence[float], *, tail: float = 0.2) -> float:
    """Relative fall of the loss over the last `tail` of a run: 0 on a plateau.

    Formula: with w the last max(4, ceil(tail n)) of the n curve points (each the mean loss of
        `log_every` steps), (mean(first half of w) - mean(second half of w)) / mean(first half).
        NaN when the curve has fewer than 4 points (too short to judge).
    Note: the schedule decays the learning rate to 0, which flattens every curve's end; a run
        counts as converged only if the loss has also stopped falling before that.

    Example:
        >>> tail_change([1.0, 0.5, 0.3, 0.3, 0.3, 0.3])
        0.0
        >>> round(tail_change([1.0, 0.8, 0.6, 0.4]), 3)  # (0.9 - 0.5) / 0.9
        0.444
    """
    values = np.asarray(curve, dtype=float)
    if len(values) < 4:
        return math.nan
    window = values[-max(4, math.ceil(tail * len(values))) :]
    half = len(window) // 2
    first, second = window[:half].mean(), window[half:].mean()
    return float((first - second) / first)


def train_encoder(
    model: torch.nn.Module,
    task: NeighbourTask,
    settings: TrainSettings,
    *,
    seed: int = 0,
    device: torch.device = CPU,
) -> GridResult:
    """One self-attention model `x -> model(x)` (e.g. `RankEncoder`) on the farthest-point task.

    The same schedule, stopping rule and scores as `train_grid`, with torch's AdamW (no weight
    decay); data are drawn on `device` (a `torch.device` its caller resolved: an experiment
    config's `Device` field, checked visible at `make_config`), and the host reads the losses once per `log_every`
    steps. Beside the model's held-out error
    (`eval_rel_mse`), the baselines on the same held-out samples: `zero_rel_mse` (the zero
    predictor, 1) and `linear_rel_mse` (`tasks.linear_baseline`, fitted on other samples).
    Rows carry no configuration columns: the caller adds its own.
    """
    if task.target != "farthest":
        raise ConfigError(
            f"train_encoder feeds every point as a query (self-attention), so it needs the "
            f"farthest-point target; got target='{task.target}'."
        )
    model.to(device)
    optimiser = torch.optim.AdamW(
        model.parameters(), lr=settings.lr, betas=settings.betas, eps=settings.eps, weight_decay=0
    )
    stream = task.stream(settings.batch_size, seed=seed, device=device)
    best, since_best, window, rows, step = math.inf, 0, [], [], 0
    model.train()
    for step in range(settings.steps):
        batch = next(stream)
        x, target = batch.x, batch.target
        for group in optimiser.param_groups:
            group["lr"] = settings.lr_at(step)
        loss = mean_squared_errors(model(x)[None], target[None])[0]  # one model's, as stacked
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        zero_error = mean_squared_errors(target[None], target.new_zeros(()))[0]  # predicting 0
        window.append(torch.stack([loss.detach(), zero_error]))
        if (step + 1) % settings.log_every == 0:  # the host reads and divides once per log
            losses = [loss / trivial for loss, trivial in torch.stack(window).tolist()]
            mean = sum(losses) / len(losses)
            window = []
            rows.append((step + 1, "train_rel_mse", mean))
            since_best = 0 if mean < best * (1 - settings.min_improvement) else since_best + 1
            best = min(best, mean)
            if since_best >= settings.patience:
                break
    return _scored(model, task, settings, device, rows, best, step + 1)


def _scored(
    model: torch.nn.Module,
    task: NeighbourTask,
    settings: TrainSettings,
    device: torch.device,
    rows: list[tuple[int, str, float]],
    best: float,
    steps_run: int,
) -> GridResult:
    """A trained model's curve rows and final scores (`train_encoder`'s rows)."""
    model.to(device).eval()
    held_out = task.sample(
        settings.eval_samples, torch.Generator().manual_seed(settings.eval_seed), torch.float32
    )
    fit = task.sample(
        settings.eval_samples, torch.Generator().manual_seed(settings.eval_seed + 1), torch.float32
    )
    with torch.no_grad():
        error = float(relative_mse(model(held_out.x.to(device)).cpu(), held_out.target))
    zero = float(relative_mse(torch.zeros_like(held_out.target), held_out.target))
    curves = pd.DataFrame(rows, columns=["step", "metric", "value"]).astype(
        {"step": int, "metric": str, "value": float}
    )
    final = pd.DataFrame(
        [
            ("eval_rel_mse", error),
            ("best_train_rel_mse", best),
            ("steps_run", float(steps_run)),
            ("zero_rel_mse", zero),  # the trivial predictor and the best one that selects
            ("linear_rel_mse", linear_baseline(fit, held_out)),  # nothing, same samples
        ],
        columns=["metric", "value"],
    )
    return GridResult(curves, final)


def train_encoders(
    encoders: list[RankEncoder],
    task: NeighbourTask,
    settings: TrainSettings,
    *,
    seeds: Sequence[int],
    device: torch.device = CPU,
) -> list[GridResult]:
    """`train_encoder` of several encoders of one shape at once, encoder u on seed u's data.

    The encoders train as one `StackedRankEncoder` (one forward, backward and optimiser step
    per step for all; AdamW without weight decay, kept per encoder, written out in
    `train.grid`); each stops on its own plateau and is then frozen while the others go on. So
    each ends where `train_encoder` alone ends with the same seed, up to float rounding
    (tests/train/test_encoders.py). The host reads the losses once per `log_every` steps. The
    trained weights are copied back into `encoders`.
    """
    if task.target != "farthest" or len(seeds) != len(encoders):
        raise ConfigError(
            f"train_encoders needs the farthest-point target (got '{task.target}') and one "
            f"seed per encoder (got {len(seeds)} seeds for {len(encoders)} encoders)."
        )
    stack = StackedRankEncoder(encoders).to(device)
    owner = torch.arange(len(encoders), device=device)
    optimiser = StackedAdamW([(p, owner) for p in stack.parameters()], len(encoders), settings)
    streams = [task.stream(settings.batch_size, seed=s, device=device) for s in seeds]
    runs = [_Run() for _ in encoders]
    active = torch.ones(len(encoders), dtype=torch.bool, device=device)
    window = []
    for step in range(settings.steps):
        batches = [next(stream) for stream in streams]
        x, target = torch.stack([b.x for b in batches]), torch.stack([b.target for b in batches])
        loss = mean_squared_errors(stack(x), target)  # (U,)
        loss.sum().backward()  # each term reaches only its own encoder's weights
        optimiser.step(settings.lr_at(step), None if all(r.active for r in runs) else active)
        window.append(
            torch.stack([loss.detach(), mean_squared_errors(target, target.new_zeros(()))])
        )
        if (step + 1) % settings.log_every == 0:  # the host reads once per log
            losses = torch.stack(window).tolist()  # [step][loss, trivial][unit]
            window = []
            for u, run in enumerate(runs):
                if run.active and not run.log(
                    step + 1, [p[0][u] / p[1][u] for p in losses], settings
                ):
                    active[u] = False
            if not any(run.active for run in runs):
                break
    stack.unstack_into(encoders)
    return [
        _scored(encoder, task, settings, device, run.rows, run.best, run.steps_run or step + 1)
        for encoder, run in zip(encoders, runs, strict=True)
    ]


@dataclass
class _Run:
    """One encoder's curve and stopping rule in `train_encoders` (as `train_encoder`'s)."""

    rows: list[tuple[int, str, float]] = field(default_factory=list)
    best: float = math.inf
    since_best: int = 0
    steps_run: int = 0  # 0 while it trains
    active: bool = True

    def log(self, step: int, losses: list[float], settings: TrainSettings) -> bool:
        """Take one curve point (the mean of `losses`); False when it stops here."""
        mean = sum(losses) / len(losses)
        self.rows.append((step, "train_rel_mse", mean))
        improved = mean < self.best * (1 - settings.min_improvement)
        self.since_best = 0 if improved else self.since_best + 1
        self.best = min(self.best, mean)
        if self.since_best >= settings.patience:
            self.active, self.steps_run = False, step
        return self.active


def train_farthest_encoder(
    config: EncoderConfig,
    *,
    n_points: int,
    n_heads: int,
    n_layers: int,
    seed: int,
    width_multiplier: int = 1,
    positions: int = 0,
) -> pd.DataFrame:
    """Train one `RankEncoder` of `config`'s width (plus `positions` scratch dimensions holding
    each token's position, Thm 5) on the farthest-point task with `n_points` points per set;
    its curve and final rows (the caller adds its identifying columns)."""
    model = RankEncoder(
        config.d_model,
        n_heads=n_heads,
        n_layers=n_layers,
        d_ff=config.d_ff,
        width_multiplier=width_multiplier,
        positions=positions,
        seed=seed,
    )
    task = NeighbourTask(config.d_model, n_points, target="farthest")
    result = train_encoder(model, task, config.train_settings(), seed=seed, device=config.device)
    return training_rows(result)


def train_farthest_encoders(
    config: EncoderConfig,
    *,
    n_points: int,
    n_heads: int,
    n_layers: int,
    seeds: Sequence[int],
    positions: int = 0,
) -> pd.DataFrame:
    """`train_farthest_encoder` for every seed of `seeds` at once (`train_encoders`; one seed:
    `train_encoder` itself); the rows of each seed, with a `seed` column first."""
    encoders = [
        RankEncoder(
            config.d_model,
            n_heads=n_heads,
            n_layers=n_layers,
            d_ff=config.d_ff,
            positions=positions,
            seed=seed,
        )
        for seed in seeds
    ]
    task = NeighbourTask(config.d_model, n_points, target="farthest")
    settings = config.train_settings()
    if len(seeds) == 1:
        results = [train_encoder(encoders[0], task, settings, seed=seeds[0], device=config.device)]
    else:
        results = train_encoders(encoders, task, settings, seeds=seeds, device=config.device)
    frames = [training_rows(r).assign(seed=s) for r, s in zip(results, seeds, strict=True)]
    frame = pd.concat(frames, ignore_index=True)
    return frame[["seed", *[c for c in frame.columns if c != "seed"]]]
