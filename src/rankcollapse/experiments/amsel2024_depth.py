"""amsel2024-depth: rank-1 heads with depth, short contexts vs long contexts.

Paper: Amsel, Yehudai, Bruna, "On the benefits of rank in attention layers" (arXiv 2407.16153,
2024), Thm 5 (for short contexts, depth lets polynomially many rank-1 heads approximate the
nearest-neighbour target: the heads vote, the next layer takes the majority, with extra
concatenated positional dimensions) and Conjecture 6 (for long contexts full rank stays
necessary, whatever the depth).
Model: `rankcollapse.nets.RankEncoder` (torch's encoder layers, unit normalisation) with Thm
5's scratch dimensions (`scratch`: each token carries a one-hot of its position in P = the
longest context extra coordinates, so the layers have width d + P; the output is the first d
coordinates), rank-1 heads (H = d + P) at each of `n_layers`, and one full-rank head (H = 1,
rank d + P) at one layer as the reference, on the farthest-point target with N short and N
long. Every arm sees the same inputs. Trained on fresh samples (AdamW, a longer warm-up than
the other experiments: deeper models can collapse to the zero predictor at lr 0.01), scored by
held-out relative MSE (the zero predictor scores 1).

How close depth brings rank-1 heads to full rank, at context N: the share of the one-layer gap
that the deepest rank-1 model closes, closure(N) = (e_1 - e_D) / (e_1 - e_F), with e_1 and
e_D the rank-1 errors at the fewest and the most layers and e_F the full-rank head's (means over
seeds): 0 when depth gains nothing, 1 when it reaches full rank (NaN when e_1 <= e_F: no gap).

Every finding is decided by the one rule (`rankcollapse.experiments.verdicts`) over the seeds
(per-seed closures), and presupposes its runs trained (`_assumptions`, predicates: a run that
breaks one makes the finding NOT TESTED by rule, named): the full-rank reference *learned* (its
held-out error below (1 - `learn_margin`) times that of the best predictor that selects
nothing, a y_i + b mean_j x_j fitted on other samples), every run it uses *converged* (its
training loss moved by less than `plateau_tol`, relative, over the last `plateau_tail` of its
curve: `train.tail_change`), and the runs trained at least `DECISIVE_STEPS` steps: Thm 5 only
says a network reaching full rank exists and Conjecture 6 is about what training can reach, so
all three findings are NOT TESTED below it, whichever side the closure falls on (the paper
trains 100k steps).

Findings:
- depth-approaches-full-rank-short (Thm 5): at the shortest context, per seed, depth closes
  more than `approach` (one half) of the gap: closure(short) > 1/2.
- full-rank-needed-long (Conjecture 6): at the longest context it does not: closure(long) <
  1/2, so one full-rank head at one layer stays well ahead of rank-1 heads at every depth.
- depth-helps-short-more (Thm 5 against Conjecture 6): per seed, closure(short) -
  closure(long) > 0.
Not reproduced: the abstract's "unless the number of heads is exponential in the embedding
dimension, even for short context lengths" is proved for the biased nearest-neighbour target
(Sec. 5), which the project does not build (amsel2024-constructions tests random rank-1 heads
on the Thm 2 setting instead).

The cpu preset trains long enough for all three (20,000 steps; quick's 600 steps and one seed
leave them NOT TESTED), at the paper's deepest encoders (1 and 5 layers), on eight seeds. Its
departures from the paper (Sec. 7: d = 64, N in {4, 16, 64, 256}, 1 to 5 layers, AdamW lr 0.01,
betas (0.9, 0.95), batch 256, warm-up then cosine decay, 100k steps, MLP width 2048, seeds 0-4,
no scratch dimensions): d = 8 with 8 scratch dimensions (so H = 16 rank-1 heads), N in {4, 8},
1 and 5 layers only, MLP width 128, 20,000 steps with 2,000 of warm-up, lr 0.003 (deep rank-1
models at lr 0.01 can collapse to the zero predictor), seeds 0-7, no early stop (patience above
the curve's length), and the final held-out error rather than the minimum over training. Kept:
AdamW without weight decay, betas (0.9, 0.95), batch 256, linear warm-up then cosine decay, fresh
samples every step, unit normalisation. Measured (2026-11-29, 2 workers on 2 cores): 10,238 s
of units, 87 min of wall, the largest unit (N = 8, 5 layers) 4,997 s (`UNIT_SECONDS`). It
decides all three, and passes them: depth-approaches-full-rank-short 0.619 [0.608, 0.630] (rank
1 0.465 -> 0.189 from 1 to 5 layers, full rank 0.018), full-rank-needed-long 0.388 [0.384,
0.391], depth-helps-short-more 0.231 [0.219, 0.244]. Why 5 layers: at 3 layers (the preset
before) the short-context closure sat at its margin, 0.495 [0.490, 0.501] on seeds 0-7 and
0.501 [0.494, 0.508] on seeds 0-11, where the rule asked for 294 seeds (the other two passed:
0.289 and 0.212 on seeds 0-11); the 1-layer units of all three runs agree to the last digit.
Exploratory runs (one seed, torch's encoder on one idle core, not this module): without scratch
dimensions depth gains rank-1 heads almost nothing at either N (2500 steps, 1 -> 3 layers: 0.545
-> 0.553 at N = 4, 0.595 -> 0.568 at N = 16; full rank 0.093 and 0.119); with 16 of them, 0.446
-> 0.254 at N = 4 (full rank 0.056: closure 0.49) and 0.562 -> 0.478 at N = 16 (full rank 0.065:
closure 0.17). At 1,500 steps and one seed: at N = 4 rank 1 0.489 -> 0.376 with full rank 0.099
(closure 0.29), at N = 8 0.599 -> 0.519 with full rank 0.126 (closure 0.17).
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
from pydantic import Field

from rankcollapse.experiments._registry import Experiment, Summary, Unit, register
from rankcollapse.experiments.verdicts import NOT_LEARNED, Assumption, Claim, Quote, finding
from rankcollapse.plot import depth_figures
from rankcollapse.sizes import NLayers, NTokens
from rankcollapse.train import EncoderConfig, tail_change, train_farthest_encoders

NAME = "amsel2024-depth"
KEYS = ["n_points", "n_layers", "n_heads", "seed"]
DECISIVE_STEPS = 20_000
"""Fewest training steps at which rank-1 heads that stay short of full rank at the shortest
context count against Thm 5: the theorem only says such a network exists, and the paper trains
100k steps (Sec. 7); a shorter run that does not reach it is NOT TESTED (one that does, passes)."""
PAPER_DEPTH = 5
"""The paper's deepest encoders (Sec. 7: 1, 3 and 5 layers)."""


