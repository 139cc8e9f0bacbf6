"""Bounds and constructions from the three papers.

`rankcollapse.theory.curves` (mu curves of the toy network under a mask, and what the Wu
experiments read from curves; Wu et al. 2024) is imported on its own; a real model's curves are
measured by `rankcollapse.hf.real_curves`.
"""

from rankcollapse.lazy import lazy_names

# public name -> its submodule, imported when the name is first used
_NAMES = {
    "CollapseRate": "rates",
    "Construction": "amsel",
    "DongConstants": "dong",
    "MaskGraph": "wu",
    "at_layer": "rates",
    "attention_step": "equilibria",
    "bound_frame": "dong",
    "bound_margins": "dong",
    "causal_uniform_attention": "equilibria",
    "collapse_rate": "rates",
    "collapse_rates": "rates",
    "contraction_factors": "rates",
    "counterexample_basin_arc": "equilibria",
    "counterexample_point_b": "equilibria",
    "first_layer_below": "rates",
    "fit_output_maps": "amsel",
    "fitted_rate": "wu",
    "fixed_point_residual": "equilibria",
    "full_rank_error_two_points": "amsel",
    "full_rank_head": "amsel",
    "informative": "dong",
    "informative_inputs": "dong",
    "layer_constants": "dong",
    "layer_eps": "wu",
    "layer_grid": "equilibria",
    "layer_stats": "rates",
    "layers_above": "rates",
    "log10_one_step_bounds": "dong",
    "log10_stepwise_bound": "dong",
    "log10_unrolled_bound": "dong",
    "log_ratios": "dong",
    "long_frame": "equilibria",
    "mask_graph": "wu",
    "mask_radius": "wu",
    "min_allowed_weight": "wu",
    "mlp_lipschitz": "dong",
    "qk_parameters": "amsel",
    "radius_concordance": "wu",
    "random_low_rank_heads": "amsel",
    "random_rank_one_error_two_points": "amsel",
    "rate_no_norm": "wu",
    "rate_unit_norm": "wu",
    "ring_inputs": "equilibria",
    "skip_network_without_collapse": "dong",
    "speed_ratio": "wu",
    "theorem3_equilibria": "equilibria",
    "theorem3_equilibrium": "equilibria",
    "theorem3_stable_rank_bound": "equilibria",
    "theorem3_value_matrix": "equilibria",
    "thm1_log_bound": "wu",
    "toy_constants": "dong",
    "trajectory": "equilibria",
    "unit_norm": "equilibria",
    "rank_one_vote": "amsel",
}
__getattr__, __dir__ = lazy_names(__name__, _NAMES)
__all__ = sorted(_NAMES)  # noqa: PLE0605 (names of the lazy table above)
