"""dong2021-bounds: measured residuals of toy networks against Dong et al.'s bounds.

Paper: Dong, Cordonnier, Loukas 2021 (arXiv 2103.03404), Thm 2.2, Cor 2.3, 3.1, 3.2 (spec
dong2021.md sec. 4). With r_l = ||res(X^l)||_{1,inf}: a pure SAN obeys r_l <= c r_{l-1}^3 with
c = 4 gamma beta / sqrt(d_qk) (times H for H heads, times lambda with an MLP after each layer);
unrolled, r_L <= c^{(3^L - 1)/2} r_0^{3^L}, informative while sqrt(c) r_0 < 1. With skips no
such bound exists (Cor 3.1): a skip network with zero value weights keeps r_L = r_0.

Variants (random init, `rankcollapse.nets.ToyNet`, float64):
    san-1head   pure single-head SAN                (Thm 2.2)
    san         pure SAN with n_heads heads         (Cor 2.3)
    san+mlp     + MLP after each layer, no skip     (Cor 3.2)
    san+skip    + attention skip (measured only: no bound applies)
    cor3.1      skip network with zero value weights (the Cor 3.1 construction)
Inputs: X = 1 x^T + spread * Z with x, Z Gaussian, for several spreads: the large ones show the
collapse from ordinary inputs, the small ones start close enough to rank 1 for the bound to be
informative (sqrt(c) r_0 < 1).

Claims:
- cubic-contraction: for pure SANs, the per-layer log-residual ratio log rho_l / log rho_{l-1}
  (rho = relative residual res_comp_rel, layers with rho_{l-1} < 0.1 and rho_l above the float64
  floor) is near 3 (|median - 3| < 0.5), the cubic rate of Thm 2.2.
- bound-holds: every measured r_l above the floor lies below its bound (per-layer and unrolled)
  on the samples where the bound is informative.
- skip-keeps-residual: the Cor 3.1 network keeps r_L = r_0 exactly.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from pydantic import BaseModel, ConfigDict, Field

from rankcollapse.experiments._registry import Claim, Experiment, Summary, Unit, register

NAME = "dong2021-bounds"

Variant = Literal["san-1head", "san", "san+mlp", "san+skip", "cor3.1"]
VARIANTS: dict[str, dict] = {
    "san-1head": {"n_heads": 1},
    "san": {},
    "san+mlp": {"mlp": True, "mlp_skip": False},
    "san+skip": {"skip": "on"},
    "cor3.1": {},
}
BOUNDED = ("san-1head", "san", "san+mlp")
DATA_SEED_OFFSET = 10_000
RATIO_WINDOW = 0.1  # logs of relative residuals above this are too close to 0 to divide


class Config(BaseModel):
    """Toy networks at init, measured residual per layer and Dong's bounds from their weights."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    variants: list[Variant] = Field(default_factory=lambda: list(VARIANTS), min_length=1)
    """Variants to run (san-1head, san, san+mlp, san+skip, cor3.1)."""
    depth: int = Field(6, ge=2, le=64)
    """Number of layers."""
    n_heads: int = Field(4, ge=1, le=64)
    """Heads per layer (san-1head always has 1)."""
    d_model: int = Field(32, ge=2, le=2048)
    """Token width."""
    n_tokens: int = Field(16, ge=2, le=1024)
    """Tokens per sequence."""
    n_samples: int = Field(4, ge=1, le=1024)
    """Input sequences per seed and spread."""
    spreads: list[float] = Field(default_factory=lambda: [0.3, 0.01, 0.001, 0.0001], min_length=1)
    """Inputs X = 1 x^T + spread * Z: how far tokens start from their common point."""
    gamma: float = Field(1.0, gt=0)
    """The paper's softmax constant gamma used in c = 4 gamma beta / sqrt(d_qk)."""
    seeds: list[int] = Field(default_factory=lambda: [0, 1, 2], min_length=1)
    """Seeds of weights and inputs (one unit per variant and seed)."""


PRESETS = {
    "quick": {},
    "paper": {
        "depth": 12,
        "n_heads": 12,
        "d_model": 768,
        "n_tokens": 128,
        "n_samples": 32,
        "spreads": [1.0, 0.3, 0.01, 0.001, 0.0001],
        "seeds": [0, 1, 2, 3, 4],
    },
}


def units(config: Config) -> list[Unit]:
    return [{"variant": v, "seed": s} for v in config.variants for s in config.seeds]


