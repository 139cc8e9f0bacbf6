"""The metric registry: every metric by name, with its formula and reference.

Formula and reference are written once, in each function's docstring ("Formula:" and
"Reference:" lines, continued on indented lines); the registry and `rankcollapse metrics`
read them from there.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from rankcollapse.errors import UnknownNameError, unknown_name
from rankcollapse.metrics import attention, cosine, residual, spectral

Kind = Literal["states", "attention"]


@dataclass(frozen=True)
class MetricInfo:
    """One registered metric.

    `fn` is the public function (`fn(x, mask)` or `fn(a, mask, *, edges)`); `kernel` computes
    the same value from prepared input (`Tokens` or `Attention`), so that the suite shares one
    Gram matrix among all metrics of a call.

    `vanishes` declares that the metric shrinks to zero as the input collapses (a residual,
    mu, the smallest singular value, the distance from uniform attention): only such a value
    can sit at the floor of a dtype, and the suite flags it when `relative` (a kernel giving
    the metric divided by the input's own size; None = the metric is already relative) is at
    most that floor. Cosines, ranks and entropies do not vanish and are never flagged.

    `reads` names the quantity of a state metric's single pass over the data (see
    `metrics._tokens.Tokens`): "norms" (mean-centred and composite norms) or "gram".
    """

    name: str
    fn: Callable[..., Any]
    kind: Kind
    formula: str
    reference: str
    kernel: Callable[..., Any]
    vanishes: bool = False
    relative: Callable[..., Any] | None = None
    reads: Literal["norms", "gram"] = "gram"


def docstring_field(fn: Callable[..., Any], label: str) -> str:
    """The text after `label:` in fn's docstring, with indented continuation lines joined.

    Example:
        >>> docstring_field(residual.mu, "Formula")
        '||X - 1 m^T||_F, m = mean of real tokens (= argmin_v ||X - 1 v^T||_F).'
    """
    lines = (inspect.getdoc(fn) or "").splitlines()
    for i, line in enumerate(lines):
        if line.startswith(f"{label}:"):
            parts = [line[len(label) + 1 :].strip()]
            for follow in lines[i + 1 :]:
                if not follow.startswith(" ") or not follow.strip():
                    break
                parts.append(follow.strip())
            return " ".join(parts)
    raise LookupError(f"{fn.__name__} has no '{label}:' line in its docstring; add one.")


def _info(
    fn: Callable[..., Any],
    kernel: Callable[..., Any],
    kind: Kind,
    *,
    vanishes: bool = False,
    relative: Callable[..., Any] | None = None,
    reads: Literal["norms", "gram"] = "gram",
) -> MetricInfo:
    return MetricInfo(
        name=fn.__name__,
        fn=fn,
        kind=kind,
        formula=docstring_field(fn, "Formula"),
        reference=docstring_field(fn, "Reference"),
        kernel=kernel,
        vanishes=vanishes,
        relative=relative,
        reads=reads,
    )


_CENTRED: dict[str, Any] = {
    "vanishes": True,
    "reads": "norms",
}  # mean-centred residuals: the norms pass

_ENTRIES = [
    _info(residual.res_comp_rel, residual._res_comp_rel, "states", **_CENTRED),
    _info(
        residual.res_comp, residual._res_comp, "states", relative=residual._res_comp_rel, **_CENTRED
    ),
    _info(residual.rank1_rel, residual._rank1_rel, "states", vanishes=True),
    _info(residual.mu, residual._mu, "states", relative=residual._mu_rel, **_CENTRED),
    _info(residual.mu_rel, residual._mu_rel, "states", **_CENTRED),
    _info(cosine.cos_mean, cosine._cos_mean, "states", reads="norms"),
    _info(cosine.abs_cos_mean, cosine._abs_cos_mean, "states"),
    _info(spectral.stable_rank, spectral._stable_rank, "states"),
    _info(spectral.effective_rank, spectral._effective_rank, "states"),
    _info(spectral.numerical_rank, spectral._numerical_rank, "states"),
    _info(
        spectral.min_sv,
        spectral._min_sv,
        "states",
        vanishes=True,
        relative=spectral._min_sv_rel,
    ),
    _info(spectral.min_sv_rel, spectral._min_sv_rel, "states", vanishes=True),
    _info(attention.attn_entropy, attention._attn_entropy, "attention"),
    _info(attention.attn_min_edge, attention._attn_min_edge, "attention"),
    _info(attention.attn_dist_uniform, attention._attn_dist_uniform, "attention", vanishes=True),
]

METRICS: dict[str, MetricInfo] = {info.name: info for info in _ENTRIES}

DEFAULT_METRICS: tuple[str, ...] = tuple(
    name for name, info in METRICS.items() if info.kind == "states"
)


def get_metric(name: str) -> MetricInfo:
    """The registered metric called `name`.

    Example:
        >>> get_metric("mu_rel").kind
        'states'
    """
    if name not in METRICS:
        raise unknown_name("metric", name, METRICS)
    return METRICS[name]


def names_of_kind(names: str | Sequence[str | MetricInfo] | None, kind: Kind) -> list[str]:
    """Check metric names for one suite (one name, several, or None = that kind's defaults)
    before any work starts; metrics already resolved (`MetricInfo`s of this kind, as a
    probe's request holds them) are not looked up again."""
    if names is not None and not isinstance(names, str):
        resolved = [m.name for m in names if isinstance(m, MetricInfo) and m.kind == kind]
        if resolved and len(resolved) == len(names):
            return resolved
    if names is None:
        return [name for name, info in METRICS.items() if info.kind == kind]
    if isinstance(names, str):
        names = [names]
    known = [name for name, info in METRICS.items() if info.kind == kind]
    plain = [m.name if isinstance(m, MetricInfo) else m for m in names]
    for name in plain:
        if name in METRICS and name not in known:
            where = (  # what it reads, and where that is measured
                "it reads attention weights, which `rankcollapse probe` captures (Python: "
                "metrics.measure_attention)"
                if METRICS[name].kind == "attention"
                else "it reads hidden states (Python: metrics.measure_states)"
            )
            raise UnknownNameError(
                f"'{name}' is {'an attention' if kind == 'states' else 'a state'} metric; "
                f"{where}. This takes {'state' if kind == 'states' else 'attention'} metrics: "
                f"{', '.join(known)}."
            )
        if name not in known:
            raise unknown_name("metric", name, known)
    return plain
