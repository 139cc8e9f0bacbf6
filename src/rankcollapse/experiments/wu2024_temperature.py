"""wu2024-temperature: sharper attention slows early collapse, most for the complete mask.

Paper: Wu, Ajorlou, Wang, Jegelka, Jadbabaie, NeurIPS 2024 (arXiv 2405.18781), the
temperature experiment; docs/wu2024.md walks through our run. Pure SAN under each mask with
the softmax scale 1/sqrt(d_QK) for d_QK in `d_qk` (the paper: 1/64, 1, 64):

- `toy`: the toy pure SAN (one head, float64) with `temperature = d_QK`;
- pretrained `minilm`, `smollm2` (and random-init `bert-base` on request) through
  `rankcollapse.measure.probe` with the `wu:san` variant, the mask replacing the model's pattern and
  the logits divided by T = sqrt(d_QK / d_head) on top of the model's own 1/sqrt(d_head): the
  attention then uses exactly 1/sqrt(d_QK) (d_QK = d_head is the model as trained).

Measured: mu_rel per layer (`rankcollapse.measure.curves`). The early collapse of a curve is
the drop of the mean log mu_rel over the first `early_layers` layers, with values at the
dtype floor clipped to the floor (`early_drop`).

Findings, per model and mode, each decided by the one rule (`experiments.verdicts`) over the
samples (the same inputs at every d_QK; `sample_drops`):
- smaller-dqk-slows@model/mode: under every mask, per sample, (drop(max d_QK) - drop(min
  d_QK)) / mean drop(max d_QK) > 0.1 (a gap of a few thousandths is noise, not a slow-down).
  A mask whose states do not collapse early at the largest d_QK (mean drop <= 0: mu_rel grows)
  has nothing to slow: NOT TESTED by rule, the presupposition named.
- complete-most@model/mode: per sample, the complete mask's gap minus the largest other > 0.
Beyond the paper (the sentence is the paper's, the quantity the project's reading):
- shallow-layers-more@model/mode: per sample and mask, the d_QK gap of the drop over the first
  third of the layers minus the gap over the last third > 0 (the effect "more in shallower
  layers than deeper layers").

The paper ran BERT, an encoder; for a causal decoder (SmolLM2) both are the project's extension
(kind "beyond"), listed apart from the paper's findings.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import TYPE_CHECKING, Annotated, Any

import numpy as np
import pandas as pd
import torch
from pydantic import Field, model_validator

from rankcollapse.experiments import verdicts
from rankcollapse.experiments._curves import CurvesConfig, ToySizes
from rankcollapse.experiments._registry import (
    Experiment,
    Summary,
    Unit,
    register,
)
from rankcollapse.experiments.verdicts import Assumption, Claim, Quote
from rankcollapse.hf import MODELS, text_model_type
from rankcollapse.measure import ModelSource, head_dim, load_cached, real_curves, toy_curves
from rankcollapse.metrics import dtype_floor
from rankcollapse.plot import line_plot, mask_panels
from rankcollapse.theory import early_drop
from rankcollapse.variants import VARIANTS

NAME = "wu2024-temperature"
if TYPE_CHECKING:  # a name to mypy; pydantic checks it against the registry
    Model = str
else:
    Model = text_model_type("toy")  # the toy, or a text model of rankcollapse.hf.MODELS
PURE_SAN = VARIANTS["wu:san"]  # Wu et al.'s pure SAN: no skip, no MLP, no norm
COLUMNS = ["model", "init", "variant", "mask", "d_qk", "mode", "layer", "sample", "metric"]
COLUMNS += ["value", "at_floor", "device"]
WHERE = "Fig. 3 (caption)"
DECIDES = (
    "more samples: --preset paper --set n_samples=64 toy.n_samples=4000 text=FILE (a text longer "
    "than the built-in corpus, which holds 55 of SmolLM2's windows of 128 tokens): 4,360 s of "
    "units on one core (2026-11-29)"
)
CLEAR_GAP = 0.1  # a slow-down: the drop at the smallest d_QK at least 10% below the largest


class Config(CurvesConfig):
    """Models, masks, d_QK values and sizes of the temperature experiment."""

    models: list[Model] = Field(["toy", "minilm", "smollm2"])
    """The toy with Wu's dynamics and pretrained models (bert-base: random init)."""
    d_qk: list[Annotated[float, Field(gt=0.0)]] = Field([1 / 64, 1.0, 64.0], min_length=2)
    """The d_QK of the softmax scale 1/sqrt(d_QK)."""
    early_layers: int = Field(4, ge=1)
    """Layers over which the early drop of log mu_rel is measured."""
    float64_models: list[Model] = Field(["smollm2"])
    """Real models run in float64: SmolLM2 without its norms overflows float32 (mu ~ 1e37)."""
    toy: ToySizes = ToySizes(n_layers=16)
    """Sizes of the toy network and its inputs."""

    @model_validator(mode="after")
    def _early_within_depth(self) -> Config:
        if "toy" in self.models and self.early_layers > self.toy.n_layers:
            raise ValueError(
                f"early_layers={self.early_layers} exceeds toy.n_layers={self.toy.n_layers}; "
                "set early_layers <= toy.n_layers"
            )
        return self


