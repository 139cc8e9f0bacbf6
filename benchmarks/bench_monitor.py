"""Monitor overhead: training time of the training-dynamics quick preset with the monitor on
(default interval) against off, in the same process.

One arm (`--arm`, default pre-ln, GPT-2's block) of the quick preset is trained `--repeats`
times with and without its monitor, interleaved (off, on, off, on, ...), on one torch thread as
the runner runs units. Printed, as the median over the interleaved (off, on) pairs: the ratio of
the training times on / off in wall time and in this process's CPU time (on a machine shared
with other jobs the wall time swings by tens of percent between runs, the CPU time of one
thread by a few), and the CPU time the monitor itself took inside the "on" runs as a share of
their training time. Target: overhead <= 3 %.

Run: `.venv/bin/python benchmarks/bench_monitor.py [--repeats 2] [--arm pre-ln]` (about a
minute per run on a quiet 2-core machine).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from rankcollapse.experiments import get_experiment
from rankcollapse.experiments.training_dynamics import arm_net
from rankcollapse.measure.monitor import MemoryLog, watch
from rankcollapse.nets import CausalLM
from rankcollapse.tasks import VOCAB_SIZE, byte_windows
from rankcollapse.train import TrainConfig, train

TARGET = 0.03


def run(config, arm: str, monitored: bool) -> tuple[float, float, float]:
    """(wall seconds of training, its CPU seconds, CPU seconds spent measuring) for one arm."""
    model = CausalLM(arm_net(config, arm, 0), vocab_size=VOCAB_SIZE, n_positions=config.n_tokens)
    inputs, targets = byte_windows(config.n_tokens, part="train")
    held_out, _ = byte_windows(config.n_tokens, part="held_out", n_samples=config.n_samples)
    monitor, spent = None, [0.0]
    if monitored:
        monitor = watch(model, blocks="body.blocks", inputs=held_out, every=config.every,
                        logs=[MemoryLog()])  # fmt: skip
        measure = monitor.measure_fn

        def timed(step: int):
            start = time.process_time()
            try:
                return measure(step)
            finally:
                spent[0] += time.process_time() - start

        monitor.measure_fn = timed
    schedule = TrainConfig(steps=config.steps, batch_size=config.batch_size, lr=config.lr)
    start, cpu = time.perf_counter(), time.process_time()
    train(model, inputs, targets, schedule, monitor=monitor)
    return time.perf_counter() - start, time.process_time() - cpu, spent[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--arm", default="pre-ln")
    args = parser.parse_args()
    config = get_experiment("training-dynamics").make_config("quick")
    torch.set_num_threads(1)
    off, on = [], []
    for _ in range(args.repeats):  # interleaved: a slow spell of the machine hits both
        off.append(run(config, args.arm, False))
        on.append(run(config, args.arm, True))
    wall = statistics.median(a[0] / b[0] - 1 for a, b in zip(on, off, strict=True))
    cpu = statistics.median(a[1] / b[1] - 1 for a, b in zip(on, off, strict=True))
    share = min(spent / (total - spent) for _, total, spent in on)
    print(
        f"training-dynamics quick, arm {args.arm}: {config.steps} steps, monitor every "
        f"{config.every} ({config.steps // config.every + 1} measurements of "
        f"{config.n_layers + 1} layers x {config.n_samples} samples x 3 metrics)"
    )
    for name, runs in (("off", off), ("on", on)):
        print(f"monitor {name}: wall {[round(r[0], 2) for r in runs]} s, "
              f"CPU {[round(r[1], 2) for r in runs]} s")  # fmt: skip
    print(f"overhead, wall (on / off - 1, median of the interleaved pairs): {wall:+.2%}")
    print(f"overhead, CPU time of this process (median of the pairs): {cpu:+.2%}")
    print(
        f"overhead, measured inside the on runs (measuring / training): {share:.2%} "
        f"(target <= {TARGET:.0%}: {'met' if share <= TARGET else 'MISSED'})"
    )


if __name__ == "__main__":
    main()
