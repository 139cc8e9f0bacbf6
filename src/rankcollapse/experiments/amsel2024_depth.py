"""amsel2024-depth: rank-1 heads with depth, short contexts vs long contexts.

Paper: Amsel, Yehudai, Bruna, "On the benefits of rank in attention layers" (arXiv 2407.16153,
2024), Thm 5 (for short contexts, depth lets polynomially many rank-1 heads approximate the
nearest-neighbour target: the heads vote, the next layer takes the majority) and Conjecture 6
(for long contexts full rank stays necessary, whatever the depth).
Model: `rankcollapse.nets.RankEncoder` (torch's encoder layers, unit normalisation) with H = d
heads of rank 1 at each of `n_layers`, and one full-rank head (H = 1, rank d) at one layer as
the reference, on the farthest-point target with N short and N long. Trained on fresh samples
(AdamW, a longer warm-up than the other experiments: deeper models can collapse to the zero
predictor at lr 0.01; the paper preset lowers lr to 0.001), scored by held-out relative MSE
(the zero predictor scores 1).

Depth benefits need long training (the paper trains 100k steps), so both findings are decided
only on arms that trained: a run has *converged* when its training loss moved by less than
`plateau_tol` (relative) over the last `plateau_tail` of its curve (`train.tail_change`), and
has *learned* when its held-out error is below (1 - `learn_margin`) times the error of the best
predictor that selects nothing (a y_i + b mean_j x_j, fitted on other samples: the trivial
baseline). A plateau at the baseline is not learning. A finding whose arms did not converge, or
whose reference arm did not learn, is NOT TESTED, and its reason names those runs.

Findings (errors are means over seeds; the note gives each seed's value, how many agree, and
the error of the best predictor that selects nothing, a y_i + b mean_j x_j, on the same samples):
- depth-helps-short-more (Thm 5): going from the fewest to the most layers, rank-1 heads'
  error falls more for the shortest context than for the longest: ratio(short) / ratio(long)
  with ratio = error(most layers) / error(fewest); expected < 1. Needs the deepest rank-1 arm
  at the short context to have learned (Thm 5 says it can).
- full-rank-needed-long (Conjecture 6): at the longest context, one full-rank head at one layer
  beats rank-1 heads at every depth: error(full rank) / least rank-1 error over depths; < 1.
  Needs the full-rank arm to have learned (rank-1 arms at the baseline are then the evidence).

The cpu preset trains the arms past their gates on a 2-core CPU (quick does not: its deep rank-1
arm at N=4 stays at the no-selection baseline and its full-rank runs are still falling when the
600 steps end). Its departures from the paper (Sec. 7: d = 64, N in {4, 16, 64, 256}, 1 to 5
layers, AdamW lr 0.01, betas (0.9, 0.95), batch 256, warm-up then cosine decay, 100k steps, MLP
width 2048, seeds 0-4): d = 8 (so H = 8 rank-1 heads), N in {4, 16}, 1 and 2 layers (Thm 5's
construction has two), MLP width 128, 4000 steps with 200 of warm-up, lr 0.003 (quick's 0.01
leaves the deep rank-1 arm at N=4 on the baseline; at 0.003 or 0.001 it settles at 0.51-0.52
against 0.59, after 3000 steps of batch 256, 6000 of batch 64 or 20,000 of batch 64 alike),
three seeds, no early stop (patience above the curve's length), and the final held-out error
rather than the minimum over training. Kept: AdamW without weight decay, betas (0.9, 0.95),
batch 256, linear warm-up then cosine decay, fresh samples every step, unit normalisation.
"""

from __future__ import annotations

import pandas as pd
from pydantic import Field

from rankcollapse.experiments._registry import (
    NOT_LEARNED,
    TOO_SMALL,
    Claim,
    Experiment,
    Summary,
    Unit,
    finding,
    register,
    seeds_agree,
)
from rankcollapse.plot import depth_figures
from rankcollapse.train import EncoderConfig, tail_change, train_farthest_encoder

