"""Probing cost and memory against a plain forward pass with output_hidden_states=True.

1. Time, per model (`--models`, default MiniLM pretrained, SmolLM2 pretrained and the
   Qwen2-0.5B-shaped random init): baseline one forward pass with `output_hidden_states=True`;
   probe `rankcollapse.measure.probe` with the default metric suite (every state metric, float64) on
   the same windows, variant `transformer`. Both measured in the same process, interleaved, best
   of `--repeats`; target ratio <= 1.2. The capture alone (`run_batch` with hooks, no metrics)
   and the metric suite alone on the baseline's hidden states are printed too, to show where the
   cost sits. Sizes: 32 x 128 tokens, except the Qwen2 shape at 8 x 256.
2. Memory, per model: each arm runs in its own subprocess: load the model, warm up,
   `malloc_trim(0)`, reset the kernel's peak-RSS counter (`echo 5 > /proc/self/clear_refs`), run,
   then read the peak (VmHWM) minus the resident size before the run. tracemalloc cannot see
   torch's allocations, and the model load's own peak would hide the forward's, hence the reset.
   Target: probe peak <= 0.5 x baseline peak (the probe runs about 2048 tokens per forward
   pass, `measure.layers.MAX_TOKENS`, and measures each layer as it arrives).

Run: `.venv/bin/python benchmarks/bench_probe.py [--models minilm smollm2 qwen2-0.5b]` (several
minutes on 2 cores; the Qwen2 shape alone is about half of it).
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

# name: (init, n_samples, n_tokens)
MODELS = {
    "minilm": ("pretrained", 32, 128),
    "smollm2": ("pretrained", 32, 128),
    "qwen2-0.5b": ("random", 8, 256),
}


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def _load(name: str):
    from rankcollapse.hf import load_model, load_windows

    init, n_samples, n_tokens = MODELS[name]
    loaded = load_model(name, init=init)
    ids, mask = load_windows(loaded.tokenizer, n_samples=n_samples, n_tokens=n_tokens)
    return loaded, ids, mask


def child(name: str, arm: str) -> None:
    """One memory measurement; prints a JSON line."""
    import torch

    from rankcollapse.measure import probe

    loaded, ids, mask = _load(name)

    def run() -> None:
        if arm == "baseline":
            with torch.no_grad():
                out = loaded.model(
                    input_ids=ids, attention_mask=mask.long(), output_hidden_states=True
                )
            del out
        else:
            probe(loaded, n_samples=ids.shape[0], n_tokens=ids.shape[1])  # default metric suite

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


def memory(name: str) -> dict[str, dict]:
    results = {}
    for arm in ("baseline", "probe"):
        out = subprocess.run(
            [sys.executable, __file__, "--child", name, arm],
            capture_output=True,
            text=True,
            check=True,
        )
        results[arm] = json.loads(out.stdout.strip().splitlines()[-1])
    return results


def timing(name: str, repeats: int) -> dict[str, float]:
    import torch

    from rankcollapse.hf import run_batch
    from rankcollapse.measure import probe
    from rankcollapse.metrics import measure_states

    loaded, ids, mask = _load(name)
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
        del out
        start = time.perf_counter()
        run_batch(loaded, ids, mask, on_layer=lambda capture: None)
        best["capture"] = min(best["capture"], time.perf_counter() - start)
        start = time.perf_counter()
        probe(loaded, n_samples=ids.shape[0], n_tokens=ids.shape[1])
        best["probe"] = min(best["probe"], time.perf_counter() - start)
    best["layers"] = loaded.n_layers
    return best


def report(name: str, repeats: int, skip_memory: bool) -> None:
    init, n_samples, n_tokens = MODELS[name]
    load = os.getloadavg()[0]
    t = timing(name, repeats)
    print(
        f"{name} ({init}, {t['layers']} layers), {n_samples} x {n_tokens} tokens, best of "
        f"{repeats} (load average {load:.1f}):"
    )
    print(f"  forward with output_hidden_states : {t['forward']:.2f} s")
    print(f"  probe, default metric suite        : {t['probe']:.2f} s")
    print(f"  capture alone (hooks, no metrics)  : {t['capture']:.2f} s")
    print(f"  metric suite alone ({t['layers'] + 1} states)    : {t['suite']:.2f} s")
    print(f"  ratio probe / forward              : {t['probe'] / t['forward']:.2f} (target <= 1.2)")
    if skip_memory:
        return
    m = memory(name)
    base, mine = m["baseline"]["peak_extra_mb"], m["probe"]["peak_extra_mb"]
    print(f"  peak RSS above the loaded model ({m['probe']['before_mb']:.0f} MB loaded):")
    print(f"    forward with output_hidden_states : {base:.0f} MB")
    print(f"    probe (streaming, default suite)   : {mine:.0f} MB")
    print(f"    ratio probe / baseline             : {mine / base:.2f} (target <= 0.5)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", nargs=2, metavar=("MODEL", "ARM"), default=None)
    parser.add_argument("--models", nargs="+", choices=list(MODELS), default=list(MODELS))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-memory", action="store_true")
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    for name in args.models:
        report(name, args.repeats, args.skip_memory)


if __name__ == "__main__":
    main()
