"""wu2024-masks: how attention masks and LayerNorm change rank collapse (Wu et al. 2024).

Paper: Wu, Ajorlou, Wang, Jegelka, Jadbabaie, "On the role of attention masks and LayerNorm
in transformers", NeurIPS 2024 (arXiv 2405.18781), experiments (spec wu2024.md sec. 4).

Five variants x masks x models, measuring `mu` = ||X - 1 mean^T||_F and `mu_rel` = mu / ||X||_F
per layer (log-log axes, as the paper plots):

- variants: san (pure masked self-attention), san+skip, san+ln, san+skip+ln, transformer;
- masks (`rankcollapse.masks` specs): complete, causal, window:1 ({i-1, i, i+1}),
  causal_window:1 ({i-1, i}), and the extras sinks:1:1 (token 0 global plus the window) and
  dilated:1:2 ({i-2, i, i+2}: even and odd tokens never meet, so the graph has no center);
- models: `toy` = Wu's dynamics on `ToyNet` (one head, unit-norm LN of wu2024.md sec. 3 placed
  after the skip sum, Gaussian weights with std 1/sqrt(d), Gaussian tokens, float64; one pass
  per mask batches every sample); `bert-base` (random init, 12 layers) and `bert-deep` (random
  init, `deep_layers` layers); pretrained `minilm` and `smollm2`, through
  `rankcollapse.hf.probe` with the Wu variants `wu:*` (their exact meaning per architecture:
  `rankcollapse variants`) and the mask replacing the model's own attention pattern, on the
  built-in corpus, in eval mode and in train mode (dropout on) for each model. The toy has no
  dropout: its rows are eval mode only. Models in `float64_models` (SmolLM2 by default) run
  in float64: without its norms SmolLM2's states grow to ~1e37 and overflow float32 inside
  attention. A curve that still overflows is recorded as `diverged` and named in the notes.

Collapse rate of a curve: minus the slope of a least-squares line through the mean (over
samples) of log mu against layer, fitted over layers 0 .. l* - 1, l* = the first layer at which
any sample sits at the floor of the dtype that produced the states (float64 toy, float32 real
models). A rate of 0.5 means mu shrinks by e^-0.5 per layer on average in that window.

Claims (from this run):
- san-collapses-every-mask: pure SAN has a positive collapse rate under every quasi-strongly
  connected mask, in every model and mode.
- local-masks-slower@model/mode: every mask of radius > 1 (windows) collapses more slowly
  than every radius-1 mask (complete, causal, sinks) under pure SAN: measured as
  min(rate over radius-1 masks) / max(rate over radius > 1 masks) > 1.
- rate-follows-radius@model/mode: the order of the rates follows the mask radius (the
  bound's argument): Kendall concordance of (radius, -rate) over mask pairs of different radius.
- ln-at-init@model/mode (random-init models): whether san+ln keeps mu_rel at the last layer
  above 1e-3 under every mask, stated as measured.
"""

from __future__ import annotations

import functools
import itertools
from typing import Literal

import numpy as np
import pandas as pd
import torch
from pydantic import BaseModel, ConfigDict, Field, field_validator

from rankcollapse.errors import InputError
from rankcollapse.experiments._registry import Claim, Experiment, Summary, Unit, register
from rankcollapse.hf import LoadedModel, load_model, probe
from rankcollapse.masks import is_quasi_strongly_connected, mask_from_spec, parse_mask_spec, radius
from rankcollapse.metrics import measure_states, metrics_frame
from rankcollapse.nets import NetConfig, ToyNet, random_tokens
from rankcollapse.plot import band_plot
from rankcollapse.theory import fitted_rate

NAME = "wu2024-masks"

Variant = Literal["san", "san+skip", "san+ln", "san+skip+ln", "transformer"]
Model = Literal["toy", "bert-base", "bert-deep", "minilm", "smollm2"]
Mode = Literal["eval", "train"]

