"""Probing cost and memory against a plain forward pass with output_hidden_states=True.

1. Time: MiniLM (pretrained) on 32 x 128 tokens of the sample corpus. Baseline: one forward pass
   with `output_hidden_states=True`. Probe: `rankcollapse.hf.probe` with the default metric suite
   (every state metric, float64) on the same windows, variant `transformer`. Both measured in the
   same process, interleaved, best of `--repeats`; target ratio <= 1.15. The capture alone
   (`run_batch` with hooks, no metrics) and the metric suite alone on the baseline's hidden
   states are printed too, to show where the cost sits.
2. Memory: SmolLM2 (30 layers) on the same 32 x 128 windows. Each arm runs in its own
   subprocess: load the model, warm up, `malloc_trim(0)`, reset the kernel's peak-RSS counter
   (`echo 5 > /proc/self/clear_refs`), run, then read the peak (VmHWM) minus the resident size
   before the run. tracemalloc cannot see torch's allocations, and the model load's own peak
   would hide the forward's, hence the reset. Target: probe peak < baseline peak.

Run: `.venv/bin/python benchmarks/bench_probe.py` (about 2-4 minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import subprocess
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

N_SAMPLES, N_TOKENS = 32, 128


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def child(arm: str) -> None:
    """One memory measurement; prints a JSON line."""
    import torch

    from rankcollapse.hf import load_model, load_windows, probe

    loaded = load_model("smollm2")
    ids, mask = load_windows(loaded.tokenizer, n_samples=N_SAMPLES, n_tokens=N_TOKENS)

    def run() -> None:
        if arm == "baseline":
            with torch.no_grad():
                out = loaded.model(
                    input_ids=ids, attention_mask=mask.long(), output_hidden_states=True
                )
            del out
        else:
            probe(loaded, n_samples=N_SAMPLES, n_tokens=N_TOKENS)  # default metric suite

    run()  # warm-up: lazy inits, thread pools
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset the peak resident set size (VmHWM) to the current size
    before = _status_kb("VmRSS")
    run()
    peak = _status_kb("VmHWM")
    print(
        json.dumps(
            {"arm": arm, "before_mb": before / 1024, "peak_extra_mb": (peak - before) / 1024}
        )
    )


def memory() -> dict[str, dict]:
    results = {}
    for arm in ("baseline", "probe"):
        out = subprocess.run(
            [sys.executable, __file__, "--child", arm], capture_output=True, text=True, check=True
        )
        results[arm] = json.loads(out.stdout.strip().splitlines()[-1])
    return results


def timing(repeats: int) -> dict[str, float]:
    import torch

    from rankcollapse.hf import load_model, load_windows, probe, run_batch
    from rankcollapse.metrics import measure_states

    loaded = load_model("minilm")
    ids, mask = load_windows(loaded.tokenizer, n_samples=N_SAMPLES, n_tokens=N_TOKENS)
    best = {"forward": float("inf"), "probe": float("inf"), "suite": float("inf")}
    best["capture"] = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        with torch.no_grad():
            out = loaded.model(input_ids=ids, attention_mask=mask.long(), output_hidden_states=True)
        best["forward"] = min(best["forward"], time.perf_counter() - start)
        start = time.perf_counter()
        for x in out.hidden_states:
            measure_states(x, mask, source_dtype=x.dtype)
        best["suite"] = min(best["suite"], time.perf_counter() - start)
        start = time.perf_counter()
        run_batch(loaded, ids, mask, on_layer=lambda capture: None)
        best["capture"] = min(best["capture"], time.perf_counter() - start)
        start = time.perf_counter()
        probe(loaded, n_samples=N_SAMPLES, n_tokens=N_TOKENS)
        best["probe"] = min(best["probe"], time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", choices=["baseline", "probe"], default=None)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-memory", action="store_true")
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return
    load = os.getloadavg()[0]
    t = timing(args.repeats)
    print(
        f"MiniLM, {N_SAMPLES} x {N_TOKENS} tokens, best of {args.repeats} (load average {load:.1f}):"
    )
    print(f"  forward with output_hidden_states : {t['forward']:.2f} s")
    print(f"  probe, default metric suite        : {t['probe']:.2f} s")
    print(f"  capture alone (hooks, no metrics)  : {t['capture']:.2f} s")
    print(f"  metric suite alone (7 states)      : {t['suite']:.2f} s")
    print(
        f"  ratio probe / forward              : {t['probe'] / t['forward']:.2f} (target <= 1.15)"
    )
    if args.skip_memory:
        return
    m = memory()
    base, mine = m["baseline"]["peak_extra_mb"], m["probe"]["peak_extra_mb"]
    print(f"SmolLM2 (30 layers), {N_SAMPLES} x {N_TOKENS} tokens, peak RSS above the loaded model:")
    print(f"  forward with output_hidden_states : {base:.0f} MB")
    print(f"  probe (streaming, default suite)   : {mine:.0f} MB")
    print(f"  ratio probe / baseline             : {mine / base:.2f} (target < 1)")


if __name__ == "__main__":
    main()
