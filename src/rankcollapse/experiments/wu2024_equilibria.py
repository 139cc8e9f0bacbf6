"""wu2024-equilibria: LayerNorm equilibria of every rank (Wu et al. 2024, Thm 3).

Paper: Wu, Ajorlou, Wang, Jegelka, Jadbabaie, "On the role of attention masks and LayerNorm
in transformers", NeurIPS 2024 (arXiv 2405.18781), Thm 3 and the 2-D example. The dynamics are
X -> LN(A X W_V) with causal uniform attention (W_Q = W_K = 0) and LN = each token divided by
its norm (`rankcollapse.theory.equilibria`).

Two parts, one unit each:

- Theorem 3 (N = d in `sizes`, W_V = I + w J, w = `w_over_n` N): every equilibrium of rank
  k = 1..N with all 2^k sign choices; measured fixed-point residual, numerical rank, minimum
  singular value and stable rank (with the bound N / (N - (N-1)/w^2) for the full-rank ones).
  Then stability: each equilibrium perturbed by Gaussian noise of each scale in
  `perturbations` (tokens re-normalised), and `n_random` Gaussian inputs, run for `n_layers`
  layers; we report which keep numerical rank >= 2. The map preserves rank exactly (A, W_V
  invertible, LN a positive diagonal), so a loss of rank is numerical: sigma_2 / sigma_1 falls
  like the powers of A (second eigenvalue 1/2) until it is below `rank_rtol`.
- The 2-D counterexample (N = d = 2, W_V = [[1, w], [0, 1]], w in `counterexample_w`): token 2
  from a ring of `n_angles` start angles, token 1 at each angle of `token1_angles` (90 = the
  paper's (0, 1)). With token 1 at (0, 1) the measured basin of B is compared with the spec's
  arc from arccos(-1/w) to 270 degrees; the same weights without LN must collapse.

Claims: equilibria are fixed points to 1e-12 with exactly the stated ranks; full-rank ones
satisfy the stable-rank bound; the basin's endpoints match the arc within the ring's
resolution; without LN every start collapses; and (honestly) most random inputs with d >= 3
still collapse to rank 1, i.e. the equilibria's basins are small.
"""

from __future__ import annotations

import math
from typing import Annotated

import numpy as np
import pandas as pd
import torch
from matplotlib.figure import Figure
from pydantic import BaseModel, ConfigDict, Field

from rankcollapse.experiments._registry import Claim, Experiment, Summary, Unit, register
from rankcollapse.metrics import measure_states, min_sv, numerical_rank, stable_rank
from rankcollapse.plot import band_plot, line_plot
from rankcollapse.theory.equilibria import (
    counterexample_basin_arc,
    counterexample_point_b,
    fixed_point_residual,
    ring_inputs,
    theorem3_equilibria,
    theorem3_stable_rank_bound,
    theorem3_value_matrix,
    trajectory,
    unit_norm,
)

NAME = "wu2024-equilibria"


class Config(BaseModel):
    """Sizes and lengths of the Theorem 3 and 2-D counterexample runs."""

    model_config = ConfigDict(extra="forbid")

    sizes: list[Annotated[int, Field(ge=2)]] = Field([3, 4, 6, 8], min_length=1)
    """N = d of each Theorem 3 run (each >= 2)."""
    w_over_n: float = Field(1.0, ge=1.0)
    """w / N for Theorem 3 (the theorem needs w >= N)."""
    n_layers: int = Field(200, ge=1)
    """Layers T run from perturbed equilibria and random inputs."""
    perturbations: list[Annotated[float, Field(gt=0.0)]] = Field([1e-8, 1e-4], min_length=1)
    """Std of the Gaussian noise added to each equilibrium before re-normalising."""
    n_perturbations: int = Field(1, ge=1)
    """Perturbed copies of each equilibrium per scale."""
    n_random: int = Field(256, ge=1)
    """Gaussian random inputs per size."""
    rank_rtol: float = Field(1e-10, gt=0.0, lt=1.0)
    """A singular value counts towards the numerical rank when > rank_rtol * sigma_max."""
    counterexample_w: list[Annotated[float, Field(gt=1.0)]] = Field([1.5, 2.0, 4.0], min_length=1)
    """w of the 2-D counterexample (each > 1)."""
    token1_angles: list[float] = Field([90.0, 45.0, 135.0, 10.0], min_length=1)
    """Start angles (degrees) of token 1 in the 2-D example; 90 is the paper's (0, 1)."""
    n_angles: int = Field(360, ge=8)
    """Start angles of token 2 on the ring (resolution 360 / n_angles degrees)."""
    counterexample_layers: int = Field(1000, ge=10)
    """Layers run in the 2-D example."""
    n_drawn: int = Field(24, ge=1)
    """Ring starts whose whole trajectory is kept for the figure."""
    seed: int = 0
    """Seed of the perturbations and random inputs."""