# NetConfig options of each variant on the toy: Wu's LN is the unit-sphere scaling, after the sum.
TOY_VARIANTS: dict[str, dict] = {
    "san": {},
    "san+skip": {"skip": "on"},
    "san+ln": {"norm": "post", "norm_kind": "unit"},
    "san+skip+ln": {"skip": "on", "norm": "post", "norm_kind": "unit"},
    "transformer": {"skip": "on", "mlp": True, "norm": "post", "norm_kind": "unit"},
}
# model name -> (rankcollapse.hf name, init)
REAL_MODELS: dict[str, tuple[str, str]] = {
    "bert-base": ("bert-base", "random"),
    "bert-deep": ("bert-base", "random"),
    "minilm": ("minilm", "pretrained"),
    "smollm2": ("smollm2", "pretrained"),
}
METRICS = ["mu", "mu_rel"]
CORE_MASKS = ["complete", "causal", "window:1", "causal_window:1"]


class CurvesConfig(BaseModel):
    """Masks, modes, sizes, dtypes and seed: what `toy_curves` and `real_curves` read.

    The defaults are this experiment's; wu2024-temperature subclasses it with its own.
    """

    model_config = ConfigDict(extra="forbid")

    masks: list[str] = Field(CORE_MASKS + ["sinks:1:1", "dilated:1:2"], min_length=1)
    """Mask specs of rankcollapse.masks (e.g. complete, causal, window:1, causal_window:1)."""
    modes: list[Mode] = ["eval", "train"]
    """Real models: eval (dropout off) and/or train mode (dropout on)."""
    toy_layers: int = Field(64, ge=1)
    """Depth of the toy network."""
    toy_d_model: int = Field(64, ge=2)
    """Width of the toy network."""
    toy_tokens: int = Field(32, ge=4)
    """Tokens per toy sequence."""
    toy_samples: int = Field(16, ge=1)
    """Toy sequences (one batch, one pass per mask and variant)."""
    float64_models: list[Model] = ["smollm2"]
    """Real models run in float64: SmolLM2 without its norms overflows float32 (mu ~ 1e37)."""
    n_samples: int = Field(32, ge=1)
    """Text windows per real model."""
    n_tokens: int = Field(128, ge=4)
    """Tokens per window (real models)."""
    seed: int = Field(0, ge=0)
    """Seed of weights, toy tokens and window choice."""

    @field_validator("masks")
    @classmethod
    def _masks_parse(cls, masks: list[str]) -> list[str]:
        for spec in masks:
            parse_mask_spec(spec)
        return masks


class Config(CurvesConfig):
    """Models, masks, variants and sizes of the masks x components experiment."""

    models: list[Model] = ["toy", "bert-base", "bert-deep", "minilm", "smollm2"]
    """Which networks: the toy with Wu's dynamics, random-init BERT (12 and deep), pretrained."""
    variants: list[Variant] = list(TOY_VARIANTS)
    """Wu's five variants."""
    deep_layers: int = Field(128, ge=1)
    """Layers of `bert-deep` (the paper's deep random-init BERT has 128)."""


# quick: 2 windows of 32 tokens per real model, a 24-layer deep BERT, and no SmolLM2 (its
# load and float64 copy alone take about a minute on 2 cores); paper: the paper's sizes.
PRESETS = {
    "quick": {
        "models": ["toy", "bert-base", "bert-deep", "minilm"],
        "masks": CORE_MASKS + ["sinks:1:1", "dilated:1:2"],
        "toy_layers": 64,
        "deep_layers": 24,
        "n_samples": 2,
        "n_tokens": 32,
    },
    "paper": {"toy_layers": 128, "toy_tokens": 128, "toy_samples": 32},
}


def units(config: Config) -> list[Unit]:
    return [{"model": m, "mask": mask} for m in config.models for mask in config.masks]


