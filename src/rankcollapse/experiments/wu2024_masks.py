"""wu2024-masks: how attention masks and LayerNorm change rank collapse (Wu et al. 2024).

Paper: Wu, Ajorlou, Wang, Jegelka, Jadbabaie, "On the role of attention masks and LayerNorm
in transformers", NeurIPS 2024 (arXiv 2405.18781): Thm 1 and the masks x components
experiment (mu against layer on log-log axes); docs/wu2024.md walks through our run.

mu = ||X - 1 mean^T||_F and mu_rel = mu / ||X||_F per layer (`rankcollapse.measure.curves`) for
Wu's five variants (pure SAN, SAN+skip, SAN+LN, SAN+skip+LN, transformer; LN = each token
scaled to unit norm) under the masks complete, causal, window {i-1, i, i+1}, causal window
{i-1, i}, and the extras sinks:1:1 (token 0 global plus the window) and dilated:1:2 (no center
node: Thm 1 does not apply). Models: the toy with Wu's dynamics (float64, no dropout: eval
only), random-init BERT (12 layers and `deep_n_layers`), pretrained MiniLM and SmolLM2 (float64:
without its norms its states reach ~1e37), in eval and train mode (dropout on).

Collapse rate of a curve: `rankcollapse.theory.collapse_rate`, the slope per layer of the log
geometric mean over samples before the first layer at the dtype floor (< 0: collapse).

Thm 1's assumptions, and how the findings keep to them: the attention rows are stochastic
(train mode puts dropout on the attention probabilities, which breaks that: train-mode curves
are measured and drawn, and excluded by name from the findings) and the value maps are bounded
(pretrained value maps amplify, SmolLM2's by about e^3 per layer, so the absolute mu can grow
while the tokens align: the findings take the slope of mu_rel = mu / ||X||_F, which the value
maps' scale does not enter).

The paper's setting is BERT (random init, 12 layers and deep, and pretrained) and Thm 1's own
dynamics (the toy); `in_paper_setting` says which models are in it (the toy and the BERT
family, MiniLM among them). The findings below over any other model (SmolLM2, a pretrained
decoder) are reported beyond the paper, one per model.

Findings (pure SAN, eval mode):
- san-collapses-every-mask: mu_rel has a negative slope for every model of the paper's setting
  and mask with a center node (a diverged curve fails it; a missing one leaves it NOT TESTED).
  The note names the deciding member (the largest slope); when that slope is within one
  standard deviation of its per-sample slopes of 0, one input could flip the sign: NOT TESTED
  (preset too small). san-collapses-every-mask@model: the same for a model beyond the setting.
- local-masks-slower@model: the slowest radius-1 mask collapses faster than the fastest mask of
  radius > 1 (speed ratio of mu_rel slopes > 1; only defined when both are negative).
Beyond the paper (Thm 1 is an upper bound and orders only the bounds, not the measured rates):
- rate-follows-radius@model: most mask pairs of different radius (share > 0.5) have slopes
  ordered by radius.
Findings (LayerNorm at random init, Wu's masks x components experiment; the paper does not say
whether dropout was on, so one finding per mode):
- ln-slows-collapse@mode: for every random-init real model (BERT-base, 12 layers and deep) and
  every mask, SAN+LN keeps the tokens further apart than pure SAN: log mu_rel(san+ln) - log
  mu_rel(san) > 0 at the deepest layer before either curve reaches the dtype floor (`ln_gaps`:
  the same layer for both; fitting each curve's slope up to its own floor compared SAN's
  layers 0-1 with SAN+LN's 0-2 and made LN look twice as fast, -5.7 against -2.7 per layer
  on BERT-base's complete mask). The deciding member is named; a gap within one standard
  deviation of its per-sample gaps of 0 is NOT TESTED. The paper plots mu, whose fall without
  LN is partly the shrinking norm; mu_rel measures the lost rank only.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pandas as pd
from pydantic import Field

from rankcollapse.experiments._curves import CORE_MASKS, CurvesConfig, WuVariant
from rankcollapse.experiments._registry import (
    TOO_SMALL,
    Claim,
    Experiment,
    Summary,
    Unit,
    finding,
    for_every,
    register,
)
from rankcollapse.hf import MODELS, text_model_type
from rankcollapse.masks import MaskSpec, parse_mask_spec
from rankcollapse.measure import ModelSource, load_cached, real_curves, toy_curves
from rankcollapse.plot import mask_panels
from rankcollapse.sizes import NLayers
from rankcollapse.theory import (
    collapse_rates,
    curve_slopes,
    mask_radius,
    radius_concordance,
    speed_ratio,
)
from rankcollapse.variants import WU_VARIANTS

NAME = "wu2024-masks"
DEEP = "bert-deep"  # BERT-base at init, `deep_n_layers` deep (the paper's deep random BERT)
if TYPE_CHECKING:  # a name to mypy; pydantic checks it against the registry
    Model = str
else:
    Model = text_model_type("toy", DEEP)  # the toy, the deep BERT, or a text model of hf.MODELS
COLUMNS = ["model", "init", "variant", "mask", "mode", "layer", "sample", "metric", "value"]
COLUMNS += ["at_floor", "device"]
BY = ["model", "mode", "variant", "mask"]
SOURCE = "Thm 1, Fig. 2"
PAPER = (
    '"pure masked attention still suffers from exponential collapse to a rank one subspace" '
    "(abstract), for every quasi-strongly connected mask (Thm 1)"
)
CONCORDANT = 0.5  # share of radius-ordered mask pairs above which the slopes "follow" radius


class Config(CurvesConfig):
    """Models, masks, variants and sizes of the masks x components experiment."""

    models: list[Model] = Field(["toy", "bert-base", "bert-deep", "minilm", "smollm2"])
    """The toy with Wu's dynamics, random-init BERT (12 layers and deep), pretrained models."""
    variants: list[WuVariant] = Field(default_factory=lambda: list(WU_VARIANTS))
    """Wu's five variants."""
    masks: list[MaskSpec] = Field(
        CORE_MASKS + [parse_mask_spec("sinks:1:1"), parse_mask_spec("dilated:1:2")], min_length=1
    )
    """Mask specs of rankcollapse.masks (e.g. complete, causal, window:1, causal_window:1)."""
    modes: list[Literal["eval", "train"]] = Field(["eval", "train"])
    """Real models: eval (dropout off) and/or train mode (dropout on)."""
    float64_models: list[Model] = Field(["smollm2"])
    """Real models run in float64: SmolLM2 without its norms overflows float32 (mu ~ 1e37)."""
    deep_n_layers: NLayers = 128
    """n_layers of `bert-deep` (the paper's deep random-init BERT has 128)."""


