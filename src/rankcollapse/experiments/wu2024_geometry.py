"""wu2024-geometry: pretrained models keep full rank but grow anisotropic with depth.

Paper: Wu, Ajorlou, Wang, Jegelka, Jadbabaie, NeurIPS 2024 (arXiv 2405.18781), the geometry
of pretrained models (docs/wu2024.md), where BERT, GPT-2, T5 and ALBERT are shown to keep full
rank and a minimum singular value away from 0 while the mean |cosine| between tokens rises
with depth, like the anisotropic Theorem 3 equilibria.

Models: any `rankcollapse.hf` names in `models` (adding an encoder such as T5 is a config
change once `rankcollapse.hf` supports it): pretrained `minilm` (BERT encoder) and `smollm2`
(Llama decoder), and for contrast `bert-base` and `gpt2` at their library default random init
(`random_init`), unmodified (the `transformer` variant, the model's own mask), eval mode, on
windows of the built-in corpus. Per layer
(layer 0 = embedding output; every layer is a raw residual-stream state, never a final-norm
output: see `rankcollapse.measure.probe`): `numerical_rank`, `min_sv`, `stable_rank`,
`abs_cos_mean`, `mu_rel` and `min_sv_rel` = sigma_min / sigma_max from the metric suite (flagged
`at_floor` by its floor rule), plus the full normalised singular spectrum sigma_i / sigma_1 of
the first `n_spectra` samples (metric `sv`, index in column `index`), from a float64 SVD of
the captured states; a ratio at most the rounding floor of the model's dtype
(`rankcollapse.metrics.dtype_floor`) is flagged `at_floor`.

Findings, per pretrained model, over the block outputs (layers >= 1): the embedding output is
not a transformer state, and in a model without absolute position embeddings (SmolLM2: RoPE
acts inside attention) a window with a repeated token has two identical embedding rows, so
layer 0 can be rank-deficient for a reason that has nothing to do with attention; its numbers
stay in the tables and figures.

Degenerate windows: a window whose first tokens repeat (e.g. two newlines, [198, 198]) has
identical leading rows in a causal model without absolute positions at *every* layer (each
leading state attends only to identical states), so it is rank-deficient by construction of the
input, not by attention. Each sample records `repeated_leading_rows` (how many of its leading
embedding rows equal row 0, besides row 0); samples with any are left out of the findings, and
each finding's note says how many.
Each is decided by the one rule (`experiments.verdicts`) over the windows (`per_window`):
- full-rank@model: the share of blocks at numerical rank min(n_tokens, d_model) > 0.9.
- min-sv-away@model: log10 of the window's smallest sigma_min / sigma_max > -4 (100x the
  float32 floor).
- cos-grows@model: the Spearman correlation of layer and the window's mean |cos| > 0.5 (a
  clear trend, not any positive correlation).
The random-init models get the same measurements in the summary table, for contrast (the paper
states nothing about them, so they are not findings).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch
from pydantic import BaseModel, ConfigDict, Field, model_validator

from rankcollapse.devices import Device, Dtype
from rankcollapse.errors import unknown_name
from rankcollapse.experiments._registry import Experiment, Summary, Unit, register
from rankcollapse.experiments.verdicts import Claim, Quote, finding
from rankcollapse.hf import MODELS, load_resolved
from rankcollapse.measure import probe
from rankcollapse.metrics import dtype_floor
from rankcollapse.plot import band_plot, line_plot, singular_spectra
from rankcollapse.seeds import Seed
from rankcollapse.sizes import NSamples, NTokens

NAME = "wu2024-geometry"
WHERE = "Fig. 4 (caption; pretrained models)"
FULL_RANK = "tokens are indeed able to maintain full rank"
ANISOTROPY = (
    "the representations are anisotropic, meaning that they concentrate in a narrow region, as "
    "indicated by the average pairwise absolute cosine similarities"
)
DECIDES = "the paper preset (32 windows of 128 tokens; CPU, about 2 minutes)"
METRICS = ["numerical_rank", "min_sv", "min_sv_rel", "stable_rank", "abs_cos_mean", "mu_rel"]
MIN_SV_REL = 1e-4
RISES = 0.5  # Spearman correlation of layer and mean |cos| that counts as rising with depth


class Config(BaseModel):
    """Models and sizes of the geometry measurements."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    models: list[str] = Field(["minilm", "smollm2", "bert-base", "gpt2"], min_length=1)
    """Names of rankcollapse.hf models (pretrained unless listed in random_init)."""
    random_init: list[str] = ["bert-base", "gpt2"]
    """Models run at their library default random init, for contrast."""
    n_samples: NSamples = 32
    """Text windows per model."""
    n_tokens: NTokens = Field(128, ge=4)
    """Tokens per window."""
    n_spectra: int = Field(3, ge=0)
    """Samples whose full singular spectrum is kept per layer."""
    seed: Seed = 0
    """Seed of the random inits and the window choice."""
    device: Device = torch.device("cpu")
    """Where the models run (auto: an accelerator when one is visible)."""
    dtype: Dtype = torch.float32
    """Parameter dtype of the models (metrics are float64, flagged at this dtype's floor)."""

    @model_validator(mode="after")
    def _known_models(self) -> Config:
        for name in self.models + self.random_init:
            if name not in MODELS:
                raise unknown_name("model", name, list(MODELS))
        return self


