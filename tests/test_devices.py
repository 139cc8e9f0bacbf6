"""Guards for the device paths CI cannot run (it has no GPU), and CUDA checks where one exists.

Two classes of failure were seen on a real GPU and are guarded here on the CPU:
- a device tensor handed to numpy without a host copy (`.numpy()` on a CUDA tensor raises);
- torch's lazily loaded linear-algebra backend (CUDA's "lazy wrapper should be called at most
  once") raced by the metric suite's worker threads making their first `torch.linalg` call.
"""

from __future__ import annotations

import ast
import threading
from pathlib import Path

import pytest
import torch

from rankcollapse.metrics import _tokens, measure_states, metrics_frame

SRC = Path(__file__).resolve().parents[1] / "src" / "rankcollapse"


def _host_conversions_without_copy(source: str) -> list[int]:
    """Lines calling `.numpy()` on anything but a `.cpu()` result, unless marked `# host`."""
    lines = source.splitlines()
    found = []
    for node in ast.walk(ast.parse(source)):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "numpy"
        ):
            continue
        copied = False  # a `.cpu()` anywhere in the chain before `.numpy()`
        receiver = node.func.value
        while isinstance(receiver, ast.Call) and isinstance(receiver.func, ast.Attribute):
            copied |= receiver.func.attr == "cpu"
            receiver = receiver.func.value
        if not copied and "# host" not in lines[node.lineno - 1]:
            found.append(node.lineno)
    return found


def test_rule_finds_a_device_tensor_handed_to_numpy():
    bad = "values = torch.cat(parts).numpy()\n"
    good = (
        "values = torch.cat(parts).cpu().numpy()\n"
        "flat = x.detach().cpu().contiguous().numpy()\n"
        "other = grid.numpy()  # host\n"
    )
    assert _host_conversions_without_copy(bad) == [1]
    assert _host_conversions_without_copy(good) == []


def test_no_numpy_conversion_without_a_host_copy():
    offenders = {
        str(path.relative_to(SRC)): lines
        for path in sorted(SRC.rglob("*.py"))
        if (lines := _host_conversions_without_copy(path.read_text()))
    }
    assert offenders == {}, (
        f".numpy() without .cpu() first (fails on a GPU): {offenders}; copy to the host with "
        ".cpu(), or mark a tensor that is on the CPU by construction with '# host'."
    )


class _LazyBackend:
    """Stands in for torch.linalg's lazily loaded CUDA backend, whose first call must not be
    made by two threads at once. Whether worker threads overlap in time depends on the Python
    (3.11's `cached_property` holds a class-wide lock, 3.12's does not), so the stand-in fails
    whenever the first call comes from a thread other than the one that starts the workers:
    only then can no worker race it."""

    def __init__(self, real, owner: int):
        self.real, self.owner, self.loaded = real, owner, False

    def __call__(self, *args, **kwargs):
        if not self.loaded:
            if threading.get_ident() != self.owner:
                raise RuntimeError("lazy wrapper should be called at most once")
            self.loaded = True
        return self.real(*args, **kwargs)


def test_first_linalg_call_is_not_raced_by_worker_threads(monkeypatch):
    monkeypatch.setattr(
        torch.linalg, "eigvalsh", _LazyBackend(torch.linalg.eigvalsh, threading.get_ident())
    )
    warmed = getattr(_tokens, "first_linalg_call", None)
    if warmed is not None:
        warmed.cache_clear()  # the first call of this process, as on a fresh GPU
    x = torch.randn(8, 64, 256, generator=torch.Generator().manual_seed(0))
    threads = torch.get_num_threads()
    torch.set_num_threads(2)  # two runs in two worker threads (8 x 64 x 256 = 2 x 2^16)
    try:
        assert len(_tokens.split_runs(x, None, 2)) == 2
        out = measure_states(x, metrics=["stable_rank", "mu_rel"])
    finally:
        torch.set_num_threads(threads)
        if warmed is not None:
            warmed.cache_clear()
    assert out["stable_rank"].value.shape == (8,)


def test_metrics_frame_copies_once_and_keeps_values():
    x = torch.randn(3, 5, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    values = measure_states(x, metrics=["mu_rel", "stable_rank"])
    frame = metrics_frame(values, layer=2)
    assert (
        frame["value"].tolist()
        == torch.cat([values["mu_rel"].value, values["stable_rank"].value]).tolist()
    )
    assert frame["at_floor"].dtype == bool


cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")


@cuda
def test_suite_on_cuda_matches_cpu():
    x = torch.randn(16, 64, 96, generator=torch.Generator().manual_seed(2))
    on_cpu = metrics_frame(measure_states(x))
    on_gpu = metrics_frame(measure_states(x.cuda()))
    relative = (on_gpu["value"] - on_cpu["value"]).abs() / on_cpu["value"].abs().clip(lower=1e-300)
    assert float(relative.max()) < 1e-8


@cuda
def test_layers_measured_on_cuda_one_at_a_time_match_cpu():
    from rankcollapse.metrics import measure_layers

    states = torch.randn(3, 4, 16, 8, generator=torch.Generator().manual_seed(3))
    on_cpu = measure_layers(list(states))
    on_gpu = measure_layers(list(states), device=torch.device("cuda"))
    assert (on_gpu.value - on_cpu.value).abs().max() < 1e-10


@cuda
def test_tiny_family_probed_on_cuda_matches_cpu():
    from rankcollapse.hf import wrap_model
    from rankcollapse.hf.models import tiny_model
    from rankcollapse.measure import probe

    settings = {
        "random_tokens": True,
        "n_samples": 2,
        "n_tokens": 8,
        "variants": ["san", "transformer"],
    }
    on_cpu = probe(wrap_model(tiny_model("bert")), **settings)
    on_gpu = probe(wrap_model(tiny_model("bert").cuda()), **settings)
    real = ~on_cpu.at_floor
    relative = (on_gpu.value - on_cpu.value)[real].abs() / on_cpu.value[real].abs().clip(
        lower=1e-300
    )
    assert float(relative.max()) < 1e-4


def test_path_products_stay_on_the_attention_device():
    from rankcollapse.paths.analysis import attention_products

    # with a CPU identity the product came back on the CPU here (on CUDA: a device mismatch)
    probs = torch.full((2, 3, 4, 4), 0.25, device="meta")
    routes = torch.tensor([[0, 1], [-1, 2]])
    assert attention_products([probs, probs], routes).device.type == "meta"