NAME = "amsel2024-depth"
KEYS = ["n_points", "n_layers", "n_heads", "seed"]


class Config(EncoderConfig):
    """Rank-1-head encoders at several depths and context lengths, and a full-rank reference."""

    contexts: list[int] = Field(default_factory=lambda: [4, 16], min_length=1)
    """Points per set N: short and long contexts."""
    n_layers: list[int] = Field(default_factory=lambda: [1, 2, 3], min_length=1)
    """Encoder depths of the rank-1 models (rank-1 heads: H = d)."""
    warmup: int = Field(200, ge=0)
    """Linear warm-up steps (longer than the others: deeper models can collapse to 0)."""
    plateau_tail: float = Field(0.2, gt=0, le=1)
    """Last part of a run's loss curve over which convergence is judged."""
    plateau_tol: float = Field(0.05, gt=0)
    """A run has converged when its loss moved by less than this (relative) over that tail."""
    learn_margin: float = Field(0.1, ge=0, lt=1)
    """A run has learned when its error is below (1 - this) x the no-selection baseline's."""


PRESETS = {
    "quick": {"seeds": [0, 1]},
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
    # quick leaves the deep rank-1 arm at N=4 on the no-selection baseline and the full-rank
    # runs still falling; this trains both past their gates (18 runs of 4000 steps: 44 minutes
    # on 2 cores under a load of about 20, roughly 10 idle; the module docstring, "The cpu
    # preset", lists each departure from the paper).
    "cpu": {
        "n_layers": [1, 2],
        "seeds": [0, 1, 2],
        "steps": 4000,
        "batch_size": 256,
        "lr": 0.003,
        "warmup": 200,
        "patience": 1000,
    },
}


def units(config: Config) -> list[Unit]:
    rank_one = [
        {"n_points": n, "n_layers": n_layers, "n_heads": config.d_model, "seed": s}
        for n in config.contexts
        for n_layers in config.n_layers
        for s in config.seeds
    ]
    full = [
        {"n_points": n, "n_layers": 1, "n_heads": 1, "seed": s}
        for n in config.contexts
        for s in config.seeds
    ]
    return rank_one + full