PRESETS = {
    "quick": {"n_samples": 4, "n_tokens": 64},
    "paper": {},
}


def units(config: Config) -> list[Unit]:
    init = {m: "random" if m in config.random_init else "pretrained" for m in config.models}
    return [{"model": m, "init": init[m]} for m in config.models]


def run_unit(config: Config, unit: Unit) -> pd.DataFrame:
    device = config.device
    loaded = load_resolved(
        unit["model"],
        init=unit["init"],
        seed=config.seed,
        device=device,
        dtype=config.dtype,
    )
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
    rows.append(_repeated_leading_rows(states[0], ids))
    for layer, x in enumerate(states):
        s = torch.linalg.svdvals(x.double())  # (n_samples, min(n, d))
        rel = (s / s[:, :1]).cpu().numpy()
        floor = dtype_floor(x.dtype)  # the rounding floor of the dtype the model ran in
        for sample in range(min(config.n_spectra, len(s))):
            rows.append(
                pd.DataFrame(
                    {
                        **ids,
                        "layer": layer,
                        "sample": sample,
                        "metric": "sv",
                        "value": rel[sample],
                        "index": np.arange(rel.shape[1]),
                        "at_floor": rel[sample] <= floor,
                    }
                )
            )
    out = pd.concat(rows, ignore_index=True)
    out["full_rank"] = min(config.n_tokens, int(states[0].shape[-1]))
    out["at_floor"] = out["at_floor"].fillna(False).astype(bool)
    out["device"] = str(device)
    return out[
        [
            "model",
            "init",
            "layer",
            "sample",
            "index",
            "metric",
            "value",
            "at_floor",
            "full_rank",
            "device",
        ]
    ]


def _repeated_leading_rows(x: torch.Tensor, ids: dict) -> pd.DataFrame:
    """Per sample: how many rows after row 0 repeat row 0 without a break (embedding output)."""
    same = (x[:, 1:] == x[:, :1]).all(dim=-1)  # (n_samples, n - 1)
    run = torch.cumprod(same.int(), dim=1).sum(dim=1).cpu().numpy()
    return pd.DataFrame(
        {
            **ids,
            "layer": 0,
            "sample": np.arange(len(run)),
            "metric": "repeated_leading_rows",
            "value": run.astype(float),
            "index": np.nan,
            "at_floor": False,
        }
    )


def degenerate_samples(results: pd.DataFrame) -> pd.DataFrame:
    """(model, init, sample) of the windows whose leading tokens repeat."""
    part = results[(results["metric"] == "repeated_leading_rows") & (results["value"] > 0)]
    return part[["model", "init", "sample"]].drop_duplicates()


