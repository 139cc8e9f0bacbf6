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

Findings, each for every model and variant named, the unit a window of text (one value per
window), decided by the one rule (`rankcollapse.experiments.verdicts`: the interval over the
windows on the paper's side; "about 0": res_comp_rel below 0.01; "well above 0": above 0.05):
- init-san-collapses ("Pure attention (SAN) converges rapidly to a rank-1 matrix", Fig. 1
  caption): at init, `san` and `san+mlp` of every bidirectional encoder are about 0 at layer 2
  (causal decoders collapse more slowly, Wu et al. 2024: reported in the notes).
- init-skip-stays ("skip connections play a key role in mitigating rank collapse", Sec. 1):
  at init, `san+skip` and `transformer` decay slowly: a window's least ratio of consecutive
  layers is above 0.5 (SAN falls by orders of magnitude per layer), a test that does not
  depend on how many layers the model has.
- pretrained-san-collapses ("as soon as the skip connections are removed, all networks exhibit
  a rapid rank collapse", Sec. 4): in every pretrained encoder the project ships, `san` is about
  0 within a handful of layers: a window's first layer below 0.01 is at most `handful` (5) for
  a model of at most the paper's 12 layers, the same share of the depth for a deeper one. Only
  one pretrained encoder ships offline (MiniLM, 6 layers); the paper's pretrained BERT, ALBERT
  and XLNet do not. `san_excluded` leaves a model out by name, with its reason.
- pretrained-decoder-san-collapses (beyond the paper): the same statement, relative to depth,
  for every pretrained causal decoder shipped (SmolLM2-135M, 30 layers: a handful is 12.5). A
  decoder is outside the paper's setting (causal masks collapse more slowly, Wu et al. 2024).
- pretrained-transformer-keeps (the same sentence of Sec. 1): every pretrained `transformer`
  keeps a residual well above 0 at its last layer.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Literal

import pandas as pd
import torch
from pydantic import BaseModel, ConfigDict, Field, FilePath

from rankcollapse.devices import Device, Dtype
from rankcollapse.experiments._registry import Experiment, Summary, Unit, register
from rankcollapse.experiments.verdicts import Claim, Quote, for_every
from rankcollapse.hf import MODELS, text_model_type
from rankcollapse.plot import band_plot, spans_decades
from rankcollapse.seeds import Seed
from rankcollapse.sizes import NLayers, NSamples, NTokens
from rankcollapse.theory import (
    at_layer,
    layer_cells,
    layer_stats,
    layers_above,
    shown_layer_stats,
)
from rankcollapse.variants import AUTHORS_VARIANTS, DONG_VARIANTS, Variant, variant_type

NAME = "dong2021-rank-collapse"
NEAR_ZERO = 0.01  # "about 0": 1% of the input's relative residual scale
CLEARLY_NONZERO = 0.05  # "well above 0": ~1e5 x the float32 floor
SLOW = 0.5  # "decays slowly": no layer more than halves the residual (SAN: orders of magnitude)
PAPER_DEPTH = 12  # BERT's, ALBERT's and XLNet's layers in the paper's Fig. 1
FIG = "Fig. 1 (caption)"
TEXT = "Sec. 4 (rank collapse in real architectures), Fig. 1"
DECIDES = "--preset paper (32 windows of 128 tokens) or more windows (--set n_samples=N)"
# SmolLM2's first layer below NEAR_ZERO sits near the margin (about 13 of its 30 layers, the
# handful 12.5): about 1,000 windows decide it, more than the built-in corpus holds (55);
# 1,024 windows of SmolLM2 with san alone took 766 s of one core (2026-11-29)
DECODER_DECIDES = (
    "about 1,000 windows of 128 tokens, from a text longer than the built-in corpus: --set "
    "text=FILE n_samples=1024 (SmolLM2 alone with variants=[san]: about 13 minutes on one core)"
)
METRIC = "res_comp_rel"
METRICS = [METRIC, "mu_rel", "stable_rank"]
SKIPLESS = [v for v in DONG_VARIANTS if not v.attention_skip]  # san, san+mlp
WITH_SKIP = [v for v in DONG_VARIANTS if v.attention_skip]  # san+skip, transformer
if TYPE_CHECKING:  # names to mypy; pydantic checks them against the registry and the sets
    ModelName = str
    VariantName = Variant
else:
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

    arms: list[Arm] = Field(
        default_factory=lambda: [Arm.model_validate(a) for a in ALL_ARMS], min_length=1
    )
    """Models and initialisations, e.g. [{"model": "minilm", "init": "pretrained"}]."""
    variants: list[VariantName] = Field(default_factory=lambda: list(DONG_VARIANTS), min_length=1)
    """Variants of arms without their own list (san, san+mlp, san+skip, transformer, ...)."""
    n_samples: NSamples = Field(32, le=1024)
    """Windows of text per model."""
    n_tokens: NTokens = Field(128, le=512)
    """Tokens per window (exactly, all real)."""
    text: FilePath | None = None
    """A UTF-8 text file whose windows are measured (None: the built-in corpus), for more
    windows than the corpus holds, e.g. Debian's fortunes: /usr/share/games/fortunes/science."""
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
        text=config.text,
        metrics=METRICS,
        seed=config.seed,
    )
    return frame.drop(columns=["mask", "temperature", "mode"]).assign(device=str(device))


def layer_means(results: pd.DataFrame) -> pd.DataFrame:
    """`layer_stats` of res_comp_rel (mean, std, floor flag) per model, init and variant."""
    return layer_stats(results[results["metric"] == METRIC], ("model", "init", "variant"))


SAYS = {
    "init-san-collapses": Quote("Pure attention (SAN) converges rapidly to a rank-1 matrix.", FIG),
    "init-skip-stays": Quote(
        "skip connections play a key role in mitigating rank collapse", "Sec. 1"
    ),
    "pretrained-san-collapses": Quote(
        "as soon as the skip connections are removed, all networks exhibit a rapid rank collapse",
        TEXT,
    ),
    "pretrained-transformer-keeps": Quote(
        "skip connections play a key role in mitigating rank collapse", "Sec. 1"
    ),
}


def per_sample(results: pd.DataFrame, init: str, variants: Sequence[str]) -> pd.DataFrame:
    """res_comp_rel per (model, variant, sample) x layer of one init: the units of a finding."""
    rows = results[
        (results["metric"] == METRIC)
        & (results["init"] == init)
        & results["variant"].isin(variants)
    ]
    return rows.pivot_table(index=["model", "variant", "sample"], columns="layer", values="value")


def _members(wide: pd.DataFrame, of) -> dict[str, list[float]]:
    """{model/variant: of(that member's rows) per sample}; `of` maps a (samples x layers)
    frame to one value per sample."""
    return {
        f"{model}/{variant}": of(part.droplevel([0, 1]).dropna(axis=1, how="all")).tolist()
        for (model, variant), part in wide.groupby(level=["model", "variant"], sort=False)
    }


def claims(config: Config, results: pd.DataFrame) -> list[Claim]:
    """The paper's statements about Fig. 1, each for every model and variant, the unit a window
    of text (one value per sample), decided by the one rule."""
    found = []
    models = {i: [a.model for a in config.arms if a.init == i] for i in ("random", "pretrained")}
    encoders = [m for m in models["random"] if not MODELS[m].causal]
    if encoders:
        found.append(
            _every(
                "init-san-collapses",
                "At initialisation, san and san+mlp fall to about 0 within two layers.",
                f"{METRIC} at layer 2, per window",
                per_sample(results, "random", SKIPLESS),
                lambda w: w[2],
                "<",
                NEAR_ZERO,
                [f"{m}/{v}" for m in encoders for v in SKIPLESS],
            )
        )
    if models["random"]:
        found.append(
            _every(
                "init-skip-stays",
                "At initialisation, the variants with the attention skip decay "
                f"slowly: no layer takes their residual below {SLOW:g} of the layer before.",
                f"least ratio of consecutive layers' {METRIC}, per window",
                per_sample(results, "random", WITH_SKIP),
                lambda w: (w.iloc[:, 1:].to_numpy() / w.iloc[:, :-1].to_numpy()).min(axis=1),
                ">",
                SLOW,
                [f"{m}/{v}" for m in models["random"] for v in WITH_SKIP],
            )
        )
    pretrained = list(dict.fromkeys(models["pretrained"]))
    if pretrained:
        san = per_sample(results, "pretrained", ["san"])
        groups = [("pretrained-san-collapses", False), ("pretrained-decoder-san-collapses", True)]
        for id_, causal in groups:
            members = [m for m in pretrained if MODELS[m].causal == causal]
            if members:
                found.append(_san_collapses(config, id_, members, san, beyond=causal))
        found.append(
            _every(
                "pretrained-transformer-keeps",
                "In pretrained models, the full transformer keeps a clearly non-zero residual.",
                f"{METRIC} at each model's last layer, per window",
                per_sample(results, "pretrained", ["transformer"]),
                lambda w: w.iloc[:, -1],
                ">",
                CLEARLY_NONZERO,
                [f"{m}/transformer" for m in pretrained],
            )
        )
    return found


def _every(
    id_, text, quantity, wide, of, side, margin, expected, decides=DECIDES, **extra
) -> Claim:
    """A finding for every member (model/variant) over its windows, by the one rule."""
    says = SAYS["pretrained-san-collapses" if id_.endswith("san-collapses") else id_]
    return for_every(
        id_,
        says=says,
        text=text,
        quantity=quantity,
        members=_members(wide, of),
        side=side,
        margin=margin,
        expected=expected,
        decides=decides,
        **extra,
    )


def handful_for(config: Config, depth: int) -> float:
    """A handful of layers in a model of `depth` layers: `config.handful` for the paper's
    12-layer encoders or shallower, the same share of the depth for a deeper model."""
    return config.handful * max(1.0, depth / PAPER_DEPTH)


def _san_collapses(
    config: Config, id: str, models: list[str], san: pd.DataFrame, *, beyond: bool
) -> Claim:
    """san is about 0 within a handful of layers (relative to depth past the paper's 12) in
    every pretrained model of `models`: per window, the first layer below NEAR_ZERO minus the
    model's handful (a window that never gets there: NaN, which fails)."""

    def excess(w: pd.DataFrame) -> pd.Series:
        depth = int(w.columns.max())
        below = w.lt(NEAR_ZERO)
        first = below.idxmax(axis=1).where(below.any(axis=1))
        return first.astype(float) - handful_for(config, depth)

    what = "causal decoder" if beyond else "encoder"
    depths = {
        m: int(san.loc[m].dropna(axis=1, how="all").columns.max())
        for m in models
        if m in san.index.get_level_values(0)
    }
    return _every(
        id,
        f"In every pretrained {what}, san falls to about 0 within a handful of layers "
        f"({config.handful} of the paper's {PAPER_DEPTH}, the same share of a deeper model).",
        f"first layer where a window's {METRIC} < {NEAR_ZERO}, minus the model's handful",
        san,
        excess,
        "<",
        0.5,  # a first layer at the handful itself is within it (layers are whole numbers)
        [f"{m}/san" for m in models],
        excluded={f"{m}/san": why for m, why in config.san_excluded.items() if m in models},
        note="; ".join(
            f"{m}: {depths[m]} layers, a handful = {handful_for(config, depths[m]):g}"
            for m in depths
        )
        + ("" if len(models) > 1 else f"; one pretrained {what} ships offline"),
        decides=DECODER_DECIDES if beyond else DECIDES,
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
    rows = table[table["model"].isin(causal) & (table["init"] == "random")]
    rows = at_layer(rows[rows["variant"].isin(SKIPLESS)], 2)
    at_init = {f"{r.model}/{r.variant}": r.mean for r in rows.itertuples()}
    source = "the built-in corpus" if config.text is None else f"the text file {config.text}"
    ran = (
        f"Arms run: {arms}; {config.n_samples} windows of {config.n_tokens} tokens each, "
        f"from {source}"
    )
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
