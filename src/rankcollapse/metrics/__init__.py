"""Metrics of rank collapse: pure functions of hidden states (..., n, d) and attention (..., n, n).

State metrics `fn(x, mask=None)`, attention metrics `fn(a, mask=None, *, edges=None)`, each
returning a float64 tensor of shape (...); the registry `METRICS` (formula and reference read
from the docstrings); the suites `measure_states` / `measure_attention`, which share one Gram
matrix per sequence and flag values at the floor of the source dtype (on an accelerator without
per-sequence SVDs, within `SPECTRA_RTOL` of the float64 route); `metrics_frame` for
tidy results; `summarize_samples` for per-layer means, quantiles and the share of sequences
at the dtype floor. Values carry no gradient: inputs are detached.
"""

from rankcollapse.metrics._batched import SPECTRA_RTOL
from rankcollapse.metrics._floor import FLOOR_FACTOR, dtype_floor
from rankcollapse.metrics._norms import composite_norm
from rankcollapse.metrics.attention import attn_dist_uniform, attn_entropy, attn_min_edge
from rankcollapse.metrics.cosine import abs_cos_mean, cos_mean
from rankcollapse.metrics.layers import measure_layers
from rankcollapse.metrics.registry import DEFAULT_METRICS, METRICS, MetricInfo, get_metric
from rankcollapse.metrics.residual import mu, mu_rel, rank1_rel, res_comp, res_comp_rel
from rankcollapse.metrics.spectral import (
    effective_rank,
    min_sv,
    min_sv_rel,
    numerical_rank,
    stable_rank,
)
from rankcollapse.metrics.suite import MetricValue, measure_attention, measure_states, metrics_frame
from rankcollapse.metrics.summary import floor_cell, summarize_samples

__all__ = [
    "DEFAULT_METRICS",
    "FLOOR_FACTOR",
    "METRICS",
    "SPECTRA_RTOL",
    "MetricInfo",
    "MetricValue",
    "abs_cos_mean",
    "attn_dist_uniform",
    "attn_entropy",
    "attn_min_edge",
    "composite_norm",
    "cos_mean",
    "dtype_floor",
    "effective_rank",
    "floor_cell",
    "get_metric",
    "measure_attention",
    "measure_layers",
    "measure_states",
    "metrics_frame",
    "min_sv",
    "min_sv_rel",
    "mu",
    "mu_rel",
    "numerical_rank",
    "rank1_rel",
    "res_comp",
    "res_comp_rel",
    "stable_rank",
    "summarize_samples",
]
