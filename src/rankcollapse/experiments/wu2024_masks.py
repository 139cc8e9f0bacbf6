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

Every finding is decided by the one rule (`rankcollapse.experiments.verdicts`): the interval
over the per-sample values against the paper's side of a margin; a "for every" finding decides each member (model/mode/mask) so. Thm 1's assumptions are
predicates (`thm1_assumptions`): a member whose attention rows are not stochastic (train mode:
dropout on the attention probabilities) or whose value maps are not bounded (A3: ||X||_F grows
by more than e per layer; SmolLM2 without its norms grows by about e^3 and reaches 1e37) is NOT
TESTED by rule, the assumption named. The rates are those of mu_rel = mu / ||X||_F, which the
value maps' scale does not enter.

The paper's setting is BERT (random init, 12 layers and deep, and pretrained) and Thm 1's own
dynamics (the toy); `in_paper_setting` says which models are in it (the toy and the BERT
family, MiniLM among them). A finding over any other model (SmolLM2) is beyond the paper.

Findings (pure SAN; units: samples):
- san-collapses-every-mask: every per-sample mu_rel slope interval lies below 0, for every
  model of the paper's setting, mode and mask with a center node (Thm 1, abstract);
  san-collapses-every-mask@model beyond the setting.
- local-masks-slower@model/eval: per sample, the fastest radius > 1 mask's slope minus the
  slowest radius-1 mask's is > 0 (abstract: local masks slow the collapse).
Beyond the paper (Thm 1 orders the bounds, not the measured rates):
- rate-follows-radius@model/eval: per sample, the share of mask pairs of different radius
  whose collapse follows the radius is > 0.5; a mask that does not collapse orders no pair.
Findings at random init (Sec. 5, App. G.1; the paper's quantity mu; the paper does not say
whether dropout was on, so one finding per mode, the mode named):
- ln-mu-stable@mode: SAN+LN's mu "no longer converges to zero and can be maintained at a
  stable level significantly above zero": per sample, log mu(last layer) - log mu(layer 1) >
  -log 2, for every random-init real model and mask (no decreasing trend; the paper never
  compares SAN+LN with SAN).
- san-mu-falls@mode: pure SAN's mu falls: the same quantity < -log 2, every mask with a center
  node (Fig. 2 caption).
Not reproduced here: "skip connections make mu unstable in deeper layers, LayerNorm
counteracts" (Sec. 5): the paper gives no measure of instability to test (docs/wu2024.md).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pandas as pd
from pydantic import Field

from rankcollapse.experiments import verdicts
from rankcollapse.experiments._curves import CORE_MASKS, CurvesConfig, WuVariant
from rankcollapse.experiments._registry import Experiment, Summary, Unit, register
from rankcollapse.experiments.verdicts import Assumption, Claim, Quote
from rankcollapse.hf import MODELS, Init, text_model_type
from rankcollapse.masks import MaskSpec, parse_mask_spec
from rankcollapse.measure import ModelSource, load_cached, real_curves, toy_curves
from rankcollapse.plot import mask_panels
from rankcollapse.sizes import NLayers
from rankcollapse.theory import (
    collapse_rates,
    curve_slopes,
    mask_radius,
    radius_concordance,
)
from rankcollapse.theory.rates import sample_rates
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
COLLAPSE = Quote(
    "pure masked attention still suffers from exponential collapse to a rank one subspace",
    "abstract; Thm 1 (every quasi-strongly connected mask)",
)
LOCAL = Quote(
    "sparse or local masked attention can provably slow down the collapse rate",
    "abstract; Thm 1, Fig. 2",
)
LN_STABLE = Quote(
    "as soon as we solely add in LayerNorm, mu(X(t)) no longer converge to zero in randomly "
    "initialized models",
    "Fig. 2 (caption)",
)
SAN_FALLS = Quote(
    "Rank collapse happens exponentially for pure attention, despite different attention masks "
    "having different convergence rates",
    "Fig. 2 (caption)",
)
CONCORDANT = 0.5  # share of radius-ordered mask pairs above which the slopes "follow" radius
VALUE_GROWTH = 1.0
"""Thm 1's A3 (bounded value maps) is taken as broken when the states' norm grows by more than
e per layer (log ||X||_F slope > 1): SmolLM2 without its norms grows by about e^3."""
DECIDES = (
    "more samples (the quick preset with --set n_samples=16: about 8 minutes on one CPU core, "
    "twice quick's 216 s of units at 8 windows), or the paper preset (32 windows of 128 tokens, "
    "a 128-layer deep BERT: 31,400 s of units on a 2-core CPU, so a GPU)"
)


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