def _inputs(config: Config, seed: int):
    """(len(spreads) * n_samples, n, d): sample i has spread spreads[i // n_samples]."""
    import torch

    from rankcollapse.nets import random_tokens

    z = random_tokens(
        config.n_samples, config.n_tokens + 1, config.d_model, seed=DATA_SEED_OFFSET + seed
    )
    return torch.cat([z[:, :1] + spread * z[:, 1:] for spread in config.spreads])


def run_unit(config: Config, unit: Unit) -> pd.DataFrame:
    import torch

    from rankcollapse.metrics import measure_states, metrics_frame
    from rankcollapse.nets import NetConfig, ToyNet
    from rankcollapse.theory import bound_frame, skip_network_without_collapse

    variant, seed = unit["variant"], unit["seed"]
    if variant == "cor3.1":
        net = skip_network_without_collapse(config.depth, config.n_heads, config.d_model, seed=seed)
    else:
        options = {"n_heads": config.n_heads, **VARIANTS[variant]}
        net = ToyNet(NetConfig(n_layers=config.depth, d_model=config.d_model, seed=seed, **options))
    x = _inputs(config, seed)
    with torch.no_grad():
        states = net(x).states
    frames = [
        metrics_frame(
            measure_states(s, metrics=["res_comp", "res_comp_rel"], source_dtype=net.dtype),
            layer=layer,
        )
        for layer, s in enumerate(states)
    ]
    if variant in BOUNDED:
        bounds = bound_frame(net, x, gamma=config.gamma)
        frames.append(bounds[~bounds["metric"].isin(["r"])])
    frame = pd.concat(frames, ignore_index=True)
    frame.insert(0, "spread", [config.spreads[i // config.n_samples] for i in frame["sample"]])
    frame.insert(0, "seed", seed)
    frame.insert(0, "variant", variant)
    return frame


def log_ratios(results: pd.DataFrame) -> pd.Series:
    """log rho_l / log rho_{l-1} of res_comp_rel, where rho_{l-1} < RATIO_WINDOW and rho_l is
    above the floor."""
    rel = results[results["metric"] == "res_comp_rel"].sort_values("layer")
    ratios = []
    for _, seq in rel.groupby(["variant", "seed", "sample"]):
        value, floor = seq["value"].to_numpy(), seq["at_floor"].to_numpy()
        for l in range(1, len(value)):
            if value[l - 1] < RATIO_WINDOW and not floor[l] and not floor[l - 1]:
                ratios.append(math.log(value[l]) / math.log(value[l - 1]))
    return pd.Series(ratios, dtype=float)


def bound_margins(results: pd.DataFrame) -> pd.DataFrame:
    """Per informative sample and layer above the floor: log10 bound - log10 measured."""
    bounded = results[results["variant"].isin(BOUNDED)]
    keys = ["variant", "seed", "sample"]
    informative = bounded[bounded["metric"] == "informative"].set_index(keys)["value"]
    wide = bounded[bounded["metric"].isin(["log10_r", "log10_one_step", "log10_unrolled"])]
    floor = wide[wide["metric"] == "log10_r"].set_index([*keys, "layer"])["at_floor"]
    wide = wide.pivot_table(index=[*keys, "layer"], columns="metric", values="value")
    wide = wide[(~floor.reindex(wide.index).astype(bool)).to_numpy()]
    wide = wide[wide.index.get_level_values("layer") > 0]
    keep = informative.reindex(wide.index.droplevel("layer")).to_numpy() == 1.0
    wide = wide[keep]
    return pd.DataFrame(
        {
            "one_step": wide["log10_one_step"] - wide["log10_r"],
            "unrolled": wide["log10_unrolled"] - wide["log10_r"],
        }
    )


def _figure(config: Config, results: pd.DataFrame) -> Figure:
    """Per variant: measured log10 r_l per spread (mean, band of one std), and the bounds'
    means over the informative samples only (elsewhere they grow and say nothing)."""
    fig = Figure(figsize=(3.6 * len(config.variants), 3.4), layout="constrained")
    axes = fig.subplots(1, len(config.variants), squeeze=False, sharey=True)[0]
    for ax, variant in zip(axes, config.variants):
        rows = results[results["variant"] == variant]
        measured = rows[rows["metric"] == "res_comp"].assign(
            log=lambda d: np.log10(d["value"].clip(lower=1e-300))
        )
        for spread, part in measured.groupby("spread", sort=False):
            stats = part.groupby("layer")["log"].agg(["mean", "std"])
            ax.plot(stats.index, stats["mean"], "o-", ms=3, label=f"measured, spread {spread:g}")
            ax.fill_between(
                stats.index, stats["mean"] - stats["std"], stats["mean"] + stats["std"], alpha=0.15
            )
        floored = measured[measured["at_floor"]].groupby("layer")["log"].mean()
        ax.plot(floored.index, floored, "o", mfc="none", color="grey", label="at float64 floor")
        keys = ["seed", "sample"]
        informative = rows[(rows["metric"] == "informative") & (rows["value"] == 1.0)][keys]
        for metric, style in (("log10_one_step", "k--"), ("log10_unrolled", "k:")):
            bound = rows[rows["metric"] == metric].merge(informative, on=keys)
            bound = bound.replace([-np.inf, np.inf], np.nan)
            if len(bound):
                line = bound.groupby("layer")["value"].mean()
                ax.plot(
                    line.index,
                    line,
                    style,
                    label=metric.removeprefix("log10_").replace("_", "-") + " bound",
                )
        ax.set_title(variant, fontsize=10)
        ax.set_xlabel("layer")
        ax.set_ylim(-20, 5)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("log10 ||res(X^l)||_{1,inf}")
    axes[0].legend(fontsize=6)
    fig.suptitle(
        f"Measured residual vs Dong et al.'s bounds (gamma = {config.gamma:g}; bounds "
        "averaged over the samples where they are informative)",
        fontsize=10,
    )
    return fig


def summarize(config: Config, results: pd.DataFrame) -> Summary:
    claims = []
    pure = [v for v in config.variants if v in BOUNDED]
    constants = pd.DataFrame()
    if pure:
        ratios = log_ratios(results[results["variant"].isin(pure)])
        median = float(ratios.median()) if len(ratios) else math.nan
        claims.append(
            Claim.check(
                "cubic-contraction",
                "Pure SANs contract cubically: log rho_l / log rho_{l-1} is near 3 (Thm 2.2).",
                "|median log-residual ratio - 3| over pure-SAN layers above the float64 floor",
                abs(median - 3),
                "<",
                0.5,
                note=f"median ratio {median:.3g} over {len(ratios)} layer steps",
            )
        )
        margins = bound_margins(results)
        holds = float(((margins >= 0).all(axis=1)).mean()) if len(margins) else math.nan
        claims.append(
            Claim.check(
                "bound-holds",
                "The bound is never below the measured residual where it is informative.",
                "share of (informative sample, layer above floor) with both bounds >= r_l",
                holds,
                ">=",
                1.0,
                note=f"{len(margins)} layer values checked; smallest margin "
                f"{margins.min().min() if len(margins) else math.nan:.3g} decades",
            )
        )
        scalars = results[results["metric"].isin(["c", "informative"])]
        constants = (
            scalars.pivot_table(index="variant", columns="metric", values="value", aggfunc="mean")
            .rename(columns={"c": "mean c", "informative": "share informative"})
            .reset_index()
        )
    if "cor3.1" in config.variants:
        res = results[(results["variant"] == "cor3.1") & (results["metric"] == "res_comp")]
        first = res[res["layer"] == 0].set_index(["seed", "sample"])["value"]
        last = res[res["layer"] == config.depth].set_index(["seed", "sample"])["value"]
        claims.append(
            Claim.check(
                "skip-keeps-residual",
                "A skip network with zero value weights never shrinks its residual (Cor 3.1).",
                "max |r_L / r_0 - 1| of the Cor 3.1 construction",
                float((last / first - 1).abs().max()),
                "<",
                1e-12,
            )
        )
    return Summary(
        tables={"constants per variant": constants} if len(constants) else {},
        figures={"residual vs bounds": _figure(config, results)},
        claims=claims,
        notes=[
            (
                f"gamma = {config.gamma:g} (the paper's softmax constant); c includes H and, for "
                "san+mlp, lambda = max|act'| ||W_1||_{1,inf} ||W_2||_{1,inf}."
            ),
            (
                "The bound says something only where sqrt(c) r_0 < 1 ('share informative'); "
                "elsewhere it grows and is drawn only for completeness."
            ),
            (
                "Residuals are mean-centred (res_comp); at_floor marks relative residuals at the "
                "float64 floor, excluded from the ratio and bound checks."
            ),
        ],
    )


register(
    Experiment(
        name=NAME,
        description="Toy SANs: measured residual per layer against Dong et al.'s cubic bounds.",
        config=Config,
        presets=PRESETS,
        units=units,
        run_unit=run_unit,
        summarize=summarize,
    )
)