def run_unit(config: Config, unit: Unit) -> pd.DataFrame:
    frame = train_farthest_encoder(config, **unit)
    for key, value in reversed(unit.items()):
        frame.insert(0, key, value)
    frame.insert(3, "d_qk", config.d_model // unit["n_heads"])
    frame["device"] = str(config.device)
    return frame


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
    kind = lambda r: "rank 1" if r.n_heads == config.d_model else "full rank"
    return "; ".join(
        f"N={r.n_points}, {r.n_layers} layer(s), {kind(r)}, seed {r.seed}: error {r.error:.3g} "
        f"(baseline {r.baseline:.3g}), tail {r.tail_change:+.1%}"
        for r in runs.itertuples()
    )


def _untested(config: Config, used: pd.DataFrame, must_learn: pd.DataFrame) -> str:
    """Why `used` cannot decide a finding: a run of `must_learn` that did not beat its baseline
    (NOT_LEARNED), or a run of `used` whose loss still moved (TOO_SMALL); "" when decided."""
    unlearned = must_learn[~must_learn.learned]
    if not unlearned.empty:
        return (
            f"{NOT_LEARNED}: {len(unlearned)} of {len(must_learn)} reference runs are not below "
            f"{1 - config.learn_margin:.0%} of the no-selection baseline: "
            + _names(config, unlearned)
        )
    stalled = used[~used.converged]
    if not stalled.empty:
        return (
            f"{TOO_SMALL}: {len(stalled)} of {len(used)} runs still moved by more than "
            f"{config.plateau_tol:.0%} over the last {config.plateau_tail:.0%} of their curve: "
            + _names(config, stalled)
        )
    return ""


def claims(config: Config, results: pd.DataFrame) -> list[Claim]:
    table = runs(config, results)
    rank1 = table[table.n_heads == config.d_model]
    by_seed = rank1.pivot_table(index="seed", columns=["n_points", "n_layers"], values="error")
    short, long = min(config.contexts), max(config.contexts)
    shallow, deep = min(config.n_layers), max(config.n_layers)
    linear = results[results.metric == "linear_rel_mse"].groupby("n_points").value.mean()
    baseline = "; no-selection baseline (a y_i + b mean_j x_j): " + ", ".join(
        f"N={n}: {v:.3g}" for n, v in linear.items()
    )
    out = []
    if short < long and shallow < deep:
        cells = pd.MultiIndex.from_product([[short, long], [shallow, deep]])
        errors = by_seed.reindex(index=config.seeds, columns=cells)  # missing run: NaN, fails
        gain = lambda e, n: e[(n, deep)] / e[(n, shallow)]
        per_seed = (gain(errors, short) / gain(errors, long)).to_dict()
        mean = errors.mean(skipna=False)
        value = float(gain(mean, short) / gain(mean, long))
        note = (
            f"ratio at N={short}: {gain(mean, short):.3g}, at N={long}: {gain(mean, long):.3g}; "
            + seeds_agree(per_seed, "<", 1.0)
            + f"; rank-1 errors {rank1.error.min():.3g} to {rank1.error.max():.3g}"
            + baseline
        )
        used = rank1[rank1.n_points.isin([short, long]) & rank1.n_layers.isin([shallow, deep])]
        reference = rank1[(rank1.n_points == short) & (rank1.n_layers == deep)]
        out.append(
            finding(
                "depth-helps-short-more",
                f"from {shallow} to {deep} layers, rank-1 heads gain more on short contexts "
                "than on long ones",
                f"error ratio ({deep} / {shallow} layers) at N={short} over that at N={long}",
                value,
                "<",
                1.0,
                note=note,
                source="Sec. 6, Thm 5",
                paper='"for short context lengths, adding depth allows the target to be '
                'approximated by low-rank attention" (abstract): poly(d) rank-1 heads in two '
                "layers",
                untested=_untested(config, used, reference),
            )
        )
    at_long = table[table.n_points == long]
    full = at_long[at_long.n_heads == 1].set_index("seed").error.reindex(config.seeds)
    rank1_long = (
        rank1[rank1.n_points == long]
        .pivot_table(index="seed", columns="n_layers", values="error")
        .reindex(index=full.index, columns=config.n_layers)  # a missing depth: NaN, fails
    )
    per_seed = (full / rank1_long.min(axis=1, skipna=False)).to_dict()
    value = float(full.mean() / rank1_long.mean(skipna=False).min(skipna=False))
    note = seeds_agree(per_seed, "<", 1.0) + f"; rank-1 depths {config.n_layers}" + baseline
    used = at_long[at_long.n_heads.isin([1, config.d_model])]
    out.append(
        finding(
            "full-rank-needed-long",
            f"at N={long}, one full-rank head beats rank-1 heads at every depth",
            f"full-rank error / least rank-1 error over depths, N={long}",
            value,
            "<",
            1.0,
            note=note,
            source="Sec. 6, Conjecture 6",
            paper='"For long contexts, we conjecture that full-rank attention is necessary" '
            "(abstract)",
            untested=_untested(config, used, at_long[at_long.n_heads == 1]),
        )
    )
    return out


def summarize(config: Config, results: pd.DataFrame) -> Summary:
    rank = lambda frame: frame.n_heads.map(
        lambda h: "rank 1" if h == config.d_model else "full rank"
    )
    final = results[results.metric == "eval_rel_mse"]
    final = final.assign(model=rank(final) + ", N=" + final.n_points.astype(str))
    curves = results[results.metric == "train_rel_mse"]
    curves = curves.assign(
        model=rank(curves) + ", " + curves.n_layers.astype(str) + " layer(s)",
        context="N=" + curves.n_points.astype(str),
    )
    figures = depth_figures(final, curves, d_model=config.d_model, n_layers=config.n_layers)
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