PRESETS = {
    "quick": {},
    "paper": {
        "n_layers": 1000,
        "perturbations": [1e-10, 1e-8, 1e-6, 1e-4, 1e-2],
        "n_perturbations": 4,
        "n_random": 2048,
        "n_angles": 1440,
        "counterexample_layers": 3000,
        "n_drawn": 36,
    },
}

# A token-2 endpoint within this distance of B (or of token 1) counts as reaching it. Token 1
# itself approaches its pole only like 1/(w t) when it starts off (0, +-1), hence not 1e-12.
_CLOSE = 1e-2
_COLLAPSED = 1e-6


def units(config: Config) -> list[Unit]:
    return [{"part": "theorem3", "n_tokens": n} for n in config.sizes] + [
        {"part": "counterexample", "w": w} for w in config.counterexample_w
    ]


def run_unit(config: Config, unit: Unit) -> pd.DataFrame:
    if unit["part"] == "theorem3":
        return _theorem3(config, unit["n_tokens"])
    return _counterexample(config, unit["w"])


def _theorem3(config: Config, n: int) -> pd.DataFrame:
    w = config.w_over_n * n
    w_v = theorem3_value_matrix(n, w)
    generator = torch.Generator().manual_seed(config.seed * 1000 + n)
    frames, equilibria, ranks = [], [], []
    for k in range(1, n + 1):
        found = theorem3_equilibria(n, n, w, k)
        equilibria += found
        ranks += [k] * len(found)
    x = torch.stack(equilibria)  # (E, n, n)
    rank = torch.tensor(ranks)
    singular = torch.linalg.svdvals(x)  # (E, n)
    per_state = {
        "fixed_point_residual": fixed_point_residual(x, w_v),
        "numerical_rank": numerical_rank(x, rtol=config.rank_rtol),
        # the k-th singular value (smallest non-zero one) and the (k+1)-th (zero in exact
        # arithmetic); min_sv is the k-th for the full-rank ones
        "sigma_k": singular[torch.arange(len(x)), rank - 1],
        "sigma_k+1": torch.cat([singular, torch.zeros(len(x), 1, dtype=torch.float64)], dim=1)[
            torch.arange(len(x)), rank
        ],
        "min_sv": min_sv(x),
        "stable_rank": stable_rank(x),
        "stable_rank_bound": torch.where(
            rank == n, theorem3_stable_rank_bound(n, w), torch.nan
        ).double(),
    }
    frames.append(_frame(per_state, part="theorem3", start="equilibrium", rank=rank))

    for scale in config.perturbations:
        starts = x.repeat(config.n_perturbations, 1, 1)
        noise = torch.randn(starts.shape, generator=generator, dtype=torch.float64)
        final = trajectory(unit_norm(starts + scale * noise), w_v, config.n_layers)[-1]
        frames.append(
            _frame(
                _stability(final, config.rank_rtol, starts),
                part="stability",
                start=f"perturbed {scale:g}",
                rank=rank.repeat(config.n_perturbations),
            )
        )
    random = unit_norm(torch.randn(config.n_random, n, n, generator=generator, dtype=torch.float64))
    final = trajectory(random, w_v, config.n_layers)[-1]
    frames.append(
        _frame(
            _stability(final, config.rank_rtol),
            part="stability",
            start="random",
            rank=numerical_rank(random, rtol=config.rank_rtol),
        )
    )
    return pd.concat(frames, ignore_index=True).assign(n_tokens=n, w=w)


