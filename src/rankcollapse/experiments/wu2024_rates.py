"""wu2024-rates: measured exponential collapse per attention mask against Wu et al.'s bound.

Paper: Wu, Ajorlou, Wang, Jegelka, Jadbabaie, NeurIPS 2024 (arXiv 2405.18781), Thm 1 and
Cor 1; docs/wu2024.md. For a quasi-strongly connected mask of radius r whose allowed attention
weights stay >= eps: mu(X^t) <= C (1 - eps^r)^{t/r} without LayerNorm; with Wu's LayerNorm,
orthogonal W_V and n center nodes: mu(X^t) <= C (1 - n eps^{2r})^{t/(2r)}.

Network: the toy pure SAN (one head, orthogonal value weights so that mu changes only through
the attention), without norm (`wu:san`) and with the unit-sphere norm (`wu:san+ln`), per mask
and seed. Measured per layer: mu, mu_rel and eps_l, the smallest allowed attention weight the
layer produced (over samples). The bound (`rankcollapse.theory.block_log_bound`) contracts by
1 - eps_b^r per block of r layers with eps_b the block's smallest eps (what the theorem's proof
uses), and C is fitted on the first r layers (`bound_excess`): the bound then predicts every
later layer from the attention actually seen. Measured slope: `rankcollapse.theory.collapse_rate`.

Findings:
- bound-is-upper: for every mask and seed (no norm), mu stays below C B_t at every layer after
  the first r, up to the dtype floor (largest log excess <= 0). Tested only where it can fail
  by its rate: a mask whose bound predicts less than one decade of contraction over the fitted
  layers (a large radius makes eps^r tiny, and the bound then only says that mu does not rise
  above its early values) is excluded by name; with every mask excluded the finding is NOT
  TESTED (preset too small: more layers would decide it).
- cor1-rate-with-ln: Cor 1, with Wu's LayerNorm and orthogonal W_V, for every strongly connected
  mask (N <= d, full-rank Gaussian inputs: the corollary's first case) and seed: mu collapses at
  least as fast as the corollary's rate, measured slope <= log(1 - N eps^{2r}) / (2r) with eps
  the unit's smallest allowed weight. Masks that are only quasi-strongly connected are excluded
  by name: their case needs all initial cosines >= 0, which Gaussian inputs do not have; so are
  masks whose rate predicts less than a decade over the fitted layers (as for bound-is-upper).
- local-masks-slower: the complete mask collapses faster than the causal window of width 1
  (speed ratio of the two slopes > 1 for every seed; only defined when both are < 0).
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import pandas as pd
import torch
from pydantic import ConfigDict, Field

from rankcollapse.experiments._registry import (
    TOO_SMALL,
    Claim,
    Experiment,
    Summary,
    Unit,
    finding,
    for_every,
    register,
    seeds_agree,
    toy_sizes,
)
from rankcollapse.masks import MaskSpec, center_nodes, parse_mask_spec
from rankcollapse.metrics import measure_layers
from rankcollapse.nets import ToyNet, random_tokens, toy_config
from rankcollapse.plot import wu_bound_figure
from rankcollapse.seeds import Seed, stream_seed
from rankcollapse.theory import (
    block_log_bound,
    bound_excess,
    collapse_rate,
    layer_eps,
    mask_radius,
    rate_unit_norm,
    speed_ratio,
)
from rankcollapse.variants import VARIANTS

NAME = "wu2024-rates"
VARIANT = {"none": VARIANTS["wu:san"], "unit": VARIANTS["wu:san+ln"]}  # norm -> toy variant
SOURCE = "Thm 1"
INFORMATIVE = math.log(10)  # a bound that predicts less contraction than a decade cannot fail


class Config(toy_sizes(n_layers=32, d_model=16, n_tokens=8, n_samples=8)):
    """Masked pure SANs: measured collapse of mu per mask, beside Wu et al.'s bound."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    masks: list[MaskSpec] = Field(
        [parse_mask_spec(s) for s in ("complete", "causal", "window:1", "causal_window:1")],
        min_length=1,
    )
    """Mask specs (rankcollapse.masks), e.g. complete, causal, window:1, causal_window:1."""
    norms: list[Literal["none", "unit"]] = Field(["none", "unit"])
    """none (Thm 1) and/or unit (Wu's LayerNorm, post; Cor 1)."""
    seeds: list[Seed] = Field([0, 1], min_length=1)
    """Seeds of weights and (their data stream) inputs."""


PRESETS = {
    "quick": {},
    "paper": {"n_layers": 128, "d_model": 64, "n_tokens": 32, "n_samples": 32, "seeds": [0, 1, 2]},
}


def units(config: Config) -> list[Unit]:
    return [
        {"mask": m, "norm": n, "seed": s}
        for m in config.masks
        for n in config.norms
        for s in config.seeds
    ]