def run_unit(config: Config, unit: Unit) -> pd.DataFrame:
    if unit["model"] == "toy":
        frame = toy_curves(config, unit["mask"], variants=config.variants)
    else:
        frame = real_curves(config, unit["model"], unit["mask"], variants=config.variants)
    return frame[["model", "init", "variant", "mask", "mode", "layer", "sample", "metric",
                  "value", "at_floor"]]  # fmt: skip


def toy_curves(
    config: CurvesConfig, mask: str, *, variants: list[str], temperature: float | None = None
) -> pd.DataFrame:
    """mu and mu_rel per layer of the toy network, every variant, one batched pass each.

    `temperature` is the d_QK of the softmax scale (None: the head's d_qk).
    """
    x = random_tokens(config.toy_samples, config.toy_tokens, config.toy_d_model, seed=config.seed)
    frames = []
    for variant in variants:
        net = ToyNet(
            NetConfig(
                n_layers=config.toy_layers,
                d_model=config.toy_d_model,
                mask=mask,
                temperature=temperature,
                seed=config.seed,
                **TOY_VARIANTS[variant],
            )
        )
        with torch.no_grad():
            states = torch.stack(net(x).states)  # (L + 1, b, n, d)
        values = measure_states(states, metrics=METRICS, source_dtype=states.dtype)
        frame = metrics_frame(values, variant=variant)  # sample = flattened (layer, sample)
        frame["layer"] = frame["sample"] // config.toy_samples
        frame["sample"] = frame["sample"] % config.toy_samples
        frames.append(frame)
    return pd.concat(frames, ignore_index=True).assign(
        model="toy", init="random", mask=mask, mode="eval"
    )


def load_real(config: CurvesConfig, model: str) -> LoadedModel:
    """The `LoadedModel` of a real-model entry (`bert-deep` = BERT-base with `deep_layers`,
    a field of this experiment's `Config` only).

    The last one is kept per process: units of one model run one after another, and a fresh
    random init of a deep BERT costs more than probing it on a few windows.
    """
    deep = config.deep_layers if model == "bert-deep" else None
    double = model in config.float64_models
    return _load(*REAL_MODELS[model], config.seed, deep, double)


@functools.lru_cache(maxsize=1)
def _load(name: str, init: str, seed: int, n_layers: int | None, double: bool) -> LoadedModel:
    overrides = {"num_hidden_layers": n_layers} if n_layers else None
    dtype = torch.float64 if double else torch.float32
    return load_model(name, init=init, seed=seed, dtype=dtype, config_overrides=overrides)


def real_curves(
    config: CurvesConfig, model: str, mask: str, *, variants: list[str], temperature: float = 1.0
) -> pd.DataFrame:
    """mu and mu_rel per layer of a real model for each variant and mode, via `hf.probe`.

    `temperature` divides the logits on top of the model's own scaling.
    """
    loaded = load_real(config, model)
    frames = []
    for mode, variant in itertools.product(config.modes, variants):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(config.seed)  # the dropout masks of train mode
            try:
                frame = probe(
                    loaded,
                    variants=[f"wu:{variant}"],
                    mask=mask,
                    temperature=temperature,
                    train_mode=mode == "train",
                    n_samples=config.n_samples,
                    n_tokens=config.n_tokens,
                    metrics=METRICS,
                    seed=config.seed,
                )
            except InputError as err:
                # Without its norms a pretrained model can overflow float32 (SmolLM2's pure
                # SAN does): the curve is lost, and the summary says so.
                if "NaN" not in str(err) and "Inf" not in str(err):
                    raise
                frame = pd.DataFrame(
                    [{"variant": variant, "mode": mode, "layer": np.nan, "sample": np.nan,
                      "metric": "diverged", "value": 1.0, "at_floor": False}]
                )  # fmt: skip
        frames.append(frame.assign(mask=mask, mode=mode))
    frame = pd.concat(frames, ignore_index=True)
    frame["variant"] = frame["variant"].str.removeprefix("wu:")
    frame["init"] = REAL_MODELS[model][1]
    return frame.assign(model=model)