# quick: 8 windows of 32 tokens per real model (at 2, the rule could not decide two findings),
# a 24-layer deep BERT, and no SmolLM2 (its load and float64 copy alone take about a minute on
# 2 cores): 216 s of units on one quiet core (2026-11-29); paper: the paper's sizes.
PRESETS: dict[str, dict[str, Any]] = {
    "quick": {
        "models": ["toy", "bert-base", "bert-deep", "minilm"],
        "deep_n_layers": 24,
        "n_samples": 8,
        "n_tokens": 32,
    },
    "paper": {"toy": {"n_layers": 128, "n_tokens": 128, "n_samples": 32}},
}


def units(config: Config) -> list[Unit]:
    return [{"model": m, "mask": mask} for m in config.models for mask in config.masks]


def run_unit(config: Config, unit: Unit) -> pd.DataFrame:
    model, device = unit["model"], config.device
    if model == "toy":
        frame = toy_curves(
            config.variants,
            unit["mask"],
            **config.toy.model_dump(),
            device=device,
            seed=config.seed,
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
            text=config.text,
            seed=config.seed,
        )
    frame = frame.assign(model=model, device=str(device))
    return frame[COLUMNS]


def tokens_of(config: Config, model: str) -> int:
    return config.toy.n_tokens if model == "toy" else config.n_tokens


def modes_of(config: Config, model: str) -> list[str]:
    return ["eval"] if model == "toy" else list(config.modes)


def init_of(model: str) -> Init:
    """The init a model runs at: the toy at random, a real one at its registry default (the
    deep BERT: BERT-base's, random)."""
    return (
        "random" if model == "toy" else MODELS["bert-base" if model == DEEP else model].default_init
    )


def in_paper_setting(model: str) -> bool:
    """Whether Wu et al. ran this model: the toy (Thm 1's dynamics) and BERT's architecture,
    at random init (12 layers and deep) or pretrained (MiniLM is a 6-layer BERT)."""
    return model in ("toy", DEEP) or MODELS[model].family == "bert"


def sample_slopes(results: pd.DataFrame, metric: str = "mu_rel") -> pd.DataFrame:
    """Per model, mode, variant, mask and sample: the collapse slope of one sample's curve of
    `metric` (`rankcollapse.theory.rates.sample_rates`: a curve at the floor from layer 1 still
    has a slope), the findings' units. Columns: BY..., sample, slope, n_fit."""
    return sample_rates(results[results["metric"] == metric], BY)


def norm_growth(results: pd.DataFrame) -> pd.DataFrame:
    """Per model, mode, variant and mask: the fitted slope per layer of log ||X||_F, with
    ||X||_F = mu / mu_rel (the value maps' growth; mu_rel = 0 at the floor is dropped).
    Columns: BY..., slope."""
    keys = [*BY, "layer", "sample"]
    wide = results[results["metric"].isin(["mu", "mu_rel"])].pivot_table(
        index=keys, columns="metric", values="value", aggfunc="first"
    )
    wide = wide[(wide.get("mu_rel", 0) > 0)].reset_index()
    if wide.empty:
        return pd.DataFrame(columns=[*BY, "slope"])
    norms = wide.assign(value=wide["mu"] / wide["mu_rel"], at_floor=False)
    return collapse_rates(norms, BY)[[*BY, "slope"]]


