"""wu2024-rates: measured exponential collapse per attention mask against Wu et al.'s bound.

Paper: Wu, Ajorlou, Wang, Jegelka, Jadbabaie, NeurIPS 2024 (arXiv 2405.18781), Thm 1 and
Cor 1; docs/wu2024.md. For a quasi-strongly connected mask of radius r whose allowed attention
weights stay >= eps: mu(X^t) <= C (1 - eps^r)^{t/r} without LayerNorm; with Wu's LayerNorm,
orthogonal W_V and n center nodes: mu(X^t) <= C (1 - n eps^{2r})^{t/(2r)}.

Network: the toy pure SAN (one head, orthogonal value weights so that mu changes only through
the attention), without norm (`wu:san`) and with the unit-sphere norm (`wu:san+ln`), per mask
and seed. Measured per layer: mu, mu_rel, eps_l (the smallest allowed attention weight the
layer produced, over samples) and ||W^1 ... W^t||_2 (the product of the value maps W = W_V W_O
so far: Thm 1's A3 asks these products to stay bounded). The bound
(`rankcollapse.theory.thm1_log_bound`) has its constants computed, not fitted:
B_t = sqrt(N - 1) K_t (1 - eps_t^r)^floor(t/r) mu(X^0) with eps_t the smallest allowed weight
of layers 1..t and K_t the largest value-map product norm so far. Measured slope:
`rankcollapse.theory.collapse_rate`. The quick preset runs the attention near uniform
(temperature 4096: eps about 0.1), the regime where the bound falls a decade below mu(X^0)
within its 32 layers; at the usual temperature eps is about 3e-4 and the bound says little more
than mu <= sqrt(N - 1) mu(X^0) for thousands of layers.

Inputs: Gaussian tokens without norm; with the unit norm their absolute values, so that every
initial cosine is >= 0 (Cor 1's assumption for masks that are only quasi-strongly connected).

Check (the proof's own inequality, not evidence for the paper):
- bound-is-upper: for every mask, seed and sample (no norm), mu_t <= B_t at every layer up to
  the dtype floor (largest log(mu_t / B_t) <= 0). Thm 1 is proved, and B_t is its inequality
  with the constants measured on the run, so it holds unless the code breaks the theorem's
  set-up (a skip, a wrong eps): a check of the code. A mask whose bound stays within a decade
  of mu(X^0) over those layers is excluded by name as uninformative, and so is a run whose
  value-map products grow with depth (A3 not met; the last product norm above the first half's
  largest by 1 %). With every mask excluded it is NOT TESTED: "assumptions not met" where a run
  breaks A3 or has no center node, else "preset too small".

Findings:
- ln-collapses-every-mask: Thm 2 / Cor 1's conclusion, which the runs can decide: with Wu's
  LayerNorm and orthogonal W_V, mu collapses exponentially under every mask (quasi-strongly
  connected, initial cosines >= 0), at whatever rate the mask allows: for every mask and seed,
  the geometric mean of mu_rel over samples falls over the last quarter of the layers before
  the float64 floor at least half as fast (decades per layer) as over the quarter before
  (`rate_persistence`), or reaches the floor. An exponential fall keeps a ratio of about 1 at
  any rate; a curve levelling off at a non-collapsed value (Wu's counterexample, a skip) tends
  to 0. A fixed drop (say a decade over the run) would test the preset's depth instead: the
  window mask loses under a decade in 128 layers while still falling. Cor 1's rate itself is
  not tested: at the measured eps it predicts under 0.03 decades over a quick run (1 - N
  eps^{2r} within 1e-3 of 1), while the complete mask reaches the float64 floor in about 3
  layers; no preset of this size makes the rate informative. (Departure: the corollary bounds
  the rate; the finding tests the exponential collapse it proves.)
- local-masks-slower: the complete mask collapses faster than the causal window of width 1:
  per seed and sample, slope(causal_window:1) - slope(complete) > 0.
Beyond the paper (Cor 1 orders the bounds, not the measured rates):
- centre-nodes-speed: at equal radius 1 with LayerNorm, the complete mask (N center nodes)
  collapses faster than the causal mask (one): per seed and sample, slope(causal) -
  slope(complete) of mu_rel > 0.
Every finding is decided by the one rule (`rankcollapse.experiments.verdicts`) over seeds x
samples (per-sample slopes: `rankcollapse.theory.rates.sample_rates`).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Literal

import numpy as np
import pandas as pd
import torch
from pydantic import ConfigDict, Field

from rankcollapse.experiments import verdicts
from rankcollapse.experiments._registry import Experiment, Summary, Unit, register, toy_sizes
from rankcollapse.experiments.verdicts import TOO_SMALL, UNMET, Claim, Quote, check
from rankcollapse.masks import MaskSpec, center_nodes, parse_mask_spec
from rankcollapse.metrics import measure_layers
from rankcollapse.nets import ToyNet, random_tokens, toy_config
from rankcollapse.plot import wu_bound_figure
from rankcollapse.seeds import Seed, stream_seed
from rankcollapse.theory import (
    collapse_rate,
    layer_eps,
    mask_radius,
    rate_persistence,
    rate_unit_norm,
    thm1_log_bound,
)
from rankcollapse.theory.rates import sample_rates
from rankcollapse.variants import VARIANTS

NAME = "wu2024-rates"
VARIANT = {"none": VARIANTS["wu:san"], "unit": VARIANTS["wu:san+ln"]}  # norm -> toy variant
INFORMATIVE = math.log(10)  # a bound that predicts less contraction than a decade cannot fail
PERSISTS = 0.5  # an exponential fall keeps about 1; one levelling off at a plateau tends to 0
BOUNDED = 1.01  # value-map products whose last norm tops the first half's by 1 % grow: not A3
DECIDES = "the paper preset (3 seeds x 32 samples, 128 layers; CPU, about 4 minutes)"


class Config(
    toy_sizes(n_layers=32, d_model=16, n_tokens=8, n_samples=8)  # type: ignore[misc]
):
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
    temperature: float | None = Field(None, gt=0, allow_inf_nan=False)
    """Attention temperature: scores divided by sqrt(temperature); None = d_qk (the usual)."""


# quick: near-uniform attention (scores / 64 instead of / 4), where the smallest allowed weight
# is about 0.1 and Thm 1's bound falls a decade below mu(X^0) within 32 layers for radius 1; at
# the usual temperature eps is about 3e-4 and the bound would need thousands of layers to
# say more than "mu stays below sqrt(N - 1) mu(X^0)". paper: the usual temperature.
PRESETS: dict[str, dict[str, Any]] = {
    "quick": {"temperature": 4096.0},
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
    sizes["temperature"] = config.temperature
    net = ToyNet(
        toy_config(VARIANT[unit["norm"]], **sizes, value_init="orthogonal", seed=unit["seed"])
    )
    x = random_tokens(
        config.n_samples, config.n_tokens, config.d_model, seed=stream_seed(unit["seed"], "data")
    )
    if unit["norm"] == "unit":  # every initial cosine >= 0: Cor 1's case for every mask
        x = x.abs()
    with torch.no_grad():
        trace = net(x, return_attention=True)
    frame = measure_layers(trace.states, metrics=["mu", "mu_rel"], source_dtype=net.dtype)
    eps = layer_eps(trace.attention, unit["mask"].build(config.n_tokens))
    per_layer = {"eps": (np.arange(1, len(eps) + 1), eps), "value_norm": value_norms(net)}
    rows = [
        pd.DataFrame(
            {"layer": layer, "sample": -1, "metric": metric, "value": value, "at_floor": False}
        )
        for metric, (layer, value) in per_layer.items()
    ]
    frame = pd.concat([frame, *rows], ignore_index=True)
    return frame.assign(**unit)[
        ["mask", "norm", "seed", "layer", "sample", "metric", "value", "at_floor"]
    ]


def value_norms(net: ToyNet) -> tuple[np.ndarray, np.ndarray]:
    """(layers 0..L, ||W^1 ... W^t||_2 at layer t): the spectral norm of the product of the
    value maps W = W_V W_O the tokens went through (1 at layer 0); one head per layer."""
    product = torch.eye(net.config.d_model, dtype=net.dtype)
    norms = [1.0]
    with torch.no_grad():
        for layer in net.layers:
            (w,) = layer.attn.head_matrices()  # one head: Thm 1's X A W_V
            product = product @ w
            norms.append(float(torch.linalg.matrix_norm(product, ord=2)))
    return np.arange(len(norms)), np.array(norms)


def curve_table(config: Config, results: pd.DataFrame) -> pd.DataFrame:
    """One row per (mask, norm, seed): graph facts, eps, the measured slope and the bound's.

    bound_slope: the mean log factor per layer of Thm 1's bound (`thm1_log_bound`) over the
    fitted layers (no norm), or Cor 1's rate from the unit's smallest eps (unit norm);
    excess: the largest log(mu_t / B_t) over every layer t and sample above the dtype floor,
    with B_t computed from that sample's mu(X^0) (no norm; NaN with the unit norm);
    bound_decades: how far below mu(X^0) the bound reaches within the fitted layers;
    value_growth: ||W^1 ... W^L||_2 over the largest such norm in the first half of the layers
    (> 1: the value-map products grow with depth).
    """
    rows = []
    results = results.astype({"at_floor": bool})
    specs = {str(spec): spec for spec in config.masks}
    for (mask, norm, seed), part in results.groupby(["mask", "norm", "seed"], sort=False):
        r = mask_radius(specs[mask], config.n_tokens)
        mu = part[part["metric"] == "mu"]
        eps = part[part["metric"] == "eps"].sort_values("layer")["value"].to_numpy()
        norms = part[part["metric"] == "value_norm"].sort_values("layer")["value"].to_numpy()
        rate = collapse_rate(mu)
        row = {
            "mask": mask,
            "norm": norm,
            "seed": seed,
            "radius": r,
            "eps_min": eps.min() if len(eps) else math.nan,
            "slope": rate.slope,
            "fit_layers": rate.n_fit,
            "excess": math.nan,
            "bound_decades": math.nan,
            "value_growth": _growth(norms),
        }
        if math.isinf(r) or not len(eps):
            row["bound_slope"] = math.nan
        elif norm == "none":
            log_b = thm1_log_bound(eps, int(r), config.n_tokens, norms if len(norms) else None)
            n = max(rate.n_fit, 1)
            row["bound_slope"] = (log_b[n - 1] - log_b[0]) / max(n - 1, 1)
            row["bound_decades"] = -log_b[:n].min() / INFORMATIVE
            row["excess"] = _excess(mu, log_b)
        else:
            n_centers = len(center_nodes(specs[mask].build(config.n_tokens)))
            row["bound_slope"] = rate_unit_norm(row["eps_min"], int(r), n_centers)
        rows.append(row)
    return pd.DataFrame(rows)


def _excess(mu: pd.DataFrame, log_b: np.ndarray) -> float:
    """max over samples and layers t >= 1 above the dtype floor of log mu_t - log mu_0 - log_b[t]
    (<= 0: every layer under the bound)."""
    logs = np.log(mu["value"].astype(float).clip(lower=1e-300))
    mu = mu.assign(log=logs)
    log0 = mu[mu["layer"] == 0].set_index("sample")["log"]
    later = mu[(mu["layer"] >= 1) & (mu["layer"] < len(log_b)) & ~mu["at_floor"]]
    if later.empty:
        return math.nan
    gap = later["log"] - later["sample"].map(log0) - log_b[later["layer"].to_numpy()]
    return float(gap.max())


def _growth(norms: np.ndarray) -> float:
    """||W^1 ... W^L||_2 over the largest product norm of layers 0..L/2; NaN without norms."""
    if len(norms) < 2:
        return math.nan
    return float(norms[-1] / norms[: len(norms) // 2 + 1].max())


def claims(config: Config, results: pd.DataFrame) -> list[Claim]:
    table = curve_table(config, results)
    plain = table[table["norm"] == "none"]
    found = []
    if "unit" in config.norms:
        unit = results[results["norm"] == "unit"]
        found.append(_ln_collapse_claim(config, unit))
        found += _centre_claim(config, unit)
    if "none" not in config.norms:
        return found
    found.append(_bound_check(config, plain))
    if {"complete", "causal_window:1"} <= set(config.masks):
        gaps = _gaps(results[results["norm"] == "none"], "causal_window:1", "complete")
        found.append(
            verdicts.finding(
                "local-masks-slower",
                says=Quote(
                    "sparse or local masked attention can provably slow down the collapse rate",
                    "abstract; Thm 1 (rate against radius)",
                ),
                text="The complete mask collapses faster than the most local mask (causal "
                "window 1).",
                quantity="per seed and sample: slope(causal_window:1) - slope(complete) of "
                "log mu per layer (units: seeds x samples); > 0: the local mask is slower",
                values=gaps,
                side=">",
                margin=0.0,  # the order of the two rates
                decides=DECIDES,
            )
        )
    return found


def _gaps(results: pd.DataFrame, slow: str, fast: str, metric: str = "mu") -> list[float]:
    """Per (seed, sample): the `slow` mask's collapse slope minus the `fast` mask's
    (`rankcollapse.theory.rates.sample_rates`; the same seed draws the same inputs)."""
    rows = results[(results["metric"] == metric) & results["mask"].isin([slow, fast])]
    rates = sample_rates(rows.astype({"at_floor": bool}), ["mask", "seed"])
    wide = rates.pivot_table(index=["seed", "sample"], columns="mask", values="slope")
    if not {slow, fast} <= set(wide.columns):
        return []
    return list(wide[slow] - wide[fast])


def _bound_check(config: Config, plain: pd.DataFrame) -> Claim:
    """bound-is-upper, a check (the proof's own inequality with its constants computed): the
    largest log(mu_t / B_t) over every informative mask and seed that meets Thm 1's
    assumptions; NOT TESTED when none does (verdicts.check has no NOT TESTED: set here)."""
    members = {f"{r.mask}/seed {r.seed}": r.excess for r in plain.itertuples()}
    expected = [f"{m}/seed {s}" for m in config.masks for s in config.seeds]
    unmet = _amplifying(plain) | {
        f"{m}/seed {s}": "no center node"
        for m in config.masks
        for s in config.seeds
        if math.isinf(mask_radius(m, config.n_tokens))
    }
    excluded = _uninformative_thm1(plain) | unmet
    used = [members.get(name, math.nan) for name in expected if name not in excluded]
    looseness = "; ".join(
        f"{r.mask}: bound {r.bound_slope:.2g}/layer vs measured {r.slope:.2g}/layer"
        for r in plain.groupby("mask", sort=False)[["bound_slope", "slope"]]
        .mean()
        .reset_index()
        .itertuples()
    )
    reasons = ", ".join(f"{k} ({v})" for k, v in excluded.items())
    upper = check(
        "bound-is-upper",
        "Thm 1's bound with its constants computed (C = sqrt(N - 1) K mu(X^0), eps the "
        "smallest allowed attention weight up to the layer, K the value-map products' "
        "norm) stays above mu at every layer and for every sample (no norm).",
        "largest log(mu_t / B_t) over layers, samples, masks and seeds (NaN: a member missing)",
        max(used) if used and not any(math.isnan(v) for v in used) else math.nan,
        "<=",
        0.0,
        note=looseness + (f"; excluded ({len(excluded)}): {reasons}" if excluded else ""),
    )
    if used:
        return upper
    cause = UNMET if any(name in unmet for name in expected) else TOO_SMALL
    return replace(
        upper,
        untested=f"{cause}: no mask meets Thm 1's assumptions with a bound that reaches a "
        "decade below mu(X^0) before the dtype floor (each mask's reason in the note); the "
        "quick preset (temperature 4096) decides it",
    )


def _uninformative_thm1(table: pd.DataFrame) -> dict[str, str]:
    """{mask/seed: reason} of the curves whose Thm 1 bound stays within a decade of mu(X^0)
    over the layers before the floor: there it allows what any collapsing curve does."""
    return {
        f"{r.mask}/seed {r.seed}": "the bound's lowest value before the floor is "
        f"{10**-r.bound_decades:.2g} mu(X^0) (eps {r.eps_min:.2g}, r {r.radius:g}): "
        "uninformative"
        for r in table.itertuples()
        if not r.bound_decades >= 1.0  # NaN too
    }


def _amplifying(table: pd.DataFrame) -> dict[str, str]:
    """{mask/seed: reason} of the runs whose value-map products grow with depth: Thm 1's A3
    (bounded products of the W_V) is not met, so its bound is no statement about them."""
    return {
        f"{r.mask}/seed {r.seed}": f"value-map products grow (x{r.value_growth:.3g} over the "
        "second half of the layers): A3 not met"
        for r in table.itertuples()
        if r.value_growth > BOUNDED
    }


def _ln_collapse_claim(config: Config, unit_norm: pd.DataFrame) -> Claim:
    """Thm 2 / Cor 1's exponential collapse with LayerNorm and orthogonal W_V, for every mask:
    per seed and sample, the fall of mu_rel does not die out (`rate_persistence`; a curve that
    reaches the float64 floor counts 1, an exponential fall)."""
    rel = unit_norm[unit_norm["metric"] == "mu_rel"]
    members: dict[str, list[float]] = {}
    for (mask, _seed, _sample), curve in rel.groupby(["mask", "seed", "sample"], sort=False):
        members.setdefault(str(mask), []).append(min(rate_persistence(curve).ratio, 1.0))
    return verdicts.for_every(
        "ln-collapses-every-mask",
        says=Quote(
            "for certain classes of value matrices, collapse to a rank one subspace still "
            "happens exponentially",
            "abstract; Thm 2, Cor 1 (orthogonal W_V, initial cosines >= 0)",
        ),
        text="With LayerNorm and orthogonal value weights, pure SAN still collapses "
        "exponentially under every mask, however slowly: over the last quarter of the layers "
        "before the float64 floor mu_rel falls at least half as fast (decades per layer) as "
        "over the quarter before; a curve levelling off at a non-collapsed value does not.",
        quantity="per seed and sample: decades per layer lost by mu_rel over the last quarter "
        "of the layers over the quarter before, capped at 1 (1: the float64 floor reached; "
        "0: no fall); units: seeds x samples, members: masks",
        members=members,
        side=">",
        margin=PERSISTS,  # an exponential fall keeps about 1, a plateau tends to 0
        expected=[str(m) for m in config.masks],
        decides=DECIDES,
        note="inputs |Z| (every initial cosine >= 0)",
    )


def _centre_claim(config: Config, unit_norm: pd.DataFrame) -> list[Claim]:
    """centre-nodes-speed (beyond: Cor 1 orders the bounds): at equal radius 1, with LayerNorm
    the complete mask (N center nodes) collapses faster than the causal mask (one)."""
    if not {"complete", "causal"} <= set(config.masks):
        return []
    return [
        verdicts.finding(
            "centre-nodes-speed",
            says=Quote(
                "mu(X^t) <= C (1 - n eps^{2r})^{t/(2r)}, n the number of center nodes",
                "Cor 1 (LayerNorm, orthogonal W_V)",
            ),
            text="At equal radius (1), the mask with more center nodes collapses faster with "
            "LayerNorm: the complete mask (N centers) faster than the causal mask (one), as "
            "Cor 1's bound orders them (the project's reading: the corollary orders bounds).",
            quantity="per seed and sample: slope(causal) - slope(complete) of log mu_rel per "
            "layer, LayerNorm (units: seeds x samples); > 0: more centers, faster",
            values=_gaps(unit_norm, "causal", "complete", metric="mu_rel"),
            side=">",
            margin=0.0,  # the order of the two rates
            decides=DECIDES,
            beyond=True,
        )
    ]


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
            "rate log(1 - n eps^{2r}) / (2r) from the smallest eps of the unit (inputs |Z|, so "
            "every initial cosine is >= 0, Cor 1's assumption for every mask)."
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