class Config(EncoderConfig):
    """Rank-1-head encoders at several depths and context lengths, and a full-rank reference."""

    contexts: list[NTokens] = Field(default_factory=lambda: [4, 16], min_length=1)
    """Points per set N: short and long contexts."""
    n_layers: list[NLayers] = Field(default_factory=lambda: [1, 2, 3], min_length=1)
    """Encoder depths of the rank-1 models (rank-1 heads: H = the width d + P)."""
    scratch: bool = True
    """Thm 5's scratch dimensions: each token carries a one-hot of its position in P = the
    longest context extra coordinates (false: none, P = 0)."""
    approach: float = Field(0.5, gt=0, lt=1)
    """Share of the one-layer rank-1 gap to full rank that depth must close to approach it."""
    warmup: int = Field(200, ge=0)
    """Linear warm-up steps (longer than the others: deeper models can collapse to 0)."""
    plateau_tail: float = Field(0.2, gt=0, le=1)
    """Last part of a run's loss curve over which convergence is judged."""
    plateau_tol: float = Field(0.05, gt=0)
    """A run has converged when its loss moved by less than this (relative) over that tail."""
    learn_margin: float = Field(0.1, ge=0, lt=1)
    """A run has learned when its error is below (1 - this) x the no-selection baseline's."""


PRESETS: dict[str, dict[str, Any]] = {
    # quick: the pipeline in about 2 minutes; 600 steps leave the runs falling (NOT TESTED)
    "quick": {"n_layers": [1, 2], "seeds": [0]},
    "paper": {
        "d_model": 32,
        "contexts": [2, 4, 16, 64],
        "n_layers": [1, 2, 3, 5],
        "d_ff": 2048,
        "seeds": [0, 1, 2],
        "steps": 50_000,
        "batch_size": 256,
        "lr": 0.001,
        "warmup": 2000,
        "patience": 200,
        "eval_samples": 16384,
    },
    # decides the three findings: DECISIVE_STEPS steps, the paper's depth and eight seeds (the
    # units of their interval); the module docstring, "The cpu preset", lists each departure
    "cpu": {
        "contexts": [4, 8],
        "n_layers": [1, PAPER_DEPTH],
        "seeds": list(range(8)),
        "steps": DECISIVE_STEPS,
        "batch_size": 256,
        "lr": 0.003,
        "warmup": 2000,
        "patience": 1000,
    },
}


