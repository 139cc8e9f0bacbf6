"""Cost of the default metric suite against one forward pass of a BERT-base-sized network.

Target: measuring all 13 hidden states (32 x 128 x 768) with `measure_states` and the default
metrics costs at most 0.1 x the forward pass that produced them. Both are timed in this
process, so the ratio holds on a busy machine even when the seconds do not.

Run: HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 .venv/bin/python benchmarks/bench_metrics.py
"""

from __future__ import annotations

import os
import time

import torch
from transformers import BertConfig, BertModel

from rankcollapse.metrics import DEFAULT_METRICS, measure_states

BATCH, N_TOKENS, TARGET = 32, 128, 0.1


def main() -> None:
    torch.manual_seed(0)
    config = BertConfig()  # BERT-base: 12 layers, 768 wide, 12 heads; random init
    model = BertModel(config).eval()
    ids = torch.randint(0, config.vocab_size, (BATCH, N_TOKENS))
    mask = torch.ones(BATCH, N_TOKENS, dtype=torch.bool)

    with torch.no_grad():
        model(input_ids=ids[:2, :16])  # warm-up: one-time allocations stay out of the timing
        start = time.perf_counter()
        states = model(input_ids=ids, output_hidden_states=True).hidden_states
        forward = time.perf_counter() - start

        measure_states(states[0][:2], mask[:2])  # warm-up of the metric code paths
        start = time.perf_counter()
        for x in states:
            measure_states(x, mask)
        metrics = time.perf_counter() - start

    ratio = metrics / forward
    load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    print(f"hidden states: {len(states)} x {tuple(states[0].shape)} {states[0].dtype}")
    print(f"metrics ({len(DEFAULT_METRICS)}): {', '.join(DEFAULT_METRICS)}")
    print(f"torch threads: {torch.get_num_threads()}, load average (1, 5, 15 min): {load}")
    print(f"forward pass with hidden states: {forward:.2f} s")
    print(f"measure_states over all layers:  {metrics:.2f} s")
    print(f"ratio metrics / forward: {ratio:.3f} (target <= {TARGET})")


if __name__ == "__main__":
    main()