# quick: the toy and MiniLM on 2 windows of 32 tokens (SmolLM2's float64 load takes a minute).
PRESETS: dict[str, dict[str, Any]] = {
    "quick": {"models": ["toy", "minilm"], "n_samples": 2, "n_tokens": 32},
    "paper": {"toy": {"n_layers": 32, "n_tokens": 128, "n_samples": 32}},
}


def units(config: Config) -> list[Unit]:
    return [{"model": m, "mask": mask} for m in config.models for mask in config.masks]


def run_unit(config: Config, unit: Unit) -> pd.DataFrame:
    model, mask, device = unit["model"], unit["mask"], config.device
    frames = []
    for d_qk in config.d_qk:
        common: dict[str, Any] = {"seed": config.seed, "metrics": ["mu_rel"]}
        if model == "toy":
            frame = toy_curves(
                [PURE_SAN],
                mask,
                **config.toy.model_dump(),
                temperature=d_qk,
                device=device,
                **common,
            )
        else:
            init = MODELS[model].default_init
            source = ModelSource(model, init, config.seed, device, config.model_dtype(model))
            loaded = load_cached(source)
            frame = real_curves(
                loaded,
                [PURE_SAN],
                mask,
                modes=config.modes,
                n_samples=config.n_samples,
                n_tokens=config.n_tokens,
                text=config.text,
                temperature=math.sqrt(d_qk / head_dim(loaded)),
                **common,
            )
        frames.append(frame.assign(d_qk=d_qk, model=model, device=str(device)))
    return pd.concat(frames, ignore_index=True)[COLUMNS]


def label(d_qk: float) -> str:
    """d_QK as the paper writes it: 1/64, 1, 64."""
    return f"d_QK = {Fraction(d_qk).limit_denominator(4096)}"


def drops_table(config: Config, results: pd.DataFrame) -> pd.DataFrame:
    """Early drop of log mu_rel per (model, mode, mask, d_qk); NaN for a diverged curve."""
    rows = []
    for (model, mode, mask, d_qk), curve in results.groupby(["model", "mode", "mask", "d_qk"]):
        rel = curve[curve["metric"] == "mu_rel"]
        double = model == "toy" or model in config.float64_models
        floor = dtype_floor(torch.float64 if double else config.dtype)
        diverged = (curve["metric"] == "diverged").any() or rel.empty
        drop = math.nan if diverged else early_drop(rel, config.early_layers, floor)
        rows.append({"model": model, "mode": mode, "mask": mask, "d_qk": d_qk, "early_drop": drop})
    return pd.DataFrame(rows, columns=["model", "mode", "mask", "d_qk", "early_drop"])