def run_unit(config: Config, unit: Unit) -> pd.DataFrame:
    sizes = {"n_layers": config.n_layers, "d_model": config.d_model, "mask": unit["mask"]}
    net = ToyNet(
        toy_config(VARIANT[unit["norm"]], **sizes, value_init="orthogonal", seed=unit["seed"])
    )
    x = random_tokens(
        config.n_samples, config.n_tokens, config.d_model, seed=stream_seed(unit["seed"], "data")
    )
    with torch.no_grad():
        trace = net(x, return_attention=True)
    frame = measure_layers(trace.states, metrics=["mu", "mu_rel"], source_dtype=net.dtype)
    eps = layer_eps(trace.attention, unit["mask"].build(config.n_tokens))
    eps_rows = pd.DataFrame(
        {
            "layer": np.arange(1, len(eps) + 1),
            "sample": -1,
            "metric": "eps",
            "value": eps,
            "at_floor": False,
        }
    )
    frame = pd.concat([frame, eps_rows], ignore_index=True)
    return frame.assign(**unit)[
        ["mask", "norm", "seed", "layer", "sample", "metric", "value", "at_floor"]
    ]


def curve_table(config: Config, results: pd.DataFrame) -> pd.DataFrame:
    """One row per (mask, norm, seed): graph facts, eps, the measured slope and the bound's.

    bound_slope: the bound's mean log factor per layer over the fitted layers; excess: how far
    log mu rises above the bound fitted on the first r layers (no norm; NaN with the unit norm,
    whose Cor 1 bound is drawn from the smallest eps of the unit: `bound_slope` only).
    """
    rows = []
    results = results.astype({"at_floor": bool})
    specs = {str(spec): spec for spec in config.masks}
    for (mask, norm, seed), part in results.groupby(["mask", "norm", "seed"], sort=False):
        r = mask_radius(specs[mask], config.n_tokens)
        mu, eps = part[part["metric"] == "mu"], part[part["metric"] == "eps"].sort_values("layer")
        rate = collapse_rate(mu)
        log_mu = np.log(mu["value"].clip(lower=1e-300)).groupby(mu["layer"]).mean().to_numpy()
        row = {
            "mask": mask,
            "norm": norm,
            "seed": seed,
            "radius": r,
            "eps_min": eps["value"].min(),
            "slope": rate.slope,
            "fit_layers": rate.n_fit,
            "excess": math.nan,
        }
        if math.isinf(r) or eps.empty:
            row["bound_slope"] = math.nan
        elif norm == "none":
            log_b = block_log_bound(eps["value"].to_numpy(), int(r))
            n = max(rate.n_fit, 1)
            row["bound_slope"] = log_b[n - 1] / max(n - 1, 1)
            row["excess"] = bound_excess(log_mu[:n], log_b, int(r))
        else:
            n_centers = len(center_nodes(specs[mask].build(config.n_tokens)))
            row["bound_slope"] = rate_unit_norm(row["eps_min"], int(r), n_centers)
        rows.append(row)
    return pd.DataFrame(rows)


def claims(config: Config, results: pd.DataFrame) -> list[Claim]:
    table = curve_table(config, results)
    plain = table[table["norm"] == "none"]
    found = []
    if "unit" in config.norms:
        found.append(_cor1_claim(config, table[table["norm"] == "unit"]))
    if "none" not in config.norms:
        return found
    members = {f"{r.mask}/seed {r.seed}": r.excess for r in plain.itertuples()}
    expected = [f"{m}/seed {s}" for m in config.masks for s in config.seeds]
    excluded = {
        f"{m}/seed {s}": "no center node"
        for m in config.masks
        for s in config.seeds
        if math.isinf(mask_radius(m, config.n_tokens))
    }
    excluded = {**_uninformative(plain), **excluded}
    untested = ""
    if all(name in excluded for name in expected):
        untested = f"{TOO_SMALL}: no mask's bound predicts a decade of contraction in this run"
    looseness = "; ".join(
        f"{r.mask}: bound {r.bound_slope:.2g}/layer vs measured {r.slope:.2g}/layer"
        for r in plain.groupby("mask", sort=False)[["bound_slope", "slope"]]
        .mean()
        .reset_index()
        .itertuples()
    )
    found.append(
        for_every(
            "bound-is-upper",
            "Thm 1's bound, with eps measured per block of r layers and C fitted on the first r "
            "layers, stays above mu at every later layer (no norm).",
            "largest log(mu_t / (C B_t)) over layers after the first r, per mask and seed",
            members,
            "<=",
            0.0,
            expected=expected,
            excluded=excluded,
            note=looseness,
            source=SOURCE,
            paper="for a quasi-strongly connected mask of radius r with attention weights >= "
            "eps: mu(X^t) <= C (1 - eps^r)^(t/r) (Thm 1)",
            untested=untested,
        )
    )
    slopes = plain.pivot_table(index="seed", columns="mask", values="slope")
    if {"complete", "causal_window:1"} <= set(config.masks):
        ratios = {
            seed: speed_ratio(row.get("complete", math.nan), row.get("causal_window:1", math.nan))
            for seed, row in slopes.iterrows()
        }
        values = {seed: ratio for seed, (ratio, _) in ratios.items()}
        reasons = [f"seed {s}: {why}" for s, (_, why) in ratios.items() if why]
        finite = {seed: v for seed, v in values.items() if math.isfinite(v)}
        found.append(
            finding(
                "local-masks-slower",
                "The complete mask collapses faster than the most local mask (causal window 1).",
                "smallest over seeds of slope(complete) / slope(causal_window:1)",
                min(values.values()) if len(values) == len(config.seeds) else math.nan,
                ">",
                1.0,
                note="; ".join(reasons + ([seeds_agree(finite, ">", 1.0)] if finite else [])),
                source="Thm 1 (rate against radius)",
                paper='"sparse or local masked attention can provably slow down the collapse '
                'rate" (abstract)',
            )
        )
    return found