def units(config: Config) -> list[Unit]:
    """One unit per model shape, every seed in it: its seeds train as one batched model
    (`train.train_encoders`), each as it would alone. Listed longest first (the longest
    context, then the deepest model): a run that knows no unit's time starts units in this
    order, so its longest unit does not start last."""
    seeds, contexts = list(config.seeds), sorted(config.contexts, reverse=True)
    rank_one = [
        {"n_points": n, "n_layers": n_layers, "n_heads": width(config), "seeds": seeds}
        for n in contexts
        for n_layers in sorted(config.n_layers, reverse=True)
    ]
    full = [{"n_points": n, "n_layers": 1, "n_heads": 1, "seeds": seeds} for n in contexts]
    return rank_one + full


def run_unit(config: Config, unit: Unit) -> pd.DataFrame:
    frame = train_farthest_encoders(config, **unit, positions=positions(config))
    for key in ("n_heads", "n_layers", "n_points"):
        frame.insert(0, key, unit[key])
    frame.insert(3, "d_qk", width(config) // unit["n_heads"])
    frame["device"] = str(config.device)
    return frame


def positions(config: Config) -> int:
    """Scratch dimensions per token: the longest context with `scratch`, else 0."""
    return max(config.contexts) if config.scratch else 0


def width(config: Config) -> int:
    """The layers' width d + P, which is also the number of rank-1 heads."""
    return config.d_model + positions(config)


def runs(config: Config, results: pd.DataFrame) -> pd.DataFrame:
    """One row per run: held-out error, its no-selection baseline, relative loss change over
    the curve's tail, converged (a plateau) and learned (below the baseline by the margin)."""
    final = results[results.metric == "eval_rel_mse"].set_index(KEYS).value.rename("error")
    linear = results[results.metric == "linear_rel_mse"].set_index(KEYS).value.rename("baseline")
    curves = results[results.metric == "train_rel_mse"].sort_values("step").groupby(KEYS).value
    tail = curves.agg(lambda v: tail_change(v.tolist(), tail=config.plateau_tail))
    table = pd.concat([final, linear, tail.rename("tail_change")], axis=1).reset_index()
    table["converged"] = table.tail_change.abs() < config.plateau_tol  # NaN: too short to tell
    table["learned"] = table.error < (1 - config.learn_margin) * table.baseline  # NaN: False
    return table


def _names(config: Config, runs: pd.DataFrame) -> str:
    kind = lambda r: "rank 1" if r.n_heads == width(config) else "full rank"
    return "; ".join(
        f"N={r.n_points}, {r.n_layers} layer(s), {kind(r)}, seed {r.seed}: error {r.error:.3g} "
        f"(baseline {r.baseline:.3g}), tail {r.tail_change:+.1%}"
        for r in runs.itertuples()
    )


def _assumptions(config: Config, used: pd.DataFrame, must_learn: pd.DataFrame) -> list:
    """What the finding presupposes of its runs, as predicates (a run that breaks one makes the
    finding NOT TESTED by rule, named): the full-rank reference learned (below (1 -
    learn_margin) x the no-selection baseline), every run it uses converged (a plateau), and the
    runs trained for at least DECISIVE_STEPS (Thm 5 is existential and Conjecture 6 is about
    what training can reach: a shorter run that has not found the construction says nothing)."""
    unlearned = must_learn[~must_learn.learned]
    stalled = used[~used.converged]
    return [
        Assumption(
            f"{NOT_LEARNED}: the full-rank reference is below "
            f"{1 - config.learn_margin:.0%} of the no-selection baseline",
            unlearned.empty,
            f"{len(unlearned)} of {len(must_learn)} reference runs do not: "
            + _names(config, unlearned),
        ),
        Assumption(
            f"converged: loss moved < {config.plateau_tol:.0%} over the last "
            f"{config.plateau_tail:.0%} of each curve",
            stalled.empty,
            f"{len(stalled)} of {len(used)} runs still moved: " + _names(config, stalled),
        ),
        Assumption(
            f"trained at least {DECISIVE_STEPS} steps",
            config.steps >= DECISIVE_STEPS,
            f"{config.steps} steps (the paper trains 100k)",
        ),
    ]


def closure(shallow: float, deep: float, full: float) -> float:
    """Share of the one-layer rank-1 gap to full rank that depth closes: (e_1 - e_D) / (e_1 -
    e_F); NaN when there is no gap (e_1 <= e_F) or a value is missing.

    Example:
        >>> closure(0.45, 0.25, 0.05), closure(0.05, 0.04, 0.05)
        (0.5, nan)
    """
    gap = shallow - full
    return float((shallow - deep) / gap) if gap > 0 else math.nan


def _closures(config: Config, table: pd.DataFrame) -> tuple[dict, dict, pd.DataFrame]:
    """closure(N) of the seed means per context, per context the closures seed by seed (the
    findings' units; a missing run gives NaN, which fails), and the errors (seed x cell)."""
    shallow, deep = min(config.n_layers), max(config.n_layers)
    arms = {"e1": (width(config), shallow), "eD": (width(config), deep), "eF": (1, 1)}
    cells = {
        (n, name): table[
            (table.n_points == n) & (table.n_heads == heads) & (table.n_layers == layers)
        ]
        .set_index("seed")
        .error
        for n in config.contexts
        for name, (heads, layers) in arms.items()
    }
    errors = pd.DataFrame(cells).reindex(index=config.seeds)
    mean = errors.mean(skipna=False)
    by_n = {n: closure(mean[(n, "e1")], mean[(n, "eD")], mean[(n, "eF")]) for n in config.contexts}
    per_seed = {
        n: [closure(row[(n, "e1")], row[(n, "eD")], row[(n, "eF")]) for _, row in errors.iterrows()]
        for n in config.contexts
    }
    return by_n, per_seed, errors


SHORT = Quote(
    "for short context lengths, adding depth allows the target to be approximated by low-rank "
    "attention",
    "abstract; Sec. 6, Thm 5",
)
LONG = Quote(
    "For long contexts, we conjecture that full-rank attention is necessary",
    "abstract; Sec. 6, Conjecture 6",
)
MEASURED_SEEDS = 8  # the seeds of the run `UNIT_SECONDS` measured
UNIT_SECONDS = {  # (N, layers, heads) -> seconds of that unit with 8 seeds, measured
    (4, 1, 1): 512,
    (4, 1, 16): 514,
    (4, 5, 16): 1_986,
    (8, 1, 1): 936,
    (8, 1, 16): 1_293,
    (8, 5, 16): 4_997,
}
"""The cpu preset's units (2026-11-29, seeds 0-7, 2 workers on 2 cores: 87 min of wall);
seeds train together, so a unit's time is about in proportion to them."""
SECONDS_PER_SEED = round(sum(UNIT_SECONDS.values()) / MEASURED_SEEDS)
WALL_PER_SEED = 655
"""Seconds of wall per seed of that run, with 2 workers."""


def decides(config: Config) -> str:
    """What decides a NOT TESTED finding of this run: the cpu preset where the run trained
    fewer steps or stopped short of the paper's depth (at 3 layers the short-context closure
    sits at its margin, which no number of seeds a run can afford decides); else more seeds,
    with what each costs at the cpu preset's sizes."""
    if config.steps < DECISIVE_STEPS or max(config.n_layers) < PAPER_DEPTH:
        n_seeds = len(PRESETS["cpu"]["seeds"])
        layers = " and ".join(map(str, PRESETS["cpu"]["n_layers"]))
        return (
            f"the cpu preset ({DECISIVE_STEPS:,} steps, {layers} layers, seeds "
            f"0-{n_seeds - 1}: {n_seeds * SECONDS_PER_SEED:,} s of units, about "
            f"{n_seeds * WALL_PER_SEED / 60:.0f} min with 2 workers)"
        )
    return (
        "that many seeds (--set seeds=[0, 1, ...]; at the cpu preset's sizes each seed costs "
        f"about {SECONDS_PER_SEED:,} s of units, {WALL_PER_SEED / 60:.0f} min of wall with 2 "
        f"workers: {int(7200 // WALL_PER_SEED)} seeds in 2 h)"
    )


def claims(config: Config, results: pd.DataFrame) -> list[Claim]:
    table = runs(config, results)
    short, long = min(config.contexts), max(config.contexts)
    shallow, deep = min(config.n_layers), max(config.n_layers)
    if short == long or shallow == deep:
        return []  # one context or one depth: nothing to compare
    by_n, per_seed, errors = _closures(config, table)
    mean = errors.mean()
    linear = results[results.metric == "linear_rel_mse"].groupby("n_points").value.mean()
    said = lambda n: (
        f"N={n}: rank 1 {mean[(n, 'e1')]:.3g} ({shallow} layer(s)) -> {mean[(n, 'eD')]:.3g} "
        f"({deep}), full rank {mean[(n, 'eF')]:.3g}, no-selection baseline "
        f"{linear.get(n, math.nan):.3g}, closure of the seed means {by_n[n]:.3g}"
    )
    used = lambda ns: table[
        table.n_points.isin(ns)
        & (
            ((table.n_heads == width(config)) & table.n_layers.isin([shallow, deep]))
            | (table.n_heads == 1)
        )
    ]
    reference = lambda ns: table[table.n_points.isin(ns) & (table.n_heads == 1)]
    quantity = f"per seed: closure = (e_{shallow} - e_{deep}) / (e_{shallow} - e_full)"
    common: dict[str, Any] = {"decides": decides(config)}
    return [
        finding(
            "depth-approaches-full-rank-short",
            says=SHORT,
            text=f"at N={short}, going from {shallow} to {deep} layers, rank-1 heads close more "
            f"than {config.approach:g} of their gap to one full-rank head",
            quantity=f"{quantity} at N={short} (units: seeds)",
            values=per_seed[short],
            side=">",
            margin=config.approach,  # "approximated": most of the gap closed
            assumptions=_assumptions(config, used([short]), reference([short])),
            note=said(short),
            **common,
        ),
        finding(
            "full-rank-needed-long",
            says=LONG,
            text=f"at N={long}, going from {shallow} to {deep} layers, rank-1 heads close less "
            f"than {config.approach:g} of their gap to one full-rank head",
            quantity=f"{quantity} at N={long} (units: seeds)",
            values=per_seed[long],
            side="<",
            margin=config.approach,  # full rank "necessary": most of the gap stays open
            assumptions=_assumptions(config, used([long]), reference([long])),
            note=said(long),
            **common,
        ),
        finding(
            "depth-helps-short-more",
            says=Quote(f"{SHORT.text}. {LONG.text}", "abstract; Sec. 6, Thm 5, Conjecture 6"),
            text=f"depth closes a larger share of the rank-1 gap to full rank at N={short} than "
            f"at N={long}",
            quantity=f"per seed: closure at N={short} minus closure at N={long} (units: seeds)",
            values=[a - b for a, b in zip(per_seed[short], per_seed[long], strict=True)],
            side=">",
            margin=0.0,  # larger, by any amount
            assumptions=_assumptions(config, used([short, long]), reference([short, long])),
            note=f"{said(short)}; {said(long)}",
            **common,
        ),
    ]


def summarize(config: Config, results: pd.DataFrame) -> Summary:
    # the figures' order (first appearance): rank 1 before full rank, short before long
    # contexts, shallow before deep, whatever order the units ran in
    order = ["n_heads", "n_points", "n_layers"]
    results = results.sort_values(order, ascending=[False, True, True], kind="stable")
    rank = lambda frame: frame.n_heads.map(
        lambda h: "rank 1" if h == width(config) else "full rank"
    )
    final = results[results.metric == "eval_rel_mse"]
    final = final.assign(model=rank(final) + ", N=" + final.n_points.astype(str))
    curves = results[results.metric == "train_rel_mse"]
    curves = curves.assign(
        model=rank(curves) + ", " + curves.n_layers.astype(str) + " layer(s)",
        context="N=" + curves.n_points.astype(str),
    )
    figures = depth_figures(
        final, curves, d_model=config.d_model, n_layers=config.n_layers, positions=positions(config)
    )
    table = runs(config, results)
    errors = (
        table.groupby(["n_points", "n_heads", "n_layers"])
        .agg(
            mean=("error", "mean"),
            std=("error", "std"),
            baseline=("baseline", "mean"),
            converged=("converged", "sum"),
            learned=("learned", "sum"),
        )
        .reset_index()
    )
    return Summary(
        tables={"errors": errors, "runs": table},
        figures=figures,
        claims=claims(config, results),
    )


register(
    Experiment(
        name=NAME,
        description="Rank-1 heads with depth, short vs long contexts (Amsel et al. 2024)",
        config=Config,
        presets=PRESETS,
        units=units,
        run_unit=run_unit,
        summarize=summarize,
        claims=claims,
    )
)
