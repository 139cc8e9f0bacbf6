"""Monitor overhead under DDP: a GPT-2-shaped model (4 layers, 128 wide, 64 tokens, batch 8 per
rank) trained by `torchrun --standalone --nproc_per_node 2` on the CPU (gloo), with the
monitor off and on (rank 0 measures 8 random-token samples every `--every` steps; the other
rank waits for it at the next gradient all-reduce).

Printed: the median seconds per training step of each rank, off and on, interleaved
(off, on, off, on, ...), the ratio on / off, and the median seconds of a step that measured
(rank 0) against one that did not. The worker is tests/measure/monitor/ddp_worker.py.

Run: `.venv/bin/python benchmarks/bench_ddp_monitor.py [--steps 40] [--every 10] [--repeats 2]`
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORKER = ROOT / "tests" / "measure" / "monitor" / "ddp_worker.py"


def run(ranks: str, steps: int, every: int) -> list[list[float]]:
    """Seconds of every step of each rank (the first step, warm-up, left out)."""
    with tempfile.TemporaryDirectory() as out:
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
                   "--nproc_per_node", "2", str(WORKER), out, "--model", "gpt2",
                   "--ranks", ranks, "--steps", str(steps), "--every", str(every)]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"}
        subprocess.run(command, env=env, check=True, capture_output=True, timeout=900)
        return [json.loads(Path(out, f"rank{r}.json").read_text())["seconds"][1:] for r in (0, 1)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    off, on = [[], []], [[], []]
    for _ in range(args.repeats):
        for arm, ranks in ((off, "off"), (on, "0")):
            for rank, seconds in enumerate(run(ranks, args.steps, args.every)):
                arm[rank] += seconds
    for rank in (0, 1):
        a, b = statistics.median(off[rank]), statistics.median(on[rank])
        mean_a, mean_b = statistics.mean(off[rank]), statistics.mean(on[rank])
        print(f"rank {rank}: median step {a * 1e3:.1f} ms off, {b * 1e3:.1f} ms on; "
              f"mean {mean_a * 1e3:.1f} -> {mean_b * 1e3:.1f} ms ({mean_b / mean_a:.3f} x)")  # fmt: skip
    # steps 1.. of the worker; the step numbers `every` divides measured (index = step - 2)
    measured = [s for i, s in enumerate(on[0]) if (i % (args.steps - 1) + 2) % args.every == 0]
    plain = [s for i, s in enumerate(on[0]) if (i % (args.steps - 1) + 2) % args.every != 0]
    print(f"rank 0, monitor on: a measuring step {statistics.median(measured) * 1e3:.1f} ms, "
          f"another {statistics.median(plain) * 1e3:.1f} ms")  # fmt: skip


if __name__ == "__main__":
    main()