def _members(
    slopes: pd.DataFrame, results: pd.DataFrame, variant: str
) -> dict[str, list[float] | None]:
    """member "model/mode/mask" -> per-sample slopes of `variant` (None: the curve diverged)."""
    part = slopes[slopes["variant"] == variant]
    members: dict[str, list[float] | None] = {
        f"{k[0]}/{k[1]}/{k[2]}": list(g["slope"])
        for k, g in part.groupby(["model", "mode", "mask"], sort=False)
    }
    diverged = results[(results["metric"] == "diverged") & (results["variant"] == variant)]
    for r in diverged[["model", "mode", "mask"]].drop_duplicates().itertuples():
        members[f"{r.model}/{r.mode}/{r.mask}"] = None
    return members


def thm1_assumptions(results: pd.DataFrame) -> dict[str, list[Assumption]]:
    """Per pure-SAN member "model/mode/mask": Thm 1's assumptions evaluated on this run.

    Row-stochastic attention: train mode puts dropout on the attention probabilities, whose
    rows then no longer sum to 1. A3 (bounded products of the value maps): the states' norm
    ||X||_F grows by more than e^VALUE_GROWTH per layer (SmolLM2 without its norms: about e^3;
    its states reach 1e37), which no bounded product sustains."""
    san = results[results["variant"] == "san"]
    out: dict[str, list[Assumption]] = {}
    for r in norm_growth(san).itertuples():
        growth = r.slope
        out[f"{r.model}/{r.mode}/{r.mask}"] = [
            Assumption(
                "row-stochastic attention",
                r.mode != "train",
                "train mode: dropout on the attention probabilities",
            ),
            Assumption(
                "A3: bounded value maps",
                not growth > VALUE_GROWTH,
                f"||X||_F grows by e^{growth:.2g} per layer",
            ),
        ]
    return out


def _san_claims(config: Config, results: pd.DataFrame, slopes: pd.DataFrame) -> list[Claim]:
    """san-collapses-every-mask over the paper's setting, and @model for each model beyond it:
    per-sample mu_rel slopes of pure SAN, every model/mode/mask with a center node."""
    members = _members(slopes, results, "san")
    assumptions = thm1_assumptions(results)
    arms = [(m, mode) for m in config.models for mode in modes_of(config, m)]
    groups: dict[str | None, list[tuple[str, str]]] = {
        None: [a for a in arms if in_paper_setting(a[0])]
    }
    groups |= {m: [a for a in arms if a[0] == m] for m in config.models if not in_paper_setting(m)}
    found = []
    for model, group in groups.items():
        if not group:
            continue
        expected = [f"{m}/{mode}/{k}" for m, mode in group for k in config.masks]
        excluded = {
            f"{m}/{mode}/{k}": "no center node: Thm 1 does not apply"
            for m, mode in group
            for k in config.masks
            if mask_radius(k, tokens_of(config, m)) == math.inf
        }
        found.append(
            verdicts.for_every(
                "san-collapses-every-mask" + (f"@{model}" if model else ""),
                says=COLLAPSE,
                text="Pure SAN collapses exponentially under every quasi-strongly connected mask"
                + (f" ({model}, beyond the paper's BERT)." if model else "."),
                quantity="per-sample collapse slope of mu_rel per layer (units: samples; "
                "members: model/mode/mask); < 0 is collapse",
                members=members,
                side="<",
                margin=0.0,  # the sign of the slope: collapse or not
                expected=expected,
                excluded=excluded,
                assumptions=assumptions,
                decides=DECIDES,
                beyond=model is not None,
            )
        )
    return found


