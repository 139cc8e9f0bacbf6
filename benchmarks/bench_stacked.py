"""The circle toy's layer: many seeds trained as one batched model vs one seed alone.

`train.train_stacked` (U seeds of one `CircleNet` variant in one vmapped model, one Adam step
for all) against `train.train` (one seed), per training step, at the cpu preset's sizes
(dong2021-circle: width 32, 2 heads, batches of 30 pairs). Prints the seconds per step alone
and batched, the ratio (U alone steps over one batched step) and what the cpu preset then
takes on 2 cores with --jobs 2 (units of `seeds_per_unit` seeds, steps as in the preset). Times
are this process's CPU seconds on one torch thread (as the runner's units), so they hold on a
busy machine (a shared one then takes longer by its load).

Run: .venv/bin/python benchmarks/bench_stacked.py [U ...]   (default: 1 10 50 100 200)
"""

from __future__ import annotations

import math
import os
import sys
import time

import torch

from rankcollapse.experiments import get_experiment
from rankcollapse.nets import CircleNet
from rankcollapse.runner.costs import makespan
from rankcollapse.tasks import circle_data
from rankcollapse.train import TrainConfig, train, train_stacked

STEPS = 60  # timed steps per measurement (after a few untimed ones)
VARIANTS = ("san", "san+skip", "san+mlp")


def _alone(variant: str, config: TrainConfig) -> float:
    """Seconds per step of `train` on one seed."""
    data = circle_data(1000, radius=0.3)
    train(CircleNet(variant), data.inputs, data.targets, config.model_copy(update={"steps": 3}))
    start = time.process_time()
    train(CircleNet(variant), data.inputs, data.targets, config)
    return (time.process_time() - start) / config.steps


def _batched(variant: str, units: int, config: TrainConfig) -> float:
    """Seconds per step of `train_stacked` on `units` seeds."""
    data = circle_data(1000, radius=0.3)
    nets = [CircleNet(variant, d_model=32, n_heads=2, seed=s) for s in range(units)]
    warm = config.model_copy(update={"steps": 3})
    train_stacked(nets, data.inputs, data.targets, [warm] * units)
    configs = [config.model_copy(update={"seed": s}) for s in range(units)]
    start = time.process_time()
    train_stacked(nets, data.inputs, data.targets, configs)
    return (time.process_time() - start) / config.steps


def main(sizes: list[int]) -> None:
    torch.set_num_threads(1)
    cpu = get_experiment("dong2021-circle").make_config("cpu")
    config = TrainConfig(steps=STEPS, batch_size=30, lr=3e-3, loss="mse")
    load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    print(f"torch threads: 1, CPU seconds of this process; load average (1, 5, 15 min): {load}")
    per_step = {}
    for variant in VARIANTS:
        alone = _alone(variant, config)
        print(f"{variant}: one seed alone {1e3 * alone:.2f} ms per step")
        for units in sizes:
            batched = _batched(variant, units, config)
            per_step[variant, units] = batched
            print(
                f"{variant}: {units} seeds batched {1e3 * batched:.1f} ms per step "
                f"({1e3 * batched / units:.2f} ms per seed); ratio {units} x alone / batched: "
                f"{units * alone / batched:.1f}"
            )
    block = cpu.seeds_per_unit
    if block in sizes:
        blocks = [min(block, len(cpu.seeds) - i) for i in range(0, len(cpu.seeds), block)]
        seconds = [
            cpu.steps * per_step[v, block] * size / block for v in VARIANTS for size in blocks
        ]
        wall = makespan(sorted(seconds, reverse=True), 2)
        print(
            f"cpu preset: {len(cpu.seeds)} seeds in units of {block}, {len(seconds)} units of "
            f"{cpu.steps} steps: about {math.ceil(wall / 60)} min of training on 2 cores with "
            "--jobs 2 (training only, each unit on a core of its own)"
        )


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [1, 10, 50, 100, 200])
