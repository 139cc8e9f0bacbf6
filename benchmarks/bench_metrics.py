"""Cost of the default metric suite against one forward pass of a BERT-base-sized network.

Target: measuring all 13 hidden states (32 x 128 x 768) with `measure_states` and the default
metrics costs at most 0.1 x the forward pass that produced them. Both are timed in this
process, interleaved, `--repeats` times; the median ratio is the result, so it holds on a busy
machine even when the seconds do not.

Beside them, the accelerator's route forced on the CPU (`measure_states(..., batched=True)`:
one batched float64 eigvalsh per layer and no SVD, one host copy), timed in the same rounds,
and its largest relative difference from the float64 route (stated tolerance `SPECTRA_RTOL`).
On a CPU it is no faster by design (its gain is on a GPU); this shows its cost and agreement.

Run: HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 .venv/bin/python benchmarks/bench_metrics.py
(about a minute on 2 cores with the default 5 repeats).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch
from transformers import BertConfig, BertModel

from rankcollapse.metrics import DEFAULT_METRICS, SPECTRA_RTOL, measure_states

BATCH, N_TOKENS, TARGET = 32, 128, 0.1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    torch.manual_seed(0)
    config = BertConfig()  # BERT-base: 12 layers, 768 wide, 12 heads; random init
    model = BertModel(config).eval()
    ids = torch.randint(0, config.vocab_size, (BATCH, N_TOKENS))
    mask = torch.ones(BATCH, N_TOKENS, dtype=torch.bool)

    load_before = os.getloadavg()[0]
    forwards, suites, batched, gaps = [], [], [], [0.0]
    with torch.no_grad():
        model(input_ids=ids[:2, :16])  # warm-up: one-time allocations stay out of the timing
        measure_states(torch.randn(2, 16, 8), metrics=list(DEFAULT_METRICS))
        for _ in range(args.repeats):
            start = time.perf_counter()
            states = model(input_ids=ids, output_hidden_states=True).hidden_states
            forwards.append(time.perf_counter() - start)

            start = time.perf_counter()
            exact = [measure_states(x, mask) for x in states]
            suites.append(time.perf_counter() - start)

            start = time.perf_counter()
            fast = [measure_states(x, mask, batched=True) for x in states]
            batched.append(time.perf_counter() - start)
            for one, other in zip(exact, fast, strict=True):
                for name, (value, _) in one.items():
                    gap = (other[name].value - value).abs() / value.abs().clamp_min(1e-300)
                    gaps.append(float(gap.max()))
            del states

    ratios = [suite / forward for suite, forward in zip(suites, forwards, strict=True)]
    load = f"{load_before:.2f} before, {os.getloadavg()[0]:.2f} after (1-min, 2 cores)"
    print(
        f"hidden states: {config.num_hidden_layers + 1} x {(BATCH, N_TOKENS, config.hidden_size)}"
    )
    print(f"metrics ({len(DEFAULT_METRICS)}): {', '.join(DEFAULT_METRICS)}")
    print(f"torch threads: {torch.get_num_threads()}, load average: {load}")
    print(f"forward pass with hidden states: {', '.join(f'{t:.2f}' for t in forwards)} s")
    print(f"measure_states over all layers:  {', '.join(f'{t:.2f}' for t in suites)} s")
    print(f"ratios metrics / forward:        {', '.join(f'{r:.3f}' for r in ratios)}")
    print(f"median ratio: {statistics.median(ratios):.3f} (target <= {TARGET})")
    print(f"batched route (forced on the CPU): {', '.join(f'{t:.2f}' for t in batched)} s")
    routes = [fast / exact for fast, exact in zip(batched, suites, strict=True)]
    print(
        f"batched / float64 route: median {statistics.median(routes):.2f}; batched / forward "
        f"{statistics.median([b / f for b, f in zip(batched, forwards, strict=True)]):.3f}; largest relative "
        f"difference {max(gaps):.1e} (stated tolerance {SPECTRA_RTOL:g}: "
        f"{'met' if max(gaps) <= SPECTRA_RTOL else 'missed'})"
    )


if __name__ == "__main__":
    main()
