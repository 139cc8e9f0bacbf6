"""Probing cost and memory against a plain forward pass with output_hidden_states=True.

1. Time, per model (`--models`, default MiniLM pretrained, SmolLM2 pretrained and the
   Qwen2-0.5B-shaped random init): baseline one forward pass with `output_hidden_states=True`;
   probe `rankcollapse.measure.probe` with the default metric suite (every state metric,
   float64) on the same windows, variant `transformer`. Both measured in the same process, in
   `--repeats` rounds: each round runs the forward and the probe back to back (in turns first),
   and its ratio compares the two at the machine's speed of that moment. The target, for
   SmolLM2's 30 layers (`TIME_TARGETS`; MiniLM's 6-layer forward is small beside the float64
   spectra of its states), is a ratio <= 1.2, read on the median of the rounds' ratios: on a
   shared 2-core machine the forward's own time drifts by a third between rounds (7.96 to
   11.28 s in one process), so the best probe over the best forward pairs runs made at
   different speeds (it is printed too). The capture alone (`run_batch` with hooks, no
   metrics) and the metric suite alone on the baseline's hidden states are printed as well, to
   show where the cost sits. Sizes: 32 x 128 tokens, except the Qwen2 shape at 8 x 256.
2. Memory, per model: each arm runs in its own subprocess: load the model, warm up,
   `malloc_trim(0)`, reset the kernel's peak-RSS counter (`echo 5 > /proc/self/clear_refs`), run,
   then read the peak (VmHWM) minus the resident size before the run. tracemalloc cannot see
   torch's allocations, and the model load's own peak would hide the forward's, hence the reset.
   Each arm runs in `--memory-runs` children (glibc keeps a varying part of freed memory
   resident: one MiniLM probe child read 44 to 166 MB); the median ratio and the worst case
   (highest probe over lowest forward) are printed. Target: probe peak <= 0.5 x baseline
   peak (the probe runs about 1024 tokens per forward pass on the CPU,
   `measure.layers.MAX_TOKENS`, and measures a few layers at a time,
   `measure.layers.GROUP_SEQUENCES`).

Run: `.venv/bin/python benchmarks/bench_probe.py [--models minilm smollm2 qwen2-0.5b]` (several
minutes on 2 cores; the Qwen2 shape alone is about half of it).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import statistics
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
TIME_TARGETS = {"smollm2": 1.2}  # probe / forward, the median of the rounds' ratios


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


def memory(name: str, runs: int) -> dict[str, list[dict]]:
    """Each arm measured in `runs` fresh children: glibc's allocator keeps a varying part of
    freed memory resident (its arenas and moving mmap threshold), so one child can read high
    or low; the spread is part of the result."""
    results: dict[str, list[dict]] = {"baseline": [], "probe": []}
    for _ in range(runs):
        for arm, measured in results.items():
            out = subprocess.run(
                [sys.executable, __file__, "--child", name, arm],
                capture_output=True,
                text=True,
                check=True,
            )
            measured.append(json.loads(out.stdout.strip().splitlines()[-1]))
    return results


def timing(name: str, repeats: int) -> tuple[dict[str, list[float]], int]:
    """Seconds per round of each arm (the forward and the probe back to back, their order
    alternating between rounds, then the capture alone and the suite alone), and the model's
    number of layers."""
    import torch

    from rankcollapse.hf import run_batch
    from rankcollapse.measure import probe
    from rankcollapse.metrics import measure_states

    loaded, ids, mask = _load(name)

    def forward() -> tuple:
        with torch.no_grad():
            out = loaded.model(input_ids=ids, attention_mask=mask.long(), output_hidden_states=True)
        return out.hidden_states

    def measured() -> None:
        probe(loaded, n_samples=ids.shape[0], n_tokens=ids.shape[1])

    def capture() -> None:
        run_batch(loaded, ids, mask, on_layer=lambda capture: None)

    states = forward()  # the suite's input, kept for every round

    def suite() -> None:
        for x in states:
            measure_states(x, mask, source_dtype=x.dtype)

    seconds: dict[str, list[float]] = {"forward": [], "probe": [], "capture": [], "suite": []}
    arms = {"forward": forward, "probe": measured, "capture": capture, "suite": suite}
    for arm in arms.values():
        arm()  # warm-up: lazy inits, thread pools
    for round_ in range(repeats):
        pair = ["forward", "probe"] if round_ % 2 == 0 else ["probe", "forward"]
        for arm in [*pair, "capture", "suite"]:
            start = time.perf_counter()
            arms[arm]()
            seconds[arm].append(time.perf_counter() - start)
    return seconds, loaded.n_layers


def report(name: str, repeats: int, skip_memory: bool, memory_runs: int) -> None:
    init, n_samples, n_tokens = MODELS[name]
    load = os.getloadavg()[0]
    t, layers = timing(name, repeats)
    best = {arm: min(values) for arm, values in t.items()}
    ratios = [probe / forward for probe, forward in zip(t["probe"], t["forward"], strict=True)]
    ratio = statistics.median(ratios)
    print(
        f"{name} ({init}, {layers} layers), {n_samples} x {n_tokens} tokens, {repeats} rounds "
        f"(load average {load:.1f}): best, median of the rounds"
    )
    for arm, label in (
        ("forward", "forward with output_hidden_states"),
        ("probe", "probe, default metric suite"),
        ("capture", "capture alone (hooks, no metrics)"),
        ("suite", f"metric suite alone ({layers + 1} states)"),
    ):
        print(f"  {label:<34} : {best[arm]:.2f} s, {statistics.median(t[arm]):.2f} s")
    print(
        f"  ratio probe / forward              : {ratio:.2f}, the median of the rounds' ratios "
        f"({min(ratios):.2f} - {max(ratios):.2f}); best over best {best['probe'] / best['forward']:.2f}"
    )
    if name in TIME_TARGETS:
        target = TIME_TARGETS[name]
        print(f"  target <= {target} on the median: {'met' if ratio <= target else 'missed'}")
    if skip_memory:
        return
    m = memory(name, memory_runs)
    base, mine = ([one["peak_extra_mb"] for one in m[arm]] for arm in ("baseline", "probe"))
    print(
        f"  peak RSS above the loaded model ({m['probe'][0]['before_mb']:.0f} MB loaded), "
        f"{memory_runs} children per arm: median (min - max)"
    )
    for label, values in (
        ("forward with output_hidden_states", base),
        ("probe (streaming, default suite)  ", mine),
    ):
        print(
            f"    {label} : {statistics.median(values):.0f} MB ({min(values):.0f} - {max(values):.0f})"
        )
    median, worst = statistics.median(mine) / statistics.median(base), max(mine) / min(base)
    print(
        f"    ratio probe / baseline             : {median:.2f} of the medians, {worst:.2f} worst "
        "case (the highest probe over the lowest forward; target <= 0.5)"
    )


def positive(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return int(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", nargs=2, metavar=("MODEL", "ARM"), default=None)
    parser.add_argument("--models", nargs="+", choices=list(MODELS), default=list(MODELS))
    parser.add_argument("--repeats", type=positive, default=5, help="timing rounds per model")
    parser.add_argument("--skip-memory", action="store_true")
    parser.add_argument("--memory-runs", type=positive, default=5, help="children per memory arm")
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    for name in args.models:
        report(name, args.repeats, args.skip_memory, args.memory_runs)


if __name__ == "__main__":
    main()
