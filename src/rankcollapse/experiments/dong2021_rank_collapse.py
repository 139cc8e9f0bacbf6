"""dong2021-rank-collapse: real transformers collapse without their skip connections.

Paper: Dong, Cordonnier, Loukas, "Attention is not all you need: pure attention loses rank
doubly exponentially with depth", ICML 2021 (arXiv 2103.03404), Fig. 1 (spec dong2021.md sec. 2
and 5).

Models (offline, `rankcollapse.hf.MODELS`): random-init BERT-base, ALBERT-base, XLNet-base (the
paper's three) plus GPT-2 small and a SmolLM2-shaped Llama, all with the library's default
initialisation; pretrained MiniLM (a 6-layer BERT) and SmolLM2-135M (a 30-layer Llama, 4-bit
GGUF weights). The paper's pretrained BERT/ALBERT/XLNet do not ship offline. Eval mode.

Variants (hooks, `rankcollapse.hf.variants`; LayerNorm stays in every one):
    san          attention skip removed, MLP block removed
    san+mlp      attention skip removed, MLP block kept
    san+skip     attention skip kept, MLP block removed
    transformer  the unchanged model
Inputs: windows of real text (the built-in sample corpus), `res_comp_rel` (mean-centred
relative composite residual, the paper's plotted quantity) per sequence and layer, float64,
flagged at the float32 floor.

Claims (computed from this run's results; "near 0" = mean below NEAR_ZERO, "well above 0" = mean
above CLEARLY_NONZERO):
- init-san-collapses: at initialisation, `san` and `san+mlp` of the bidirectional encoders (the
  paper's models) are near 0 by layer 2. Causal decoders are reported in the notes: under a
  causal mask pure attention collapses more slowly (Wu et al. 2024), which this run shows.
- init-skip-stays: at initialisation, `san+skip` and `transformer` stay well above 0 at the
  last layer (every model).
- pretrained-san-collapses: in pretrained encoders (MiniLM), `san` is near 0 within HANDFUL
  layers. Pretrained decoders (SmolLM2) are reported in the notes: causal, they collapse later.
- pretrained-transformer-keeps: in pretrained models, `transformer` keeps a clearly non-zero
  residual at the last layer.
"""

from __future__ import annotations

from typing import Literal

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from rankcollapse.experiments._registry import Claim, Experiment, Summary, Unit, register
from rankcollapse.plot import band_plot

NAME = "dong2021-rank-collapse"
NEAR_ZERO = 0.01  # "fall to about 0": 1% of the input's relative residual scale
CLEARLY_NONZERO = (
    0.05  # "well above 0" / "clearly non-zero": 5x NEAR_ZERO, ~1e5 x the float32 floor
)
HANDFUL = 6  # "within a handful of layers"
METRIC = "res_comp_rel"

ModelName = Literal[
    "minilm", "smollm2", "bert-base", "albert-base", "xlnet-base", "gpt2", "llama-small"
]
VariantName = Literal["san", "san+mlp", "san+skip", "transformer"]
# Causal decoders (not in the paper): their attention is a causal mask, under which pure attention
# collapses more slowly (Wu et al. 2024); the paper's claims are about bidirectional encoders.
DECODERS = {"gpt2", "llama-small", "smollm2"}
SKIPLESS = ["san", "san+mlp"]
WITH_SKIP = ["san+skip", "transformer"]


class Arm(BaseModel):
    """One model at one initialisation (one unit: the model loads once, all variants run)."""

    model_config = ConfigDict(extra="forbid")

    model: ModelName
    init: Literal["pretrained", "random"]


ALL_ARMS = [
    {"model": "bert-base", "init": "random"},
    {"model": "albert-base", "init": "random"},
    {"model": "xlnet-base", "init": "random"},
    {"model": "gpt2", "init": "random"},
    {"model": "llama-small", "init": "random"},
    {"model": "minilm", "init": "random"},
    {"model": "minilm", "init": "pretrained"},
    {"model": "smollm2", "init": "pretrained"},
]


class Config(BaseModel):
    """Real models in Dong et al.'s four variants, on windows of real text."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    arms: list[Arm] = Field(default_factory=lambda: [Arm(**a) for a in ALL_ARMS], min_length=1)
    """Models and initialisations, e.g. [{"model": "minilm", "init": "pretrained"}]."""
    variants: list[VariantName] = Field(
        default_factory=lambda: ["san", "san+mlp", "san+skip", "transformer"], min_length=1
    )
    """Which of Dong's variants to run."""
    n_samples: int = Field(32, ge=1, le=1024)
    """Windows of text per model."""
    n_tokens: int = Field(128, ge=2, le=512)
    """Tokens per window (exactly, all real)."""
    random_layers: int | None = Field(None, ge=1, le=96)
    """Depth of random-init models (None: the preset's own depth)."""
    seed: int = 0
    """Seed of the random inits and of the window choice."""


