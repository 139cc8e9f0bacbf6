"""dong2021-path-effectiveness: short paths carry what a trained SAN computes.

Paper: Dong, Cordonnier, Loukas, "Attention is not all you need: pure attention loses rank
doubly exponentially with depth", ICML 2021 (arXiv 2103.03404), Sec. 5, Fig. 4; the network
and its training as in the authors' code (twistedcubic/attention-rank-collapse).

The authors' SAN (`rankcollapse.nets.SAN`): skip connections, post-LayerNorm, no MLP, their
Linear + LayerNorm embedding, and their training-time dropout 0.1 in four places (the embedding,
the attention probabilities, the attention output before the skip-add, the classifier input),
off at evaluation (eval mode). It is trained with the full model on the three tasks of Sec. 5
(`rankcollapse.tasks.task_data`: sorting, convex hull, memorization). At inference only
`n_paths` paths of one length k are kept, drawn uniformly among the C(L, k) H^k paths of that
length, and the network is run restricted to them as in the authors' evaluation
(`rankcollapse.train.path_accuracies`); `n_repeats` fresh samples per k and n_paths give a
spread. Each unit reports the full model's accuracy and the trivial baselines (random guess,
majority class; majority class per position when the SAN sees positions, as in sorting)
measured on the same data.

The paper's baseline, the one the verdicts use: a random guess for sorting (1 / n_classes,
measured by guessing), the majority class (measured) for convex hull and memorization. What
needs no attention is reported beside it as a caveat, not a gate: k = 0 (the embedding alone, not
a path through attention: the "best length" findings look at k >= 1) and, for sorting, the
per-position prior (position i holds the i-th smallest digit, so a predictor that sees only the
position scores about 0.35); method notes: docs/methods.md, sec. 5.

Findings (per task; the unit is the seed, one trained SAN, its path accuracies averaged over
the repeats; each decided by the one rule, `rankcollapse.experiments.verdicts`):
- {task}:best-short, "short paths carry predictive power": the best accuracy over k = 1..2 (and
  n_paths) beats the paper's baseline by more than 0.05. Convex hull: the baseline is the
  authors' drawn majority line, 0.54; the measured majority (about 0.60) is decided too and
  shown in the note, both against the same short-path accuracies.
- {task}:long-near-baseline, "the output of longer paths is not much better than a random
  guess": the accuracy at k = L minus the paper's baseline is below 0.1.
- Beyond the papers (the paper draws them in Fig. 4 without a sentence): {task}:more-paths-help,
  20 paths beat 5 at k = 1; {task}:full-beats-paths, the full model beats every path subset.
Every finding assumes the paper's setting, a full model at about the paper's accuracy (sorting
0.98, convex hull 0.90, memorization 0.85; the one rule: its interval over the seeds above the
paper's accuracy minus 0.05); otherwise NOT TESTED, the assumption named. A NOT TESTED names the
seeds that would decide it at the measured spread.

Departures from the paper and the authors' code:
- Training: Adam at lr 3e-4 to 3e-3 with mini-batches of 8-64 for a fixed number of steps,
  where the authors' README commands use Adam at lr 1e-5 for 65 (sorting) and 70 (convex hull)
  epochs and the Hugging Face trainer for 50 epochs (memorization); the presets reach the
  paper's full-model accuracy in far fewer steps.
- Every head step and the final sum of the kept paths are normalised by a LayerNorm without gain
  or bias, as in the authors' `--no_sub_path` evaluation; the full model applies that norm too,
  before its classifier (`rankcollapse.nets.SAN`), so the classifier sees normalised states in
  training and in the path evaluation.
- Convex hull: the quick preset uses width 48 instead of 84. Memorization: windows of the
  project's sample corpus instead of RTE sentences (see PRESETS).
- Seeds: the paper shows one trained network per task; the quick and paper presets train three,
  the units of every finding.
"""

from __future__ import annotations

import math
from functools import partial

import pandas as pd
import torch
from pydantic import BaseModel, ConfigDict, Field

from rankcollapse.devices import Device
from rankcollapse.experiments._registry import Experiment, Summary, Unit, register
from rankcollapse.experiments.verdicts import Assumption, Claim, Quote, Side, decide, finding
from rankcollapse.plot import path_accuracy_figure
from rankcollapse.seeds import Seed
from rankcollapse.sizes import NPaths
from rankcollapse.tasks import TASKS, TaskName
from rankcollapse.train import TaskSetup, path_accuracy_tables, path_effectiveness

