"""wu2024-temperature: sharper attention slows early collapse, most for the complete mask.

Paper: Wu, Ajorlou, Wang, Jegelka, Jadbabaie, NeurIPS 2024 (arXiv 2405.18781), experiments
(spec wu2024.md sec. 4, "Temperature"). Pure SAN under each mask with the softmax scale
1/sqrt(d_QK) for d_QK in `d_qk` (the paper: 1/64, 1, 64):

- `toy`: `ToyNet` pure SAN (one head, width `toy_d_model`, float64) with `temperature = d_QK`;
- pretrained `minilm`, `smollm2` (and random-init `bert-base` on request) through
  `rankcollapse.hf.probe` with the `wu:san` variant, the mask replacing the model's pattern and
  the logits rescaled by 1 / T with T = sqrt(d_QK / d_head) on top of the model's own
  1/sqrt(d_head): the attention then uses exactly 1/sqrt(d_QK). d_QK = d_head is the model as
  trained (64 for BERT-base and SmolLM2, 32 for MiniLM).

Measured: `mu` and `mu_rel` per layer (as wu2024-masks). The early collapse of a curve is
the drop of the mean log mu_rel over the first `early_layers` layers,
log mu_rel(0) - log mu_rel(early_layers), with values at the dtype floor clipped to the floor
(so a curve that reaches it early has a finite drop).

Claims (from this run), per model:
- smaller-dqk-slows@model: for every mask, the early drop at the smallest d_QK is below the
  drop at the largest d_QK; measured as the smallest gap drop(max d_QK) - drop(min d_QK) over
  masks, expected > 0.
- complete-most@model: that gap is largest under the complete mask.
"""

from __future__ import annotations

import math
from typing import Annotated, Literal

import numpy as np
import pandas as pd
import torch
from pydantic import Field, model_validator

from rankcollapse.experiments._registry import Claim, Experiment, Summary, Unit, register
from rankcollapse.experiments.wu2024_masks import (
    CORE_MASKS,
    CurvesConfig,
    Mode,
    load_real,
    real_curves,
    toy_curves,
)
from rankcollapse.metrics import dtype_floor
from rankcollapse.plot import band_plot

NAME = "wu2024-temperature"

Model = Literal["toy", "bert-base", "minilm", "smollm2"]


class Config(CurvesConfig):
    """Models, masks, d_QK values and sizes of the temperature experiment."""

    models: list[Model] = Field(["toy", "minilm", "smollm2"])
    """The toy with Wu's dynamics and pretrained models (bert-base: random init)."""
    d_qk: list[Annotated[float, Field(gt=0.0)]] = Field([1 / 64, 1.0, 64.0], min_length=2)
    """The d_QK of the softmax scale 1/sqrt(d_QK)."""
    early_layers: int = Field(4, ge=1)
    """Layers over which the early drop of log mu_rel is measured."""
    # Defaults that differ from wu2024-masks (float64_models: this experiment's models only).
    masks: list[str] = Field(CORE_MASKS, min_length=1)
    """Mask specs of rankcollapse.masks."""
    modes: list[Mode] = Field(["eval"])
    """Real models: eval (dropout off) and/or train mode."""
    toy_layers: int = Field(16, ge=1)
    """Depth of the toy network."""
    float64_models: list[Model] = Field(["smollm2"])
    """Real models run in float64: SmolLM2 without its norms overflows float32 (mu ~ 1e37)."""

    @model_validator(mode="after")
    def _early_within_depth(self) -> Config:
        if "toy" in self.models and self.early_layers > self.toy_layers:
            raise ValueError(
                f"early_layers={self.early_layers} exceeds toy_layers={self.toy_layers}; "
                "set early_layers <= toy_layers"
            )
        return self


# quick: the toy and MiniLM on 2 windows of 32 tokens (SmolLM2 only in paper: see wu2024-masks).
PRESETS = {
    "quick": {"models": ["toy", "minilm"], "n_samples": 2, "n_tokens": 32},
    "paper": {"toy_layers": 32, "toy_tokens": 128, "toy_samples": 32},
}


def units(config: Config) -> list[Unit]:
    return [{"model": m, "mask": mask} for m in config.models for mask in config.masks]


def run_unit(config: Config, unit: Unit) -> pd.DataFrame:
    model, mask = unit["model"], unit["mask"]
    frames = []
    for d_qk in config.d_qk:
        if model == "toy":
            frame = toy_curves(config, mask, variants=["san"], temperature=d_qk)
        else:
            temperature = math.sqrt(d_qk / _head_dim(config, model))
            frame = real_curves(config, model, mask, variants=["san"], temperature=temperature)
        frames.append(frame.assign(d_qk=d_qk))
    frame = pd.concat(frames, ignore_index=True)
    return frame[["model", "init", "variant", "mask", "d_qk", "mode", "layer", "sample",
                  "metric", "value", "at_floor"]]  # fmt: skip