PRESETS = {
    # Quick: the headline on real pretrained weights (MiniLM and SmolLM2) plus MiniLM and
    # BERT-base at init, on 8 windows of 64 tokens (the paper: 32 x 128), so `make demo` takes
    # a few minutes on 2 cores. The other random-init models are in the paper preset.
    "quick": {
        "arms": [
            {"model": "minilm", "init": "pretrained"},
            {"model": "smollm2", "init": "pretrained"},
            {"model": "minilm", "init": "random"},
            {"model": "bert-base", "init": "random"},
        ],
        "n_samples": 8,
        "n_tokens": 64,
    },
    # Paper: every model, 32 sequences of 128 tokens (Fig. 1).
    "paper": {},
}


def units(config: Config) -> list[Unit]:
    return [{"model": a.model, "init": a.init} for a in config.arms]


def run_unit(config: Config, unit: Unit) -> pd.DataFrame:
    from rankcollapse.hf import load_model, probe

    overrides = None
    if unit["init"] == "random" and config.random_layers is not None:
        overrides = {"num_hidden_layers": config.random_layers}
    loaded = load_model(
        unit["model"], init=unit["init"], seed=config.seed, config_overrides=overrides
    )
    frame = probe(
        loaded,
        variants=config.variants,
        n_samples=config.n_samples,
        n_tokens=config.n_tokens,
        metrics=[METRIC],
        seed=config.seed,
    )
    return frame.drop(columns=["mask", "temperature", "mode"])


def layer_means(results: pd.DataFrame) -> pd.DataFrame:
    """Mean, std and floor flag of res_comp_rel per (model, init, variant, layer)."""
    res = results[results["metric"] == METRIC]
    return (
        res.groupby(["model", "init", "variant", "layer"], sort=False)
        .agg(mean=("value", "mean"), std=("value", "std"), any_at_floor=("at_floor", "any"))
        .reset_index()
    )


def _at(table: pd.DataFrame, init: str, variants: list[str], layer: str | int) -> pd.DataFrame:
    part = table[(table["init"] == init) & table["variant"].isin(variants)]
    if layer == "last":
        last = part.groupby(["model", "init"])["layer"].transform("max")
        return part[part["layer"] == last]
    return part[part["layer"] == layer]


def _listing(rows: pd.DataFrame) -> str:
    return "; ".join(f"{r.model}/{r.variant}: {r.mean:.3g}" for r in rows.itertuples())


def first_layer_near_zero(rows: pd.DataFrame) -> dict[str, float]:
    """Per model, the first layer whose mean is below NEAR_ZERO (inf when none is)."""
    first = {}
    for model, part in rows.groupby("model", sort=False):
        below = part.loc[part["mean"] < NEAR_ZERO, "layer"]
        first[model] = float(below.min()) if not below.empty else float("inf")
    return first


def claims(table: pd.DataFrame) -> list[Claim]:
    """The paper's four statements about Fig. 1, on this run's per-layer means."""
    found = []
    early = _at(table[~table["model"].isin(DECODERS)], "random", SKIPLESS, 2)
    if not early.empty:
        found.append(
            Claim.check(
                "init-san-collapses",
                "At initialisation, san and san+mlp fall to about 0 within two layers.",
                f"max over random-init encoders of mean {METRIC} at layer 2 (san, san+mlp)",
                float(early["mean"].max()),
                "<",
                NEAR_ZERO,
                note=_listing(early),
            )
        )
    late = _at(table, "random", WITH_SKIP, "last")
    if not late.empty:
        found.append(
            Claim.check(
                "init-skip-stays",
                "At initialisation, the variants with the attention skip stay well above 0 at "
                "the last layer.",
                f"min over random-init models of last-layer mean {METRIC} (san+skip, transformer)",
                float(late["mean"].min()),
                ">",
                CLEARLY_NONZERO,
                note=_listing(late),
            )
        )
    san = table[(table["init"] == "pretrained") & (table["variant"] == "san")]
    encoders = san[~san["model"].isin(DECODERS)]
    if not encoders.empty:
        first = first_layer_near_zero(encoders)
        found.append(
            Claim.check(
                "pretrained-san-collapses",
                f"In pretrained encoders, san collapses within a handful ({HANDFUL}) of layers.",
                f"max over pretrained encoders of the first layer where san's mean {METRIC} < "
                f"{NEAR_ZERO} (inf: never)",
                max(first.values()),
                "<=",
                HANDFUL,
                note="; ".join(f"{m}: layer {v:g}" for m, v in first.items()),
            )
        )
    kept = _at(table, "pretrained", ["transformer"], "last")
    if not kept.empty:
        found.append(
            Claim.check(
                "pretrained-transformer-keeps",
                "In pretrained models, the full transformer keeps a clearly non-zero residual.",
                f"min over pretrained models of last-layer mean {METRIC} (transformer)",
                float(kept["mean"].min()),
                ">",
                CLEARLY_NONZERO,
                note=_listing(kept),
            )
        )
    return found