def _local_claim(
    config: Config, model: str, slopes: pd.DataFrame, assumptions: list[Assumption]
) -> Claim | None:
    """local-masks-slower@model/eval: per sample, the fastest radius > 1 mask's mu_rel slope
    minus the slowest radius-1 mask's (> 0: every local mask is slower)."""
    radius = {str(k): mask_radius(k, tokens_of(config, model)) for k in config.masks}
    part = slopes[(slopes["model"] == model) & (slopes["mode"] == "eval")]
    part = part[part["variant"] == "san"].pivot_table(
        index="sample", columns="mask", values="slope", aggfunc="first"
    )
    near = [k for k, r in radius.items() if r <= 1 and k in part]
    far = [k for k, r in radius.items() if 1 < r < math.inf and k in part]
    if not (near and far):
        return None
    gap = part[far].min(axis=1) - part[near].max(axis=1)
    means = part.mean()
    return verdicts.finding(
        f"local-masks-slower@{model}/eval",
        says=LOCAL,
        text="More local masks collapse more slowly: every radius > 1 mask is slower than "
        "every radius-1 mask (pure SAN).",
        quantity="per sample: fastest radius > 1 mu_rel slope minus slowest radius-1 slope "
        "(units: samples); > 0: the local masks are slower",
        values=gap,
        side=">",
        margin=0.0,  # the order of the rates, whatever their ratio
        assumptions=assumptions,
        decides=DECIDES,
        note="mean slopes, fastest first: "
        + ", ".join(f"{k} {means[k]:.3g}" for k in means.sort_values().index),
        beyond=not in_paper_setting(model),
    )


def collapse_concordance(radii: list[float], slopes: list[float]) -> float:
    """`radius_concordance` counting only collapse: a slope >= 0 is slower than every collapse
    and ties with another non-collapse, so masks none of which collapse concord in no pair.

    Example:
        >>> collapse_concordance([1, 4], [-2.0, -0.5]), collapse_concordance([1, 4], [0.1, 0.2])
        (1.0, 0.0)
    """
    return radius_concordance(radii, [s if s < 0 else math.inf for s in slopes])


def _radius_claim(
    config: Config, model: str, slopes: pd.DataFrame, assumptions: list[Assumption]
) -> Claim | None:
    """rate-follows-radius@model/eval (beyond the paper): per sample, the share of mask pairs of
    different radius whose collapse follows the radius."""
    radius = {str(k): mask_radius(k, tokens_of(config, model)) for k in config.masks}
    radius = {k: r for k, r in radius.items() if r < math.inf}
    part = slopes[(slopes["model"] == model) & (slopes["mode"] == "eval")]
    part = part[part["variant"] == "san"].pivot_table(
        index="sample", columns="mask", values="slope", aggfunc="first"
    )
    masks = [k for k in radius if k in part]
    if len({radius[k] for k in masks}) < 2:
        return None
    shares = [
        collapse_concordance([radius[k] for k in masks], [row[k] for k in masks])
        for _, row in part.iterrows()
    ]
    return verdicts.finding(
        f"rate-follows-radius@{model}/eval",
        says=Quote(
            "sparse or local masked attention can provably slow down the collapse rate",
            "abstract; Thm 1 orders the bounds (1 - eps^r)^(1/r), not the measured rates",
        ),
        text="Most mask pairs of different radius have collapse slopes ordered by the radius "
        "(larger radius, slower; a mask that does not collapse orders no pair with another).",
        quantity="per sample: share of mask pairs of different radius whose mu_rel collapse "
        "follows the radius (units: samples)",
        values=shares,
        side=">",
        margin=CONCORDANT,  # "most" pairs
        assumptions=assumptions,
        decides=DECIDES,
        beyond=True,
    )


