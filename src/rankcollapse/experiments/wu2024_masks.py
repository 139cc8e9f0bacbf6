"""wu2024-masks: how attention masks and LayerNorm change rank collapse (Wu et al. 2024).

Paper: Wu, Ajorlou, Wang, Jegelka, Jadbabaie, "On the role of attention masks and LayerNorm
in transformers", NeurIPS 2024 (arXiv 2405.18781): Thm 1 and the masks x components
experiment (mu against layer on log-log axes); docs/wu2024.md walks through our run.

mu = ||X - 1 mean^T||_F and mu_rel = mu / ||X||_F per layer (`rankcollapse.theory.curves`) for
Wu's five variants (pure SAN, SAN+skip, SAN+LN, SAN+skip+LN, transformer; LN = each token
scaled to unit norm) under the masks complete, causal, window {i-1, i, i+1}, causal window
{i-1, i}, and the extras sinks:1:1 (token 0 global plus the window) and dilated:1:2 (no center
node: Thm 1 does not apply). Models: the toy with Wu's dynamics (float64, no dropout: eval
only), random-init BERT (12 layers and `deep_n_layers`), pretrained MiniLM and SmolLM2 (float64:
without its norms its states reach ~1e37), in eval and train mode (dropout on).

Collapse rate of a curve: `rankcollapse.theory.collapse_rate`, the slope per layer of the log
geometric mean over samples before the first layer at the dtype floor (< 0: collapse).

Findings:
- san-collapses-every-mask: pure SAN's mu has a negative slope for every model, mode and mask
  with a center node (a diverged or missing curve fails it).
- local-masks-slower@model/mode: the slowest radius-1 mask collapses faster than the fastest
  mask of radius > 1 (speed ratio > 1; only defined when both slopes are negative).
- rate-follows-radius@model/mode: the order of the slopes follows the radius (concordance 1).
SAN+LN at random init is a measurement (mu_rel at the last layer per mask), not a finding.
"""

from __future__ import annotations

import math
from typing import Literal

import pandas as pd
from pydantic import Field

from rankcollapse.devices import resolve_device
from rankcollapse.experiments._registry import (
    Claim,
    Experiment,
    Summary,
    Unit,
    finding,
    for_every,
    register,
)
from rankcollapse.masks import MaskSpecText
from rankcollapse.plot import mask_panels
from rankcollapse.theory import mask_radius, radius_concordance, speed_ratio
from rankcollapse.theory.curves import (
    WU_VARIANTS,
    CurvesConfig,
    WuVariant,
    curve_slopes,
    load_real,
    real_curves,
    toy_curves,
)

NAME = "wu2024-masks"
Model = Literal["toy", "bert-base", "bert-deep", "minilm", "smollm2"]
REAL = {
    "bert-base": ("bert-base", "random"),
    "bert-deep": ("bert-base", "random"),
    "minilm": ("minilm", "pretrained"),
    "smollm2": ("smollm2", "pretrained"),
}
CORE_MASKS = ["complete", "causal", "window:1", "causal_window:1"]
COLUMNS = ["model", "init", "variant", "mask", "mode", "layer", "sample", "metric", "value"]
COLUMNS += ["at_floor", "device"]
BY = ["model", "mode", "variant", "mask"]
SOURCE, PAPER = "Thm 1; masks x components figure", "pure SAN collapses exponentially"


class Config(CurvesConfig):
    """Models, masks, variants and sizes of the masks x components experiment."""

    models: list[Model] = Field(["toy", "bert-base", "bert-deep", "minilm", "smollm2"])
    """The toy with Wu's dynamics, random-init BERT (12 layers and deep), pretrained models."""
    variants: list[WuVariant] = Field(list(WU_VARIANTS))
    """Wu's five variants."""
    masks: list[MaskSpecText] = Field(CORE_MASKS + ["sinks:1:1", "dilated:1:2"], min_length=1)
    """Mask specs of rankcollapse.masks (e.g. complete, causal, window:1, causal_window:1)."""
    modes: list[Literal["eval", "train"]] = Field(["eval", "train"])
    """Real models: eval (dropout off) and/or train mode (dropout on)."""
    float64_models: list[Model] = Field(["smollm2"])
    """Real models run in float64: SmolLM2 without its norms overflows float32 (mu ~ 1e37)."""
    deep_n_layers: int = Field(128, ge=1)
    """n_layers of `bert-deep` (the paper's deep random-init BERT has 128)."""


