"""Every experiment of the three papers, registered by name.

Each module below registers itself on import; add a new experiment by adding its import.
"""

# Experiment modules (each registers itself):
from rankcollapse.experiments import (
    amsel2024_constructions,  # noqa: F401
    amsel2024_depth,  # noqa: F401
    amsel2024_encoder,  # noqa: F401
    amsel2024_rank_vs_heads,  # noqa: F401
    dong2021_bounds,  # noqa: F401
    dong2021_circle,  # noqa: F401
    dong2021_path_effectiveness,  # noqa: F401
    dong2021_path_lengths,  # noqa: F401
    dong2021_rank_collapse,  # noqa: F401
    paths_by_length,  # noqa: F401
    toy_collapse,  # noqa: F401
    wu2024_counterexample,  # noqa: F401
    wu2024_equilibria,  # noqa: F401
    wu2024_geometry,  # noqa: F401
    wu2024_masks,  # noqa: F401
    wu2024_rates,  # noqa: F401
    wu2024_temperature,  # noqa: F401
)
from rankcollapse.experiments._registry import (
    DEFAULT_PRESET,
    PRESETS,
    Claim,
    Experiment,
    Summary,
    Unit,
    check,
    experiment_names,
    finding,
    for_every,
    get_experiment,
    merge_values,
    nest_dotted,
    register,
    seeds_agree,
)

__all__ = [
    "DEFAULT_PRESET",
    "PRESETS",
    "Claim",
    "Experiment",
    "Summary",
    "Unit",
    "check",
    "experiment_names",
    "finding",
    "for_every",
    "get_experiment",
    "merge_values",
    "nest_dotted",
    "register",
    "seeds_agree",
]
