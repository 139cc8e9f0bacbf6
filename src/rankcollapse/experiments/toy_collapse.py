"""toy-collapse: pure attention loses rank doubly exponentially; skip connections stop it.

Paper: Dong, Cordonnier, Loukas, "Attention is not all you need: pure attention loses rank
doubly exponentially with depth", ICML 2021 (arXiv 2103.03404), Thm 2.2 / Cor 2.3 (pure
SAN: r_l <= c r_{l-1}^3 per layer), Sec. 3 (skips, MLPs, LayerNorm), and the shape of Fig. 1
reproduced on the toy network.

Network: `rankcollapse.nets.ToyNet` at random initialisation (same attention weights for
every variant of a seed), on Gaussian tokens, in the toy variants of `rankcollapse.nets`
(`san`, `san+skip`, `san+mlp`, `san+ln` with post-LayerNorm, `transformer` = skip + MLP +
post-LN). Measured per layer l = 0..n_layers, per sequence: `res_comp_rel` (mean-centred
relative composite residual, the paper's plotted quantity) and `mu_rel`, in float64, each
flagged when it sits at the floor of the dtype that produced the states.

Findings (this run's numbers; every one can fail):
- san-doubly-exponential: for pure SAN, the contraction factor q_l = R_{l+1} / R_l of the
  geometric-mean residual R_l shrinks from layer to layer (the log residual falls faster than
  geometrically, as r_l <= c r_{l-1}^3 predicts): the largest q_{l+1} / q_l over the layers
  above the dtype floor is < 1.
- skip-keeps-residual: every variant with the attention skip decays slowly: no layer takes its
  mean residual below half of the layer before, and it never reaches the floor (Sec. 3.1; pure
  SAN falls by orders of magnitude per layer). A per-layer test: it does not pass or fail by
  the number of layers.
- mlp-does-not-prevent: the MLP alone does not stop the collapse (Sec. 3.2): the last-layer
  mean residual of san+mlp is below 1e-6.
- mlp-doubly-exponential: Cor 3.2's Lipschitz argument: an MLP of Lipschitz constant lambda after
  each layer turns c into lambda H c, so san+mlp still collapses doubly exponentially (its
  contraction factors shrink, as for pure SAN).
- mlp-larger-lambda-slower: Cor 3.2's "slower for a larger lambda": an extra san+mlp arm with
  the MLP's output weights W_2 times `mlp_gain` (> 1; its lambda grows with it, the attention
  weights are the same) keeps a larger residual than the gain-1 arm: log10 of the ratio of their
  geometric means, at the deepest layer where the gain-1 arm is above the floor, is > 0 (a
  gain arm at the floor counts at its floor value, so it fails).
- ln-does-not-prevent: LayerNorm does not prevent the collapse (Sec. 3.3: it rescales and
  shifts each token, a diagonal factor the argument absorbs): the last-layer mean res_comp_rel
  of san+ln is below 1e-6 (a seed at the floor counts as 0). LN can delay the collapse at random
  init (the note gives san+ln's lag behind pure SAN per layer); the paper's statement is about
  its end, not its speed. Wu et al. 2024's refutation of "LayerNorm plays no role" rests on
  constructed weights (their causal 2-D counterexample, Thm 3's equilibria: wu2024-counterexample
  and wu2024-equilibria), not on random initialisation, and does not bear on this row.
  (Formerly ln-plays-no-role: san+ln within one decade of pure SAN at every layer, a reading
  the paper does not make; at one layer the lag alone is 3 decades.)
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import pandas as pd
from pydantic import ConfigDict, Field

from rankcollapse.experiments._registry import (
    Experiment,
    Summary,
    Unit,
    finding,
    for_every,
    register,
    seeds_agree,
    toy_sizes,
)
from rankcollapse.experiments.verdicts import Claim
from rankcollapse.plot import band_plot
from rankcollapse.seeds import Seed
from rankcollapse.theory import contraction_factors, layer_cells, layer_stats, shown_layer_stats

NAME = "toy-collapse"

Variant = Literal["san", "san+skip", "san+mlp", "san+ln", "transformer"]
VARIANTS: list[Variant] = ["san", "san+skip", "san+mlp", "san+ln", "transformer"]
METRICS = ["res_comp_rel", "mu_rel"]
SKIP_LEVEL = 1e-3  # "away from 0" (pure SAN ends near 1e-16)
COLLAPSED_LEVEL = 1e-6  # "collapsed"
SLOW = 0.5  # "decays slowly": no layer more than halves the residual (SAN: orders of magnitude)


class Config(
    toy_sizes(n_layers=8, n_heads=2, d_model=32, n_tokens=16, n_samples=8)  # type: ignore[misc]
):
    """A toy network at random initialisation, run in every variant for several seeds."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    variants: list[Variant] = Field(default_factory=lambda: list(VARIANTS), min_length=1)
    """Toy variants to run (san, san+skip, san+mlp, san+ln, transformer)."""
    seeds: list[Seed] = Field(default_factory=lambda: [0, 1, 2], min_length=1)
    """Seeds of weights and inputs (one unit per variant and seed)."""
    dtype: Literal["float64", "float32"] = "float64"
    """Dtype of the network's weights and states (metrics are float64 either way)."""
    mlp_gain: float = Field(4.0, gt=1, allow_inf_nan=False)
    """Factor on W_2 of an extra san+mlp arm (a larger MLP Lipschitz constant, Cor 3.2)."""


