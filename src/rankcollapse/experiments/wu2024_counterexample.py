"""wu2024-counterexample: the 2-D LayerNorm counterexample and its basin (Wu et al. 2024).

Paper: Wu, Ajorlou, Wang, Jegelka, Jadbabaie, "On the role of attention masks and LayerNorm
in transformers", NeurIPS 2024 (arXiv 2405.18781), the 2-D example before Thm 3; docs/wu2024.md.
Causal mask, N = d = 2, W_Q = W_K = 0 (uniform attention), W_V = [[1, w], [0, 1]], w > 1,
X -> LN(A X W_V) with LN = each token divided by its norm (`rankcollapse.theory.equilibria`).
With token 1 at (0, 1), token 2 goes to B = (-1/w, -sqrt(1 - 1/w^2)) from the open arc running
counter-clockwise from arccos(-1/w) to 270 degrees and collapses onto token 1 elsewhere;
without LN the same weights collapse.

One unit per w in `w`: token 2 from a ring of `n_angles` start angles, token 1 at each angle of
`token1_angles` (90 = the paper's (0, 1)), `n_layers` layers with and without LN.

Checks (the paper's analytic construction evaluated on a fixed ring of starts: they hold by
design and guard the code; they are not findings):
- basin-arc: with token 1 at (0, 1) token 2 reaches B exactly from one contiguous arc whose
  endpoints match arccos(-1/w) and 270 degrees within the ring's resolution, for every w.
- no-ln-collapses: without LN every start ends with identical tokens (mu_rel < 1e-10).
- ln-plays-a-role: Wu et al.'s refutation of Dong et al.'s "LayerNorm plays no role": with the
  same weights, the share of starts (token 1 at (0, 1)) that end at B, a rank-2 equilibrium,
  with LN minus the share that stay apart (mu_rel >= 1e-10) without LN exceeds 0.25 for every w
  (the arc is 150 to 180 degrees of the ring: 42-50% of the starts).
"""

from __future__ import annotations

import math
from typing import Annotated

import numpy as np
import pandas as pd
import torch
from pydantic import BaseModel, ConfigDict, Field

from rankcollapse.experiments._registry import Experiment, Summary, Unit, register
from rankcollapse.experiments.verdicts import Claim, check
from rankcollapse.metrics import measure_states
from rankcollapse.plot import band_plot, counterexample_basin, counterexample_trajectories
from rankcollapse.sizes import NLayers
from rankcollapse.theory.equilibria import (
    counterexample_basin_arc,
    counterexample_point_b,
    layer_grid,
    long_frame,
    ring_inputs,
    theorem3_value_matrix,
    trajectory,
)

NAME = "wu2024-counterexample"
CLOSE, COLLAPSED = 1e-2, 1e-6
"""Token 2 within CLOSE of B counts as reaching it (token 1 approaches its pole only like
1/(w t) when it starts off (0, +-1)); tokens within COLLAPSED of each other have merged."""


class Config(BaseModel):
    """Weights, start rings and length of the 2-D counterexample."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    w: list[Annotated[float, Field(gt=1.0)]] = Field([1.5, 2.0, 4.0], min_length=1)
    """w of W_V = [[1, w], [0, 1]] (each > 1)."""
    token1_angles: list[float] = Field([90.0, 45.0, 135.0, 10.0], min_length=1)
    """Start angles (degrees) of token 1; 90 is the paper's (0, 1)."""
    n_angles: int = Field(360, ge=8)
    """Start angles of token 2 on the ring (resolution 360 / n_angles degrees)."""
    n_layers: NLayers = Field(1000, ge=10)
    """Layers run."""
    n_drawn: int = Field(24, ge=1)
    """Ring starts whose whole trajectory is kept for the figure."""


PRESETS = {"quick": {}, "paper": {"n_angles": 1440, "n_layers": 3000, "n_drawn": 36}}


def units(config: Config) -> list[Unit]:
    return [{"w": w} for w in config.w]


