"""Per-length path decomposition against enumeration, and against one forward pass.

1. Toy networks L=6, H=2 (729 paths) and L=8, H=3 (65,536 paths): time `enumerate_paths`
   and `decompose_by_length` on the same frozen network; print the speed-up and check that the
   enumerated terms, summed per length, equal the per-length totals.
2. A BERT-base-sized toy network (12 layers, 12 heads, width 768, 128 tokens, skips, post-LN):
   time one forward pass and the per-length decomposition (freezing included: it runs the
   forward pass once to get the attention); target: at most 8 x the forward pass.

Timings are the best of several repeats in this one process, so the ratios hold on a shared,
noisy machine. Run: .venv/bin/python benchmarks/bench_paths.py
"""

from __future__ import annotations

import time

import torch

from rankcollapse.nets import NetConfig, ToyNet, random_tokens
from rankcollapse.paths import count_enumerated, decompose_by_length, enumerate_paths, freeze_toy


def best_time(fn, repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def warm_up() -> None:
    """One untimed run: the first calls of a process pay torch's one-off set-up costs."""
    net = ToyNet(NetConfig(n_layers=6, n_heads=2, d_model=16, skip="on"))
    frozen = freeze_toy(net, random_tokens(1, 8, 16, seed=0))
    enumerate_paths(frozen)
    decompose_by_length(frozen)


def enumeration_vs_per_length(n_layers: int, n_heads: int) -> None:
    net = ToyNet(NetConfig(n_layers=n_layers, n_heads=n_heads, d_model=16, skip="on"))
    frozen = freeze_toy(net, random_tokens(1, 8, 16, seed=0))
    enumerated = enumerate_paths(frozen)
    by_length = decompose_by_length(frozen)
    totals = torch.stack(
        [enumerated.terms[enumerated.lengths == k].sum(0) for k in range(n_layers + 1)]
    )
    error = float((totals - by_length.components).abs().max() / by_length.output.abs().max())
    t_enum = best_time(lambda: enumerate_paths(frozen), repeats=3)
    t_length = best_time(lambda: decompose_by_length(frozen), repeats=20)
    print(
        f"L={n_layers}, H={n_heads}: {count_enumerated(frozen):,} paths; enumeration "
        f"{t_enum * 1e3:.1f} ms, per-length {t_length * 1e3:.2f} ms, speed-up "
        f"{t_enum / t_length:.0f}x; per-length totals agree to {error:.1e} (relative)"
    )


def decomposition_vs_forward() -> None:
    config = NetConfig(n_layers=12, n_heads=12, d_model=768, skip="on", norm="post")
    net = ToyNet(config)
    x = random_tokens(1, 128, 768, seed=0)
    with torch.no_grad():
        t_forward = best_time(lambda: net(x))
        t_decompose = best_time(lambda: decompose_by_length(freeze_toy(net, x)))
    ratio = t_decompose / t_forward
    verdict = "within" if ratio <= 8 else "OVER"
    print(
        f"BERT-base-sized toy (12 x 12 heads, width 768, 128 tokens, float64): forward "
        f"{t_forward * 1e3:.0f} ms, freeze + per-length decomposition {t_decompose * 1e3:.0f} ms "
        f"= {ratio:.2f} x forward ({verdict} the 8 x target)"
    )


if __name__ == "__main__":
    threads = torch.get_num_threads()
    # Tiny tensors: one thread, so a busy machine's scheduling of a second thread does not
    # stall every small op (it did: x100 swings between identical runs).
    torch.set_num_threads(1)
    warm_up()
    enumeration_vs_per_length(6, 2)
    enumeration_vs_per_length(8, 3)
    torch.set_num_threads(threads)
    decomposition_vs_forward()