PRESETS = {
    "quick": {},
    # The BERT-base shape of the paper's Fig. 1 (12 layers, 12 heads, width 768, 32 x 128).
    # About 2 min per unit on one core: use --jobs.
    "paper": {
        "n_layers": 12,
        "n_heads": 12,
        "d_model": 768,
        "n_tokens": 128,
        "n_samples": 32,
        "seeds": [0, 1, 2],
    },
}


def units(config: Config) -> list[Unit]:
    """One unit per variant and seed (mlp_gain 1), plus san+mlp at config.mlp_gain."""
    gains = {v: [1.0, config.mlp_gain] if v == "san+mlp" else [1.0] for v in config.variants}
    return [
        {"variant": v, "seed": s, "mlp_gain": g}
        for v in config.variants
        for g in gains[v]
        for s in config.seeds
    ]


def run_unit(config: Config, unit: Unit) -> pd.DataFrame:
    import torch

    from rankcollapse.metrics import measure_layers
    from rankcollapse.nets import ToyNet, random_tokens, toy_config
    from rankcollapse.seeds import stream_seed

    net = ToyNet(
        toy_config(
            unit["variant"],
            n_layers=config.n_layers,
            n_heads=config.n_heads,
            d_model=config.d_model,
            dtype=config.dtype,
            seed=unit["seed"],
        )
    )
    if unit["mlp_gain"] != 1.0:  # lambda of the MLP grows with its output weights (Cor 3.2)
        with torch.no_grad():
            for block in net.layers:
                block.mlp_block.mlp.w_2.mul_(unit["mlp_gain"])
    x = random_tokens(
        config.n_samples,
        config.n_tokens,
        config.d_model,
        seed=stream_seed(unit["seed"], "data"),
        dtype=net.dtype,
    )
    with torch.no_grad():  # a graph kept for backward took 9 GB at the paper size
        states = net(x).states  # n_layers + 1 tensors (n_samples, n_tokens, d_model)
    return measure_layers(states, metrics=METRICS, source_dtype=net.dtype, **unit)


DOUBLY_EXPONENTIAL = {  # variant -> (id, statement, source, the paper's words)
    "san": (
        "san-doubly-exponential",
        (
            "Pure self-attention collapses doubly exponentially: the log residual falls faster "
            "than geometrically (r_l <= c r_{l-1}^3)."
        ),
        "Thm 2.2, Cor 2.3",
        (
            '"without skip connections or MLPs, the output converges doubly exponentially to a '
            'rank-1 matrix" (abstract); r_l <= c r_{l-1}^3 (Thm 2.2)'
        ),
    ),
    "san+mlp": (
        "mlp-doubly-exponential",
        (
            "With an MLP after each layer the collapse is still doubly exponential (the MLP's "
            "Lipschitz constant only scales c)."
        ),
        "Sec. 3.2, Cor 3.2",
        (
            "an MLP of Lipschitz constant lambda turns c into lambda H c: the convergence stays "
            "doubly exponential, slower for a larger lambda (Cor 3.2)"
        ),
    ),
}


def doubly_exponential_claim(
    variant: str, per_layer: pd.DataFrame, per_seed: pd.DataFrame
) -> Claim:
    """Contraction factors q_l of the geometric-mean residual must shrink (pooled over seeds)."""
    measured, q, run = contraction_factors(per_layer)
    seeds = {s: contraction_factors(part)[0] for s, part in per_seed.groupby("seed")}
    layers = f"layers {int(run['layer'].min())}...{int(run['layer'].max())}" if len(run) else "-"
    id_, text, source, paper = DOUBLY_EXPONENTIAL[variant]
    return finding(
        id_,
        text,
        f"max over layers of q_{{l+1}} / q_l, q_l = R_{{l+1}} / R_l (R = geometric mean of "
        f"{variant}'s res_comp_rel over sequences and seeds, layers above the dtype floor)",
        measured,
        "<",
        1.0,
        note=f"contraction factors q_l for {layers}: {', '.join(f'{v:.3g}' for v in q)}"
        + ("" if len(q) > 1 else "; fewer than 3 layers above the floor")
        + f"; per seed: {seeds_agree(seeds, '<', 1.0)}",
        source=source,
        paper=paper,
    )