# quick: 2 windows of 32 tokens per real model, a 24-layer deep BERT, and no SmolLM2 (its
# load and float64 copy alone take about a minute on 2 cores); paper: the paper's sizes.
PRESETS = {
    "quick": {
        "models": ["toy", "bert-base", "bert-deep", "minilm"],
        "deep_n_layers": 24,
        "n_samples": 2,
        "n_tokens": 32,
    },
    "paper": {"toy": {"n_layers": 128, "n_tokens": 128, "n_samples": 32}},
}


def units(config: Config) -> list[Unit]:
    return [{"model": m, "mask": mask} for m in config.models for mask in config.masks]


def run_unit(config: Config, unit: Unit) -> pd.DataFrame:
    model, device = unit["model"], resolve_device(config.device)
    common = {"seed": config.seed}
    if model == "toy":
        frame = toy_curves(
            config.variants, unit["mask"], **config.toy.model_dump(), device=device, **common
        )
    else:
        name, init = REAL[model]
        deep = config.deep_n_layers if model == "bert-deep" else None
        loaded = load_real(
            name,
            init,
            seed=config.seed,
            n_layers=deep,
            double=model in config.float64_models,
            dtype=config.dtype,
            device=device,
        )
        frame = real_curves(
            loaded,
            config.variants,
            unit["mask"],
            modes=config.modes,
            n_samples=config.n_samples,
            n_tokens=config.n_tokens,
            **common,
        )
    frame = frame.assign(model=model, device=str(device))
    return frame[COLUMNS]


def tokens_of(config: Config, model: str) -> int:
    return config.toy.n_tokens if model == "toy" else config.n_tokens


def modes_of(config: Config, model: str) -> list[str]:
    return ["eval"] if model == "toy" else list(config.modes)


def claims(config: Config, results: pd.DataFrame) -> list[Claim]:
    slopes = curve_slopes(results.astype({"at_floor": bool}), BY)
    san = slopes[slopes["variant"] == "san"]
    members = {f"{r.model}/{r.mode}/{r.mask}": None if r.diverged else r.slope_mu
               for r in san.itertuples()}  # fmt: skip
    arms = [(model, mode) for model in config.models for mode in modes_of(config, model)]
    radii = {(m, k): mask_radius(k, tokens_of(config, m))
             for m in config.models for k in config.masks}  # fmt: skip
    expected = [f"{m}/{mode}/{k}" for m, mode in arms for k in config.masks]
    excluded = {f"{m}/{mode}/{k}": "no center node"
                for m, mode in arms for k in config.masks if radii[m, k] == math.inf}  # fmt: skip
    found = [for_every(
        "san-collapses-every-mask",
        "Pure SAN collapses exponentially under every quasi-strongly connected mask.",
        "largest collapse slope of mu per layer (model/mode/mask); < 0 is collapse",
        members, "<", 0.0, expected=expected, excluded=excluded, source=SOURCE, paper=PAPER,
    )]  # fmt: skip
    for model, mode in arms:
        radius = {k: radii[model, k] for k in config.masks if radii[model, k] < math.inf}
        slope = {k: members.get(f"{model}/{mode}/{k}") for k in radius}
        slope = {k: math.nan if v is None else v for k, v in slope.items()}
        near = {k: slope[k] for k, r in radius.items() if r <= 1}
        far = {k: slope[k] for k, r in radius.items() if r > 1}
        if near and far:
            slow, fast = max(near, key=near.get), min(far, key=far.get)
            ratio, reason = speed_ratio(near[slow], far[fast])
            reason = (
                reason
                or f"slowest radius-1: {slow} {near[slow]:.3g}; fastest: {fast} {far[fast]:.3g}"
            )
            found.append(finding(
                f"local-masks-slower@{model}/{mode}",
                "More local masks collapse more slowly: every radius > 1 mask is slower than "
                "every radius-1 mask (pure SAN).",
                "slowest radius-1 slope / fastest radius > 1 slope (both must be < 0)",
                ratio, ">", 1.0, note=reason, source=SOURCE,
                paper="local masks slow collapse (the radius in Thm 1's rate)",
            ))  # fmt: skip
        found.append(finding(
            f"rate-follows-radius@{model}/{mode}",
            "The order of the collapse slopes follows the mask radius (larger, slower).",
            "fraction of mask pairs of different radius ordered by radius",
            radius_concordance(list(radius.values()), list(slope.values())), ">=", 1.0,
            note="fastest first: " + " > ".join(sorted(slope, key=slope.get)),
            source="Thm 1 (rate against radius)", paper="the bound's rate flattens with radius",
        ))  # fmt: skip
    return found