def _stability(final: torch.Tensor, rtol: float, starts: torch.Tensor | None = None) -> dict:
    s = torch.linalg.svdvals(final)  # (b, n)
    values = {
        "numerical_rank": numerical_rank(final, rtol=rtol),
        "sv_ratio_2_1": s[:, 1] / s[:, 0],
    }
    if starts is not None:
        values["distance_to_start"] = (final - starts).flatten(1).norm(dim=1)
    return values


def _frame(values: dict[str, torch.Tensor], **ids) -> pd.DataFrame:
    """Long rows: ids (scalars or per-sample tensors), sample, metric, value."""
    frames = []
    for metric, value in values.items():
        value = value.double().numpy()
        columns = {k: (v.numpy() if isinstance(v, torch.Tensor) else v) for k, v in ids.items()}
        frames.append(
            pd.DataFrame(
                {**columns, "sample": np.arange(len(value)), "metric": metric, "value": value}
            )
        )
    return pd.concat(frames, ignore_index=True)


def _counterexample(config: Config, w: float) -> pd.DataFrame:
    w_v = theorem3_value_matrix(2, w)
    b = counterexample_point_b(w)
    layers = _layer_grid(config.counterexample_layers)
    drawn = np.linspace(0, config.n_angles, config.n_drawn, endpoint=False).astype(int)
    frames = []
    for token1 in config.token1_angles:
        radians = math.radians(token1)
        angles, x = ring_inputs(config.n_angles, (math.cos(radians), math.sin(radians)))
        ids = {"part": "counterexample", "token1_angle": token1, "start_angle": angles}
        for norm in (True, False):
            states = trajectory(x, w_v, config.counterexample_layers, norm=norm)  # (T+1, b, 2, 2)
            final = states[-1]
            label = "LN" if norm else "no LN"
            gap = (final[:, 1] - final[:, 0]).norm(dim=-1)
            pole = torch.sign(final[:, 0, 1:2])  # token 1's pole, (0, +1) or (0, -1)
            frames.append(
                _frame(
                    {
                        "final_angle": torch.rad2deg(torch.atan2(final[:, 1, 1], final[:, 1, 0]))
                        % 360.0,
                        "reaches_b": ((final[:, 1] - pole * b).norm(dim=-1) < _CLOSE).double(),
                        "collapsed": (gap < _COLLAPSED).double(),
                    },
                    **ids,
                    norm=label,
                )
            )
            if token1 == 90.0:  # the paper's start: the mu curves of the figure
                values = measure_states(
                    states[torch.as_tensor(layers)], metrics=["mu_rel"], source_dtype=torch.float64
                )["mu_rel"]  # (len(layers), n_angles)
                frames.append(
                    pd.DataFrame(
                        {
                            "part": "counterexample",
                            "token1_angle": token1,
                            "norm": label,
                            "layer": np.repeat(layers, config.n_angles),
                            "start_angle": np.tile(angles.numpy(), len(layers)),
                            "metric": "mu_rel",
                            "value": values.value.flatten().numpy(),
                            "at_floor": values.at_floor.flatten().numpy(),
                        }
                    )
                )
            if norm:
                # (len(layers), n_drawn, 2, 2)
                kept = states[torch.as_tensor(layers)][:, torch.as_tensor(drawn)]
                for token in (0, 1):
                    for axis, metric in ((0, "x"), (1, "y")):
                        frames.append(
                            pd.DataFrame(
                                {
                                    "part": "trajectory",
                                    "token1_angle": token1,
                                    "norm": label,
                                    "token": token + 1,
                                    "start_angle": np.tile(angles[drawn].numpy(), len(layers)),
                                    "layer": np.repeat(layers, len(drawn)),
                                    "metric": metric,
                                    "value": kept[:, :, token, axis].flatten().numpy(),
                                }
                            )
                        )
    return pd.concat(frames, ignore_index=True).assign(w=w, n_angles=config.n_angles)