def summarize(config: Config, results: pd.DataFrame) -> Summary:
    table = layer_means(results)
    arms = [f"{a.model} ({a.init})" for a in config.arms]
    data = results[results["metric"] == METRIC].assign(
        panel=lambda d: pd.Categorical(d["model"] + " (" + d["init"] + ")", categories=arms),
        variant=lambda d: pd.Categorical(d["variant"], categories=config.variants),
    )
    figure = band_plot(
        data,
        x="layer",
        hue="variant",
        panel="panel",
        logy=False,
        title=f"Relative residual {METRIC} per layer: mean +- std over {config.n_samples} "
        f"windows of {config.n_tokens} tokens",
        ylabel="relative residual",
    )
    wide = table.pivot_table(index=["model", "init", "layer"], columns="variant", values="mean")
    quantized = sorted(
        {f"{m}: {q}" for m, q in zip(results["model"], results["quantized"]) if q != "no"}
    )
    notes = [
        (
            "Variants by hooks: no attention skip = the post-attention LayerNorm acts on the "
            "attention output alone (post-LN) or the block returns the attention branch alone "
            "(pre-LN); no MLP = the MLP sub-layer is an exact identity (`rankcollapse variants`)."
        ),
        (
            "ALBERT quirk: the authors' ALBERT 'no MLP' still left a GELU and a residual; here "
            "ALBERT's MLP sub-layer is an exact identity like every other model's. ALBERT's one "
            "shared block is applied at every depth; its layer 0 is the output of the embedding "
            "projection."
        ),
        (
            "Pre-LN models (GPT-2, Llama/SmolLM2): states are the raw residual stream, never the "
            "final norm's output; post-LN models (BERT, MiniLM, ALBERT, XLNet): every state is a "
            "LayerNorm output."
        ),
        "Random-init presets use MiniLM's WordPiece tokenizer (their embeddings are random).",
        "Values at the float32 floor are flagged at_floor (hollow markers in the figure).",
    ]
    if quantized:
        notes.append("Quantized weights: " + "; ".join(quantized) + ".")
    decoders = _at(table[table["model"].isin(DECODERS)], "random", SKIPLESS, 2)
    if not decoders.empty:
        notes.append(
            f"Causal decoders at init (not in the paper), mean {METRIC} at layer 2: "
            f"{_listing(decoders)}; under a causal mask pure attention collapses more slowly "
            "(Wu et al. 2024), so init-san-collapses covers the encoders only."
        )
    late_decoders = table[
        (table["init"] == "pretrained")
        & (table["variant"] == "san")
        & table["model"].isin(DECODERS)
    ]
    if not late_decoders.empty:
        first = first_layer_near_zero(late_decoders)
        depth = late_decoders.groupby("model")["layer"].max()
        notes.append(
            f"Pretrained causal decoders (not in the paper), first layer where san's mean "
            f"{METRIC} < {NEAR_ZERO}: "
            + "; ".join(f"{m}: {v:g} of {depth[m]}" for m, v in first.items())
            + " (pretrained-san-collapses covers the encoders only)."
        )
    return Summary(
        tables={
            f"mean {METRIC} per layer": wide.reset_index(),
            f"per-layer statistics of {METRIC}": table,
        },
        figures={"residual vs layer": figure},
        claims=claims(table),
        notes=notes,
    )


register(
    Experiment(
        name=NAME,
        description="Real transformers (BERT, ALBERT, XLNet, GPT-2, Llama; MiniLM, SmolLM2) "
        "collapse without their skip connections (Fig. 1).",
        config=Config,
        presets=PRESETS,
        units=units,
        run_unit=run_unit,
        summarize=summarize,
    )
)
