"""paths-by-length: exact per-length path components of toy and real transformers.

Paper: Dong, Cordonnier, Loukas 2021 (arXiv 2103.03404), Sec. 3: the
output of a self-attention network is a sum over paths, and the total of the paths of each
length k can be computed exactly without enumerating them. Going further than the paper, the
same is done for full pretrained transformers (BERT family, Llama family) by freezing, from the
forward pass, the attention probabilities, every norm's per-token scale and every MLP's
activation gate (see `rankcollapse.paths.real`); the MLP is one more branch that keeps a path's
length. Also the "chained attention" analysis: for uniformly sampled paths of each length, the
relative distance of P_path = P^L_{h_L} ... P^1_{h_1} to its best rank-1 approximation.

Per model and length k = 0..L (and the bias term, length -1): the component's Frobenius norm,
`norm_ratio` = ||C_k|| / ||X^L||, `share` = <C_k, X^L> / ||X^L||^2 (shares add up to 1), and
collapse metrics of the component (res_comp_rel, mu_rel, stable_rank); `exact_error` = max |sum
of components + bias - real output| / max |output|; `rank1_dist` of sampled path products.

Checks (they hold by construction, so they are no evidence for the paper):
- long-products-near-rank-one: for every model, the attention products of the longest paths
  are closer to rank 1 than single heads (median rank1_dist at length L / at length 1 < 1).
  Products of row-stochastic matrices with positive entries always contract towards rank 1
  (softmax attention has every entry > 0), so this guards the sampling code, it does not test
  the paper.
- toy-decomposition-exact / real-decomposition-exact: the components add up to the output to
  float64 rounding (real models run in float64; Llama's RMSNorm computes in float32 inside a
  float64 model, so its level is float32's).
- pure-san-single-length: a pure SAN has all of its output at length L (the recursion has no
  other term).
"""

from __future__ import annotations

from typing import Literal

import pandas as pd
from pydantic import ConfigDict, Field, field_validator

from rankcollapse.experiments._registry import Experiment, Summary, Unit, register, toy_sizes
from rankcollapse.experiments.verdicts import Claim, check
from rankcollapse.paths import length_summary
from rankcollapse.plot import length_figures
from rankcollapse.seeds import Seed
from rankcollapse.sizes import NPaths

NAME = "paths-by-length"

ToyVariant = Literal["san", "san+skip", "san+skip+ln", "transformer"]
# Toy variant of `rankcollapse.nets` and options on top (biases give the bias term a value).
TOY: dict[ToyVariant, tuple[str, dict]] = {
    "san": ("san", {}),
    "san+skip": ("san+skip", {}),
    "san+skip+ln": ("san+skip", {"norm": "post", "bias": True}),
    "transformer": ("transformer", {"activation": "gelu", "bias": True}),
}
TOY_EXACT = 1e-12
REAL_EXACT = 1e-5  # float32 level: Llama's RMSNorm runs in float32 even in a float64 model


class Config(
    toy_sizes(n_layers=6, n_heads=2, d_model=32, n_tokens=16, n_samples=4)  # type: ignore[misc]
):
    """Toy networks and real models, decomposed by path length on the same inputs.

    n_layers, n_heads, d_model size the toy networks; real models keep their own.
    """

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    toy_variants: list[ToyVariant] = Field(default_factory=lambda: list(TOY))
    """Toy variants: san, san+skip, san+skip+ln (post-LN), transformer (skip + MLP + post-LN)."""
    models: list[str] = Field(default_factory=lambda: ["minilm:pretrained", "llama-small:random"])
    """Real models as name:init (names of rankcollapse.hf.MODELS; every family decomposes)."""
    n_paths: NPaths = Field(8, le=1000)
    """Sampled paths per length for the attention-product analysis."""
    seeds: list[Seed] = Field(default_factory=lambda: [0], min_length=1)
    """Seeds of toy weights, inputs and path samples."""

    @field_validator("models")
    @classmethod
    def _models_decompose(cls, models: list[str]) -> list[str]:
        from rankcollapse.hf import model_entry  # the model registry (imports transformers)

        for entry in models:
            model_entry(entry, decomposable=True)  # raises for a model that does not decompose
        return models


PRESETS = {
    "quick": {},
    "paper": {
        "n_layers": 12,
        "n_heads": 12,
        "d_model": 768,
        "models": [
            "minilm:pretrained",
            "minilm:random",
            "bert-base:random",
            "smollm2:pretrained",
            "llama-small:random",
        ],
        "n_tokens": 128,
        "n_samples": 8,
        "n_paths": 20,
        "seeds": [0, 1, 2],
    },
}


def units(config: Config) -> list[Unit]:
    toys = [
        {"model": f"toy-{v}", "init": "random", "seed": s}
        for v in config.toy_variants
        for s in config.seeds
    ]
    from rankcollapse.hf import model_entry

    reals = [
        {"model": name, "init": init, "seed": config.seeds[0]}
        for name, init in map(model_entry, config.models)
    ]
    return toys + reals


