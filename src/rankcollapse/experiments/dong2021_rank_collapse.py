"""dong2021-rank-collapse: real transformers collapse without their skip connections.

Paper: Dong, Cordonnier, Loukas, "Attention is not all you need: pure attention loses rank
doubly exponentially with depth", ICML 2021 (arXiv 2103.03404), Sec. 4 and Fig. 1.

Arms (model, init; offline, `rankcollapse.hf.MODELS`): the paper's BERT, ALBERT and XLNet at
random initialisation (library default init), GPT-2 and a SmolLM2-shaped Llama at init, and the
pretrained MiniLM (a 6-layer BERT) and SmolLM2-135M (a 30-layer Llama); the paper's pretrained
BERT/ALBERT/XLNet do not ship offline. Eval mode. The report names the arms each preset ran.

Variants (`rankcollapse.hf` hooks; LayerNorm stays in every one): `san` (attention skip and MLP
removed), `san+mlp`, `san+skip`, `transformer`; and, per arm, the authors' surgery with its
quirks (`dong-authors:san`, ..., defined for BERT, ALBERT and XLNet by `rankcollapse.hf`).
Inputs: windows of real text; `res_comp_rel` (mean-centred relative composite residual, the
paper's plotted quantity) per sequence and layer, float64, flagged at the float32 floor; also
`mu_rel` and `stable_rank`, which explain a residual above 1.

Findings ("about 0": mean res_comp_rel below 0.01; "well above 0": above 0.05):
- init-san-collapses: at init, `san` and `san+mlp` of every bidirectional encoder are about 0
  by layer 2 (causal decoders collapse more slowly, Wu et al. 2024: reported in the notes).
- init-skip-stays: at init, `san+skip` and `transformer` decay slowly: in no layer does their
  mean residual fall below half of the layer before (SAN falls by orders of magnitude per layer),
  a test that does not depend on how many layers the model has.
- pretrained-san-collapses: in every pretrained encoder the project ships (MiniLM, 6 layers)
  `san` is about 0 within a handful of layers, a handful being `handful` = 5 layers (counted
  from the embedding output). The paper's pretrained BERT, ALBERT and XLNet do not ship
  offline. `san_excluded` leaves a model out by name, with its reason and a count; a model whose
  san never gets there, or has no curve, fails the finding.
- pretrained-decoder-san-collapses (beyond the paper): the same statement for every pretrained
  causal decoder shipped (SmolLM2-135M, 30 layers, from its 4-bit GGUF). A decoder is outside
  the paper's setting (causal masks collapse more slowly, Wu et al. 2024), so this is the
  project's extension, listed apart from the paper's findings.
- pretrained-transformer-keeps: every pretrained `transformer` keeps a residual well above 0.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Literal

import pandas as pd
import torch
from pydantic import BaseModel, ConfigDict, Field

from rankcollapse.devices import Device, Dtype
from rankcollapse.experiments._registry import Experiment, Summary, Unit, for_every, register
from rankcollapse.experiments.verdicts import Claim
from rankcollapse.hf import MODELS, text_model_type
from rankcollapse.plot import band_plot, spans_decades
from rankcollapse.seeds import Seed
from rankcollapse.sizes import NLayers, NSamples, NTokens
from rankcollapse.theory import (
    at_layer,
    first_layer_below,
    layer_cells,
    layer_stats,
    layers_above,
    shown_layer_stats,
)
from rankcollapse.variants import AUTHORS_VARIANTS, DONG_VARIANTS, variant_type

NAME = "dong2021-rank-collapse"
NEAR_ZERO = 0.01  # "about 0": 1% of the input's relative residual scale
CLEARLY_NONZERO = 0.05  # "well above 0": ~1e5 x the float32 floor
SLOW = 0.5  # "decays slowly": no layer more than halves the residual (SAN: orders of magnitude)
METRIC = "res_comp_rel"
METRICS = [METRIC, "mu_rel", "stable_rank"]
SKIPLESS = [v for v in DONG_VARIANTS if not v.attention_skip]  # san, san+mlp
WITH_SKIP = [v for v in DONG_VARIANTS if v.attention_skip]  # san+skip, transformer
ModelName = text_model_type()  # a text model of `rankcollapse.hf.MODELS`
VariantName = variant_type("dong", "dong-authors")  # exact and authors' variants


def decoders(models: Iterable[str]) -> list[str]:
    """The causal decoders among `models` (the registry says which): not in the paper, they
    collapse more slowly (Wu et al. 2024), so their numbers go to the notes."""
    return [m for m in dict.fromkeys(models) if MODELS[m].causal]


class Arm(BaseModel):
    """One model at one initialisation (one unit: the model loads once, all variants run)."""

    model_config = ConfigDict(extra="forbid")

    model: ModelName
    init: Literal["pretrained", "random"]
    variants: list[VariantName] | None = None
    """Variants of this arm (None: the config's); e.g. ALBERT's exact and authors' ones."""


ALBERT_BOTH = {
    "model": "albert-base",
    "init": "random",
    "variants": DONG_VARIANTS + AUTHORS_VARIANTS,
}
ALL_ARMS = [
    {"model": "bert-base", "init": "random"},
    ALBERT_BOTH,
    {"model": "xlnet-base", "init": "random"},
    {"model": "gpt2", "init": "random"},
    {"model": "llama-small", "init": "random"},
    {"model": "minilm", "init": "random"},
    {"model": "minilm", "init": "pretrained"},
    {"model": "smollm2", "init": "pretrained"},
]
QUICK_ARMS = [
    {"model": "minilm", "init": "pretrained"},
    {"model": "smollm2", "init": "pretrained"},
    {"model": "minilm", "init": "random"},
    {"model": "bert-base", "init": "random"},
]


class Config(BaseModel):
    """Real models in Dong et al.'s four variants, on windows of real text."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    arms: list[Arm] = Field(default_factory=lambda: [Arm(**a) for a in ALL_ARMS], min_length=1)
    """Models and initialisations, e.g. [{"model": "minilm", "init": "pretrained"}]."""
    variants: list[VariantName] = Field(default_factory=lambda: list(DONG_VARIANTS), min_length=1)
    """Variants of arms without their own list (san, san+mlp, san+skip, transformer, ...)."""
    n_samples: NSamples = Field(32, le=1024)
    """Windows of text per model."""
    n_tokens: NTokens = Field(128, le=512)
    """Tokens per window (exactly, all real)."""
    n_layers: NLayers | None = Field(None, le=96)
    """Depth of random-init models (None: the model's own depth)."""
    handful: int = Field(5, ge=1, le=96)
    """A handful of layers: this many (pretrained-san-collapses)."""
    san_excluded: dict[ModelName, str] = Field(default_factory=dict)
    """Pretrained models left out of pretrained-san-collapses, each with its reason, e.g.
    {"smollm2": "causal decoder"} (the finding names them and counts them)."""
    device: Device = torch.device("cpu")
    """Where the models run (auto: an accelerator when one is visible)."""
    dtype: Dtype = torch.float32
    """Parameter dtype of the models (metrics are float64, flagged at this dtype's floor)."""
    seed: Seed = 0
    """Seed of the random inits and of the window choice."""


PRESETS = {
    # Quick: pretrained MiniLM and SmolLM2 plus MiniLM and BERT-base at init, on 8 windows of
    # 64 tokens (the paper: 32 x 128), so `make demo` takes a few minutes on 2 cores.
    "quick": {"arms": QUICK_ARMS, "n_samples": 8, "n_tokens": 64},
    # Paper: every model, 32 sequences of 128 tokens (Fig. 1); ALBERT also the authors' way.
    "paper": {},
}


def units(config: Config) -> list[Unit]:
    return [{"model": a.model, "init": a.init} for a in config.arms]


def run_unit(config: Config, unit: Unit) -> pd.DataFrame:
    from rankcollapse.hf import load_resolved
    from rankcollapse.measure import probe

    arm = next(a for a in config.arms if (a.model, a.init) == (unit["model"], unit["init"]))
    device = config.device
    n_layers = config.n_layers if unit["init"] == "random" else None
    loaded = load_resolved(
        unit["model"],
        init=unit["init"],
        seed=config.seed,
        device=device,
        dtype=config.dtype,
        n_layers=n_layers,
    )
    frame = probe(
        loaded,
        variants=arm.variants or config.variants,
        n_samples=config.n_samples,
        n_tokens=config.n_tokens,
        metrics=METRICS,
        seed=config.seed,
    )
    return frame.drop(columns=["mask", "temperature", "mode"]).assign(device=str(device))


def layer_means(results: pd.DataFrame) -> pd.DataFrame:
    """`layer_stats` of res_comp_rel (mean, std, floor flag) per model, init and variant."""
    return layer_stats(results[results["metric"] == METRIC], ("model", "init", "variant"))


def _slowest_step(table: pd.DataFrame, init: str, variants: list[str]) -> dict:
    """{model/variant: least mean(layer l) / mean(layer l - 1) over l} of one init."""
    part = table[(table["init"] == init) & table["variant"].isin(variants)]
    steps = {}
    for (model, variant), curve in part.groupby(["model", "variant"], sort=False):
        means = curve.sort_values("layer")["mean"].to_numpy()
        steps[f"{model}/{variant}"] = float((means[1:] / means[:-1]).min())
    return steps


def _members(table: pd.DataFrame, init: str, variants: list[str], layer: str | int) -> dict:
    """{model/variant: mean at `layer` ("last": each model's last layer)} of one init."""
    part = at_layer(table[(table["init"] == init) & table["variant"].isin(variants)], layer)
    return {f"{r.model}/{r.variant}": r.mean for r in part.itertuples()}


# (id, text, init, variants, layer, relation, threshold, encoders only, the paper's words)
STATEMENTS = [
    (
        "init-san-collapses",
        "At initialisation, san and san+mlp fall to about 0 within two layers.",
        "random",
        SKIPLESS,
        2,
        "<",
        NEAR_ZERO,
        True,
        "at initialisation, the output of SAN and SAN+MLP rapidly converges to rank 1",
    ),
    (
        "pretrained-transformer-keeps",
        "In pretrained models, the full transformer keeps a clearly non-zero residual.",
        "pretrained",
        ["transformer"],
        "last",
        ">",
        CLEARLY_NONZERO,
        False,
        "the full transformer (skip connections and MLPs) does not lose rank",
    ),
]


def claims(config: Config, results: pd.DataFrame) -> list[Claim]:
    """The paper's four statements about Fig. 1, on this run's per-layer means."""
    table, found = layer_means(results), []
    for id_, text, init, variants, layer, relation, level, encoders, paper in STATEMENTS:
        models = [a.model for a in config.arms if a.init == init]
        models = [m for m in models if not (encoders and MODELS[m].causal)]
        if models:
            found.append(
                for_every(
                    id_,
                    text,
                    f"mean {METRIC} at layer {layer} per {init} model and variant "
                    f"({', '.join(variants)})",
                    _members(table, init, variants, layer),
                    relation,
                    level,
                    expected=[f"{m}/{v}" for m in models for v in variants],
                    source="Sec. 4, Fig. 1",
                    paper=paper,
                )
            )
    models = [a.model for a in config.arms if a.init == "random"]
    if models:
        found.insert(
            1,
            for_every(
                "init-skip-stays",
                "At initialisation, the variants with the attention skip decay slowly: no layer "
                f"takes their residual below {SLOW:g} of the layer before.",
                f"least ratio of consecutive layers' mean {METRIC}, per random-init model and "
                f"variant ({', '.join(WITH_SKIP)})",
                _slowest_step(table, "random", WITH_SKIP),
                ">",
                SLOW,
                expected=[f"{m}/{v}" for m in models for v in WITH_SKIP],
                source="Sec. 4, Fig. 1",
                paper="with skip connections the residual decays slowly and stays far from 0 "
                "(Sec. 4, Fig. 1: skip connections play a key role in mitigating rank collapse)",
            ),
        )
    models = list(dict.fromkeys(a.model for a in config.arms if a.init == "pretrained"))
    if models:
        san = table[(table["init"] == "pretrained") & (table["variant"] == "san")]
        first = first_layer_below(san[san["model"].isin(models)], NEAR_ZERO)
        encoders = [m for m in models if not MODELS[m].causal]  # the paper's setting
        decoders = [m for m in models if MODELS[m].causal]  # beyond it: listed apart
        groups = [("pretrained-san-collapses", encoders, "encoder", False)]
        groups += [("pretrained-decoder-san-collapses", decoders, "causal decoder", True)]
        for offset, (id, members, what, beyond) in enumerate(g for g in groups if g[1]):
            found.insert(2 + offset, _san_collapses(config, id, members, what, first, beyond))
    return found


def _san_collapses(
    config: Config, id: str, models: list[str], what: str, first: dict, beyond: bool
) -> Claim:
    """san falls to about 0 within `config.handful` layers in every pretrained `what`: the
    paper's statement for its encoders (Sec. 4, Fig. 1); for causal decoders the project's
    extension (`beyond`), listed apart from the paper's findings."""
    return for_every(
        id,
        f"In every pretrained {what}, san falls to about 0 within a handful of layers: by "
        f"layer {config.handful}.",
        f"first layer where san's mean {METRIC} < {NEAR_ZERO}, latest model",
        {m: first.get(m, (math.nan,))[0] for m in models},  # no curve: NaN, fails
        "<=",
        config.handful,
        expected=models,
        excluded={m: why for m, why in config.san_excluded.items() if m in models},
        source="Sec. 4, Fig. 1",
        note="; ".join(
            f"{m}: layer {first[m][0]:g} of {first[m][1]}" for m in models if m in first
        ),
        paper="pretrained, SAN and SAN+MLP converge to rank 1 within a handful of layers "
        "(Sec. 4, Fig. 1; the paper's models are encoders)",
        beyond=beyond,
    )


NOTE = (
    "Variants, and the states a pre-LN or post-LN model exposes: docs/methods.md, sec. 4; why "
    f"{METRIC} can exceed 1 (the table of those layers gives mu_rel and the stable rank): "
    "sec. 1. Random-init models use MiniLM's tokenizer. Values at the float32 floor are hollow."
)


def notes(config: Config, results: pd.DataFrame, table: pd.DataFrame) -> list[str]:
    """What ran, and the measurements no finding covers."""
    arms = ", ".join(f"{a.model} ({a.init})" for a in config.arms)
    devices = ", ".join(sorted(set(results.get("device", pd.Series(["cpu"])))))
    quantized = sorted(set(results.get("quantized", pd.Series(["no"]))) - {"no"})
    causal = decoders(table["model"])
    at_init = _members(table[table["model"].isin(causal)], "random", SKIPLESS, 2)
    ran = f"Arms run: {arms}; {config.n_samples} windows of {config.n_tokens} tokens each"
    said = [f"{ran}; device {devices}.", NOTE]
    if at_init:
        said.append(
            f"Causal decoders at init (not in the paper), mean {METRIC} at layer 2: "
            + "; ".join(f"{k}: {v:.3g}" for k, v in at_init.items())
        )
    if quantized:
        said.append("Quantized weights: " + "; ".join(quantized) + ".")
    return said


def summarize(config: Config, results: pd.DataFrame) -> Summary:
    table = layer_means(results)
    data = results[results["metric"] == METRIC]  # arms and variants in the order they ran
    signal = data.loc[~data["at_floor"].astype(bool), "value"]
    figure = band_plot(
        data.assign(model=data["model"] + " (" + data["init"] + ")"),
        x="layer",
        hue="variant",
        panel="model",
        logy=spans_decades(signal),  # SAN's fall from 1 to 1e-3 would read as 0 on a linear axis
        floor=config.dtype,
        ylabel="relative residual",
        title=f"Relative residual {METRIC} per layer over {config.n_samples} windows of "
        f"{config.n_tokens} tokens",
    )
    wide = table.assign(mean=layer_cells(table)).pivot_table(
        index=["model", "init", "layer"], columns="variant", values="mean", aggfunc="first"
    )
    above = layers_above(results, METRIC, 1.0, by=("model", "init", "variant"))
    return Summary(
        tables={
            f"mean {METRIC} per layer": wide.reset_index(),
            f"per-layer statistics of {METRIC}": shown_layer_stats(table),
            f"layers where the mean {METRIC} exceeds 1": above,
        },
        figures={"residual vs layer": figure},
        claims=claims(config, results),
        notes=notes(config, results, table),
    )


register(
    Experiment(
        name=NAME,
        description="Real transformers collapse without their skip connections (Fig. 1); the "
        "report names the models run.",
        config=Config,
        presets=PRESETS,
        units=units,
        run_unit=run_unit,
        summarize=summarize,
        claims=claims,
    )
)
