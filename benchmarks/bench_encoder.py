"""amsel2024-depth's units on the CPU: rank-1 heads written out against torch's fused kernel.

`nets.StackedRankEncoder` trains every seed of a unit as one model. On the CPU its rank-1 heads
are written out with the heads on the last axis (`nets.rank_encoder.head_attention`), where
torch's fused kernel (`scaled_dot_product_attention`, the code before) handles 16 heads of
size 1 on sets of 8 tokens slowly. This script trains the cpu preset's largest unit (N = 8
points, 5 layers, 16 rank-1 heads at width 8 + 8, MLP width 128, 3 seeds, batches of 256:
`train.train_farthest_encoders`, as the experiment's unit) for `STEPS` steps both ways in one
process, on one torch thread (as the runner's units), `REPEATS` times each, interleaved, and
prints the median CPU seconds per step, their ratio and the largest difference of the two
arms' held-out errors.

Run: .venv/bin/python benchmarks/bench_encoder.py   (about a minute)
"""

from __future__ import annotations

import os
import statistics
import time

import torch

from rankcollapse.experiments import amsel2024_depth
from rankcollapse.nets import rank_encoder
from rankcollapse.train import train_farthest_encoders

STEPS, REPEATS = 100, 3  # steps per training run; runs per arm


def fused(qkv: torch.Tensor, *, accelerator: bool) -> torch.Tensor:
    """The code before: torch's fused kernel for every head size, (..., n, 3, H, r) ->
    (..., n, H, r)."""
    q, k, v = qkv.movedim(-3, 0).transpose(-2, -3)
    return torch.nn.functional.scaled_dot_product_attention(q, k, v).transpose(-2, -3)


def main() -> None:
    torch.set_num_threads(int(os.environ.get("BENCH_THREADS", "1")))  # the runner uses 1
    preset = amsel2024_depth.PRESETS["cpu"]
    config = amsel2024_depth.Config(
        **{**preset, "seeds": [0, 1, 2], "steps": STEPS, "warmup": 10, "eval_samples": 256}
    )
    width = amsel2024_depth.width(config)
    unit = {"n_points": max(config.contexts), "n_layers": max(config.n_layers), "n_heads": width}
    written_out = rank_encoder.head_attention
    seconds: dict[str, list[float]] = {"written out": [], "fused": []}
    errors: dict[str, list[float]] = {}
    for _ in range(REPEATS):  # the arms interleaved, so a burst of load hits them alike
        for arm, attention in (("written out", written_out), ("fused", fused)):
            rank_encoder.head_attention = attention
            start = time.process_time()
            rows = train_farthest_encoders(
                config, **unit, seeds=config.seeds, positions=amsel2024_depth.positions(config)
            )
            seconds[arm].append((time.process_time() - start) / STEPS)
            errors[arm] = rows[rows.metric == "eval_rel_mse"].value.tolist()
    rank_encoder.head_attention = written_out
    gap = max(abs(a - b) / b for a, b in zip(errors["written out"], errors["fused"], strict=True))
    new, old = (statistics.median(seconds[arm]) for arm in ("written out", "fused"))
    load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    print(
        f"unit: {len(config.seeds)} seeds, batches of {config.batch_size} sets of "
        f"{unit['n_points']} points, {unit['n_layers']} layers of {width} rank-1 heads, "
        f"MLP width {config.d_ff}, {STEPS} steps"
    )
    print(f"torch threads: {torch.get_num_threads()}, load average (1, 5, 15 min): {load}")
    print(f"torch's fused kernel: {1e3 * old:.1f} ms per step (median of {REPEATS})")
    print(f"written out:          {1e3 * new:.1f} ms per step")
    print(
        f"ratio fused / written out: {old / new:.2f}; largest relative difference of the "
        f"held-out errors: {gap:.1e}"
    )


if __name__ == "__main__":
    main()