def _toy(config: Config, unit: Unit):
    from rankcollapse.nets import ToyNet, random_tokens, toy_config
    from rankcollapse.paths import freeze_toy
    from rankcollapse.seeds import stream_seed

    variant, options = TOY[unit["model"].removeprefix("toy-")]
    size = {"n_layers": config.n_layers, "n_heads": config.n_heads, "d_model": config.d_model}
    net = ToyNet(toy_config(variant, **size, seed=unit["seed"], **options))
    seed = stream_seed(unit["seed"], "data")
    return freeze_toy(
        net, random_tokens(config.n_samples, config.n_tokens, config.d_model, seed=seed)
    )


def _real(config: Config, unit: Unit):
    import torch

    from rankcollapse.hf import load_resolved
    from rankcollapse.measure import ProbeInputs
    from rankcollapse.paths import freeze_real

    loaded = load_resolved(  # an exact decomposition: float64, on the CPU
        unit["model"],
        init=unit["init"],
        seed=unit["seed"],
        device=torch.device("cpu"),
        dtype=torch.float64,
    )
    inputs, token_mask = ProbeInputs(  # text windows; random ids without a tokenizer; pixels
        random_tokens=not loaded.has_tokenizer,
        n_samples=config.n_samples,
        n_tokens=config.n_tokens,
        seed=unit["seed"],
    ).build(loaded)
    return freeze_real(loaded, inputs, token_mask)


def run_unit(config: Config, unit: Unit) -> pd.DataFrame:
    from rankcollapse.paths import (
        decompose_by_length,
        exact_error_frame,
        length_frame,
        products_frame,
    )

    frozen = _toy(config, unit) if unit["model"].startswith("toy-") else _real(config, unit)
    result = decompose_by_length(frozen)
    products = products_frame(frozen.attention(), n_paths=config.n_paths, seed=unit["seed"])
    exact = exact_error_frame(result, frozen.reference)
    frame = pd.concat([length_frame(result), exact, products], ignore_index=True)
    return frame.assign(**unit)[[*unit, *frame.columns]]


def _labelled(results: pd.DataFrame) -> pd.DataFrame:
    return results.assign(label=results["model"] + " (" + results["init"] + ")")


def rank1_ratios(results: pd.DataFrame) -> pd.Series:
    """Per model: median rank1_dist of sampled path products at length L / at length 1."""
    medians = length_summary(_labelled(results), by="label")[1]
    return medians.apply(lambda row: row.dropna().iloc[-1] / row.dropna().iloc[0], axis=1)


def claims(config: Config, results: pd.DataFrame) -> list[Claim]:
    found = []
    error = _labelled(results[results["metric"] == "exact_error"])
    is_toy = error["model"].str.startswith("toy-")
    for subset, claim_id, level, scope in (
        (error[is_toy], "toy-decomposition-exact", TOY_EXACT, "toy networks"),
        (error[~is_toy], "real-decomposition-exact", REAL_EXACT, "real models (float64)"),
    ):
        if len(subset):
            worst = subset.groupby("label")["value"].max()
            found.append(
                check(
                    claim_id,
                    f"Components plus bias equal the output of {scope}.",
                    "max relative error of sum of components + bias vs the real output",
                    float(worst.max()),
                    "<",
                    level,
                    note="; ".join(f"{k}: {v:.2g}" for k, v in worst.items()),
                )
            )
    share = results[results["metric"] == "share"]
    if "san" in config.toy_variants:
        san = share[(share["model"] == "toy-san") & (share["length"] == config.n_layers)]
        found.append(
            check(
                "pure-san-single-length",
                "A pure SAN's output is all at length L.",
                "max |share of length L - 1| (toy-san)",
                float((san["value"] - 1).abs().max()),
                "<",
                1e-12,
            )
        )
    expected = list(dict.fromkeys(f"{u['model']} ({u['init']})" for u in units(config)))
    ratios = rank1_ratios(results).reindex(expected)  # a missing model: NaN, the check fails
    found.append(
        check(
            "long-products-near-rank-one",
            "Longer chains of attention are closer to rank 1: products of positive "
            "row-stochastic matrices contract (it holds by construction).",
            "largest over models of median rank1_dist at length L / at length 1",
            float(ratios.max(skipna=False)) if len(ratios) else float("nan"),
            "<",
            1.0,
            note=", ".join(f"{m}: {v:.3g}" for m, v in ratios.items()),
        )
    )
    return found


def summarize(config: Config, results: pd.DataFrame) -> Summary:
    results = _labelled(results)
    table, medians = length_summary(results, by="label")
    return Summary(
        tables={"per-length means": table, "median rank1_dist": medians.reset_index()},
        figures=length_figures(results),
        claims=claims(config, results),
        notes=[
            (
                "What is frozen, and why the sum is exact: docs/methods.md, sec. 5. Biases form "
                "the separate bias term (length -1 in the tables); an MLP branch keeps a path's "
                "length. Real models run in float64; Llama's RMSNorm runs in float32 internally, "
                "which sets its exact_error at float32's level."
            )
        ],
    )


register(
    Experiment(
        name=NAME,
        description="Exact per-length path components (norms, shares, collapse) and attention "
        "products, toy and real models.",
        config=Config,
        presets=PRESETS,
        units=units,
        run_unit=run_unit,
        summarize=summarize,
        claims=claims,
    )
)