def summarize(config: Config, results: pd.DataFrame) -> Summary:
    results = results.astype({"at_floor": bool})
    rates = curve_slopes(results, BY)
    san = rates[rates["variant"] == "san"]
    mu_rel = results[results["metric"] == "mu_rel"]
    last = mu_rel[mu_rel["layer"] == mu_rel.groupby("model")["layer"].transform("max")]
    ln = last[(last["variant"] == "san+ln") & (last["init"] == "random")]
    tables = {
        "pure SAN: collapse slope of mu per layer": san.pivot_table(
            index=["model", "mode"], columns="mask", values="slope_mu", sort=False
        ).reset_index(),
        "collapse slope of mu_rel per layer": rates.pivot_table(
            index=["model", "mode", "variant"], columns="mask", values="slope_mu_rel", sort=False
        ).reset_index(),
        "SAN+LN at random init: mean mu_rel at the last layer": ln.pivot_table(
            index=["model", "mode"], columns="mask", values="value", sort=False
        ).reset_index(),
    }
    notes = [NOTE_SLOPES, NOTE_LN] + [
        f"{r.model} {r.variant} ({r.mode}, mask {r.mask}): the hidden states overflowed "
        "(NaN/Inf) before the last layer; no curve, and a finding over it fails."
        for r in rates[rates["diverged"]].itertuples()
    ]
    figures = {}
    curves = results[results["metric"].isin(["mu", "mu_rel"])]
    for (model, mode), rows in curves.groupby(["model", "mode"], sort=False):
        for metric in ("mu", "mu_rel") if mode == "eval" else ("mu",):
            figures[f"{model}_{mode}_{metric}"] = mask_panels(
                rows[rows["metric"] == metric], hue="variant", ylabel=metric,
                title=f"{model} ({mode} mode): {metric} against layer",
            )  # fmt: skip
    return Summary(tables=tables, figures=figures, claims=claims(config, results), notes=notes)


NOTE_SLOPES = (
    "Slopes are natural-log slopes per layer of the geometric mean over samples, fitted before "
    "the first layer at the dtype floor; negative means collapse. mu_rel slopes separate a "
    "shrinking norm from lost rank (without LN much of mu's decay is the norm)."
)
NOTE_LN = (
    "SAN+LN at random init is stated as measured: whether it keeps mu_rel away from 0 depends "
    "on the mode (dropout) and the mask; the paper does not say which mode it ran."
)

register(
    Experiment(
        name=NAME,
        description="Wu 2024: mu against layer for 5 variants x masks on the toy, "
        "random-init BERT (12 and deep) and pretrained models, eval and train mode",
        config=Config,
        presets=PRESETS,
        units=units,
        run_unit=run_unit,
        summarize=summarize,
        claims=claims,
    )
)