def _layer_grid(n_layers: int) -> np.ndarray:
    """Every layer up to 10, then about 30 log-spaced layers up to `n_layers`."""
    grid = np.concatenate([np.arange(min(n_layers, 10) + 1), np.geomspace(10, n_layers, 30)])
    return np.unique(np.round(grid).astype(int))


# ----------------------------------------------------------------------------- summary


def summarize(config: Config, results: pd.DataFrame) -> Summary:
    summary = Summary()
    integers = {"n_tokens": int, "rank": int}  # a CSV round trip makes them floats (NaN elsewhere)
    thm = results[results["part"] == "theorem3"].astype(integers)
    stab = results[results["part"] == "stability"].astype(integers)
    ce = results[results["part"] == "counterexample"]
    traj = results[results["part"] == "trajectory"]

    if not thm.empty:
        _summarize_theorem3(thm, stab, summary)
    if not ce.empty:
        _summarize_counterexample(config, ce, traj, summary)
    return summary


def _summarize_theorem3(thm: pd.DataFrame, stab: pd.DataFrame, summary: Summary) -> None:
    wide = thm.pivot_table(
        index=["n_tokens", "w", "rank", "sample"], columns="metric", values="value"
    ).reset_index()
    table = (
        wide.groupby(["n_tokens", "w", "rank"])
        .agg(
            equilibria=("sample", "count"),
            max_residual=("fixed_point_residual", "max"),
            rank_min=("numerical_rank", "min"),
            rank_max=("numerical_rank", "max"),
            sigma_k_min=("sigma_k", "min"),
            sigma_k1_max=("sigma_k+1", "max"),
            stable_rank_max=("stable_rank", "max"),
            stable_rank_bound=("stable_rank_bound", "max"),
        )
        .reset_index()
    )
    summary.tables["theorem3_equilibria"] = table
    summary.claims.append(
        Claim.check(
            "thm3-fixed-points",
            "Every Theorem 3 equilibrium is a fixed point of X -> LN(A X W_V) to machine precision.",
            "max |LN(A X W_V) - X| over all equilibria",
            wide["fixed_point_residual"].max(),
            "<",
            1e-12,
        )
    )
    summary.claims.append(
        Claim.check(
            "thm3-ranks",
            "Each rank-k equilibrium has numerical rank exactly k.",
            "fraction of equilibria whose numerical rank equals k",
            (wide["numerical_rank"] == wide["rank"]).mean(),
            ">=",
            1.0,
        )
    )
    full = wide[wide["rank"] == wide["n_tokens"]]
    summary.claims.append(
        Claim.check(
            "thm3-stable-rank",
            "Full-rank equilibria are anisotropic: stable rank <= N / (N - (N-1)/w^2).",
            "max over full-rank equilibria of stable rank - bound",
            (full["stable_rank"] - full["stable_rank_bound"]).max(),
            "<=",
            0.0,
        )
    )

    final = stab[stab["metric"] == "numerical_rank"].assign(keeps_rank_2=lambda d: d["value"] >= 2)
    kept = (
        final.groupby(["n_tokens", "start", "rank"])["keeps_rank_2"].mean().rename("fraction")
    ).reset_index()
    summary.tables["stability_keeps_rank_2"] = kept.pivot_table(
        index=["n_tokens", "rank"], columns="start", values="fraction"
    ).reset_index()
    perturbed = kept[kept["start"] != "random"]
    summary.figures["theorem3_stability"] = line_plot(
        perturbed.rename(columns={"rank": "equilibrium rank k"}),
        x="equilibrium rank k",
        y="fraction",
        hue="start",
        panel="n_tokens",
        title="Perturbed Theorem 3 equilibria: fraction keeping numerical rank >= 2 after T layers",
        ylabel="fraction keeping rank >= 2",
    )
    random = final[(final["start"] == "random") & (final["n_tokens"] >= 3)]
    by_size = random.groupby("n_tokens")["keeps_rank_2"].mean()
    summary.claims.append(
        Claim.check(
            "thm3-small-basins",
            "The equilibria's basins are small for d >= 3: most random inputs still collapse "
            "to numerical rank 1.",
            "largest fraction (over N >= 3) of random inputs keeping rank >= 2 after T layers",
            by_size.max() if len(by_size) else float("nan"),
            "<",
            0.5,
            note=", ".join(f"N={n}: {f:.3f}" for n, f in by_size.items()),
        )
    )


