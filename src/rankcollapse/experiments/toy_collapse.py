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

Findings, each decided by the one rule (`rankcollapse.experiments.verdicts`) over the seeds
(one network each; a seed whose curve reaches the dtype floor counts its residual as 0):
- san-doubly-exponential ("without skip connections or multi-layer perceptrons (MLPs), the
  output converges doubly exponentially to a rank-1 matrix", abstract): per seed, the
  contraction factor q_l = R_{l+1} / R_l of the geometric-mean residual R_l shrinks: the
  largest q_{l+1} / q_l over the layers above the dtype floor is < 1 (r_l <= c r_{l-1}^3).
- mlp-doubly-exponential (Cor 3.2: the MLP's Lipschitz constant lambda turns c into lambda H c):
  the same for san+mlp.
- skip-keeps-residual ("skip connections and MLPs stop the output from degeneration", abstract),
  for every variant with the attention skip: per seed, no layer takes the mean residual below
  half of the layer before (pure SAN falls by orders of magnitude per layer).
- mlp-does-not-prevent ("MLPs do not seem to help in the mitigation of convergence", Sec. 4):
  per seed, san+mlp's last-layer mean residual is below 1e-6.
- mlp-larger-lambda-slower (Cor 3.2, "the larger the Lipschitz constants are, the slower the
  convergence"): an extra san+mlp arm with the MLP's output weights W_2 times `mlp_gain` (> 1,
  the same attention weights) keeps a larger residual than the gain-1 arm: per seed, log10 of
  the ratio of their geometric means at the deepest layer where the gain-1 arm is above the
  floor is > 0. Cor 3.2 orders the bounds; at width 16 two seeds disagree (tests), at the
  presets' widths every seed agrees.
- ln-does-not-prevent ("Layer normalization plays no role", Sec. 3.3): per seed, san+ln's
  last-layer mean res_comp_rel is below 1e-6. LN can delay the collapse at random init (the
  note gives san+ln's lag behind pure SAN per layer); the paper's statement is about its end,
  not its speed. Wu et al. 2024 dispute "LayerNorm plays no role" with constructed weights
  (wu2024-counterexample, wu2024-equilibria) and, at random initialisation, for masked
  attention with LayerNorm, whose mu they find to stay at a stable level above zero (their
  Sec. 5; wu2024-masks tests it); this row tests Dong's sentence on Dong's setting.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import ConfigDict, Field

from rankcollapse.experiments._registry import Experiment, Summary, Unit, register, toy_sizes
from rankcollapse.experiments.verdicts import Claim, Quote, finding, for_every
from rankcollapse.lazy import lazy_module
from rankcollapse.plot import band_plot
from rankcollapse.seeds import Seed
from rankcollapse.theory import contraction_factors, layer_cells, layer_stats, shown_layer_stats

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
else:  # a stored run imports this module and never its results' libraries
    np, pd = lazy_module("numpy"), lazy_module("pandas")

NAME = "toy-collapse"

Variant = Literal["san", "san+skip", "san+mlp", "san+ln", "transformer"]
VARIANTS: list[Variant] = ["san", "san+skip", "san+mlp", "san+ln", "transformer"]
METRICS = ["res_comp_rel", "mu_rel"]
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
    from rankcollapse.nets.layers import MLPBlock
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
                if isinstance(block.mlp_block, MLPBlock):  # san+mlp's: no other has a gain
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


ABSTRACT = "abstract; Thm 2.2, Cor 2.3"
DOUBLY_EXPONENTIAL = {  # variant -> (id, statement, the paper's sentence)
    "san": (
        "san-doubly-exponential",
        (
            "Pure self-attention collapses doubly exponentially: the log residual falls faster "
            "than geometrically (r_l <= c r_{l-1}^3)."
        ),
        Quote(
            "without skip connections or multi-layer perceptrons (MLPs), the output converges "
            "doubly exponentially to a rank-1 matrix",
            ABSTRACT,
        ),
    ),
    "san+mlp": (
        "mlp-doubly-exponential",
        (
            "With an MLP after each layer the collapse is still doubly exponential (the MLP's "
            "Lipschitz constant only scales c)."
        ),
        Quote(
            "the convergence rate can be controlled by the Lipschitz constants of the MLPs",
            "Sec. 3.2, Cor 3.2",
        ),
    ),
}
LAMBDA = Quote(
    "the larger the Lipschitz constants are, the slower the convergence", "Sec. 3.2, Cor 3.2"
)
SKIPS = Quote("skip connections and MLPs stop the output from degeneration", "abstract; Cor 3.1")
MLP_ALONE = Quote("MLPs do not seem to help in the mitigation of convergence", "Sec. 4, Fig. 1")
LN = Quote("Layer normalization plays no role", "Sec. 3.3 (its heading)")
DECIDES = "--preset paper (3 seeds of BERT-base's shape) or more seeds"


def seed_curves(res: pd.DataFrame, variant: str) -> dict:
    """{seed: `layer_stats` curve of `variant`} (the unit of every finding is the seed)."""
    part = res[res["variant"] == variant]
    return {seed: layer_stats(rows, ()) for seed, rows in part.groupby("seed")}


def _last(curve: pd.DataFrame) -> float:
    """A seed's last-layer mean residual, 0 when any of its values reached the dtype floor."""
    floored = bool(curve["any_at_floor"].astype(bool).any())
    return 0.0 if floored else float(curve.sort_values("layer")["mean"].iloc[-1])


def _slowest_step(curve: pd.DataFrame) -> float:
    """Least mean(layer l) / mean(layer l - 1) of one seed's curve; 0 if it reached the floor."""
    if curve["any_at_floor"].astype(bool).any():
        return 0.0
    means = curve.sort_values("layer")["mean"].to_numpy()
    return float((means[1:] / means[:-1]).min()) if len(means) > 1 else np.nan


def _per_seed(values: dict) -> str:
    return ", ".join(f"seed {s}: {v:.3g}" for s, v in values.items())


def claims(config: Config, results: pd.DataFrame) -> list[Claim]:
    """Every finding over the seeds (one network each), by the one rule."""
    all_gains = results[results["metric"] == "res_comp_rel"]
    res = all_gains[all_gains["mlp_gain"] == 1.0]
    per_layer = layer_stats(res, ("variant",))
    found = []
    for variant in (v for v in DOUBLY_EXPONENTIAL if v in config.variants):
        id_, text, says = DOUBLY_EXPONENTIAL[variant]
        seeds = {s: contraction_factors(c)[0] for s, c in seed_curves(res, variant).items()}
        found.append(
            finding(
                id_,
                says=says,
                text=text,
                quantity="max over layers above the dtype floor of "
                f"q_{{l+1}} / q_l, q_l = R_{{l+1}} / R_l, R = geometric mean of {variant}'s "
                "res_comp_rel over sequences, per seed",
                values=list(seeds.values()),
                side="<",
                margin=1.0,
                decides=DECIDES,
                note=_per_seed(seeds),
            )
        )
    skips = [v for v in config.variants if "skip" in v or v == "transformer"]
    if skips:
        members = {v: [_slowest_step(c) for c in seed_curves(res, v).values()] for v in skips}
        found.append(
            for_every(
                "skip-keeps-residual",
                says=SKIPS,
                text="Skip connections keep the residual away "
                f"from 0: it decays slowly (no layer takes it below {SLOW:g} of the layer before) "
                "and never reaches the floor.",
                quantity="least ratio of consecutive layers' mean "
                "res_comp_rel, per seed (0 if any value reached the dtype floor)",
                members={v: m for v, m in members.items() if m},
                side=">",
                margin=SLOW,
                expected=skips,
                decides=DECIDES,
            )
        )
    if "san+mlp" in config.variants:
        found.append(
            _collapsed(
                "mlp-does-not-prevent",
                "san+mlp",
                MLP_ALONE,
                res,
                "An MLP alone (no skip) does not prevent the collapse.",
            )
        )
        found.append(_lambda_claim(config, all_gains[all_gains["variant"] == "san+mlp"]))
    if "san+ln" in config.variants:
        found.append(
            _collapsed(
                "ln-does-not-prevent",
                "san+ln",
                LN,
                res,
                "LayerNorm does not prevent the collapse: with post-LN and no skip the residual "
                "still reaches about 0.",
                note=_ln_lag(per_layer),
            )
        )
    return found


def _collapsed(
    id_: str, variant: str, says: Quote, res: pd.DataFrame, text: str, note: str = ""
) -> Claim:
    """`variant`'s last-layer residual is below COLLAPSED_LEVEL, per seed (a floor value 0)."""
    seeds = {s: _last(c) for s, c in seed_curves(res, variant).items()}
    return finding(
        id_,
        says=says,
        text=text,
        quantity=f"last-layer mean res_comp_rel of {variant} per "
        "seed (0 when a value reached the dtype floor)",
        values=list(seeds.values()),
        side="<",
        margin=COLLAPSED_LEVEL,
        decides=DECIDES,
        note="; ".join(p for p in (_per_seed(seeds), note) if p),
    )


def _lambda_gap(mlp: pd.DataFrame, gain: float) -> tuple[int, float]:
    """(layer, log10 R(gain) / R(1)) of san+mlp's geometric-mean residual at the deepest layer
    where the gain-1 arm is above the dtype floor; NaN when an arm is missing or no such layer
    (a gain arm at the floor counts at its floor value)."""
    stats = layer_stats(mlp, ("mlp_gain",))
    wide = stats.pivot(index="layer", columns="mlp_gain", values="geo_mean")
    floored = stats.pivot(index="layer", columns="mlp_gain", values="any_at_floor")
    if not {1.0, gain} <= set(wide.columns):
        return 0, np.nan
    above = floored.index[~floored[1.0].astype(bool)]
    layer = int(above.max()) if len(above) else 0
    gap = float(np.log10(wide.loc[layer, gain] / wide.loc[layer, 1.0]))
    return layer, gap if layer > 0 else np.nan


def _lambda_claim(config: Config, mlp: pd.DataFrame) -> Claim:
    """Cor 3.2: the san+mlp arm at mlp_gain keeps a larger residual than the gain-1 arm, in
    every seed's network (the same attention weights)."""
    gain = config.mlp_gain
    seeds = {s: _lambda_gap(part, gain) for s, part in mlp.groupby("seed")}
    return finding(
        "mlp-larger-lambda-slower",
        says=LAMBDA,
        text="A larger MLP Lipschitz constant lambda slows the collapse (c becomes lambda H c).",
        quantity=f"log10(R(gain {gain:g}) / R(gain 1)) of san+mlp's geometric-mean "
        "res_comp_rel at the deepest layer where the gain-1 arm is above the dtype floor, per "
        "seed (decades)",
        values=[g for _, g in seeds.values()],
        side=">",
        margin=0.0,
        decides=DECIDES,
        note=", ".join(f"seed {s}: {g:+.3g} at layer {l}" for s, (l, g) in seeds.items())
        + f"; W_2 times {gain:g}, same attention weights",
    )


def _ln_lag(per_layer: pd.DataFrame) -> str:
    """san+ln's lag behind pure SAN per layer, and what Wu et al. 2024 say about LayerNorm."""
    wide = per_layer.pivot(index="layer", columns="variant", values="geo_mean")
    lag = ""
    if "san" in wide.columns:
        gap = np.log10(wide["san+ln"] / wide["san"]).dropna()
        lag = "san+ln above pure SAN per layer (decades, floor values included): " + ", ".join(
            f"{int(layer)}: {g:.2g}" for layer, g in gap.items()
        )
    return (
        f"{lag}; a lag is a delay, not a prevention. Wu et al. 2024 dispute that LayerNorm "
        "plays no role, with constructed weights (wu2024-counterexample, wu2024-equilibria) "
        "and at random initialisation for masked attention (their Sec. 5: wu2024-masks); this "
        "row tests Dong's sentence on Dong's setting, a random-init SAN with post-LN"
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
