"""wu2024-geometry: pretrained models keep full rank but grow anisotropic with depth.

Paper: Wu, Ajorlou, Wang, Jegelka, Jadbabaie, NeurIPS 2024 (arXiv 2405.18781), experiments
(spec wu2024.md sec. 4, "Geometry of pretrained models"), where BERT, GPT-2, T5 and ALBERT
are shown to keep full rank and a minimum singular value away from 0 while the mean |cosine|
between tokens rises with depth, like the anisotropic Theorem 3 equilibria.

Models: pretrained `minilm` (BERT encoder) and `smollm2` (Llama decoder), and for contrast
random-init `bert-base` and `gpt2` (library default init), unmodified (the `transformer`
variant, the model's own mask), eval mode, on windows of the built-in corpus. Per layer
(layer 0 = embedding output; every layer is a raw residual-stream state, never a final-norm
output: see `rankcollapse.hf.probe`): `numerical_rank`, `min_sv`, `stable_rank`,
`abs_cos_mean`, `mu_rel` from the metric suite, plus `min_sv_rel` = sigma_min / sigma_max and
the full normalised singular spectrum sigma_i / sigma_1 of the first `n_spectra` samples
(metric `sv`, index in column `index`), from a float64 SVD of the captured states.

Claims (from this run), per model, over the block outputs (layers >= 1): the embedding
output is not a transformer state, and in a model without absolute position embeddings
(SmolLM2: RoPE acts inside attention) a window with a repeated token has two identical
embedding rows, so layer 0 can be rank-deficient for a reason that has nothing to do with
attention; its numbers stay in the tables and figures.
- full-rank@model: every layer of every sample has numerical rank min(n_tokens, d_model).
- min-sv-away@model: the median sigma_min / sigma_max stays above 1e-4 at every layer (100x
  the float32 floor).
- cos-grows@model: mean |cosine| rises with depth: Spearman correlation of layer and the
  mean |cos| > 0.
The random-init models get the same measurements (and claims, labelled) for contrast.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import pandas as pd
import torch
from matplotlib.figure import Figure
from pydantic import BaseModel, ConfigDict, Field

from rankcollapse.experiments._registry import Claim, Experiment, Summary, Unit, register
from rankcollapse.hf import load_model, probe
from rankcollapse.plot import line_plot

NAME = "wu2024-geometry"

Model = Literal["minilm", "smollm2", "bert-base", "gpt2"]
INIT = {"minilm": "pretrained", "smollm2": "pretrained", "bert-base": "random", "gpt2": "random"}
METRICS = ["numerical_rank", "min_sv", "stable_rank", "abs_cos_mean", "mu_rel"]
MIN_SV_REL = 1e-4


class Config(BaseModel):
    """Models and sizes of the geometry measurements."""

    model_config = ConfigDict(extra="forbid")

    models: list[Model] = ["minilm", "smollm2", "bert-base", "gpt2"]
    """Pretrained minilm and smollm2; random-init bert-base and gpt2 for contrast."""
    n_samples: int = Field(32, ge=1)
    """Text windows per model."""
    n_tokens: int = Field(128, ge=4)
    """Tokens per window."""
    n_spectra: int = Field(3, ge=0)
    """Samples whose full singular spectrum is kept per layer."""
    seed: int = Field(0, ge=0)
    """Seed of the random inits and the window choice."""


PRESETS = {
    "quick": {"n_samples": 4, "n_tokens": 64},
    "paper": {},
}


def units(config: Config) -> list[Unit]:
    return [{"model": m, "init": INIT[m]} for m in config.models]


def run_unit(config: Config, unit: Unit) -> pd.DataFrame:
    loaded = load_model(unit["model"], init=unit["init"], seed=config.seed)
    frame = probe(
        loaded,
        variants=["transformer"],
        n_samples=config.n_samples,
        n_tokens=config.n_tokens,
        metrics=METRICS,
        seed=config.seed,
        keep_states=True,
    )
    states = frame.attrs.pop("states")["transformer"]  # per layer (n_samples, n, d)
    ids = {"model": unit["model"], "init": unit["init"]}
    rows = [frame.assign(**ids, index=np.nan)]
    for layer, x in enumerate(states):
        s = torch.linalg.svdvals(x.double())  # (n_samples, min(n, d))
        rel = (s / s[:, :1]).numpy()
        rows.append(
            pd.DataFrame(
                {**ids, "layer": layer, "sample": np.arange(len(s)), "metric": "min_sv_rel",
                 "value": rel[:, -1], "index": np.nan}
            )
        )  # fmt: skip
        for sample in range(min(config.n_spectra, len(s))):
            rows.append(
                pd.DataFrame(
                    {**ids, "layer": layer, "sample": sample, "metric": "sv",
                     "value": rel[sample], "index": np.arange(rel.shape[1])}
                )
            )  # fmt: skip
    out = pd.concat(rows, ignore_index=True)
    out["full_rank"] = min(config.n_tokens, int(states[0].shape[-1]))
    out["at_floor"] = out["at_floor"].fillna(False).astype(bool)
    return out[["model", "init", "layer", "sample", "index", "metric", "value", "at_floor",
                "full_rank"]]  # fmt: skip


def summarize(config: Config, results: pd.DataFrame) -> Summary:
    summary = Summary()
    per_layer = results[results["metric"].isin(METRICS + ["min_sv_rel"])]
    table = (
        per_layer.groupby(["model", "init", "layer", "metric"])["value"]
        .median()
        .unstack("metric")
        .reset_index()
    )
    summary.tables["geometry_per_layer_median"] = table
    blocks = per_layer[per_layer["layer"] >= 1]
    for (model, init), part in blocks.groupby(["model", "init"], sort=False):
        label = f"{model}/{init}"
        ranks = part[part["metric"] == "numerical_rank"]
        summary.claims.append(
            Claim.check(
                f"full-rank@{label}",
                "The hidden states keep full rank at every layer (block outputs).",
                "fraction of (layer, sample) states with numerical rank min(n_tokens, d_model)",
                (ranks["value"] >= ranks["full_rank"]).mean(),
                ">=",
                1.0,
            )
        )
        min_sv = part[part["metric"] == "min_sv_rel"].groupby("layer")["value"].median()
        summary.claims.append(
            Claim.check(
                f"min-sv-away@{label}",
                "The minimum singular value stays well away from 0 at every layer (block outputs).",
                "smallest (over layers) median sigma_min / sigma_max",
                min_sv.min(),
                ">",
                MIN_SV_REL,
            )
        )
        cos = part[part["metric"] == "abs_cos_mean"].groupby("layer")["value"].mean()
        summary.claims.append(
            Claim.check(
                f"cos-grows@{label}",
                "The mean |cosine| between tokens grows with depth (anisotropy).",
                "Spearman correlation of layer and mean |cos|",
                _spearman(cos.index.to_numpy(float), cos.to_numpy()),
                ">",
                0.0,
                note=f"layer 1: {cos.iloc[0]:.3f}, last layer: {cos.iloc[-1]:.3f}",
            )
        )
    for metric in ["abs_cos_mean", "min_sv_rel", "stable_rank", "numerical_rank"]:
        rows = per_layer[per_layer["metric"] == metric]
        summary.figures[metric] = line_plot(
            rows.assign(model=rows["model"] + " (" + rows["init"] + ")"),
            x="layer",
            hue="model",
            logy=metric == "min_sv_rel",
            title=f"{metric} against layer (mean over samples)",
            ylabel=metric,
        )
    layer0 = per_layer[(per_layer["layer"] == 0) & (per_layer["metric"] == "numerical_rank")]
    deficient = layer0[layer0["value"] < layer0["full_rank"]]
    for model, part in deficient.groupby("model"):
        summary.notes.append(
            f"{model}: the embedding output (layer 0) is rank-deficient in {len(part)} of "
            f"{(layer0['model'] == model).sum()} samples (lowest rank {part['value'].min():g}); "
            "left out of the claims (see the experiment's docstring)."
        )
    spectra = results[results["metric"] == "sv"]
    if not spectra.empty:
        summary.figures["singular_spectra"] = _spectra_figure(spectra)
    return summary


def _spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman rank correlation (ties broken by order; NaN for fewer than 3 points)."""
    if len(x) < 3:
        return float("nan")
    return float(np.corrcoef(np.argsort(np.argsort(x)), np.argsort(np.argsort(y)))[0, 1])