NAME = "dong2021-path-effectiveness"
PAPER_FULL_ACCURACY = {"sorting": 0.98, "convex-hull": 0.90, "memorization": 0.85}
SHORT = 2  # "short paths": length at most 2
MARGIN = 0.05  # a best length must beat the paper's baseline by 5 accuracy points
NEAR_BASELINE = 0.1  # "not much better than" the baseline: by under 10 accuracy points
ABOUT = 0.05  # "about" the paper's full-model accuracy: within 5 accuracy points
# The authors' convex-hull panel draws its majority line at 0.54 (their plotting script); the
# data's own majority, measured, is shown beside it (about 0.60 at the project's sizes).
PAPER_LINE = {"convex-hull": 0.54}
# The trivial predictor the paper compares the paths with, measured on the same data: a random
# guess for sorting (1 / n_classes), the majority class for convex hull and memorization.
COMPARATOR = {"sorting": "random", "convex-hull": "majority", "memorization": "majority"}
SOURCE = "Sec. 5, Fig. 4"


class Config(BaseModel):
    """Train a SAN per task and seed; evaluate it restricted to sampled paths of each length."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    tasks: list[TaskName] = Field(default_factory=lambda: list(TASKS), min_length=1)
    """Which tasks to run (sorting, convex-hull, memorization)."""
    sorting: TaskSetup
    """Sorting: sizes and training."""
    convex_hull: TaskSetup
    """Convex hull: sizes and training."""
    memorization: TaskSetup
    """Memorization: sizes and training."""
    n_paths: list[NPaths] = Field(default_factory=lambda: [5, 20], min_length=1)
    """Numbers of paths kept at inference (one curve each)."""
    n_repeats: int = Field(5, ge=2)
    """Fresh path samples per length and n_paths (mean and std over them)."""
    seeds: list[Seed] = Field(default_factory=lambda: [0], min_length=1)
    """Seeds of weights, data and path samples (one unit per task and seed)."""
    device: Device = torch.device("cpu")
    """Where the SANs train and run: auto (an accelerator if visible), cpu, cuda, mps."""
    checkpoint_dir: str | None = None
    """Folder of trained SANs keyed by their full config (None: always train)."""


PRESETS = {
    # Shorter training runs than the paper (widths as in the paper except convex hull, 48
    # instead of 84), three seeds. 20 path samples per length: one sample of 5 paths at k = 1
    # scatters by about 0.13 (sorting, seed 0), so the 20-vs-5 gain needs 20 samples to stand
    # clear of it (3 samples gave -0.02, 20 give +0.09). Convex hull trains 1800 steps: with
    # the authors' dropout, 900 left the full model at 0.82, below the paper's 0.90 (seed 0:
    # 0.961 at 1800 steps, 0.967 at 3000, k = 1 at 0.648 and 0.643 against majority 0.588).
    "quick": {
        "sorting": {"n_train": 10000, "n_eval": 150, "n_tokens": 8, "steps": 1500, "lr": 3e-3},
        "convex_hull": {
            "n_train": 4000,
            "n_eval": 150,
            "n_tokens": 10,
            "n_heads": 3,
            "steps": 1800,
            "lr": 2e-3,
        },
        "memorization": {
            "n_train": 100,
            "n_eval": 100,
            "n_tokens": 24,
            "d_model": 64,
            "steps": 900,
            "batch_size": 32,
            "lr": 2e-3,
        },
        "n_repeats": 20,
        "seeds": [0, 1, 2],
    },
    # The paper's sizes (Sec. 5 and the authors' scripts): sorting L6 H2 width 48 on 10000
    # sequences; convex hull L6 H3 width 84 on 10000 sets; memorization L6 H2 width 250. The
    # authors trained with lr 1e-5 for 65-105 epochs; we use Adam at lr 1e-3 for about 100
    # epochs, which reaches the paper's full-model accuracy. Memorization: the sample corpus
    # holds about 7500 tokens, so 200 windows of 32 tokens stand in for the paper's 500 RTE
    # sentences of up to 128 tokens.
    "paper": {
        "sorting": {
            "n_train": 10000,
            "n_eval": 500,
            "n_tokens": 8,
            "steps": 30000,
            "batch_size": 32,
        },
        "convex_hull": {
            "n_train": 10000,
            "n_eval": 500,
            "n_tokens": 10,
            "n_heads": 3,
            "d_model": 84,
            "steps": 30000,
            "batch_size": 32,
        },
        "memorization": {
            "n_train": 200,
            "n_eval": 200,
            "n_tokens": 32,
            "d_model": 250,
            "steps": 5000,
            "batch_size": 8,
            "lr": 3e-4,
        },
        "n_repeats": 20,
        "seeds": [0, 1, 2],
    },
}


def units(config: Config) -> list[Unit]:
    return [{"task": t, "seed": s} for t in config.tasks for s in config.seeds]


def setup_of(config: Config, task: str) -> TaskSetup:
    return getattr(config, task.replace("-", "_"))


def run_unit(config: Config, unit: Unit) -> pd.DataFrame:
    from rankcollapse.seeds import stream_seed
    from rankcollapse.train import DirectoryStore, evaluate_san, train_on_task

    task, seed, device = unit["task"], unit["seed"], config.device
    store = DirectoryStore(config.checkpoint_dir) if config.checkpoint_dir else None
    trained, held_out = train_on_task(
        task, setup_of(config, task), seed=seed, store=store, device=device
    )
    rows = evaluate_san(
        trained.model,
        held_out,
        n_paths=config.n_paths,
        n_repeats=config.n_repeats,
        seed=stream_seed(seed, "paths"),
    )
    stats = trained.stats()
    training = pd.DataFrame(
        {"kind": "training", "metric": list(stats), "value": list(stats.values())}
    )
    rows = pd.concat([rows, training], ignore_index=True)
    columns = ["task", "seed", "device", *rows.columns]
    return rows.assign(task=task, seed=seed, device=str(device))[columns]


def claims(config: Config, results: pd.DataFrame) -> list[Claim]:
    out = []
    for task in [t for t in config.tasks if t in set(results["task"])]:
        out += task_claims(task, setup_of(config, task), results[results["task"] == task])
    return out


SAYS = {
    "best-short": Quote("short paths carry predictive power", SOURCE),
    "long-near-baseline": Quote(
        "the output of longer paths is not much better than a random guess", SOURCE
    ),
}
# The paper draws these two comparisons (Fig. 4: the full model's line, 5 and 20 paths) without
# a sentence on them: the project's reading of its figure, listed beyond the papers.
DRAWN = Quote("the full model and 5 and 20 sampled paths, drawn per path length", SOURCE)


def seed_values(task: str, setup: TaskSetup, rows: pd.DataFrame) -> pd.DataFrame:
    """One row per seed (the unit of every finding): the full model's accuracy, the paper's
    baseline and the measured one, the best accuracy over n_paths at the short lengths
    k = 1..SHORT (`short`) and at k = L (`long`), the gain of the most paths over the fewest at
    k = 1 and the full model's margin over the best path subset."""
    out = {}
    for seed, part in rows.groupby("seed"):
        m = path_effectiveness(
            part, n_layers=setup.n_layers, comparator=COMPARATOR[task], short=SHORT, margin=MARGIN
        )
        paths = part[part["kind"] == "paths"].astype({"n_paths": int, "length": int})
        by_length = paths.groupby(["n_paths", "length"])["value"].mean().groupby("length").max()
        out[seed] = {
            "full": m["full"],
            "measured": m["baseline"],
            "baseline": PAPER_LINE.get(task, m["baseline"]),
            "short": float(by_length.reindex(range(1, SHORT + 1)).max()),
            "long": float(by_length.get(setup.n_layers, math.nan)),
            "gain": m["gain"],
            "full_margin": m["full_margin"],
            "note": _lengths_note(by_length, part),
        }
    return pd.DataFrame.from_dict(out, orient="index")