# ----------------------------------------------------------------------------- rates


def collapse_rate(curve: pd.DataFrame) -> tuple[float, int]:
    """(rate, number of fitted layers) of one curve's rows (layer, sample, value, at_floor).

    Rate = minus the least-squares slope of mean-over-samples log mu against layer, over the
    layers before the first one where any sample is at the dtype floor (NaN if < 2 layers).

    Example:
        >>> curve = pd.DataFrame({"layer": [0, 1, 2, 3], "sample": 0, "at_floor": False,
        ...                       "value": np.exp(-0.5 * np.arange(4.0))})
        >>> round(collapse_rate(curve)[0], 6), collapse_rate(curve)[1]
        (0.5, 4)
    """
    by_layer = curve.assign(log=np.log(curve["value"].clip(lower=1e-300))).groupby("layer")
    stats = by_layer.agg(log=("log", "mean"), floor=("at_floor", "any")).sort_index()
    floor = stats["floor"].to_numpy(dtype=bool)
    n_fit = int(floor.argmax()) if floor.any() else len(stats)
    geometric_mean = np.exp(stats["log"].to_numpy()[:n_fit])  # layers 0 .. n_fit - 1
    return -fitted_rate(geometric_mean), n_fit


def rates_table(results: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """One collapse rate of `mu` per group of `by`, with its fit window, and beside it the
    rate of `mu_rel` (the same fit): without LN part of mu's decay can be the norm shrinking."""
    tables = []
    for metric, column in (("mu", "rate"), ("mu_rel", "rate_mu_rel")):
        rows = []
        curves = results[results["metric"] == metric].astype({"at_floor": bool})
        for key, curve in curves.groupby(by, sort=False):
            rate, n_fit = collapse_rate(curve)
            rows.append({**dict(zip(by, key)), column: rate, f"fit_layers_{metric}": n_fit})
        tables.append(pd.DataFrame(rows))
    return tables[0].merge(tables[1], on=by, how="left")


def tokens_of(config: CurvesConfig, model: str) -> int:
    """Tokens per sequence of a model entry (the mask radius depends on it)."""
    return config.toy_tokens if model == "toy" else config.n_tokens


def mask_radius(spec: str, n_tokens: int) -> float:
    """Radius of the mask graph at `n_tokens` tokens; inf when it has no center node."""
    m = mask_from_spec(spec, n_tokens)
    return float(radius(m)) if is_quasi_strongly_connected(m) else float("inf")


def kendall_concordance(radii: list[float], rates: list[float]) -> float:
    """Fraction of pairs with different finite radius whose rates are ordered the other way
    (larger radius, smaller rate); NaN when no such pair.

    Example:
        >>> kendall_concordance([1, 1, 16, 31], [5.0, 0.7, 0.01, 0.2])
        0.8
    """
    pairs = [
        (r1 - r2) * (k1 - k2) < 0
        for (r1, k1), (r2, k2) in itertools.combinations(zip(radii, rates), 2)
        if r1 != r2 and np.isfinite(r1) and np.isfinite(r2)
    ]
    return float(np.mean(pairs)) if pairs else float("nan")


# ----------------------------------------------------------------------------- summary


def summarize(config: Config, results: pd.DataFrame) -> Summary:
    summary = Summary()
    results = results.astype({"at_floor": bool})
    rates = rates_table(results, ["model", "mode", "variant", "mask"])
    rates["radius"] = [
        mask_radius(mask, tokens_of(config, model))
        for mask, model in zip(rates["mask"], rates["model"])
    ]
    summary.tables["collapse_rates"] = rates
    san = rates[rates["variant"] == "san"]
    connected = san[np.isfinite(san["radius"])]
    summary.claims.append(
        Claim.check(
            "san-collapses-every-mask",
            "Pure SAN collapses exponentially under every (quasi-strongly connected) mask.",
            "smallest fitted collapse rate of mu over models, modes and masks (per layer)",
            connected["rate"].min(),
            ">",
            0.0,
            note="; ".join(
                f"{r.model}/{r.mode}/{r.mask}: {r.rate:.3g}" for r in connected.itertuples()
            ),
        )
    )
    order_rows = []
    for (model, mode), part in connected.groupby(["model", "mode"], sort=False):
        ordered = part.sort_values("rate", ascending=False)
        order_rows.append(
            {
                "model": model,
                "mode": mode,
                "masks_fastest_first": " > ".join(ordered["mask"]),
                "concordance_with_radius": kendall_concordance(
                    list(part["radius"]), list(part["rate"])
                ),
            }
        )
        global_masks, local_masks = part[part["radius"] <= 1], part[part["radius"] > 1]
        if len(global_masks) and len(local_masks):
            summary.claims.append(
                Claim.check(
                    f"local-masks-slower@{model}/{mode}",
                    "More local masks collapse more slowly: every radius > 1 mask is slower "
                    "than every radius-1 mask (pure SAN).",
                    "min rate over radius-1 masks / max rate over radius > 1 masks",
                    global_masks["rate"].min() / local_masks["rate"].max(),
                    ">",
                    1.0,
                )
            )
        summary.claims.append(
            Claim.check(
                f"rate-follows-radius@{model}/{mode}",
                "The order of the collapse rates follows the mask radius (larger radius, slower).",
                "Kendall concordance of (radius, -rate) over mask pairs of different radius",
                order_rows[-1]["concordance_with_radius"],
                ">=",
                1.0,
                note=order_rows[-1]["masks_fastest_first"],
            )
        )
    summary.tables["mask_order"] = pd.DataFrame(order_rows)
    _ln_claims(config, results, summary)
    for row in results[results["metric"] == "diverged"].itertuples():
        summary.notes.append(
            f"{row.model} {row.variant} ({row.mode}, mask {row.mask}): the hidden states "
            "overflowed float32 (NaN/Inf) before the last layer; no curve."
        )
    for model in results["model"].unique():
        part = results[results["model"] == model]
        for metric in METRICS:
            rows = part[part["metric"] == metric]
            if rows.empty:
                continue
            summary.figures[f"{model}_{metric}"] = band_plot(
                rows.assign(
                    layer=rows["layer"].clip(lower=1),
                    curve=rows["variant"] + " (" + rows["mode"] + ")",
                ),
                hue="curve",
                panel="mask",
                logx=True,
                logy=True,
                title=f"{model}: {metric} against layer (layer 0 drawn at 1)",
                ylabel=metric,
            )
    return summary


def _ln_claims(config: Config, results: pd.DataFrame, summary: Summary) -> None:
    last = results[results["metric"] == "mu_rel"]
    last = last[last["layer"] == last.groupby("model")["layer"].transform("max")]
    table = (
        last.groupby(["model", "init", "mode", "variant", "mask"])["value"]
        .mean()
        .rename("mu_rel_last_layer")
        .reset_index()
    )
    summary.tables["last_layer_mu_rel"] = table
    ln = table[(table["variant"] == "san+ln") & (table["init"] == "random")]
    for (model, mode), part in ln.groupby(["model", "mode"], sort=False):
        part = part[[np.isfinite(mask_radius(m, tokens_of(config, model))) for m in part["mask"]]]
        summary.claims.append(
            Claim.check(
                f"ln-at-init@{model}/{mode}",
                f"At random init ({mode} mode), SAN + LN keeps mu_rel at the last layer above "
                "1e-3 under every connected mask (stated as measured, either way).",
                "smallest mean mu_rel at the last layer over masks (san+ln)",
                part["mu_rel_last_layer"].min(),
                ">",
                1e-3,
                note="; ".join(
                    f"{m}: {v:.2g}" for m, v in zip(part["mask"], part["mu_rel_last_layer"])
                ),
            )
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
    )
)
