"""The metric suite: many metrics of one batch, sharing one Gram matrix, with floor flags.

The floor rule (defined once, in `metrics._floor`): a value is flagged `at_floor` when the
metric vanishes as the input collapses (`MetricInfo.vanishes`: residuals, mu, rank-1
residual, smallest singular value, distance from uniform attention) and its relative size
(`MetricInfo.relative`, e.g. mu / ||X||_F for mu, sigma_min / sigma_max for min_sv) is at
most FLOOR_FACTOR x eps(source_dtype), the dtype that produced the activations (for attention,
the attention's own dtype), or the state's entries are small enough for underflow to decide
its arithmetic in that dtype (`underflowing`). Cosines, ranks and entropies tend to 1, whole
numbers or log n, not to 0, and are never flagged. The metric functions themselves never flag; only this suite
does, since it knows the dtype.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from functools import cache
from typing import NamedTuple

import numpy as np
import pandas as pd
import torch
from torch import Tensor

from rankcollapse.errors import InputError
from rankcollapse.metrics._batched import DeflatedTokens, DeviceTokens
from rankcollapse.metrics._floor import dtype_floor, underflowing
from rankcollapse.metrics._tokens import Tokens, first_linalg_call, single_thread, split_runs
from rankcollapse.metrics.attention import Attention
from rankcollapse.metrics.registry import METRICS, MetricInfo, names_of_kind


class MetricValue(NamedTuple):
    """One metric over a batch: `value` float64 (...), `at_floor` bool (...)."""

    value: Tensor
    at_floor: Tensor


def _measure(info: MetricInfo, prepared: Tokens | Attention, source: torch.dtype) -> MetricValue:
    """One metric's values and floor flags for activations made in dtype `source`: the one
    place that reads `MetricInfo.vanishes`."""
    value = info.kernel(prepared)
    if not info.vanishes:
        return MetricValue(value, torch.zeros_like(value, dtype=torch.bool))
    relative = value if info.relative is None else info.relative(prepared)
    at_floor = relative <= dtype_floor(source)
    if isinstance(prepared, Tokens):
        at_floor |= underflowing(prepared.rms, source)
    return MetricValue(value, at_floor)


@cache
def _pool(workers: int) -> ThreadPoolExecutor:
    """One pool of `workers` threads per process, kept between calls: starting the threads
    anew per call cost about 5 % of a probe of SmolLM2 (62 calls, 2 threads each)."""
    return ThreadPoolExecutor(workers, thread_name_prefix="rankcollapse-metrics")


os.register_at_fork(after_in_child=_pool.cache_clear)  # a forked child has none of the threads


def measure_states(
    x: Tensor,
    mask: Tensor | None = None,
    *,
    metrics: list[str] | tuple[str, ...] | tuple[MetricInfo, ...] | None = None,
    source_dtype: torch.dtype | None = None,
    batched: bool | None = None,
) -> dict[str, MetricValue]:
    """State metrics of a batch of hidden states, sharing one Gram matrix per sequence.

    On the CPU, torch runs on one intra-op thread (see `metrics._tokens.single_thread` for the
    measured reason); instead the sequences are cut into as many runs as torch had threads,
    checked and measured side by side: the calling thread measures one run, a pool of Python
    threads the others (torch releases the GIL in its kernels). Every sequence is computed
    exactly as alone, whatever the split; an error is reported for the whole batch.

    On an accelerator (or with `batched`) the whole batch is one pass on the device with no host
    read until its end (`metrics._batched`): one batched float64 eigvalsh, no SVD, one host
    copy of every value, the float64 route only for sequences with a value the Gram cannot
    vouch for; values within `SPECTRA_RTOL` (relative) of the float64 route (the CPU's).

    Args:
        x: hidden states, shape (..., n, d), any float dtype.
        mask: True for real tokens, shape (..., n). Pads never enter.
        metrics: state-metric names; None = DEFAULT_METRICS (all state metrics).
        source_dtype: the dtype that produced the activations (for the floor flags);
            None = x.dtype.
        batched: the accelerator's route (True) or the float64 route (False); None = the
            accelerator's on an accelerator, the float64 one on the CPU.

    Returns:
        {name: MetricValue(value float64 (...), at_floor bool (...))}, in the order asked; on
        the host after the accelerator's route, where x is after the float64 one.

    Example:
        >>> out = measure_states(torch.ones(3, 4, 2), metrics=["mu_rel", "stable_rank"])
        >>> out["mu_rel"].value, out["mu_rel"].at_floor
        (tensor([0., 0., 0.], dtype=torch.float64), tensor([True, True, True]))
    """
    names = names_of_kind(metrics, "states")
    if source_dtype is not None:
        dtype_floor(source_dtype)  # a clear error for a dtype that is not floating
    reads = tuple({METRICS[name].reads for name in names})  # one pass over x reads them all

    def measure(run: tuple[Tensor, Tensor | None]) -> list[MetricValue]:
        t = Tokens(*run, reads=reads)
        return [_measure(METRICS[name], t, source_dtype or t.dtype) for name in names]

    on_device = isinstance(x, Tensor) and x.device.type != "cpu"
    if batched or (batched is None and on_device):
        return _measure_batched(x, mask, names, source_dtype, reads)
    if on_device:  # the float64 route in one batched pass
        return dict(zip(names, measure((x, mask)), strict=True))
    with single_thread() as threads:
        runs = split_runs(x, mask, threads)
        try:
            if len(runs) == 1:
                return dict(zip(names, measure(runs[0]), strict=True))
            first_linalg_call(x.device)
            # the calling thread measures the first run itself: one thread fewer to hand work
            # to, and one malloc arena fewer holding freed memory (MiniLM's probe peak: median
            # 116 MB with every run on the pool, 59 MB so, `benchmarks/bench_probe.py`)
            pending = [_pool(len(runs) - 1).submit(measure, run) for run in runs[1:]]
            try:
                results = [measure(runs[0])]
            finally:
                wait(pending)  # no run outlives the call, also after an error
            results += [job.result() for job in pending]
        except InputError:
            Tokens(x, mask)  # checks the whole batch: the error names the sample in x
            raise
    batch = x.shape[:-2]
    return {
        name: MetricValue(
            torch.cat([part[i].value for part in results]).reshape(batch),
            torch.cat([part[i].at_floor for part in results]).reshape(batch),
        )
        for i, name in enumerate(names)
    }


def _measure_batched(
    x: Tensor,
    mask: Tensor | None,
    names: list[str],
    source: torch.dtype | None,
    reads: tuple[str, ...],
) -> dict[str, MetricValue]:
    """`measure_states` on the accelerator's route (`metrics._batched`): every value and flag
    reaches the host in one copy; the sequences whose values the Gram cannot vouch for are
    measured again (`_measure_again`: one more copy, only when there are some)."""
    with single_thread():
        t = DeviceTokens(x, mask, reads=reads)
        dtype = source or t.dtype
        host = _to_host(t, names, dtype, lambda: [t.to_redo(dtype), t.invalid()])
        redo, invalid = host[-2] != 0, host[-1] != 0  # numpy from here: no device read
        if invalid.any():
            Tokens(x, mask)  # the whole batch's error names the sample (NaN, Inf, < 2 tokens)
        if redo.any():
            n, d = x.shape[-2:]
            index = torch.from_numpy(redo.nonzero()[0]).to(x.device)
            flat = x.reshape(-1, n, d)[index], t.mask.reshape(-1, n)[index]
            host[: 2 * len(names), redo] = _measure_again(*flat, names, dtype, reads)
    batch = x.shape[:-2]
    return {
        name: MetricValue(
            torch.from_numpy(host[i]).reshape(batch),
            torch.from_numpy(host[len(names) + i] != 0).reshape(batch),
        )
        for i, name in enumerate(names)
    }


def _measure_again(
    x: Tensor, mask: Tensor, names: list[str], source: torch.dtype, reads: tuple[str, ...]
) -> np.ndarray:
    """Values and flags (2 len(names), m) of the m sequences (m, n, d) the Gram could not vouch
    for: their spectra in two stages (`DeflatedTokens`, one more host copy), and the float64
    route (with its SVD, and one copy more) for those still unresolved."""
    deflated = DeflatedTokens(x, mask, reads=reads)
    host = _to_host(deflated, names, source, lambda: [deflated.to_redo(source)])
    still = host[-1] != 0
    if still.any():
        index = torch.from_numpy(still.nonzero()[0]).to(x.device)
        host[:-1, still] = _to_host(Tokens(x[index], mask[index], reads=reads), names, source)
    return host[:-1]


def _to_host(
    t: Tokens, names: list[str], source: torch.dtype, checks: Callable[[], list[Tensor]] = list
) -> np.ndarray:
    """Every value, then every flag, then the columns `checks()` returns (computed after the
    values: what they check depends on what the values computed), in one host copy, float64:
    (2 len(names) + len(checks()), sequences)."""
    results = [_measure(METRICS[name], t, source) for name in names]
    columns = [r.value for r in results] + [r.at_floor for r in results] + checks()
    return torch.stack([c.reshape(-1).to(torch.float64) for c in columns]).cpu().numpy()


def measure_attention(
    a: Tensor,
    mask: Tensor | None = None,
    *,
    edges: Tensor | None = None,
    metrics: list[str] | tuple[str, ...] | tuple[MetricInfo, ...] | None = None,
) -> dict[str, MetricValue]:
    """Attention metrics of a batch of attention matrices, checked once.

    Args:
        a: attention, shape (..., n, n), rows sum to 1, any float dtype.
        mask: True for real tokens, shape (..., n) (for heads (b, h, n, n): mask[:, None, :]).
        edges: allowed edges, boolean, broadcastable to a.shape; None = all real pairs.
        metrics: attention-metric names; None = all attention metrics.

    Returns:
        {name: MetricValue(value float64 (...), at_floor bool (...))}, in the order asked.

    Example:
        >>> out = measure_attention(torch.full((2, 3, 3), 1 / 3), metrics=["attn_dist_uniform"])
        >>> out["attn_dist_uniform"].at_floor
        tensor([True, True])
    """
    names = names_of_kind(metrics, "attention")
    with single_thread():
        p = Attention.of(a, mask, edges)
        return {name: _measure(METRICS[name], p, a.dtype) for name in names}


RESULT_COLUMNS = ("sample", "metric", "value", "at_floor")


def metrics_frame(values: dict[str, MetricValue], **ids: object) -> pd.DataFrame:
    """Long table of suite results: ids as leading columns, then sample, metric, value, at_floor.

    `sample` is the flattened batch index (0 for an unbatched input).

    Example:
        >>> out = measure_states(torch.eye(3).expand(2, 3, 3), metrics=["stable_rank"])
        >>> frame = metrics_frame(out, layer=4)
        >>> list(frame.columns), frame["value"].round(12).tolist()
        (['layer', 'sample', 'metric', 'value', 'at_floor'], [3.0, 3.0])
    """
    clash = [key for key in ids if key in RESULT_COLUMNS]
    if clash:
        raise InputError(
            f"id column(s) {clash} clash with the result columns {list(RESULT_COLUMNS)}; "
            "rename them (e.g. 'seq' instead of 'sample')."
        )
    if values:
        counts = [result.value.numel() for result in values.values()]
        total = sum(counts)
        # values and flags leave their device in one copy to the host
        host = torch.cat(
            [r.value.reshape(-1) for r in values.values()]
            + [r.at_floor.reshape(-1).to(torch.float64) for r in values.values()]
        ).cpu()
        # one frame from whole columns: a frame per metric and a concat cost 4 x more, and
        # inserting the id columns afterwards 2 x more
        frame = pd.DataFrame(
            {
                **ids,
                "sample": np.concatenate([np.arange(count) for count in counts]),
                "metric": np.repeat(list(values), counts),
                "value": host[:total].numpy(),  # host
                "at_floor": host[total:].numpy() != 0,  # host
            }
        )
    else:
        frame = pd.DataFrame(columns=RESULT_COLUMNS)
        for position, (key, value) in enumerate(ids.items()):
            frame.insert(position, key, value)
    return frame
