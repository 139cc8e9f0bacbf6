"""Accuracy of a trained classifier: in full, against trivial baselines, restricted to paths.

Path effectiveness (Dong, Cordonnier, Loukas 2021, Sec. 5, Fig. 4): a trained `SAN` is run
keeping only `n_paths` paths of one length k, drawn uniformly among the C(L, k) H^k paths of
that length (`rankcollapse.paths.sample_paths`), and scored; `n_repeats` fresh samples per
(n_paths, k) give a spread.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import torch
from torch import Tensor

from rankcollapse.nets import SAN
from rankcollapse.paths import restricted_logits, sample_paths
from rankcollapse.tasks import TaskData, label_ceiling, trivial_baselines

MAX_ROUTE_SEQUENCES = 20_000
"""Routes x sequences per batched pass of `path_accuracies` (bounds memory, not results)."""


def accuracy(logits: Tensor, targets: Tensor) -> Tensor:
    """Share of tokens whose arg-max class is the target: logits (..., b, n, C), targets (b, n).

    Returns a float64 tensor of shape (...) (one accuracy per leading index).

    Example:
        >>> accuracy(torch.tensor([[[2.0, 0.0], [0.0, 1.0]]]), torch.tensor([[0, 0]]))
        tensor(0.5000, dtype=torch.float64)
    """
    return (logits.argmax(dim=-1) == targets).double().mean(dim=(-2, -1))


def path_accuracies(
    model: SAN,
    inputs: Tensor,
    targets: Tensor,
    *,
    n_paths: Sequence[int],
    n_repeats: int,
    seed: int,
) -> pd.DataFrame:
    """Accuracy of `model` (put in eval mode) restricted to sampled paths, for every n_paths and
    length k = 0..L.

    All samples come from one generator seeded with `seed`, drawn in the order of the rows
    (n_paths, then k), so a run is reproducible and no two samples share random numbers.

    Returns:
        tidy frame with columns n_paths, length, repeat, accuracy (float64).

    Example:
        >>> from rankcollapse.nets import SANConfig
        >>> model = SAN(SANConfig(inputs="points", n_classes=2, n_layers=2, d_model=4)).eval()
        >>> x, y = torch.randn(6, 5, 2), torch.randint(2, (6, 5))
        >>> frame = path_accuracies(model, x, y, n_paths=[1, 3], n_repeats=2, seed=0)
        >>> len(frame), int(frame["length"].max())
        (12, 2)
    """
    n_layers, n_heads = model.config.n_layers, model.config.n_heads
    device = model.classifier.weight.device
    model.eval()  # dropout off
    inputs, targets = inputs.to(device), targets.to(device)
    generator = torch.Generator().manual_seed(seed)
    rows = []
    with torch.no_grad():
        for size in n_paths:
            per_pass = max(1, MAX_ROUTE_SEQUENCES // (size * len(inputs)))
            for length in range(n_layers + 1):
                routes = sample_paths(
                    n_layers, n_heads, length, size, seed=generator, n_repeats=n_repeats
                )
                scores = [
                    accuracy(restricted_logits(model, inputs, chunk), targets)
                    for chunk in routes.split(per_pass)
                ]
                rows += [
                    (size, length, repeat, float(acc))
                    for repeat, acc in enumerate(torch.cat(scores).tolist())
                ]
    return pd.DataFrame(rows, columns=["n_paths", "length", "repeat", "accuracy"])


def evaluate_san(
    model: SAN, data: TaskData, *, n_paths: Sequence[int], n_repeats: int, seed: int
) -> pd.DataFrame:
    """Everything Sec. 5 reports of a trained SAN on `data`, as tidy rows (in eval mode).

    First the full model's accuracy (kind "full"), then the trivial baselines measured on the
    same labels (kind "baseline": random, majority; position_majority when the model sees
    positions, since only then can it learn a prior per position; for memorization the ceiling
    of a model without positions), then `path_accuracies` (kind "paths").

    Returns:
        frame with columns kind, n_paths, length, repeat, metric, value.

    Example:
        >>> from rankcollapse.nets import SANConfig
        >>> from rankcollapse.tasks import convex_hull_data
        >>> data = convex_hull_data(4, seed=0, n_points=5)
        >>> model = SAN(SANConfig(inputs="points", n_classes=2, n_layers=1, d_model=4)).eval()
        >>> evaluate_san(model, data, n_paths=[2], n_repeats=2, seed=0)["kind"].unique().tolist()
        ['full', 'baseline', 'paths']
    """
    device = model.classifier.weight.device
    model.eval()  # dropout off: the model is evaluated as trained, never with training noise
    with torch.no_grad():
        full = float(accuracy(model(data.inputs.to(device)).cpu(), data.targets))
    rows = [("full", "accuracy", full)]
    baselines = trivial_baselines(data.targets, data.n_classes, seed=seed)
    if model.positions is None:
        del baselines["position_majority"]
    if data.name == "memorization":
        baselines["ceiling"] = label_ceiling(data)
    rows += [("baseline", name, value) for name, value in baselines.items()]
    paths = path_accuracies(
        model, data.inputs, data.targets, n_paths=n_paths, n_repeats=n_repeats, seed=seed
    )
    return pd.concat(
        [
            pd.DataFrame(rows, columns=["kind", "metric", "value"]),
            paths.rename(columns={"accuracy": "value"}).assign(kind="paths", metric="accuracy"),
        ],
        ignore_index=True,
    )[["kind", "n_paths", "length", "repeat", "metric", "value"]]


def path_effectiveness(
    rows: pd.DataFrame,
    n_layers: int,
    *,
    comparator: str,
    short: int = 2,
    margin: float = 0.05,
) -> dict:
    """How accuracy spreads over path lengths, from `evaluate_san` rows of one task.

    Rows of one task (one seed or several; `kind` "paths" with n_paths, length, value, the
    rest the full model and baselines); Dong, Cordonnier, Loukas 2021, Sec. 5, Fig. 4. The
    paper compares the paths with one trivial predictor, `comparator` (a baseline row:
    "random" for sorting, "majority" for convex hull). Keys: `full` (full-model accuracy);
    `baseline`, the comparator's accuracy on the same data; `paths_learned`, whether the best
    path length k >= 1 (best over n_paths) beats it by `margin`; `best_length`, the longest of
    the best lengths k >= 1, NaN unless `paths_learned`; `long_gap`, accuracy at k = n_layers
    minus the comparator; `gain`, mean accuracy of the most paths minus the fewest (20 and 5
    when run) at k = 1; `full_margin`, the full model minus the best path accuracy; notes in
    words, with what needs no attention (k = 0, the per-position prior) as a caveat.
    """
    ref = rows[rows["kind"] != "paths"].groupby("metric")["value"].mean()
    paths = rows[rows["kind"] == "paths"].astype({"n_paths": int, "length": int})
    curve = paths.groupby(["n_paths", "length"])["value"].mean()  # mean accuracy per (n_paths, k)
    by_length = curve.groupby(level="length").max()  # best over n_paths at each k
    baseline = float(ref.get(comparator, np.nan))
    name = comparator.replace("_", " ")
    attention = by_length[by_length.index >= 1]
    best = float(attention.max())
    tied = [int(k) for k, v in attention.items() if abs(v - best) <= 1e-12]
    learned = bool(best - baseline >= margin)
    sizes = sorted(set(paths["n_paths"]))
    small, large = (5, 20) if {5, 20} <= set(sizes) else (sizes[0], sizes[-1])
    gain = curve.get((large, 1), np.nan) - curve.get((small, 1), np.nan)
    lengths = ", ".join(f"k={k}: {v:.3f}" for k, v in by_length.items())
    caveat = [f"k = 0 (no attention) {by_length.get(0, np.nan):.3f}"]
    if "position_majority" in ref:
        prior = ref["position_majority"]
        caveat.append(f"per-position prior {prior:.3f} (best k >= 1 {best - prior:+.3f})")
    ceiling = ref.get("ceiling")
    return {
        "full": float(ref.get("accuracy", np.nan)),
        "baseline": baseline,
        "paths_learned": learned,
        "best_length": float(max(tied)) if tied and learned else np.nan,
        "best_note": f"{lengths}; best k >= 1: {', '.join(map(str, tied))} at {best:.3f}, "
        f"{best - baseline:+.3f} against the paper's baseline ({name} {baseline:.3f}): "
        + ("beats it by the margin" if learned else f"no length beats it by {margin}")
        + f"; caveat, what needs no attention: {', '.join(caveat)}",
        "trivial_note": f"the paper's baseline: {name} {baseline:.3f}",
        "long_gap": float(by_length.get(n_layers, np.nan)) - baseline,
        "gain": float(gain),
        "n_small": small,
        "n_large": large,
        "full_margin": float(ref.get("accuracy", np.nan)) - float(by_length.max()),
        "ceiling_note": "" if ceiling is None else f"; ceiling without positions {ceiling:.3f}",
    }


def path_accuracy_tables(results: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(path rows, reference, wide) of `evaluate_san` rows with a `task` column.

    reference: per task the mean full-model accuracy ("full model") and baselines; wide: per
    (task, length) the mean and std of the path accuracy for each n_paths.
    """
    paths = results[results["kind"] == "paths"].astype({"n_paths": int, "length": int})
    reference = (
        results[results["kind"] != "paths"]
        .pivot_table(index="task", columns="metric", values="value", observed=True)
        .rename_axis(columns=None)
        .rename(columns={"accuracy": "full model"})
    )
    wide = paths.pivot_table(
        index=["task", "length"],
        columns="n_paths",
        values="value",
        aggfunc=["mean", "std"],
        observed=True,
    )
    wide.columns = [f"accuracy {stat}, {n} paths" for stat, n in wide.columns]
    return paths, reference, wide