def claims(config: Config, results: pd.DataFrame) -> list[Claim]:
    all_gains = results[results["metric"] == "res_comp_rel"]
    res = all_gains[all_gains["mlp_gain"] == 1.0]
    per_layer = layer_stats(res, ("variant",))
    last = per_layer[per_layer["layer"] == config.n_layers].set_index("variant")
    found = []
    for variant in (v for v in DOUBLY_EXPONENTIAL if v in config.variants):
        part = res[res["variant"] == variant]
        found.append(
            doubly_exponential_claim(
                variant,
                per_layer[per_layer["variant"] == variant],
                layer_stats(part, ("seed",)),
            )
        )
    by_seed = layer_stats(res, ("variant", "seed"))
    by_seed = by_seed.assign(
        floored=by_seed.groupby(["variant", "seed"])["any_at_floor"].transform("any")
    )
    by_seed = by_seed[by_seed["layer"] == config.n_layers]

    def per_seed(variants: list[str], worst: str) -> dict:
        rows = by_seed[by_seed["variant"].isin(variants)]
        return rows["mean"].where(~rows["floored"], 0.0).groupby(rows["seed"]).agg(worst).to_dict()

    skips = [v for v in config.variants if "skip" in v or v == "transformer"]
    if skips:
        floored = set(per_layer.loc[per_layer["any_at_floor"].astype(bool), "variant"])
        # A variant that reached the floor at any layer counts as 0 (collapsed).
        members = {v: 0.0 if v in floored else _slowest_step(per_layer, v) for v in skips}
        members = {v: m for v, m in members.items() if v in set(per_layer["variant"])}
        san_last = format(last.loc["san", "mean"], ".2g") if "san" in last.index else "not run"
        found.append(
            for_every(
                "skip-keeps-residual",
                "Skip connections keep the residual away from 0: it decays slowly (no layer "
                f"takes it below {SLOW:g} of the layer before) and never reaches the floor.",
                "least ratio of consecutive layers' mean res_comp_rel per variant with the "
                "attention skip (0 if any value reached the dtype floor)",
                members,
                ">",
                SLOW,
                expected=skips,
                note=f"pure SAN at the last layer: {san_last}; last-layer means: "
                + ", ".join(f"{v}: {last['mean'].get(v, np.nan):.3g}" for v in skips),
                source="Sec. 3.1, Fig. 1",
                paper='"skip connections and MLPs stop the output from degeneration" '
                "(abstract); with skips, parameterisations exist where r_L >= r_0 (Cor 3.1)",
            )
        )
    if "san+mlp" in config.variants:
        found.append(
            for_every(
                "mlp-does-not-prevent",
                "An MLP alone (no skip) does not prevent the collapse.",
                "last-layer mean res_comp_rel of san+mlp",
                {"san+mlp": last["mean"].get("san+mlp", np.nan)},
                "<",
                COLLAPSED_LEVEL,
                expected=["san+mlp"],
                note="per seed, a floor value as 0: "
                + seeds_agree(per_seed(["san+mlp"], "max"), "<", COLLAPSED_LEVEL),
                source="Sec. 3.2, Cor 3.2",
                paper="MLPs slow the convergence down but, without skip connections, the "
                "output still converges to rank 1 (Cor 3.2)",
            )
        )
    if "san+mlp" in config.variants:
        found.append(_lambda_claim(config, all_gains[all_gains["variant"] == "san+mlp"]))
    if "san+ln" in config.variants:
        found.append(_ln_claim(config, per_layer, per_seed(["san+ln"], "max")))
    return found


def _slowest_step(per_layer: pd.DataFrame, variant: str) -> float:
    """Least mean(layer l) / mean(layer l - 1) of one variant's curve."""
    means = per_layer[per_layer["variant"] == variant].sort_values("layer")["mean"].to_numpy()
    return float((means[1:] / means[:-1]).min()) if len(means) > 1 else np.nan