def _summarize_counterexample(
    config: Config, ce: pd.DataFrame, traj: pd.DataFrame, summary: Summary
) -> None:
    ends = ce[ce["layer"].isna()]
    wide = ends.pivot_table(
        index=["w", "token1_angle", "norm", "start_angle"], columns="metric", values="value"
    ).reset_index()
    rows = []
    for w, part in wide[(wide["norm"] == "LN") & (wide["token1_angle"] == 90.0)].groupby("w"):
        inside = part.loc[part["reaches_b"] > 0, "start_angle"]
        spanned = part["start_angle"].between(inside.min(), inside.max())
        start, end = counterexample_basin_arc(w)
        rows.append(
            {
                "w": w,
                "basin_first": inside.min(),
                "arc_start": start,
                "basin_last": inside.max(),
                "arc_end": end,
                "resolution": 360.0 / part["start_angle"].size,
                "contiguous": inside.size == spanned.sum(),
            }
        )
    basin = pd.DataFrame(rows)
    summary.tables["counterexample_basin"] = basin
    summary.tables["counterexample_outcomes"] = (
        wide.groupby(["w", "token1_angle", "norm"])
        .agg(reaches_b=("reaches_b", "mean"), collapsed=("collapsed", "mean"))
        .reset_index()
    )
    if not basin.empty:
        deviation = np.maximum(
            (basin["basin_first"] - basin["arc_start"]).abs(),
            (basin["basin_last"] - basin["arc_end"]).abs(),
        )
        summary.claims.append(
            Claim.check(
                "ce-basin-arc",
                "With token 1 at (0, 1), token 2 reaches B exactly from the arc "
                "arccos(-1/w) -> 270 degrees (one contiguous arc).",
                "largest gap (degrees, over w) between measured basin endpoints and the arc, "
                "in units of the ring resolution",
                (deviation / basin["resolution"]).max()
                if basin["contiguous"].all()
                else float("nan"),
                "<=",
                1.0,
            )
        )
        summary.figures["counterexample_basin"] = _basin_figure(wide[wide["norm"] == "LN"])
    no_ln = ce[(ce["norm"] == "no LN") & (ce["metric"] == "mu_rel") & ce["layer"].notna()]
    last = no_ln[no_ln["layer"] == no_ln["layer"].max()]
    summary.claims.append(
        Claim.check(
            "ce-no-ln-collapses",
            "Without LN the same weights collapse: every start ends with identical tokens.",
            "largest mu_rel at the last layer without LN, over all starts and w",
            last["value"].max(),
            "<",
            1e-10,
        )
    )
    mu = ce[(ce["metric"] == "mu_rel") & ce["layer"].notna() & (ce["token1_angle"] == 90.0)]
    ends_at_b = wide[(wide["norm"] == "LN") & (wide["token1_angle"] == 90.0)].set_index(
        ["w", "start_angle"]
    )["reaches_b"]
    at_b = ends_at_b.reindex(pd.MultiIndex.from_frame(mu[["w", "start_angle"]])).to_numpy() > 0
    group = np.where(
        mu["norm"] == "no LN", "no LN", np.where(at_b, "LN, start in basin", "LN, other starts")
    )
    summary.figures["counterexample_mu"] = band_plot(
        mu.assign(
            layer=mu["layer"].astype(int).clip(lower=1),
            at_floor=mu["at_floor"].astype(bool),
            outcome=group,
        ),
        hue="outcome",
        panel="w",
        logx=True,
        title="2-D counterexample, token 1 at (0, 1): mu_rel over the ring of starts "
        "(layer 0 drawn at 1)",
        ylabel="mu_rel",
    )
    if not traj.empty:
        summary.figures["counterexample_trajectories"] = _trajectory_figure(traj)