# quick: 2 windows of 32 tokens per real model, a 24-layer deep BERT, and no SmolLM2 (its
# load and float64 copy alone take about a minute on 2 cores); paper: the paper's sizes.
PRESETS: dict[str, dict[str, Any]] = {
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
    model, device = unit["model"], config.device
    common: dict[str, Any] = {"seed": config.seed}
    if model == "toy":
        frame = toy_curves(
            config.variants, unit["mask"], **config.toy.model_dump(), device=device, **common
        )
    else:
        name = "bert-base" if model == DEEP else model
        init = init_of(model)
        deep = config.deep_n_layers if model == DEEP else None
        dtype = config.model_dtype(model)
        source = ModelSource(name, init, config.seed, device, dtype, n_layers=deep)
        frame = real_curves(
            load_cached(source),
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


def init_of(model: str) -> str:
    """The init a model runs at: the toy at random, a real one at its registry default (the
    deep BERT: BERT-base's, random)."""
    return (
        "random" if model == "toy" else MODELS["bert-base" if model == DEEP else model].default_init
    )


def in_paper_setting(model: str) -> bool:
    """Whether Wu et al. ran this model: the toy (Thm 1's dynamics) and BERT's architecture,
    at random init (12 layers and deep) or pretrained (MiniLM is a 6-layer BERT)."""
    return model in ("toy", DEEP) or MODELS[model].family == "bert"


def _sample_spread(results: pd.DataFrame, variant: str) -> dict[str, float]:
    """Per model/mode/mask member: the standard deviation of the per-sample mu_rel slopes of
    `variant` (NaN with one sample): how far one input's rate strays from another's."""
    rows = results[(results["metric"] == "mu_rel") & (results["variant"] == variant)]
    per_sample = collapse_rates(rows, [*BY, "sample"])
    spread = per_sample.groupby(BY, sort=False)["slope"].std()
    return {f"{model}/{mode}/{mask}": v for (model, mode, _, mask), v in spread.items()}


def _deciding(members: dict, expected: list[str], excluded: dict, worst=max) -> str | None:
    """The member whose value decides a for-every finding (the worst finite one), or None."""
    values = {
        k: members[k]
        for k in expected
        if k not in excluded and members.get(k) is not None and not math.isnan(members[k])
    }
    return worst(values, key=values.get) if values else None


def _san_claim(
    config: Config, results: pd.DataFrame, members: dict, arms: list, model: str | None = None
) -> Claim:
    """san-collapses-every-mask over `arms`, its deciding member named; NOT TESTED when that
    member's slope is within one standard deviation of the per-sample slopes of 0. With
    `model` (beyond the paper's setting): san-collapses-every-mask@model, a beyond finding."""
    radii = {
        (m, k): mask_radius(k, tokens_of(config, m)) for m in config.models for k in config.masks
    }
    expected = [f"{m}/{mode}/{k}" for m, mode in arms for k in config.masks]
    excluded = {
        f"{m}/{mode}/{k}": "no center node" if radii[m, k] == math.inf else "dropout (train)"
        for m, mode in arms
        for k in config.masks
        if radii[m, k] == math.inf or mode == "train"
    }
    spread = _sample_spread(results, "san")
    decider = _deciding(members, expected, excluded)
    note, untested = "", ""
    if decider is not None:
        slope, sd = members[decider], spread.get(decider, math.nan)
        note = f"deciding member {decider}: slope {slope:.3g}, per-sample sd {sd:.2g}"
        if slope < 0 and abs(slope) <= sd:  # a negative slope that one sample could flip
            untested = (
                f"{TOO_SMALL}: the deciding member {decider}'s slope {slope:.3g} is within one "
                f"standard deviation ({sd:.2g}) of its per-sample slopes of 0; a deeper "
                "run (more layers to fit) or more samples would decide it"
            )
    return for_every(
        "san-collapses-every-mask" + (f"@{model}" if model else ""),
        "Pure SAN collapses exponentially under every quasi-strongly connected mask"
        + (f" ({model}, beyond the paper's BERT)." if model else "."),
        "largest collapse slope of mu_rel per layer (model/mode/mask); < 0 is collapse",
        members,
        "<",
        0.0,
        expected=expected,
        excluded=excluded,
        note=note,
        untested=untested,
        source=SOURCE,
        paper=PAPER,
        beyond=model is not None,
    )


def ln_gaps(results: pd.DataFrame) -> pd.DataFrame:
    """Per model, mode and mask: how far LayerNorm keeps pure SAN's tokens apart, at the same
    layer, on random-init curves.

    Formula: gap = mean_s log mu_rel(SAN+LN) - mean_s log mu_rel(SAN) at layer l*, the deepest
    layer before either curve has a sample at the dtype floor (a floor value is rounding, and
    fitting each curve up to its own floor compares different layers); > 0: LN slowed the
    collapse. sd: the standard deviation over samples of the per-sample gap at l*.
    Columns: model, mode, mask, layer (l*), gap, sd, ln, san (the two geometric means).
    """
    rows = results[(results["metric"] == "mu_rel") & results["variant"].isin(["san", "san+ln"])]
    rows = rows[rows["init"] == "random"].assign(
        log=np.log(rows["value"].astype(float).clip(lower=1e-300)),
        floor=rows["at_floor"].astype(bool),
    )
    out = []
    for (model, mode, mask), part in rows.groupby(["model", "mode", "mask"], sort=False):
        floored = part[part["floor"]].groupby("variant")["layer"].min()
        deepest = part.groupby("variant")["layer"].max()
        if len(deepest) < 2:
            continue  # one variant only: no comparison
        layer = min(floored.get(v, deepest[v] + 1) - 1 for v in deepest.index)
        at = part[part["layer"] == max(layer, 0)].pivot_table(
            index="sample", columns="variant", values="log", aggfunc="mean"
        )
        per_sample = at["san+ln"] - at["san"]
        out.append(
            (model, mode, mask, max(layer, 0), per_sample.mean(), per_sample.std(),
             math.exp(at["san+ln"].mean()), math.exp(at["san"].mean()))
        )  # fmt: skip
    return pd.DataFrame(out, columns=["model", "mode", "mask", "layer", "gap", "sd", "ln", "san"])


def _ln_claims(config: Config, results: pd.DataFrame) -> list[Claim]:
    """ln-slows-collapse@mode: at random init, LN keeps pure SAN's tokens further apart
    (`ln_gaps` > 0) for every random-init real model and mask, one finding per mode; the
    deciding member is named, and NOT TESTED when its gap is within one sd of 0."""
    models = [m for m in config.models if m != "toy" and init_of(m) == "random"]
    if not models or not {"san", "san+ln"} <= {v.short for v in config.variants}:
        return []
    gaps = ln_gaps(results[results["model"].isin(models)])
    found = []
    for mode in config.modes:
        part = gaps[gaps["mode"] == mode]
        members = {f"{r.model}/{r.mask}": r.gap for r in part.itertuples()}
        expected = [f"{m}/{k}" for m in models for k in config.masks]
        decider = _deciding(members, expected, {}, worst=min)
        note, untested = "", ""
        if decider is not None:
            row = part[part["model"] + "/" + part["mask"] == decider].iloc[0]
            note = f"deciding member {decider}: gap {row.gap:.3g}, per-sample sd {row.sd:.2g}; "
            if row.gap > 0 and row.gap <= row.sd:
                untested = (
                    f"{TOO_SMALL}: the deciding member {decider}'s gap {row.gap:.3g} is within "
                    f"one standard deviation ({row.sd:.2g}) of its per-sample gaps of 0"
                )
        said = "; ".join(
            f"{r.model}/{r.mask} at layer {r.layer}: san+ln {r.ln:.3g}, san {r.san:.3g}"
            for r in part.itertuples()
        )
        found.append(
            for_every(
                f"ln-slows-collapse@{mode}",
                f"At random initialisation ({mode} mode), LayerNorm slows pure SAN's collapse: "
                "SAN+LN's tokens stay further apart than SAN's under every mask.",
                "least log mu_rel(SAN+LN) - log mu_rel(SAN) at the deepest layer before either "
                "reaches the floor (model/mask); > 0: LN slows collapse",
                members,
                ">",
                0.0,
                expected=expected,
                note=note + "mu_rel (geometric mean): " + said,
                untested=untested,
                source="Sec. 6 (masks x components, random init)",
                paper="LayerNorm changes the picture at random initialisation: with LN the "
                "tokens of pure attention stop collapsing (the paper does not say whether "
                "dropout was on)",
            )
        )
    return found


def claims(config: Config, results: pd.DataFrame) -> list[Claim]:
    slopes = curve_slopes(results.astype({"at_floor": bool}), BY)
    san = slopes[slopes["variant"] == "san"]
    members = {
        f"{r.model}/{r.mode}/{r.mask}": None if r.diverged else r.slope_mu_rel
        for r in san.itertuples()
    }
    arms = [(model, mode) for model in config.models for mode in modes_of(config, model)]
    radii = {
        (m, k): mask_radius(k, tokens_of(config, m)) for m in config.models for k in config.masks
    }
    paper_arms = [arm for arm in arms if in_paper_setting(arm[0])]
    found = [_san_claim(config, results, members, paper_arms)] if paper_arms else []
    for model in dict.fromkeys(m for m, _ in arms if not in_paper_setting(m)):
        model_arms = [arm for arm in arms if arm[0] == model]
        found.append(_san_claim(config, results, members, model_arms, model))
    found += _ln_claims(config, results)
    for model, mode in arms:
        if mode == "train":  # dropout on the attention: rows not stochastic, Thm 1 does not apply
            continue
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
            found.append(
                finding(
                    f"local-masks-slower@{model}/{mode}",
                    "More local masks collapse more slowly: every radius > 1 mask is slower than "
                    "every radius-1 mask (pure SAN).",
                    "slowest radius-1 slope / fastest radius > 1 slope of mu_rel (both < 0)",
                    ratio,
                    ">",
                    1.0,
                    note=reason,
                    source=SOURCE,
                    paper='"sparse or local masked attention can provably slow down the collapse '
                    'rate" (abstract); Fig. 2: the masks collapse at different rates',
                    beyond=not in_paper_setting(model),
                )
            )
        found.append(
            finding(
                f"rate-follows-radius@{model}/{mode}",
                "Most mask pairs of different radius have collapse slopes ordered by the radius "
                "(larger radius, slower).",
                "fraction of mask pairs of different radius whose mu_rel slopes follow the radius",
                radius_concordance(list(radius.values()), list(slope.values())),
                ">",
                CONCORDANT,
                note="fastest first: " + " > ".join(sorted(slope, key=slope.get)),
                source="Thm 1 (the bound's rate against radius)",
                paper="Thm 1 bounds the rate by (1 - eps^r)^(1/r), slower for larger r; it "
                "orders the bounds, not the measured rates",
                beyond=True,
            )
        )
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
                rows[rows["metric"] == metric],
                hue="variant",
                ylabel=metric,
                title=f"{model} ({mode} mode): {metric} against layer",
            )
    return Summary(tables=tables, figures=figures, claims=claims(config, results), notes=notes)


NOTE_SLOPES = (
    "Slopes are natural-log slopes per layer of the geometric mean over samples, fitted before "
    "the first layer at the dtype floor; negative means collapse. mu_rel slopes separate a "
    "shrinking norm from lost rank (without LN much of mu's decay is the norm)."
)
NOTE_LN = (
    "SAN+LN at random init: ln-slows-collapse@eval and @train state, per mode, whether LN slows "
    "the collapse; the paper does not say which mode it ran (the table gives mu_rel at the last "
    "layer)."
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
