"""Bounds and constructions from the three papers."""

from rankcollapse.theory.dong import (
    DongConstants,
    bound_frame,
    informative,
    layer_constants,
    log10_one_step_bounds,
    log10_stepwise_bound,
    log10_unrolled_bound,
    mlp_lipschitz,
    norm_1_inf,
    skip_network_without_collapse,
    toy_constants,
)
from rankcollapse.theory.wu import (
    MaskGraph,
    bound_curve,
    fitted_rate,
    mask_graph,
    min_allowed_weight,
    rate_no_norm,
    rate_unit_norm,
)

__all__ = [
    "DongConstants",
    "MaskGraph",
    "bound_curve",
    "bound_frame",
    "fitted_rate",
    "informative",
    "layer_constants",
    "log10_one_step_bounds",
    "log10_stepwise_bound",
    "log10_unrolled_bound",
    "mask_graph",
    "min_allowed_weight",
    "mlp_lipschitz",
    "norm_1_inf",
    "rate_no_norm",
    "rate_unit_norm",
    "skip_network_without_collapse",
    "toy_constants",
]