def sample_drops(config: Config, results: pd.DataFrame) -> pd.DataFrame:
    """Per model, mode, mask, d_QK and sample: the drop of log mu_rel (floor-clipped) over the
    first `early_layers` layers (`early`), over the first third of the layers (`shallow`) and
    over the last third (`deep`): the findings' units (the same inputs at every d_QK). A
    diverged curve's drops are NaN."""
    keys = ["model", "mode", "mask", "d_qk"]
    rel = results[results["metric"] == "mu_rel"]
    rows = []
    for key, curve in rel.groupby(keys, sort=False):
        double = key[0] == "toy" or key[0] in config.float64_models
        floor = dtype_floor(torch.float64 if double else config.dtype)
        logs = np.log(curve["value"].astype(float).clip(lower=floor))
        wide = curve.assign(log=logs).pivot_table(index="sample", columns="layer", values="log")
        last = int(wide.columns.max())
        third = max(last // 3, 1)
        early = min(config.early_layers, last)
        drops = {
            "early": wide[0] - wide[early],
            "shallow": wide[0] - wide[third],
            "deep": wide[last - third] - wide[last],
        }
        rows += [(*key, sample, *(d[sample] for d in drops.values())) for sample in wide.index]
    frame = pd.DataFrame(rows, columns=[*keys, "sample", "early", "shallow", "deep"])
    diverged = results.loc[results["metric"] == "diverged", keys].drop_duplicates()
    bad = frame.merge(diverged.assign(bad=True), on=keys, how="left")["bad"].eq(True)
    frame.loc[bad.to_numpy(), ["early", "shallow", "deep"]] = math.nan
    gone = diverged.merge(frame[keys].drop_duplicates(), on=keys, how="left", indicator=True)
    gone = gone[gone["_merge"] == "left_only"][keys].assign(sample=0, early=math.nan)
    return pd.concat([frame, gone.assign(shallow=math.nan, deep=math.nan)], ignore_index=True)


def _gaps(drops: pd.DataFrame, column: str, small: float, large: float) -> pd.DataFrame:
    """Per mask (columns) and sample (rows): drop at the largest d_QK minus at the smallest."""
    wide = drops.pivot_table(index="sample", columns=["mask", "d_qk"], values=column, dropna=False)
    masks = wide.columns.get_level_values(0).unique()
    return pd.DataFrame(
        {m: wide.get((m, large), math.nan) - wide.get((m, small), math.nan) for m in masks}
    )


def claims(config: Config, results: pd.DataFrame) -> list[Claim]:
    drops = sample_drops(config, results.astype({"at_floor": bool}))
    small, large = min(config.d_qk), max(config.d_qk)
    found = []
    for model in config.models:
        # a causal decoder is outside the paper's setting (BERT): the project's extension
        beyond = model != "toy" and MODELS[model].causal
        for mode in ["eval"] if model == "toy" else config.modes:
            part = drops[(drops["model"] == model) & (drops["mode"] == mode)]
            found += _mode_claims(config, part, f"{model}/{mode}", small, large, beyond)
    return found


def _mode_claims(
    config: Config, part: pd.DataFrame, arm: str, small: float, large: float, beyond: bool
) -> list[Claim]:
    """The three findings of one model and mode, decided over its samples."""
    early = _gaps(part, "early", small, large)
    at_large = part[part["d_qk"] == large].groupby("mask")["early"].mean()
    # the sentence presupposes an early collapse at the largest d_QK to slow
    presumes = {
        str(m): [
            Assumption(
                f"early collapse at {label(large)}", bool(drop > 0), f"mu_rel grows: {drop:.2g}"
            )
        ]
        for m, drop in at_large.items()
    }
    relative = {m: list(early[m] / at_large[m]) for m in early}
    common: dict[str, Any] = {"decides": DECIDES, "beyond": beyond}
    found = [
        verdicts.for_every(
            f"smaller-dqk-slows@{arm}",
            says=Quote("Smaller temperature terms alleviate the rate of rank collapse", WHERE),
            text=f"Smaller d_QK (sharper attention) clearly slows the early collapse of pure SAN "
            f"under every mask ({label(small)} against {label(large)}, first "
            f"{config.early_layers} layers).",
            quantity="per sample: (drop(max d_QK) - drop(min d_QK)) / mean drop(max d_QK) of "
            "log mu_rel over the early layers (units: samples; members: masks)",
            members=relative,
            side=">",
            margin=CLEAR_GAP,  # a slow-down of at least 10 %, not a few thousandths
            expected=[str(m) for m in config.masks],
            assumptions=presumes,
            **common,
        )
    ]
    if "complete" in early and len(early.columns) > 1:
        others = early.drop(columns="complete").max(axis=1)
        found.append(
            verdicts.finding(
                f"complete-most@{arm}",
                says=Quote(
                    "effect is more significant with global attention than with sparser masked "
                    "attention",
                    WHERE,
                ),
                text="The slow-down from a smaller d_QK is largest under the complete mask.",
                quantity="per sample: the complete mask's early-drop gap minus the largest "
                "gap of another mask (units: samples)",
                values=early["complete"] - others,
                side=">",
                margin=0.0,  # complete first, by any amount
                note="mean gaps: " + ", ".join(f"{m} {g:.3g}" for m, g in early.mean().items()),
                **common,
            )
        )
    shallow, deep = _gaps(part, "shallow", small, large), _gaps(part, "deep", small, large)
    found.append(
        verdicts.for_every(
            f"shallow-layers-more@{arm}",
            says=Quote(
                "Smaller temperature terms alleviate the rate of rank collapse ... and more in "
                "shallower layers than deeper layers",
                WHERE,
            ),
            text="The slow-down from a smaller d_QK shows more in the shallower layers than in "
            "the deeper ones, under every mask.",
            quantity="per sample: the d_QK gap of the drop over the first third of the layers "
            "minus the gap over the last third (units: samples; members: masks)",
            members={m: list(shallow[m] - deep[m]) for m in shallow},
            side=">",
            margin=0.0,  # more, by any amount
            expected=[str(m) for m in config.masks],
            assumptions=presumes,
            decides=DECIDES,
            note="the quantity (thirds of the depth, floor-clipped drops) is the project's "
            "reading of the sentence, so the finding is listed beyond the paper",
            beyond=True,
        )
    )
    return found


def summarize(config: Config, results: pd.DataFrame) -> Summary:
    results = results.astype({"at_floor": bool})
    drops = drops_table(config, results)
    table = drops.assign(d_qk=drops["d_qk"].map(label)).pivot_table(
        index=["model", "mode", "mask"], columns="d_qk", values="early_drop", sort=False
    )
    rel = results[results["metric"] == "mu_rel"].assign(d_qk=lambda d: d["d_qk"].map(label))
    curve = ["model", "mode", "mask", "d_qk", "layer"]
    rel["floor_share"] = rel.groupby(curve)["at_floor"].transform("mean")
    figures = {}
    for model, rows in rel.groupby("model", sort=False):
        # A layer's mean is signal only when no sequence is at the floor.
        clean = rows[rows["floor_share"] == 0]
        figures[f"{model}_mu_rel"] = mask_panels(
            clean,
            hue="d_qk",
            floor_column=None,
            ylabel="mu_rel",
            title=f"{model}: pure SAN mu_rel against layer by d_QK (layers where no sequence "
            "is at the dtype floor)",
        )
        reached = rows.groupby("mask")["floor_share"].transform("max") > 0
        if reached.any():  # one panel per mask where some sequence reaches the floor
            share = rows[reached].drop_duplicates(curve)
            figures[f"{model}_floor_share"] = line_plot(
                share,
                x="layer",
                y="floor_share",
                hue="d_qk",
                panel="mask",
                title=f"{model}: share of sequences whose mu_rel is at the dtype floor",
                ylabel="share at the floor",
            )
    floors = {name: dtype_floor(getattr(torch, name)) for name in ("float64", "float32")}
    notes = [
        "Early drop = mean over sequences of log mu_rel(0) - log mu_rel(early layer), values "
        "below the floor of the dtype that produced the states clipped to it ("
        + ", ".join(f"{k}: {v:.2g}" for k, v in floors.items())
        + "). The mu_rel figures draw only layers where no sequence is at the floor; the "
        "share at the floor has its own figure."
    ] + [
        f"{r.model} pure SAN ({r.mode}, mask {r.mask}, {label(r.d_qk)}): the hidden states "
        "overflowed (NaN/Inf); no curve, and the findings over it fail."
        for r in results[results["metric"] == "diverged"].itertuples()
    ]
    return Summary(
        tables={"early drop of log mu_rel": table.reset_index()},
        figures=figures,
        claims=claims(config, results),
        notes=notes,
    )


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
        claims=claims,
    )
)