def _lengths_note(by_length: pd.Series, rows: pd.DataFrame) -> str:
    """Accuracy per path length (best over n_paths), and what needs no attention: k = 0 and,
    for a SAN that sees positions, the per-position prior."""
    prior = rows.loc[rows["metric"] == "position_majority", "value"]
    caveat = f"k = 0 (no attention) {by_length.get(0, math.nan):.3f}"
    caveat += f", per-position prior {prior.mean():.3f}" if len(prior) else ""
    lengths = ", ".join(f"k={k}: {v:.3f}" for k, v in by_length.items())
    return f"{lengths}; caveat, what needs no attention: {caveat}"


def task_claims(task: str, setup: TaskSetup, rows: pd.DataFrame) -> list[Claim]:
    """The four findings of one task, each over the seeds (one trained SAN each)."""
    v = seed_values(task, setup, rows)
    learned = _learned(task, v["full"])
    name = f"the paper's baseline ({_baseline_name(task)})"
    more = decide(v["short"] - v["measured"], ">", MARGIN)
    shown = ""
    if task in PAPER_LINE:  # the measured majority beside the paper's line, both shown
        shown = (
            f"width {setup.d_model} (the paper's 84: --preset paper); "
            f"against the measured majority ({v['measured'].mean():.3f}): "
            f"{more.verdict}, short minus majority {more.describe()}"
        )
    say = partial(_task_finding, task, [learned])
    return [
        say(
            "best-short",
            f"Short paths (k = 1..{SHORT}) beat {name} by more than {MARGIN}.",
            f"best accuracy over k = 1..{SHORT} and n_paths minus {name}, per seed",
            v["short"] - v["baseline"],
            ">",
            MARGIN,
            "; ".join(p for p in (shown, f"seed 0: {v['note'].iloc[0]}") if p),
        ),
        say(
            "long-near-baseline",
            f"The longest paths (k = L = {setup.n_layers}) are at most {NEAR_BASELINE} "
            f"better than {name}.",
            f"accuracy at k = L (best over n_paths) minus {name}, per seed",
            v["long"] - v["baseline"],
            "<",
            NEAR_BASELINE,
            f"measured baseline {v['measured'].mean():.3f}",
        ),
        say(
            "more-paths-help",
            "More paths help at k = 1 (the most paths against the fewest).",
            "mean accuracy at k = 1 with the most paths minus with the fewest, per seed",
            v["gain"],
            ">",
            0.0,
            beyond=True,
        ),
        say(
            "full-beats-paths",
            "The full model beats every subset of paths.",
            "full-model accuracy minus the best mean path accuracy (any k, n_paths), per seed",
            v["full_margin"],
            ">",
            0.0,
            beyond=True,
        ),
    ]