def _basin_figure(wide: pd.DataFrame) -> Figure:
    """Final angle of token 2 against its start angle, per w, with the spec's arc shaded."""
    ws = sorted(wide["w"].unique())
    starts = sorted(wide["token1_angle"].unique())
    fig = Figure(figsize=(4.2 * len(ws), 3.6), layout="constrained")
    axes = fig.subplots(1, len(ws), squeeze=False, sharey=True)[0]
    for ax, w in zip(axes, ws):
        start, end = counterexample_basin_arc(w)
        ax.axvspan(start, end, color="0.85", label="spec arc (token 1 at 90)")
        for i, token1 in enumerate(starts):
            part = wide[(wide["w"] == w) & (wide["token1_angle"] == token1)]
            ax.plot(
                part["start_angle"],
                part["final_angle"],
                ".",
                ms=2,
                color=f"C{i}",
                label=f"token 1 at {token1:g} deg",
            )
        ax.set_title(f"w = {w:g}", fontsize=10)
        ax.set_xlabel("start angle of token 2 (deg)")
        ax.set_xlim(0, 360)
    axes[0].set_ylabel("final angle of token 2 (deg)")
    axes[-1].legend(fontsize=7, markerscale=4)
    fig.suptitle("2-D counterexample with LN: where token 2 ends, by start", fontsize=10)
    return fig


def _trajectory_figure(traj: pd.DataFrame) -> Figure:
    """Token trajectories on the unit circle: one panel per (w, token 1 start)."""
    keys = list(traj.groupby(["w", "token1_angle"]).groups)
    cols = len(traj["token1_angle"].unique())
    rows = math.ceil(len(keys) / cols)
    fig = Figure(figsize=(3.0 * cols, 3.0 * rows), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False).flatten()
    circle = np.linspace(0, 2 * np.pi, 200)
    for ax, (w, token1) in zip(axes, keys):
        part = traj[(traj["w"] == w) & (traj["token1_angle"] == token1)]
        ax.plot(np.cos(circle), np.sin(circle), color="0.8", lw=0.8)
        wide = part.pivot_table(
            index=["token", "start_angle", "layer"], columns="metric", values="value"
        ).reset_index()
        for (token, _), path in wide.groupby(["token", "start_angle"]):
            color = "black" if token == 1 else "C0"
            ax.plot(path["x"], path["y"], "-", lw=0.6, color=color, alpha=0.6)
            ax.plot(path["x"].iloc[-1], path["y"].iloc[-1], "o", ms=2, color=color)
        b = counterexample_point_b(w).numpy()
        ax.plot(*b, "r*", ms=8)
        ax.set_title(f"w = {w:g}, token 1 at {token1:g} deg", fontsize=8)
        ax.set_aspect("equal")
        ax.set_xticks([])
        ax.set_yticks([])
    for ax in axes[len(keys) :]:
        ax.set_visible(False)
    fig.suptitle(
        "2-D counterexample with LN: token 2 (blue) and token 1 (black); red star = B", fontsize=10
    )
    return fig


register(
    Experiment(
        name=NAME,
        description="Wu 2024 Thm 3: LN equilibria of every rank, their stability, and the 2-D "
        "counterexample's basin",
        config=Config,
        presets=PRESETS,
        units=units,
        run_unit=run_unit,
        summarize=summarize,
    )
)