def _spectra_figure(spectra: pd.DataFrame) -> Figure:
    """sigma_i / sigma_1 of sample 0 at a few layers, one panel per model."""
    keys = list(spectra.groupby(["model", "init"], sort=False).groups)
    fig = Figure(figsize=(4.0 * len(keys), 3.4), layout="constrained")
    axes = fig.subplots(1, len(keys), squeeze=False, sharey=True)[0]
    for ax, (model, init) in zip(axes, keys):
        part = spectra[(spectra["model"] == model) & (spectra["init"] == init)]
        part = part[part["sample"] == 0]
        layers = sorted(part["layer"].unique())
        shown = sorted({layers[0], layers[len(layers) // 2], layers[-1]})
        for i, layer in enumerate(shown):
            curve = part[part["layer"] == layer].sort_values("index")
            ax.plot(curve["index"], curve["value"], color=f"C{i}", label=f"layer {layer}")
        ax.set_yscale("log")
        ax.set_title(f"{model} ({init})", fontsize=10)
        ax.set_xlabel("index i")
        ax.legend(fontsize=7)
    axes[0].set_ylabel("sigma_i / sigma_1 (sample 0)")
    fig.suptitle("Singular spectra of the hidden states", fontsize=10)
    return fig


register(
    Experiment(
        name=NAME,
        description="Wu 2024: pretrained models keep full rank and sigma_min > 0 while mean "
        "|cos| grows with depth (random-init BERT and GPT-2 for contrast)",
        config=Config,
        presets=PRESETS,
        units=units,
        run_unit=run_unit,
        summarize=summarize,
    )
)