def _ln_claims(config: Config, results: pd.DataFrame) -> list[Claim]:
    """Per mode, at random init (Sec. 5, App. G.1): san+ln's mu shows no decreasing trend, and
    pure SAN's mu falls, for every random-init real model and mask (`mu_trend` per sample)."""
    models = [m for m in config.models if m != "toy" and init_of(m) == "random"]
    variants = {v.short for v in config.variants}
    if not models:
        return []
    trend = mu_trend(results[results["model"].isin(models)])
    found = []
    for mode in config.modes:
        members = {
            variant: {
                f"{r[0]}/{r[1]}": list(g["trend"])
                for r, g in trend[(trend["mode"] == mode) & (trend["variant"] == variant)].groupby(
                    ["model", "mask"], sort=False
                )
            }
            for variant in ("san+ln", "san")
        }
        expected = [f"{m}/{k}" for m in models for k in config.masks]
        said = (
            f"{mode} mode (the paper does not say whether dropout was on; train mode puts it "
            "on, eval mode takes it off)"
        )
        if "san+ln" in variants:
            found.append(
                verdicts.for_every(
                    f"ln-mu-stable@{mode}",
                    says=LN_STABLE,
                    text=f"At random initialisation, SAN+LN's mu shows no decreasing trend under "
                    f"every mask ({mode} mode).",
                    quantity="per sample: log(mu at the last layer / mu after the first block) "
                    "of SAN+LN, floor values at the floor (units: samples; members: "
                    "model/mask)",
                    members=members["san+ln"],
                    side=">",
                    margin=-math.log(2),  # a stable level: less than half of mu lost
                    expected=expected,
                    decides=DECIDES,
                    note=said,
                )
            )
        if "san" in variants:
            expected_san = [
                f"{m}/{k}"
                for m in models
                for k in config.masks
                if mask_radius(k, tokens_of(config, m)) < math.inf
            ]
            found.append(
                verdicts.for_every(
                    f"san-mu-falls@{mode}",
                    says=SAN_FALLS,
                    text=f"At random initialisation, pure SAN's mu falls under every mask with "
                    f"a center node ({mode} mode).",
                    quantity="per sample: log(mu at the last layer / mu after the first block) "
                    "of pure SAN (units: samples; members: model/mask)",
                    members=members["san"],
                    side="<",
                    margin=-math.log(2),  # a fall: more than half of mu lost
                    expected=expected_san,
                    decides=DECIDES,
                    note=said,
                )
            )
    return found


def mu_trend(results: pd.DataFrame) -> pd.DataFrame:
    """Per model, mode, variant, mask and sample: log mu(last layer) - log mu(layer 1), the
    trend of mu after the first block (the embedding-to-block step is not a trend; a value at
    the dtype floor counts at the floor). Columns: BY..., sample, trend."""
    rows = results[(results["metric"] == "mu") & (results["layer"] >= 1)]
    if rows.empty:
        return pd.DataFrame(columns=[*BY, "sample", "trend"])
    logs = rows.assign(log=np.log(rows["value"].astype(float).clip(lower=1e-300)))
    ordered = logs.sort_values("layer", kind="stable").groupby([*BY, "sample"], sort=False)["log"]
    trend = (ordered.last() - ordered.first()).rename("trend").reset_index()
    return trend


def claims(config: Config, results: pd.DataFrame) -> list[Claim]:
    results = results.astype({"at_floor": bool})
    slopes = sample_slopes(results)
    found = _san_claims(config, results, slopes)
    found += _ln_claims(config, results)
    assumptions = thm1_assumptions(results)
    for model in config.models:
        if "eval" not in modes_of(config, model):
            continue  # train mode: dropout breaks the row-stochastic attention of Thm 1
        worst = [
            a for k in config.masks for a in assumptions.get(f"{model}/eval/{k}", []) if not a.holds
        ][:1]
        found += [
            c
            for c in (
                _local_claim(config, model, slopes, worst),
                _radius_claim(config, model, slopes, worst),
            )
            if c is not None
        ]
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
    "SAN+LN at random init: ln-mu-stable@eval and @train state, per mode, whether SAN+LN's mu "
    "keeps a stable level (Sec. 5, App. G.1); the paper does not say which mode it ran (the "
    "table gives mu_rel at the last layer)."
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