def _baseline_name(task: str) -> str:
    if task in PAPER_LINE:
        return f"the authors' drawn majority line {PAPER_LINE[task]:g}"
    return f"{COMPARATOR[task]}, measured"


def _learned(task: str, full: pd.Series) -> Assumption:
    """The paper's setting: a full model at about the paper's accuracy (the one rule over the
    seeds: its interval above the paper's accuracy minus ABOUT)."""
    paper = PAPER_FULL_ACCURACY[task]
    d = decide(full, ">", paper - ABOUT)
    return Assumption(
        f"the full model learned {task} (accuracy about the paper's {paper:.2f})",
        d.verdict == "PASS",
        "" if d.verdict == "PASS" else f"full-model accuracy {d.describe()}; train longer (steps)",
    )


def _task_finding(
    task: str,
    assumptions: list[Assumption],
    name: str,
    text: str,
    quantity: str,
    values: pd.Series,
    side: Side,
    margin: float,
    note: str = "",
    *,
    beyond: bool = False,
) -> Claim:
    """One finding of `task` by the one rule over its seeds' values."""
    per_seed = ", ".join(f"seed {s}: {x:+.3f}" for s, x in values.items())
    return finding(
        f"{task}:{name}",
        says=DRAWN if beyond else SAYS[name],
        text=text,
        quantity=quantity,
        values=values.tolist(),
        side=side,
        margin=margin,
        assumptions=assumptions,
        decides="more seeds at this preset (seeds: [0, 1, ..., n - 1])",
        note="; ".join(p for p in (per_seed, note) if p),
        beyond=beyond,
    )


def summarize(config: Config, results: pd.DataFrame) -> Summary:
    found = claims(config, results)
    floors = {
        task: path_effectiveness(
            results[results["task"] == task],
            setup_of(config, task).n_layers,
            comparator=COMPARATOR[task],
            short=SHORT,
            margin=MARGIN,
        )["baseline"]
        for task in set(results["task"])
    }
    results = results.assign(task=pd.Categorical(results["task"], categories=list(config.tasks)))
    paths, reference, wide = path_accuracy_tables(results)
    devices = sorted(set(results["device"].astype(str))) if "device" in results else ["cpu"]
    note = (
        f"Each unit trains its SAN (on {', '.join(devices)}), then reports the full model's "
        "accuracy on the evaluation data, the baselines on the same data, the path accuracies "
        "(evaluated as in the authors' code: docs/methods.md, sec. 5). k = 0 keeps only the "
        "embedding (no attention): drawn hollow, left out of the best-length finding."
    )
    notes = [note]
    unlearned = sorted(
        {c.id.split(":")[0] for c in found if "the full model learned" in c.untested}
    )
    if unlearned:
        notes.append(
            f"The full model did not reach the paper's accuracy on {', '.join(unlearned)} with "
            "this preset's training budget: path findings of those tasks are not tested; train "
            "longer (steps) or on more data (n_train), e.g. with the paper preset."
        )
    return Summary(
        tables={
            "full model and baselines (mean over seeds)": reference.reset_index(),
            "accuracy by path length (over repeats and seeds)": wide.reset_index(),
        },
        figures={
            "accuracy vs path length": path_accuracy_figure(
                paths,
                reference,
                floors,
                margin=MARGIN,
                title=f"Path effectiveness: {config.n_repeats} path samples per length "
                f"x {len(config.seeds)} seed(s)",
            )
        },
        claims=found,
        notes=notes,
    )


register(
    Experiment(
        name=NAME,
        description="Trained SANs restricted to sampled paths: short paths carry the accuracy.",
        config=Config,
        presets=PRESETS,
        units=units,
        run_unit=run_unit,
        summarize=summarize,
        claims=claims,
    )
)
