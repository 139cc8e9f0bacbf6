"""toy-collapse: pure attention loses rank doubly exponentially; skip connections stop it.

Paper: Dong, Cordonnier, Loukas, "Attention is not all you need: pure attention loses rank
doubly exponentially with depth", ICML 2021 (arXiv 2103.03404), Thm 2.2 / Cor 2.3 (pure
SAN: r_l <= c r_{l-1}^3 per layer), Cor 3.1 (skips), Cor 3.2 (MLPs), and the shape of Fig. 1
reproduced on the toy network (spec dong2021.md sec. 1, 2, 4).

Network: `rankcollapse.nets.ToyNet` at random initialisation (same attention weights for
every variant of a seed), on Gaussian tokens, in the variants
    san          pure self-attention network, X^l = SA(X^{l-1})
    skip         + attention skip, X + SA(X)
    mlp          + token-wise MLP block (with its own skip)
    ln           + LayerNorm, post (after the sum)
    skip-mlp-ln  + skip + MLP + post-LayerNorm (a post-LN transformer)
Measured per layer l = 0..depth, per sequence: `res_comp_rel` (mean-centred relative
composite residual, the paper's plotted quantity) and `mu_rel`, in float64, each flagged when
it sits at the floor of the dtype that produced the states.

Claims (computed from this run's results):
- san-doubly-exponential: for pure SAN, the per-layer contraction factor
  q_l = R_{l+1} / R_l of the geometric-mean residual R_l shrinks from layer to layer (the log
  residual falls faster than geometrically, as r_l <= c r_{l-1}^3 predicts); measured as the
  largest q_{l+1} / q_l over layers above the dtype floor; expected < 1.
- skip-keeps-residual: every variant with the attention skip keeps its mean residual at the
  last layer above 1e-3 and never reaches the floor, while pure SAN does.
- mlp-ln-do-not-prevent: the MLP alone and the LayerNorm alone do not stop the collapse (the
  paper: MLPs slow it, LayerNorm plays no role): their last-layer residual is below 1e-6.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from rankcollapse.experiments._registry import Claim, Experiment, Summary, Unit, register
from rankcollapse.plot import band_plot

NAME = "toy-collapse"

Variant = Literal["san", "skip", "mlp", "ln", "skip-mlp-ln"]

# NetConfig options of each variant, and how the figure names it.
VARIANTS: dict[str, dict] = {
    "san": {},
    "skip": {"skip": "on"},
    "mlp": {"mlp": True},
    "ln": {"norm": "post"},
    "skip-mlp-ln": {"skip": "on", "mlp": True, "norm": "post"},
}
LABELS = {
    "san": "SAN",
    "skip": "SAN + skip",
    "mlp": "SAN + MLP",
    "ln": "SAN + LN (post)",
    "skip-mlp-ln": "SAN + skip + MLP + LN",
}
METRICS = ["res_comp_rel", "mu_rel"]
DATA_SEED_OFFSET = 10_000  # tokens and weights come from different streams of one seed
SKIP_LEVEL = 1e-3  # "away from 0": the skip claim's level (pure SAN ends near 1e-16)
COLLAPSED_LEVEL = 1e-6  # "collapsed": the MLP / LN claim's level


class Config(BaseModel):
    """A toy network at random initialisation, run in every variant for several seeds."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    variants: list[Variant] = Field(default_factory=lambda: list(VARIANTS), min_length=1)
    """Which variants to run (san, skip, mlp, ln, skip-mlp-ln)."""
    depth: int = Field(8, ge=2, le=96)
    """Number of layers."""
    n_heads: int = Field(2, ge=1, le=64)
    """Attention heads per layer."""
    d_model: int = Field(32, ge=2, le=4096)
    """Token width."""
    n_tokens: int = Field(16, ge=2, le=4096)
    """Tokens per sequence."""
    n_samples: int = Field(8, ge=1, le=1024)
    """Gaussian input sequences per seed."""
    seeds: list[int] = Field(default_factory=lambda: [0, 1, 2], min_length=1)
    """Seeds of weights and inputs (one unit per variant and seed)."""
    dtype: Literal["float64", "float32"] = "float64"
    """Dtype of the network's weights and states (metrics are float64 either way)."""


PRESETS = {
    "quick": {},
    # The BERT-base shape of the paper's Fig. 1 (12 layers, 12 heads, width 768, 32 x 128).
    # About 2 min per unit on one core: use --jobs.
    "paper": {
        "depth": 12,
        "n_heads": 12,
        "d_model": 768,
        "n_tokens": 128,
        "n_samples": 32,
        "seeds": [0, 1, 2],
    },
}


def units(config: Config) -> list[Unit]:
    return [{"variant": v, "seed": s} for v in config.variants for s in config.seeds]


def run_unit(config: Config, unit: Unit) -> pd.DataFrame:
    from rankcollapse.metrics import measure_states, metrics_frame
    from rankcollapse.nets import NetConfig, ToyNet, random_tokens

    net = ToyNet(
        NetConfig(
            n_layers=config.depth,
            n_heads=config.n_heads,
            d_model=config.d_model,
            dtype=config.dtype,
            seed=unit["seed"],
            **VARIANTS[unit["variant"]],
        )
    )
    x = random_tokens(
        config.n_samples,
        config.n_tokens,
        config.d_model,
        seed=DATA_SEED_OFFSET + unit["seed"],
        dtype=net.dtype,
    )
    states = net(x).states  # depth + 1 tensors (n_samples, n_tokens, d_model)
    frames = [
        metrics_frame(measure_states(s, metrics=METRICS, source_dtype=net.dtype), **unit, layer=l)
        for l, s in enumerate(states)
    ]
    return pd.concat(frames, ignore_index=True)


