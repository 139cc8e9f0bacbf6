"""A Qwen2-0.5B-shaped model (24 layers, width 896, 14 heads, 2 key-value heads, random init)
probed on 8 x 256 tokens on this machine: time against a plain forward with
output_hidden_states=True, and peak memory of the streaming probe against that forward.

The measurement itself lives in `bench_probe.py` (same method for every model); this script
runs it for the Qwen2 shape only. Run: `.venv/bin/python benchmarks/bench_qwen2.py` (a few
minutes on 2 cores).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from bench_probe import report

if __name__ == "__main__":
    report("qwen2-0.5b", repeats=2, skip_memory=False)