def _lambda_claim(config: Config, mlp: pd.DataFrame) -> Claim:
    """Cor 3.2: the san+mlp arm at mlp_gain keeps a larger residual than the gain-1 arm."""
    stats = layer_stats(mlp, ("mlp_gain",))
    wide = stats.pivot(index="layer", columns="mlp_gain", values="geo_mean")
    floored = stats.pivot(index="layer", columns="mlp_gain", values="any_at_floor")
    gain = config.mlp_gain
    if {1.0, gain} <= set(wide.columns):
        above = floored.index[~floored[1.0].astype(bool)]
        layer = int(above.max()) if len(above) else 0
        gap = float(np.log10(wide.loc[layer, gain] / wide.loc[layer, 1.0]))
        per = ", ".join(f"{int(l)}: {np.log10(r):.2g}" for l, r in (wide[gain] / wide[1.0]).items())
    else:
        layer, gap, per = 0, np.nan, "an arm is missing"
    return finding(
        "mlp-larger-lambda-slower",
        "A larger MLP Lipschitz constant lambda slows the collapse (c becomes lambda H c).",
        f"log10(R(gain {gain:g}) / R(gain 1)) of san+mlp's geometric-mean res_comp_rel at the "
        "deepest layer where the gain-1 arm is above the dtype floor (decades)",
        gap if layer > 0 else np.nan,
        ">",
        0.0,
        note=f"at layer {layer}; per layer: {per}; W_2 times {gain:g}, same attention weights",
        source="Sec. 3.2, Cor 3.2",
        paper="an MLP of Lipschitz constant lambda turns c into lambda H c: the convergence "
        "stays doubly exponential, slower for a larger lambda (Cor 3.2)",
    )


def _ln_claim(config: Config, per_layer: pd.DataFrame, seeds: dict) -> Claim:
    """Dong et al. Sec. 3.3: LayerNorm does not prevent the collapse (san+ln reaches ~0)."""
    last = per_layer[(per_layer["layer"] == config.n_layers) & (per_layer["variant"] == "san+ln")]
    wide = per_layer.pivot(index="layer", columns="variant", values="geo_mean")
    lag = ""
    if "san" in wide.columns:
        gap = np.log10(wide["san+ln"] / wide["san"]).dropna()
        lag = "; san+ln above pure SAN per layer (decades, floor values included): " + ", ".join(
            f"{int(layer)}: {g:.2g}" for layer, g in gap.items()
        )
    return for_every(
        "ln-does-not-prevent",
        "LayerNorm does not prevent the collapse: with post-LN and no skip the residual still "
        "reaches about 0.",
        "last-layer mean res_comp_rel of san+ln",
        {"san+ln": float(last["mean"].iloc[0]) if len(last) else np.nan},
        "<",
        COLLAPSED_LEVEL,
        expected=["san+ln"],
        note="per seed, a floor value as 0: "
        + seeds_agree(seeds, "<", COLLAPSED_LEVEL)
        + lag
        + "; a lag is a delay, not a prevention. Wu et al. 2024's refutation of 'LN plays no "
        "role' uses constructed weights (wu2024-counterexample, wu2024-equilibria), not this "
        "random init",
        source="Sec. 3.3",
        paper="layer normalization rescales and shifts each token, a diagonal factor the "
        "argument absorbs: it plays no role in preventing the collapse (paraphrase)",
    )


def summarize(config: Config, results: pd.DataFrame) -> Summary:
    gain_one = results[results["mlp_gain"] == 1.0]
    per_layer = layer_stats(gain_one[gain_one["metric"] == "res_comp_rel"], ("variant",))
    figure = band_plot(
        gain_one.assign(variant=pd.Categorical(gain_one["variant"], categories=config.variants)),
        x="layer",
        hue="variant",
        panel="metric",
        logy=True,
        title=f"Toy network at init: {config.n_heads} heads, width {config.d_model}, "
        f"{config.n_tokens} tokens; {config.n_samples} sequences x {len(config.seeds)} seeds",
        ylabel="relative residual",
    )
    floor_note = (
        f"Values at or below the floor of {config.dtype} (10 x machine epsilon) are flagged "
        "at_floor and drawn as hollow markers; the doubly exponential finding uses only the "
        "layers where no sequence is at the floor."
    )
    cells = per_layer.assign(mean=layer_cells(per_layer))
    wide = cells.pivot(index="layer", columns="variant", values="mean")
    tables = {
        "mean res_comp_rel per layer": wide[config.variants]
        .rename_axis(columns=None)
        .reset_index(),
        "per-layer statistics of res_comp_rel": shown_layer_stats(per_layer),
    }
    mlp = results[(results["variant"] == "san+mlp") & (results["metric"] == "res_comp_rel")]
    if len(mlp):
        stats = layer_stats(mlp, ("mlp_gain",))
        gains = stats.assign(geo_mean=layer_cells(stats, "geo_mean")).pivot(
            index="layer", columns="mlp_gain", values="geo_mean"
        )
        tables["san+mlp geometric-mean res_comp_rel by MLP gain (W_2 factor)"] = (
            gains.rename(columns=lambda g: f"gain {g:g}").rename_axis(columns=None).reset_index()
        )
    return Summary(
        tables=tables,
        figures={"residual vs layer": figure},
        claims=claims(config, results),
        notes=[floor_note],
    )


register(
    Experiment(
        name=NAME,
        description="Toy SAN at init: pure attention collapses doubly exponentially; skips stop it.",
        config=Config,
        presets=PRESETS,
        units=units,
        run_unit=run_unit,
        summarize=summarize,
        claims=claims,
    )
)