def summarize(config: Config, results: pd.DataFrame) -> Summary:
    res = results[results["metric"] == "res_comp_rel"]
    per_layer = layer_table(res)
    last = per_layer[per_layer["layer"] == config.depth].set_index("variant")
    claims = []
    if "san" in config.variants:
        claims.append(doubly_exponential_claim(per_layer[per_layer["variant"] == "san"]))
    skips = [v for v in config.variants if "skip" in v]
    if skips:
        reached_floor = bool(per_layer[per_layer["variant"].isin(skips)]["any_at_floor"].any())
        value = float(last.loc[skips, "mean"].min()) if not reached_floor else 0.0
        san_last = format(last.loc["san", "mean"], ".2g") if "san" in last.index else "not run"
        claims.append(
            Claim.check(
                "skip-keeps-residual",
                "Skip connections keep the residual away from 0 (no doubly exponential "
                "collapse; Cor. 3.1).",
                f"min over {', '.join(skips)} of the last-layer mean res_comp_rel "
                "(0 if any value reached the dtype floor)",
                value,
                ">",
                SKIP_LEVEL,
                note=f"pure SAN at the last layer: {san_last}",
            )
        )
    alone = [v for v in ("mlp", "ln") if v in config.variants]
    if alone:
        claims.append(
            Claim.check(
                "mlp-ln-do-not-prevent",
                "An MLP alone or a LayerNorm alone does not prevent the collapse (Cor. 3.2; "
                "LayerNorm plays no role).",
                f"max over {', '.join(alone)} of the last-layer mean res_comp_rel",
                float(last.loc[alone, "mean"].max()),
                "<",
                COLLAPSED_LEVEL,
            )
        )
    figure_data = results.assign(
        variant=pd.Categorical(
            results["variant"].map(LABELS), categories=[LABELS[v] for v in config.variants]
        )
    )
    figure = band_plot(
        figure_data,
        x="layer",
        hue="variant",
        panel="metric",
        logy=True,
        title=f"Toy network at init: {config.n_heads} heads, width {config.d_model}, "
        f"{config.n_tokens} tokens; mean +- std over {config.n_samples} sequences x "
        f"{len(config.seeds)} seeds",
        ylabel="relative residual",
    )
    floor_note = (
        f"Values at or below the floor of {config.dtype} (10 x eps) are flagged at_floor and "
        "drawn as hollow markers; the doubly exponential claim uses only the layers where no "
        "sequence is at the floor."
    )
    wide = per_layer.pivot(index="layer", columns="variant", values="mean")
    return Summary(
        tables={
            "mean res_comp_rel per layer": wide[config.variants]
            .rename_axis(columns=None)
            .reset_index(),
            "per-layer statistics of res_comp_rel": per_layer,
        },
        figures={"residual vs layer": figure},
        claims=claims,
        notes=[floor_note],
    )


def layer_table(res: pd.DataFrame) -> pd.DataFrame:
    """Per variant and layer: mean, std, geometric mean and floor flag over sequences and seeds."""
    table = (
        res.assign(log=np.log(res["value"].clip(lower=np.finfo(float).tiny)))
        .groupby(["variant", "layer"], sort=False)
        .agg(
            mean=("value", "mean"),
            std=("value", "std"),
            log_mean=("log", "mean"),
            any_at_floor=("at_floor", "any"),
        )
        .reset_index()
    )
    table["geo_mean"] = np.exp(table.pop("log_mean"))
    return table


def doubly_exponential_claim(san: pd.DataFrame) -> Claim:
    """Contraction factors q_l = R_{l+1} / R_l of the geometric-mean residual must shrink."""
    above = san[~san["any_at_floor"]].sort_values("layer")
    # Only the unbroken run of layers from the input up to the first floor value counts.
    layers = above["layer"].to_numpy()
    run = above[layers == np.arange(len(layers)) + layers[0]] if len(layers) else above
    q = run["geo_mean"].to_numpy()[1:] / run["geo_mean"].to_numpy()[:-1]
    acceleration = q[1:] / q[:-1]
    measured = float(acceleration.max()) if len(acceleration) else float("nan")
    factors = ", ".join(f"{v:.3g}" for v in q)
    return Claim.check(
        "san-doubly-exponential",
        "Pure self-attention collapses doubly exponentially: the log residual falls faster "
        "than geometrically (Thm 2.2: r_l <= c r_{l-1}^3).",
        "max over layers of q_{l+1} / q_l, q_l = R_{l+1} / R_l (R = geometric mean of "
        "res_comp_rel, layers above the dtype floor)",
        measured,
        "<",
        1.0,
        note=f"contraction factors q_l for layers {int(run['layer'].min())}..."
        f"{int(run['layer'].max())}: {factors}"
        + ("" if len(acceleration) else "; fewer than 3 layers above the floor"),
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
    )
)