def run_unit(config: Config, unit: Unit) -> pd.DataFrame:
    w = unit["w"]
    w_v, b = theorem3_value_matrix(2, w), counterexample_point_b(w)
    layers = torch.as_tensor(layer_grid(config.n_layers))
    drawn = torch.as_tensor(
        np.linspace(0, config.n_angles, config.n_drawn, endpoint=False).astype(int)
    )
    frames = []
    for token1 in config.token1_angles:
        radians = math.radians(token1)
        angles, x = ring_inputs(config.n_angles, (math.cos(radians), math.sin(radians)))
        for norm, label in ((True, "LN"), (False, "no LN")):
            states = trajectory(x, w_v, config.n_layers, norm=norm)  # (T + 1, b, 2, 2)
            final = states[-1]
            pole = torch.sign(final[:, 0, 1:2])  # token 1's pole, (0, +1) or (0, -1)
            ends = {
                "final_angle": torch.rad2deg(torch.atan2(final[:, 1, 1], final[:, 1, 0])) % 360.0,
                "reaches_b": ((final[:, 1] - pole * b).norm(dim=-1) < CLOSE).double(),
                "collapsed": ((final[:, 1] - final[:, 0]).norm(dim=-1) < COLLAPSED).double(),
            }
            ids = {"part": "end", "token1_angle": token1, "norm": label, "start_angle": angles}
            frames.append(long_frame(ends, **ids))
            values = measure_states(states[layers], metrics=["mu_rel"], source_dtype=torch.float64)
            frames.append(
                pd.DataFrame(
                    {
                        **ids,
                        "part": "curve",
                        "layer": np.repeat(layers.cpu().numpy(), config.n_angles),
                        "start_angle": np.tile(angles.cpu().numpy(), len(layers)),
                        "metric": "mu_rel",
                        "value": values["mu_rel"].value.flatten().cpu().numpy(),
                        "at_floor": values["mu_rel"].at_floor.flatten().cpu().numpy(),
                    }
                )
            )
            if norm:
                kept = states[layers][:, drawn]  # (len(layers), n_drawn, 2, 2)
                for token in (1, 2):
                    angle = torch.atan2(kept[:, :, token - 1, 1], kept[:, :, token - 1, 0])
                    frames.append(
                        long_frame(
                            {"angle": angle.flatten()},
                            part="trajectory",
                            token1_angle=token1,
                            norm=label,
                            token=token,
                            layer=layers.repeat_interleave(len(drawn)),
                            start_angle=angles[drawn].repeat(len(layers)),
                        )
                    )
    return pd.concat(frames, ignore_index=True).assign(w=w)


def basin_table(results: pd.DataFrame) -> pd.DataFrame:
    """Per w (token 1 at 90 degrees, LN): the measured basin of B against the arc."""
    ends = results[(results["part"] == "end") & (results["norm"] == "LN")]
    ends = ends[ends["token1_angle"] == 90.0]
    wide = ends.pivot_table(index=["w", "start_angle"], columns="metric", values="value")
    rows = []
    for w, part in wide.reset_index().groupby("w"):
        inside = part.loc[part["reaches_b"] > 0, "start_angle"]
        start, end = counterexample_basin_arc(w)
        spanned = part["start_angle"].between(inside.min(), inside.max()).sum()
        rows.append(
            {
                "w": w,
                "basin_first": inside.min(),
                "arc_start": start,
                "basin_last": inside.max(),
                "arc_end": end,
                "resolution": 360.0 / len(part),
                "contiguous": inside.size == spanned,
            }
        )
    return pd.DataFrame(
        rows,
        columns=[
            "w",
            "basin_first",
            "arc_start",
            "basin_last",
            "arc_end",
            "resolution",
            "contiguous",
        ],
    )


