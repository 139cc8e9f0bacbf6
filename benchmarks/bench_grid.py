"""Training a grid of 16 (r, H) attention layers as one batched model vs one after another.

Target (issue 47): `train_grid` (all 16 configurations in one model, one optimiser step for
all) is at least 5 x faster than `train_one_by_one` (the same loop, one configuration at a
time), and
gives every configuration the same loss curve and held-out error up to float32 rounding.
Both are timed in this process, so the ratio holds on a busy machine even when the seconds
do not.

Run: .venv/bin/python benchmarks/bench_grid.py
"""

from __future__ import annotations

import os
import time

import numpy as np
import torch

from rankcollapse.tasks import NeighbourTask
from rankcollapse.train import GridPoint, TrainSettings, train_grid, train_one_by_one

D_MODEL, N_POINTS, STEPS, BATCH, TARGET = 16, 8, 150, 64, 5.0
RANKS, HEADS = (1, 2, 4, 16), (1, 2, 4, 8)


def _steps_run(result) -> np.ndarray:
    return result.final[result.final.metric == "steps_run"].value.to_numpy()


def main() -> None:
    torch.set_num_threads(int(os.environ.get("BENCH_THREADS", "1")))  # the runner uses 1
    task = NeighbourTask(D_MODEL, N_POINTS, target="farthest")
    points = [GridPoint(r, h, seed=0) for r in RANKS for h in HEADS]
    settings = TrainSettings(steps=STEPS, batch_size=BATCH, log_every=10, eval_samples=512)
    train_grid(task, points[:2], TrainSettings(steps=3, batch_size=BATCH, eval_samples=64))

    start = time.perf_counter()
    batched = train_grid(task, points, settings)
    grid_seconds = time.perf_counter() - start
    start = time.perf_counter()
    alone = train_one_by_one(task, points, settings)
    alone_seconds = time.perf_counter() - start

    keys = ["d_qk", "n_heads", "seed", "metric"]
    final = batched.final.merge(alone.final, on=keys, suffixes=("_grid", "_alone"))
    curves = batched.curves.merge(alone.curves, on=[*keys, "step"], suffixes=("_grid", "_alone"))
    errors = final[final.metric == "eval_rel_mse"]
    final_gap = np.max(np.abs(errors.value_grid - errors.value_alone) / errors.value_alone)
    curve_gap = np.max(np.abs(curves.value_grid - curves.value_alone) / curves.value_alone)
    ratio = alone_seconds / grid_seconds
    load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    print(
        f"grid: {len(points)} configurations (r in {RANKS}, H in {HEADS}), d={D_MODEL}, "
        f"N={N_POINTS}, {STEPS} steps of {BATCH} samples"
    )
    print(f"torch threads: {torch.get_num_threads()}, load average (1, 5, 15 min): {load}")
    grid_step = grid_seconds / _steps_run(batched).max()  # one step trains every configuration
    alone_step = alone_seconds / _steps_run(alone).sum()
    print(f"one batched model:  {grid_seconds:.2f} s ({1e3 * grid_step:.1f} ms per step, all)")
    print(f"one after another:  {alone_seconds:.2f} s ({1e3 * alone_step:.2f} ms per step, each)")
    print(
        f"largest relative difference per configuration: held-out error {final_gap:.1e}, "
        f"loss curve {curve_gap:.1e} ({len(curves)} curve points)"
    )
    verdict = "met" if ratio >= TARGET else "missed"
    print(f"ratio one-by-one / batched: {ratio:.2f} (target >= {TARGET}): {verdict}")


if __name__ == "__main__":
    main()
