"""The device check: every family on an accelerator, agreement with the CPU, big shapes, training.

Run on a machine with a GPU (about 5 minutes on one H100), from a checkout, with or without
the package installed (the checkout's `src` is put on the path):

    python benchmarks/gpu_check.py                 # device cuda
    python benchmarks/gpu_check.py --skip-8b       # no Llama-3-8B shape (a GPU under 40 GB)
    python benchmarks/gpu_check.py --device cpu --quick   # the script itself, here (no targets)

Needs no weights package and no network: random-init models, random tokens. Prints one
markdown table (what, result, target, verdict); docs/gpu.md keeps the last one measured.

Rows:
- resolution: the largest error of float64 Gram eigenvalues on the device against an SVD's
  squares, in units of sqrt(k) eps64 lambda_max; the device's metric route assumes at most 4
  (`metrics._batched`: what it takes from the Gram and what it measures again). Then its
  second stage (`DeflatedTokens`) on one layer of float32 states collapsed to rounding noise:
  the rounding of its product W = Q^T X on the device against numpy's extended precision
  (at most 4 sqrt(k) eps64 sigma_max assumed), and the suite's time against an SVD of each
  sequence.
- family/<name>: the tiny random-init model of every family probed on the device with every
  variant it supports (Dong's, Wu's, the authors'), a mask and a temperature where the family
  takes them, in float32; `agree` is the largest relative difference of a per-layer mean from
  the same probe on the CPU (values at the floor excluded; target 1e-4); `states` the largest
  relative difference of a layer's hidden states themselves, |S_device - S_cpu|_F / |S_cpu|_F
  (the forward's share of the gap); `metrics` the largest relative difference of a value
  measured on the device from the same states' metrics measured on the host (the metric code's
  share); `noise` how far Gaussian noise of the states' measured size moves the CPU's per-layer
  means (the metrics' own conditioning: values just above the float32 floor and rank counts
  move most). A family agrees when its forward agrees at float32 rounding (states <= 1e-5),
  the metric code at float64 (metrics <= 1e-8), and each metric's per-layer means within 1e-4
  or within 10 x what that noise moves them. Then a bfloat16 run with the share of values
  flagged at its floor.
- qwen2-0.5b (32 x 512) and llama3-8b (8 x 2048, bfloat16, initialised on the device): a plain
  forward with output_hidden_states against the probe with the O(n d) metrics (res_comp_rel,
  mu_rel; target <= 1.15 x the forward) and against the full default suite (the accelerator's
  route: one batched float64 eigvalsh per layer group and no SVD, one host copy; for the
  sequences with a value the Gram cannot vouch for, two stages, and the host's route only
  for what those cannot vouch for either; target <= 3 x the forward); peak memory ratio
  (target <= 1) for both; for the Qwen2 shape also its `san` variant with the full suite (no
  target: its pure-attention layers collapse to float32 rounding noise, which the device
  route now resolves in its two stages, without the SVD it took before); and the floor of the
  full suite: the float64 eigvalsh of every layer alone. The family rows check the spectra of
  that route against the host's float64 route (`SPECTRA_RTOL`).
- amsel2024-depth: seconds per step of every unit of the paper preset (one model shape, its
  seeds trained as one batched model, `train.train_encoders`: difference of two capped runs, so
  start-up and scoring cancel), the largest per seed against the 3 ms target with its operations
  counted (`FlopCounterMode`: 210.5 GFLOP per seed and step, so 3.14 ms at the 67 TFLOP/s
  float32 peak of an H100 or H200 SXM, above the target) and the rate reached; on CUDA the same
  unit again with TF32 matrix products (informational: the experiment trains in float32); and
  the preset's estimate on this device: sum over units of steps x that unit's step time (target
  one hour), with the preset's operations counted alike (101.3 PFLOP: 0.42 h at that float32
  peak).
  Where the largest unit's step goes: one layer's attention, forward and backward, by each
  route of `nets.rank_encoder.head_attention` (torch's fused kernel on rank-1 heads padded to
  8, and the broadcast product written out, which the CPU takes), and the five kernels that
  take most of ten whole steps under `torch.profiler` (the full table is printed above).

Every target row ends in "met" or "missed" (no verdict on a CPU, where no target is judged).
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np
import torch

from rankcollapse.experiments import get_experiment
from rankcollapse.experiments.amsel2024_depth import positions
from rankcollapse.hf import ARCHITECTURES, load_model, wrap_model
from rankcollapse.hf.models import tiny_model
from rankcollapse.measure import probe
from rankcollapse.metrics import SPECTRA_RTOL, measure_states
from rankcollapse.nets import RankEncoder
from rankcollapse.nets.rank_encoder import head_attention
from rankcollapse.tasks import NeighbourTask
from rankcollapse.train.amsel import train_farthest_encoders
from rankcollapse.variants import AUTHORS_VARIANTS, DONG_VARIANTS, WU_VARIANTS

ROWS: list[tuple[str, str, str, str]] = []
SPECTRAL = {"stable_rank", "effective_rank", "numerical_rank", "min_sv", "min_sv_rel", "rank1_rel"}
SECTIONS = ("resolution", "families", "qwen2-0.5b", "llama3-8b", "training")
SUITE_TARGET, O_ND_TARGET, STEP_TARGET, PRESET_HOURS = 3.0, 1.15, 3e-3, 1.0


def row(what: str, result: str, target: str = "", ok: bool | None = None) -> None:
    verdict = "" if ok is None else ("met" if ok else "missed")
    ROWS.append((what, result, target, verdict))
    print(f"  {what}: {result} {target} {verdict}", flush=True)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def per_layer_means(on_cpu, on_device):
    """Per (variant, layer, metric) means of both runs over the same samples: those at the
    floor on neither side. Excluding each side's own floor values instead compares means of
    different samples wherever a value straddles the floor (xlnet's pure-attention layers sit
    at 1.2e-6 to 2.2e-6 relative, just above float32's 1.19e-6)."""
    keys = ["variant", "layer", "metric", "sample"]
    cpu, device = (run.set_index(keys)[["value", "at_floor"]] for run in (on_cpu, on_device))
    cpu.attrs = device.attrs = {}  # the kept states: pandas compares attrs when joining
    both = cpu.join(device, lsuffix="_cpu", rsuffix="_device")
    real = both[~(both.at_floor_cpu | both.at_floor_device)]
    means = real.groupby(level=["variant", "layer", "metric"])
    return means.value_cpu.mean(), means.value_device.mean()


def states_gap(on_cpu, on_device) -> float:
    """Largest |S_device - S_cpu|_F / |S_cpu|_F over variants and layers (kept states)."""
    gaps = [
        float((d.double() - c.double()).norm() / c.double().norm().clamp_min(1e-300))
        for name, layers in on_cpu.attrs["states"].items()
        for c, d in zip(layers, on_device.attrs["states"][name], strict=True)
    ]
    return max(gaps)


def metric_gap(on_device) -> tuple[float, float]:
    """Largest relative difference of the device's state metrics from the same kept states
    measured on the host's float64 route (values at the floor on either side excluded): for
    the O(n d) metrics, and for the spectra (the device's route, `SPECTRA_RTOL`)."""
    rows = on_device.set_index(["variant", "layer", "metric", "sample"]).sort_index()
    gaps = {False: [0.0], True: [0.0]}
    for name, layers in on_device.attrs["states"].items():
        for layer, states in enumerate(layers):
            for metric, (value, at_floor) in measure_states(states).items():
                if (name, layer, metric, 0) not in rows.index:
                    continue
                there = rows.loc[(name, layer, metric)].sort_index()
                keep = ~(at_floor.numpy() | there.at_floor.to_numpy())
                host = value.numpy()[keep]
                device_values = there.value.to_numpy()[keep]
                if keep.any():
                    gap = float((abs(device_values - host) / abs(host).clip(1e-300)).max())
                    gaps[metric in SPECTRAL].append(gap)
    return max(gaps[False]), max(gaps[True])


def noise_gaps(on_cpu, scale: float) -> dict[str, float]:
    """The metrics' own conditioning: per state metric, the largest relative change of a
    per-layer mean (values at the floor excluded) when the CPU's states get Gaussian noise of
    relative size `scale` (the forward's measured gap), all on the host."""
    generator = torch.Generator().manual_seed(0)
    gaps: dict[str, float] = {}
    for layers in on_cpu.attrs["states"].values():
        for states in layers:
            exact = states.double()
            noise = torch.randn(states.shape, generator=generator, dtype=torch.float64)
            jittered = exact + scale * exact.norm() / states.numel() ** 0.5 * noise
            before = measure_states(exact, source_dtype=states.dtype)
            after = measure_states(jittered, source_dtype=states.dtype)
            for metric, (value, floor) in before.items():
                keep = ~(floor | after[metric].at_floor)
                if keep.any():
                    mean, moved = value[keep].mean(), after[metric].value[keep].mean()
                    gap = float((moved - mean).abs() / mean.abs().clamp_min(1e-300))
                    gaps[metric] = max(gaps.get(metric, 0.0), gap)
    return gaps


def family_variants(family: str) -> list[str]:
    names = DONG_VARIANTS + WU_VARIANTS
    if ARCHITECTURES[family].authors_surgery:
        names = names + AUTHORS_VARIANTS
    return names


def check_families(
    device: torch.device, families: list[str], n_samples: int, n_tokens: int
) -> None:
    for family in families:
        arch = ARCHITECTURES[family]
        settings = {
            "n_samples": n_samples,
            "n_tokens": n_tokens,
            "variants": family_variants(family),
        }
        settings["random_tokens"] = arch.inputs == "tokens"
        if arch.attention_interface:
            settings.update(mask="window:1", temperature=2.0)
        try:
            on_cpu = probe(wrap_model(tiny_model(family)), keep_states=True, **settings)
            on_device = probe(
                wrap_model(tiny_model(family).to(device)), keep_states=True, **settings
            )
            cpu_means, device_means = per_layer_means(on_cpu, on_device)
            joined = cpu_means.to_frame("cpu").join(device_means.rename("device"), how="inner")
            gaps = (joined.device - joined.cpu).abs() / joined.cpu.abs().clip(lower=1e-300)
            forward, (code, spectra) = states_gap(on_cpu, on_device), metric_gap(on_device)
            noise = noise_gaps(on_cpu, forward)
            per_metric = gaps.groupby(level="metric").max()
            allowed = {m: max(1e-4, 10 * noise.get(m, 0.0)) for m in per_metric.index}
            worst = max(per_metric.index, key=lambda m: per_metric[m] / allowed[m])
            low = probe(wrap_model(tiny_model(family, dtype=torch.bfloat16).to(device)), **settings)
            row(
                f"family/{family}",
                f"states {forward:.1e}; metrics {code:.1e}, spectra {spectra:.1e}; means "
                f"{per_metric.max():.1e} "
                f"({len(joined)}), worst {worst} {per_metric[worst]:.1e} where noise of the "
                f"states' size moves it {noise.get(worst, 0.0):.1e} on the CPU; bfloat16 at "
                f"floor {low.at_floor.mean():.0%}",
                f"states <= 1e-5, metrics <= 1e-8, spectra <= {SPECTRA_RTOL:g}, each metric's "
                "means <= 1e-4 or 10 x noise",
                None  # on the CPU the device is the host: they agree by construction
                if device.type == "cpu"
                else (
                    forward <= 1e-5
                    and code <= 1e-8
                    and spectra <= SPECTRA_RTOL
                    and per_metric[worst] <= allowed[worst]
                ),
            )
        except Exception as err:  # noqa: BLE001 (one family's failure is a row, not the end)
            traceback.print_exc()
            row(f"family/{family}", f"error: {type(err).__name__}: {str(err)[:120]}", "", False)


def timed(device: torch.device, work, repeats: int = 3) -> tuple[float, float]:
    """Median seconds and peak device memory (GiB; 0 on the CPU) of `work()`."""
    times, peak = [], 0.0
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(device)
        sync(device)
        start = time.perf_counter()
        work()
        sync(device)
        times.append(time.perf_counter() - start)
        if device.type == "cuda":
            peak = max(peak, torch.cuda.max_memory_allocated(device) / 2**30)
    return statistics.median(times), peak


def check_shape(
    name: str,
    device: torch.device,
    dtype: torch.dtype,
    n_samples: int,
    n_tokens: int,
    variants: list[str],
    overrides: dict | None = None,
) -> None:
    loaded = load_model(name, init="random", device=device, dtype=dtype, config_overrides=overrides)
    vocabulary = loaded.vocabulary
    ids = torch.randint(
        vocabulary.size - 1, (n_samples, n_tokens), generator=torch.Generator().manual_seed(0)
    )
    ids = (ids + 1).to(device)  # never id 0 (a pad id in the borrowed vocabulary)

    def forward() -> None:
        with torch.no_grad():
            out = loaded.model(input_ids=ids, output_hidden_states=True)
            del out

    probe_args = {
        "random_tokens": True,
        "n_samples": n_samples,
        "n_tokens": n_tokens,
        "device": device,
        "dtype": dtype,
        "batch_size": n_samples,
    }
    label = f"{name} {n_samples} x {n_tokens} {str(dtype)[6:]}"
    forward()  # warm-up: kernels, allocator, and the solver the suite's spectra use
    measure_states(torch.randn(2, 8, 4, device=device), batched=True)
    base_time, base_peak = timed(device, forward)
    row(f"{label} forward (hidden states)", f"{base_time:.3f} s, {base_peak:.1f} GiB")
    for metrics, target in ((["res_comp_rel", "mu_rel"], O_ND_TARGET), (None, SUITE_TARGET)):
        kind = "O(n d) metrics" if metrics else "full default suite"
        per_variant = len(variants)

        def run(metrics=metrics) -> None:
            probe(loaded, variants=variants, metrics=metrics, **probe_args)

        seconds, peak = timed(device, run, repeats=3 if metrics else 1)
        ratio = seconds / (base_time * per_variant)  # one forward per variant
        memory = peak / max(base_peak, 1e-9)
        result = (
            f"{seconds:.3f} s for {per_variant} variants = {ratio:.2f} x forward, peak "
            f"{peak:.1f} GiB ({memory:.2f} x)"
        )
        ok = None if device.type != "cuda" else (ratio <= target and memory <= 1.0001)
        row(f"{label} probe, {kind}", result, f"<= {target} x, memory <= 1 x", ok)
    if "san" not in variants:  # collapsed states of this dtype: the float64 route's share
        seconds, _ = timed(device, lambda: probe(loaded, variants=["san"], **probe_args), 1)
        row(
            f"{label} probe of the san variant (collapsing layers), full default suite",
            f"{seconds:.3f} s = {seconds / base_time:.2f} x forward",
        )
    row(f"{label} floor of a full spectrum per sequence", spectrum_floor(loaded, ids, base_time))


def gram_resolution(device: torch.device) -> None:
    """The largest error of float64 Gram eigenvalues on `device` against an SVD's squares, in
    units of sqrt(k) eps64 lambda_max (the device route assumes at most 4: `metrics._batched`),
    over random, collapsed (bfloat16) and massive-activation states of k = 512 and 2048."""
    generator = torch.Generator().manual_seed(0)
    worst = 0.0
    for n, d in ((512, 1024), (2048, 4096)):
        base = torch.randn(1, d, generator=generator)
        for x in (
            torch.randn(n, d, generator=generator),
            (base + 1e-3 * torch.randn(n, d, generator=generator)).bfloat16(),
            torch.randn(n, d, generator=generator) * torch.where(torch.arange(d) < 2, 1e3, 1.0),
        ):
            x = x.double().to(device)
            lam = torch.linalg.eigvalsh(x @ x.mT).flip(0)
            sv = torch.linalg.svdvals(x)
            error = float((lam - sv.square()).abs().max() / sv[0].square())
            worst = max(worst, error / (n**0.5 * torch.finfo(torch.float64).eps))
    row(
        "float64 Gram eigenvalues against an SVD",
        f"error at most {worst:.2f} sqrt(k) eps64 lambda_max",
        "<= 4",
        None if device.type == "cpu" else worst <= 4,
    )


def resolution(device: torch.device, quick: bool) -> None:
    """The section of that name: `gram_resolution`, then `second_stage`."""
    gram_resolution(device)
    second_stage(device, quick)


def second_stage(device: torch.device, quick: bool) -> None:
    """The device route's two stages (`metrics._batched.DeflatedTokens`) on one layer of float32
    sequences collapsed to rounding noise (the Qwen2 shape's 32 x 512 x 896): the rounding of
    W = Q^T X on the device against extended precision on the host (the route assumes at most
    4 sqrt(k) eps64 sigma_max), and the metric suite's time against an SVD of each sequence
    (what such sequences cost before)."""
    batch, n, d = (2, 48, 64) if quick else (32, 512, 896)
    generator = torch.Generator().manual_seed(1)
    mean = torch.randn(batch, 1, d, generator=generator, dtype=torch.float64)
    noise = torch.randn(batch, n, d, generator=generator, dtype=torch.float64)
    x = (mean + 3e-7 * mean.abs() * noise).float().to(device)
    one = x[0].double()
    _, q = torch.linalg.eigh(one @ one.mT)
    w = (q.mT @ one).cpu().numpy().astype(np.longdouble)
    extended = q.cpu().numpy().astype(np.longdouble).T @ one.cpu().numpy().astype(np.longdouble)
    error = np.linalg.norm((w - extended).astype(np.float64), 2)
    scale = n**0.5 * np.finfo(np.float64).eps * float(torch.linalg.matrix_norm(one, 2))
    row(
        "rounding of W = Q^T X (two stages) against extended precision",
        f"at most {error / scale:.2f} sqrt(k) eps64 sigma_max (numpy longdouble, eps "
        f"{float(np.finfo(np.longdouble).eps):.1e})",
        "<= 4",
        None if device.type == "cpu" else error / scale <= 4,
    )
    measure_states(x[:2], batched=True)  # warm-up: the solvers' first calls
    suite, _ = timed(device, lambda: measure_states(x, batched=True), repeats=1)
    svd, _ = timed(device, lambda: torch.linalg.svdvals(x.double()), repeats=1)
    row(
        f"default suite on {batch} float32 sequences of {n} x {d} collapsed to rounding noise",
        f"{suite * 1e3:.0f} ms with the two stages; an SVD of each sequence alone "
        f"{svd * 1e3:.0f} ms",
    )


def spectrum_floor(loaded, ids: torch.Tensor, base_time: float) -> str:
    """What the spectra cost at least on the device's solver: a batched float64 eigvalsh of one
    layer's Gram matrices, timed alone, times the number of layers, against the forward (the
    spectral metrics need every sequence's whole spectrum)."""
    with torch.no_grad():
        states = loaded.model(input_ids=ids, output_hidden_states=True).hidden_states
    x = states[-1].double()
    gram = x @ x.mT if x.shape[-2] <= x.shape[-1] else x.mT @ x
    del x
    solve, _ = timed(ids.device, lambda: torch.linalg.eigvalsh(gram))
    floor = (base_time + len(states) * solve) / base_time
    return (
        f"float64 eigvalsh of one layer's {len(gram)} Gram matrices of {gram.shape[-1]}: "
        f"{solve * 1e3:.1f} ms; over {len(states)} layers the forward plus them is "
        f"{floor:.1f} x the forward"
    )


def step_seconds(config, unit: dict, device: torch.device, few: int, many: int) -> float:
    """Seconds per training step of one unit on `config`'s device, trained as the experiment
    trains it (`train_farthest_encoders`: its seeds as one batched model, Thm 5's scratch
    dimensions): two capped runs, their difference, so building and scoring cancel."""
    spent = []
    for steps in (few, many):
        capped = config.model_copy(update={"steps": steps, "eval_samples": 256, "patience": 10**9})
        sync(device)
        start = time.perf_counter()
        train_farthest_encoders(capped, **unit, positions=positions(config))
        sync(device)
        spent.append(time.perf_counter() - start)
    return max(spent[1] - spent[0], 1e-9) / (many - few)


def seed_step_flops(config, unit: dict) -> float:
    """Floating-point operations of one training step (forward and backward) of one seed of
    `unit`, counted by torch's `FlopCounterMode` (matrix products and attention; elementwise
    work is not counted) on a small batch on the host and scaled to the preset's batch (every
    counted term is linear in it)."""
    from torch.utils.flop_counter import FlopCounterMode

    model = RankEncoder(
        config.d_model,
        n_heads=unit["n_heads"],
        n_layers=unit["n_layers"],
        d_ff=config.d_ff,
        positions=positions(config),
    )
    small = 8
    batch = NeighbourTask(config.d_model, unit["n_points"], target="farthest").sample(
        small, torch.Generator().manual_seed(0)
    )
    with FlopCounterMode(display=False) as counter:
        (model(batch.x) - batch.target).square().sum().backward()
    return counter.get_total_flops() * config.batch_size / small


def attention_routes(shape: tuple[int, ...], device: torch.device) -> None:
    """One layer's attention on qkv of `shape` (sets, n, 3, H, r), forward and backward, by
    each route of `head_attention`: a row each."""
    draw = torch.Generator(device).manual_seed(0)
    qkv = torch.randn(shape, device=device, generator=draw, requires_grad=True)
    routes = [(True, "fused kernel, heads padded to 8"), (False, "written out")]
    for accelerator, route in routes[: 2 if shape[-1] == 1 else 1]:  # written out: rank 1 only

        def work(accelerator=accelerator) -> None:
            head_attention(qkv, accelerator=accelerator).sum().backward()
            qkv.grad = None

        work()  # warm-up
        seconds, peak = timed(device, work, repeats=5)
        row(
            f"amsel2024-depth unit's attention, one layer of {shape[0]} sets, {route}",
            f"{seconds * 1e3:.2f} ms forward and backward, peak {peak:.1f} GiB",
        )


def step_parts(config, unit: dict, device: torch.device, quick: bool) -> None:
    """Where a step of `unit` goes: `attention_routes` on its shape, then the kernels of ten
    whole steps as `torch.profiler` times them (printed; the five that take most are rows)."""
    seeds, batch = len(config.seeds), 8 if quick else config.batch_size
    size = (config.d_model + positions(config)) // unit["n_heads"]
    shape = (seeds * batch, unit["n_points"], 3, unit["n_heads"], size)
    attention_routes(shape, device)
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    capped = config.model_copy(update={"steps": 3 if quick else 10, "eval_samples": 256})
    try:  # a machine without the profiler's tracing library loses this row, not the section
        with profile(activities=activities) as profiler:
            train_farthest_encoders(capped, **unit, positions=positions(config))
    except Exception as err:  # noqa: BLE001
        row("amsel2024-depth unit's profile", f"error: {type(err).__name__}: {str(err)[:120]}")
        return
    on_device = device.type == "cuda"  # the kernels; on the host, the operators' own time
    key = "self_device_time_total" if on_device else "self_cpu_time_total"
    kind = torch.autograd.DeviceType.CUDA if on_device else torch.autograd.DeviceType.CPU
    events = [e for e in profiler.key_averages() if e.device_type == kind]
    events.sort(key=lambda e: getattr(e, key), reverse=True)
    total = sum(getattr(e, key) for e in events) or 1.0
    print(profiler.key_averages().table(sort_by=key, row_limit=20), flush=True)
    for event in events[:5]:
        row(
            f"amsel2024-depth unit's {capped.steps} steps, {event.key[:60]}",
            f"{getattr(event, key) / 1e3:.1f} ms ({getattr(event, key) / total:.0%} of the "
            f"profiled time, {event.count} calls)",
        )


def check_training(device: torch.device, quick: bool) -> None:
    experiment = get_experiment("amsel2024-depth")
    config = experiment.make_config("paper", {"device": str(device)})
    units = experiment.units(config)
    shapes = {(u["n_points"], u["n_layers"], u["n_heads"]): u for u in units}
    few, many = (3, 8) if quick else (20, 120)
    if quick:  # the script itself, on a CPU: the two smallest shapes only
        shapes = dict(sorted(shapes.items())[:2])
    per_step = {key: step_seconds(config, unit, device, few, many) for key, unit in shapes.items()}
    largest = max(shapes, key=lambda k: (k[0], k[1], k[2]))
    seeds = len(config.seeds)
    flops = seed_step_flops(config, shapes[largest])
    rate = flops * seeds / per_step[largest] / 1e12
    name = f"amsel2024-depth paper unit N={largest[0]}, {largest[1]} layers, {largest[2]} heads"
    row(
        f"{name}, {seeds} seeds in one model",
        f"{per_step[largest] * 1e3:.2f} ms per step of the {seeds} seeds = "
        f"{per_step[largest] / seeds * 1e3:.2f} ms per seed ({config.batch_size} sets, d_ff "
        f"{config.d_ff}; {flops / 1e9:.1f} GFLOP per seed, {rate:.1f} TFLOP/s)",
        f"<= {STEP_TARGET * 1e3:g} ms per seed",
        None if device.type != "cuda" else per_step[largest] / seeds <= STEP_TARGET,
    )
    step_parts(config, shapes[largest], device, quick)
    if device.type == "cuda":  # below the float32 floor only with TF32 matrix products
        before = torch.get_float32_matmul_precision()
        torch.set_float32_matmul_precision("high")
        try:
            tf32 = step_seconds(config, shapes[largest], device, few, many) / seeds
        finally:
            torch.set_float32_matmul_precision(before)
        row(
            f"{name}, TF32 matrix products (not the experiment's default)",
            f"{tf32 * 1e3:.2f} ms per seed ({flops / tf32 / 1e12:.1f} TFLOP/s)",
        )
    if quick:
        return
    total = sum(
        config.steps * per_step[(u["n_points"], u["n_layers"], u["n_heads"])] for u in units
    )
    work = sum(config.steps * len(u["seeds"]) * seed_step_flops(config, u) for u in units)
    row(
        "amsel2024-depth paper preset on one device, estimate",
        f"{total / 3600:.2f} h for {len(units)} units ({len(units) * seeds} runs) of "
        f"{config.steps} steps (at most: plateaus stop earlier; {work / 1e15:.1f} PFLOP)",
        f"<= {PRESET_HOURS:g} h",
        None if device.type != "cuda" else total <= PRESET_HOURS * 3600,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--quick", action="store_true", help="small sizes: check the script itself")
    parser.add_argument("--skip-8b", action="store_true", help="no Llama-3-8B shape")
    parser.add_argument(
        "--sections",
        default=",".join(SECTIONS),
        help=f"comma-separated, of {', '.join(SECTIONS)} (default: all)",
    )
    parser.add_argument(
        "--families", default=",".join(ARCHITECTURES), help="comma-separated (default: all)"
    )
    args = parser.parse_args()
    unknown_sections = sorted(set(args.sections.split(",")) - set(SECTIONS))
    if unknown_sections:
        parser.error(f"--sections: no section {', '.join(unknown_sections)}")
    unknown = sorted(set(args.families.split(",")) - set(ARCHITECTURES))
    if unknown:
        parser.error(
            f"--families: no family {', '.join(unknown)}; choose from {', '.join(ARCHITECTURES)}"
        )
    device = torch.device(args.device)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else device.type
    print(f"device check on {name}, torch {torch.__version__}", flush=True)
    start = time.perf_counter()
    sections = [
        ("resolution", lambda: resolution(device, args.quick)),
        ("families", lambda: check_families(device, args.families.split(","), 4, 16)),
        (
            "qwen2-0.5b",
            lambda: check_shape(
                "qwen2-0.5b",
                device,
                torch.float32,
                *((2, 32) if args.quick else (32, 512)),
                ["transformer"],
                {"num_hidden_layers": 2} if args.quick else None,
            ),
        ),
        (
            "llama3-8b",
            lambda: check_shape(
                "llama3-8b",
                device,
                torch.bfloat16,
                *((1, 16) if args.quick else (8, 2048)),
                ["san", "transformer"],
                {
                    "num_hidden_layers": 1,
                    "hidden_size": 64,
                    "intermediate_size": 128,
                    "num_attention_heads": 4,
                    "num_key_value_heads": 2,
                }
                if args.quick
                else None,
            ),
        ),
        ("training", lambda: check_training(device, args.quick)),
    ]
    for section, work in sections:
        if (section == "llama3-8b" and args.skip_8b) or section not in args.sections.split(","):
            continue
        try:
            work()
            gc.collect()  # the section's model goes before the next one's comes
            if device.type == "cuda":
                torch.cuda.empty_cache()
        except Exception as err:  # noqa: BLE001 (a section's failure is a row)
            traceback.print_exc()
            row(section, f"error: {type(err).__name__}: {str(err)[:160]}", "", False)
    print(f"\n{name}, torch {torch.__version__}, {time.perf_counter() - start:.0f} s\n")
    print("| what | result | target | verdict |\n|---|---|---|---|")
    for cells in ROWS:
        print("| " + " | ".join(cells) + " |")
    return 0 if all(cells[3] != "missed" for cells in ROWS) else 1


if __name__ == "__main__":
    sys.exit(main())