def _head_dim(config: Config, model: str) -> int:
    hf_config = load_real(config, model).model.config
    head_dim = getattr(hf_config, "head_dim", None)
    return head_dim or hf_config.hidden_size // hf_config.num_attention_heads


def early_drop(curve: pd.DataFrame, early_layers: int, floor: float) -> float:
    """log mu_rel(0) - log mu_rel(early_layers) of the mean log over samples, floor-clipped.

    Example:
        >>> curve = pd.DataFrame({"layer": [0, 1, 2], "value": [1.0, 0.1, 1e-30]})
        >>> round(early_drop(curve, 2, 1e-15), 4)  # 15 ln 10: the floor caps the drop
        34.5388
    """
    logs = np.log(curve["value"].clip(lower=floor)).groupby(curve["layer"]).mean()
    last = min(early_layers, int(logs.index.max()))
    return float(logs.loc[0] - logs.loc[last])


def summarize(config: Config, results: pd.DataFrame) -> Summary:
    summary = Summary()
    results = results.astype({"at_floor": bool})
    rel = results[results["metric"] == "mu_rel"]
    rows = []
    for (model, mode, mask, d_qk), curve in rel.groupby(["model", "mode", "mask", "d_qk"]):
        double = model == "toy" or model in config.float64_models
        floor = dtype_floor(torch.float64 if double else torch.float32)
        rows.append(
            {"model": model, "mode": mode, "mask": mask, "d_qk": d_qk,
             "early_drop": early_drop(curve, config.early_layers, floor)}
        )  # fmt: skip
    drops = pd.DataFrame(rows, columns=["model", "mode", "mask", "d_qk", "early_drop"])
    summary.tables["early_drop"] = drops.pivot_table(
        index=["model", "mode", "mask"], columns="d_qk", values="early_drop"
    ).reset_index()
    small, large = min(config.d_qk), max(config.d_qk)
    for (model, mode), part in drops.groupby(["model", "mode"], sort=False):
        by = part.pivot_table(index="mask", columns="d_qk", values="early_drop")
        gap = by[large] - by[small]
        summary.claims.append(
            Claim.check(
                f"smaller-dqk-slows@{model}/{mode}",
                f"Smaller d_QK (sharper attention) slows the early collapse of pure SAN under "
                f"every mask (d_QK {small:g} vs {large:g}, first {config.early_layers} layers).",
                "smallest gap over masks: drop(max d_QK) - drop(min d_QK) of log mu_rel",
                gap.min(),
                ">",
                0.0,
                note="; ".join(f"{m}: {g:.3g}" for m, g in gap.items()),
            )
        )
        if "complete" in gap.index:
            summary.claims.append(
                Claim.check(
                    f"complete-most@{model}/{mode}",
                    "The slow-down from a smaller d_QK is largest under the complete mask.",
                    "mask with the largest gap is complete",
                    gap.idxmax() == "complete",
                    "true",
                    note=f"largest gap: {gap.idxmax()} ({gap.max():.3g})",
                )
            )
    for row in results[results["metric"] == "diverged"].itertuples():
        summary.notes.append(
            f"{row.model} pure SAN ({row.mode}, mask {row.mask}, d_QK {row.d_qk:g}): the hidden "
            "states overflowed float32 (NaN/Inf) before the last layer; no curve."
        )
    for model in rel["model"].unique():
        rows = rel[rel["model"] == model]
        summary.figures[f"{model}_mu_rel"] = band_plot(
            rows.assign(
                layer=rows["layer"].clip(lower=1),
                d_qk=rows["d_qk"].map(lambda v: f"d_QK = {v:g}"),
            ),
            hue="d_qk",
            panel="mask",
            logx=True,
            logy=True,
            title=f"{model}: pure SAN mu_rel against layer by d_QK (layer 0 drawn at 1)",
            ylabel="mu_rel",
        )
    return summary


register(
    Experiment(
        name=NAME,
        description="Wu 2024: pure SAN under each mask with d_QK in {1/64, 1, 64}; smaller d_QK "
        "slows early collapse, most for the complete mask",
        config=Config,
        presets=PRESETS,
        units=units,
        run_unit=run_unit,
        summarize=summarize,
    )
)