def _uninformative(table: pd.DataFrame) -> dict[str, str]:
    """{mask/seed: reason} of the curves whose bound predicts under a decade over the fitted
    layers: there the bound cannot fail by its rate."""
    excluded = {}
    for r in table.itertuples():
        predicted = -r.bound_slope * max(r.fit_layers - 1, 1)
        if not predicted >= INFORMATIVE:  # NaN too
            excluded[f"{r.mask}/seed {r.seed}"] = (
                f"the bound predicts {predicted / INFORMATIVE:.2g} decades: uninformative"
            )
    return excluded


def _cor1_claim(config: Config, unit_norm: pd.DataFrame) -> Claim:
    """Cor 1 on the strongly connected masks: measured slope <= the corollary's rate."""
    expected = [f"{m}/seed {s}" for m in config.masks for s in config.seeds]
    excluded = _uninformative(unit_norm)
    for mask in config.masks:
        n_centers = len(center_nodes(mask.build(config.n_tokens)))
        if n_centers < config.n_tokens:
            reason = "quasi-strongly connected only: Gaussian inputs break cos >= 0"
            excluded |= {f"{mask}/seed {s}": reason for s in config.seeds}
    if config.n_tokens > config.d_model:
        excluded = {name: f"N = {config.n_tokens} > d = {config.d_model}" for name in expected}
    members = {f"{r.mask}/seed {r.seed}": r.slope - r.bound_slope for r in unit_norm.itertuples()}
    return for_every(
        "cor1-rate-with-ln",
        "With LayerNorm and orthogonal value weights, pure SAN collapses at least as fast as "
        "Cor 1's rate under every strongly connected mask.",
        "largest measured slope of mu minus Cor 1's slope log(1 - N eps^{2r}) / (2r), per mask "
        "and seed (<= 0: at least as fast)",
        members,
        "<=",
        0.0,
        expected=expected,
        excluded=excluded,
        note="; ".join(
            f"{r.mask}/seed {r.seed}: {r.slope:.3g} vs {r.bound_slope:.3g}/layer"
            for r in unit_norm.itertuples()
        ),
        source="Thm 2, Cor 1",
        paper="with LayerNorm and orthogonal W_V, a strongly connected mask, N <= d and a "
        "full-rank input: mu(X^t) <= C (1 - N eps^{2r})^{t/(2r)}, exponential collapse (Cor 1)",
        untested=""
        if any(name not in excluded for name in expected)
        else f"{TOO_SMALL}: no mask meets Cor 1's first case with a bound that predicts a "
        "decade of contraction",
    )


def summarize(config: Config, results: pd.DataFrame) -> Summary:
    table = curve_table(config, results)
    means = (
        table.groupby(["mask", "norm"], sort=False)
        .agg(
            radius=("radius", "first"),
            eps_min=("eps_min", "min"),
            slope=("slope", "mean"),
            bound_slope=("bound_slope", "mean"),
            largest_excess=("excess", "max"),
        )
        .reset_index()
    )
    notes = [
        (
            "Slopes are natural-log slopes per layer (negative: collapse): measured from the "
            "geometric mean over samples before the dtype floor; the bound's is its mean log "
            "factor per layer over the same layers. With the unit norm the table gives Cor 1's "
            "rate log(1 - n eps^{2r}) / (2r) from the smallest eps of the unit; Cor 1 assumes a "
            "strongly connected mask or non-negative initial cosines (Gaussian inputs have not)."
        ),
    ]
    return Summary(
        tables={"slopes per mask (means over seeds)": means},
        figures={
            "mu against layer with the bound": wu_bound_figure(
                results,
                masks=config.masks,
                norms=config.norms,
                seeds=config.seeds,
                n_tokens=config.n_tokens,
            )
        },
        claims=claims(config, results),
        notes=notes,
    )


register(
    Experiment(
        name=NAME,
        description="Masked SANs: measured collapse per mask against Wu et al.'s Thm 1 bound "
        "with eps measured per block.",
        config=Config,
        presets=PRESETS,
        units=units,
        run_unit=run_unit,
        summarize=summarize,
        claims=claims,
    )
)