def claims(config: Config, results: pd.DataFrame) -> list[Claim]:
    """Three checks: they evaluate the paper's analytic construction (fixed weights, a ring of
    starts, no sampling), so they hold by design and guard the code; they are not findings."""
    basin = basin_table(results)
    gap = (
        np.maximum(
            (basin["basin_first"] - basin["arc_start"]).abs(),
            (basin["basin_last"] - basin["arc_end"]).abs(),
        )
        / basin["resolution"]
    )
    steps = {
        f"w={r.w:g}": (g if r.contiguous else math.nan)
        for r, g in zip(basin.itertuples(), gap, strict=True)
    }
    curves = results[(results["part"] == "curve") & (results["norm"] == "no LN")]
    last = curves[curves["layer"] == curves.groupby("w")["layer"].transform("max")]
    no_ln = {f"w={w:g}": v for w, v in last.groupby("w")["value"].max().items()}
    ends = results[(results["part"] == "end") & (results["token1_angle"] == 90.0)]
    with_ln = ends[(ends["norm"] == "LN") & (ends["metric"] == "reaches_b")]
    at_90 = last[last["token1_angle"] == 90.0]
    apart = (at_90["value"] >= 1e-10).groupby(at_90["w"]).mean()
    reach = with_ln.groupby("w")["value"].mean()
    role = {f"w={w:g}": float(reach[w] - apart.get(w, 0.0)) for w in reach.index}
    expected = [f"w={w:g}" for w in config.w]
    return [
        check(
            "basin-arc",
            "With token 1 at (0, 1), token 2 reaches B exactly from one contiguous arc "
            "arccos(-1/w) -> 270 degrees (the 2-D example before Thm 3), for every w.",
            "largest gap between measured basin endpoints and the arc, in ring steps "
            "(NaN: not one contiguous arc, or a w missing)",
            _worst(steps, expected, max),
            "<=",
            1.0,
            note=", ".join(f"{k}: {v:.2g} steps" for k, v in steps.items()),
        ),
        check(
            "no-ln-collapses",
            "Without LN the same weights collapse: every start ends with identical tokens.",
            "largest mu_rel at the last layer without LN, over w, starts and token 1 angles",
            _worst(no_ln, expected, max),
            "<",
            1e-10,
            note=", ".join(f"{k}: {v:.2g}" for k, v in no_ln.items()),
        ),
        check(
            "ln-plays-a-role",
            "LayerNorm changes the outcome of the same weights (the construction behind "
            '"Our result refutes the previous hypothesis that LayerNorm plays no role in the '
            'rank collapse of self-attention", abstract): with LN a share of the starts ends '
            "at B (rank 2), without LN none stays apart.",
            "least share of starts reaching B with LN minus share staying apart without LN "
            "(token 1 at 90 degrees), over w",
            _worst(role, expected, min),
            ">",
            0.25,
            note=", ".join(f"{k}: {v:.2g}" for k, v in role.items()),
        ),
    ]


def _worst(values: dict[str, float], expected: list[str], worst) -> float:
    """The worst value over every expected w; NaN when one is missing or NaN (never passes)."""
    picked = [values.get(name, math.nan) for name in expected]
    return math.nan if any(math.isnan(v) for v in picked) else float(worst(picked))


def summarize(config: Config, results: pd.DataFrame) -> Summary:
    ends = results[results["part"] == "end"]
    wide = ends.pivot_table(
        index=["w", "token1_angle", "norm", "start_angle"], columns="metric", values="value"
    ).reset_index()
    outcomes = (
        wide.groupby(["w", "token1_angle", "norm"])
        .agg(reaches_b=("reaches_b", "mean"), collapsed=("collapsed", "mean"))
        .reset_index()
    )
    mu = results[(results["part"] == "curve") & (results["token1_angle"] == 90.0)]
    at_b = wide[(wide["norm"] == "LN") & (wide["token1_angle"] == 90.0)].set_index(
        ["w", "start_angle"]
    )["reaches_b"]
    in_basin = at_b.reindex(pd.MultiIndex.from_frame(mu[["w", "start_angle"]])).to_numpy() > 0
    outcome = np.where(
        mu["norm"] == "no LN", "no LN", np.where(in_basin, "LN, start in basin", "LN, other starts")
    )
    figures = {
        "basin": counterexample_basin(wide[wide["norm"] == "LN"]),
        "mu_rel": band_plot(
            mu.assign(
                layer=mu["layer"].astype(int).clip(lower=1),
                at_floor=mu["at_floor"].astype(bool),
                outcome=outcome,
            ),
            hue="outcome",
            panel="w",
            logx=True,
            ylabel="mu_rel",
            title="Token 1 at (0, 1): mu_rel over the ring of starts (layer 0 drawn at 1)",
        ),
        "trajectories": counterexample_trajectories(results[results["part"] == "trajectory"]),
    }
    return Summary(
        tables={
            "basin of B (token 1 at 90 degrees)": basin_table(results),
            "share of starts reaching B or collapsing": outcomes,
        },
        figures=figures,
        claims=claims(config, results),
    )


register(
    Experiment(
        name=NAME,
        description="Wu 2024: the 2-D LayerNorm counterexample; basin of B against the arc "
        "arccos(-1/w) -> 270 degrees, and collapse without LN",
        config=Config,
        presets=PRESETS,
        units=units,
        run_unit=run_unit,
        summarize=summarize,
        claims=claims,
    )
)