def per_model(results: pd.DataFrame) -> pd.DataFrame:
    """One row per (model, init) over the block outputs (layers >= 1) of the non-degenerate
    windows: the claims' numbers."""
    keys = ["model", "init", "sample"]
    left_out = degenerate_samples(results).assign(degenerate=True)
    blocks = results[results["layer"] >= 1].merge(left_out, on=keys, how="left")
    degenerate = blocks["degenerate"].fillna(False).astype(bool)
    rows = []
    for (model, init), part in blocks[~degenerate].groupby(["model", "init"], sort=False):
        ranks = part[part["metric"] == "numerical_rank"]
        min_sv = part[part["metric"] == "min_sv_rel"]["value"]
        cos = part[part["metric"] == "abs_cos_mean"].groupby("layer")["value"].mean()
        dropped = left_out[(left_out["model"] == model) & (left_out["init"] == init)]
        rows.append(
            {
                "model": model,
                "init": init,
                "blocks": part["layer"].nunique(),
                "samples": part["sample"].nunique(),
                "degenerate_samples": len(dropped),
                "full_rank_share": (ranks["value"] >= ranks["full_rank"]).mean(),
                "min_sv_rel": min_sv.min(),
                "median_sv_rel": min_sv.median(),
                "cos_first_block": cos.iloc[0] if len(cos) else np.nan,
                "cos_last_layer": cos.iloc[-1] if len(cos) else np.nan,
                "spearman_cos_layer": _spearman(cos.index.to_numpy(float), cos.to_numpy()),
            }
        )
    return pd.DataFrame(rows)


def per_window(results: pd.DataFrame) -> pd.DataFrame:
    """One row per pretrained (model, sample) over the block outputs (layers >= 1) of the
    non-degenerate windows: the findings' units. Columns: model, sample, full_rank_share
    (share of blocks at numerical rank min(n_tokens, d_model)), log10_min_sv_rel (log10 of the
    window's smallest sigma_min / sigma_max), spearman_cos (Spearman correlation of layer and
    the window's mean |cos|)."""
    keys = ["model", "init", "sample"]
    left_out = degenerate_samples(results).assign(degenerate=True)
    blocks = results[(results["layer"] >= 1) & (results["init"] == "pretrained")]
    blocks = blocks.merge(left_out, on=keys, how="left")
    blocks = blocks[~blocks["degenerate"].fillna(False).astype(bool)]
    rows = []
    for (model, sample), part in blocks.groupby(["model", "sample"], sort=False):
        ranks = part[part["metric"] == "numerical_rank"]
        cos = part[part["metric"] == "abs_cos_mean"].sort_values("layer")
        rows.append(
            (
                model,
                sample,
                (ranks["value"] >= ranks["full_rank"]).mean(),
                float(np.log10(part.loc[part["metric"] == "min_sv_rel", "value"].min())),
                _spearman(cos["layer"].to_numpy(float), cos["value"].to_numpy()),
            )
        )
    return pd.DataFrame(
        rows, columns=["model", "sample", "full_rank_share", "log10_min_sv_rel", "spearman_cos"]
    )


def claims(config: Config, results: pd.DataFrame) -> list[Claim]:
    found = []
    windows = per_window(results)
    for r in per_model(results).itertuples():
        if r.init != "pretrained":
            continue
        left_out = (
            f"{r.degenerate_samples} of {r.samples + r.degenerate_samples} windows left out: "
            "their leading tokens repeat, so their leading states are identical in a causal "
            "model at every layer (the input's doing, not attention's)"
            if r.degenerate_samples
            else f"all {r.samples} windows used"
        )
        mine = windows[windows["model"] == r.model]
        found += [
            finding(
                f"full-rank@{r.model}",
                says=Quote(FULL_RANK, WHERE),
                text="The hidden states keep full rank at every layer (block outputs).",
                quantity="share of block outputs at numerical rank min(n_tokens, d_model), per "
                "window (units: windows)",
                values=mine["full_rank_share"],
                side=">",
                margin=0.9,  # full rank at (almost) every block: a drop in 1 block of 10 fails
                note=left_out,
                decides=DECIDES,
            ),
            finding(
                f"min-sv-away@{r.model}",
                says=Quote(FULL_RANK, WHERE),
                text="The minimum singular value stays well away from 0 at every layer "
                "(block outputs).",
                quantity="log10 of the smallest sigma_min / sigma_max over a window's blocks "
                "(units: windows)",
                values=mine["log10_min_sv_rel"],
                side=">",
                margin=float(np.log10(MIN_SV_REL)),  # 100 x the float32 floor
                note=f"median over layers and windows {r.median_sv_rel:.3g}; {left_out}",
                decides=DECIDES,
            ),
            finding(
                f"cos-grows@{r.model}",
                says=Quote(ANISOTROPY, WHERE),
                text="The mean |cosine| between tokens grows with depth (anisotropy).",
                quantity="Spearman correlation of layer and a window's mean |cos| (units: windows)",
                values=mine["spearman_cos"],
                side=">",
                margin=RISES,  # a clear rise with depth, not any positive correlation
                note=f"first block: {r.cos_first_block:.3f}, last layer: {r.cos_last_layer:.3f}; "
                + left_out,
                decides=DECIDES,
            ),
        ]
    return found


def summarize(config: Config, results: pd.DataFrame) -> Summary:
    summary = Summary(claims=claims(config, results))
    per_layer = results[results["metric"].isin(METRICS)]
    summary.tables["per model (block outputs)"] = per_model(results)
    summary.tables["per layer (median over samples)"] = (
        per_layer.groupby(["model", "init", "layer", "metric"])["value"]
        .median()
        .unstack("metric")
        .reset_index()
    )
    labelled = per_layer.assign(model=per_layer["model"] + " (" + per_layer["init"] + ")")
    for metric, ylabel in (
        ("abs_cos_mean", "mean |cosine| between tokens"),
        ("min_sv_rel", "sigma_min / sigma_max"),
        ("stable_rank", "stable rank"),
    ):
        summary.figures[metric] = band_plot(
            labelled[labelled["metric"] == metric],
            x="layer",
            hue="model",
            logy=metric == "min_sv_rel",
            title=f"{ylabel} against layer (mean over samples)",
            ylabel=ylabel,
            band=None,
            floor_column="at_floor" if metric == "min_sv_rel" else None,
        )
    ranks = labelled[labelled["metric"] == "numerical_rank"]
    # every model sits at full rank: one panel each, or the lines hide one another
    summary.figures["numerical_rank"] = line_plot(
        ranks.assign(value=ranks["value"] / ranks["full_rank"]),
        x="layer",
        panel="model",
        title="numerical rank / min(n_tokens, d_model) against layer (mean over samples)",
        ylabel="rank / full rank",
    )
    layer0 = per_layer[(per_layer["layer"] == 0) & (per_layer["metric"] == "numerical_rank")]
    deficient = layer0[layer0["value"] < layer0["full_rank"]]
    for model, part in deficient.groupby("model"):
        summary.notes.append(
            f"{model}: the embedding output (layer 0) is rank-deficient in {len(part)} of "
            f"{(layer0['model'] == model).sum()} samples (lowest rank {part['value'].min():g}); "
            "left out of the findings (see the experiment's docstring)."
        )
    spectra = results[results["metric"] == "sv"]
    if not spectra.empty:
        summary.figures["singular_spectra"] = singular_spectra(spectra)
    return summary


def _spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman rank correlation (ties broken by order; NaN for fewer than 3 points)."""
    if len(x) < 3:
        return float("nan")
    return float(np.corrcoef(np.argsort(np.argsort(x)), np.argsort(np.argsort(y)))[0, 1])


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
        claims=claims,
    )
)
