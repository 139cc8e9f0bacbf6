"""Every experiment of the three papers, registered by name.

`MODULES` names the module of each experiment; a module is imported the first time its
experiment is asked for (`get_experiment`), where it registers itself. A worker process that
runs units of one experiment thus imports that experiment's module alone (and not, say, the
real models another one loads). Add a new experiment by adding its line to `MODULES`.
"""

from rankcollapse.experiments._registry import (
    DEFAULT_PRESET,
    PRESETS,
    Experiment,
    Summary,
    Unit,
    declare,
    experiment_names,
    get_experiment,
    merge_values,
    merged_values,
    nest_dotted,
    register,
)
from rankcollapse.experiments.verdicts import (
    LEVEL,
    MISSING,
    NOT_LEARNED,
    TOO_SMALL,
    UNMET,
    VERDICTS,
    Assumption,
    Claim,
    Decision,
    Quote,
    Tally,
    check,
    decide,
    finding,
    for_every,
    t_quantile,
    tally,
)

MODULES = {  # experiment name -> its module in this package
    "amsel2024-constructions": "amsel2024_constructions",
    "amsel2024-depth": "amsel2024_depth",
    "amsel2024-encoder": "amsel2024_encoder",
    "amsel2024-rank-vs-heads": "amsel2024_rank_vs_heads",
    "dong2021-bounds": "dong2021_bounds",
    "dong2021-circle": "dong2021_circle",
    "dong2021-path-effectiveness": "dong2021_path_effectiveness",
    "dong2021-path-lengths": "dong2021_path_lengths",
    "dong2021-rank-collapse": "dong2021_rank_collapse",
    "paths-by-length": "paths_by_length",
    "toy-collapse": "toy_collapse",
    "training-dynamics": "training_dynamics",
    "wu2024-counterexample": "wu2024_counterexample",
    "wu2024-equilibria": "wu2024_equilibria",
    "wu2024-geometry": "wu2024_geometry",
    "wu2024-masks": "wu2024_masks",
    "wu2024-rates": "wu2024_rates",
    "wu2024-temperature": "wu2024_temperature",
}
for _name, _module in MODULES.items():
    declare(_name, f"{__name__}.{_module}")

__all__ = [
    "DEFAULT_PRESET",
    "LEVEL",
    "MISSING",
    "MODULES",
    "NOT_LEARNED",
    "PRESETS",
    "TOO_SMALL",
    "UNMET",
    "VERDICTS",
    "Assumption",
    "Claim",
    "Decision",
    "Experiment",
    "Quote",
    "Summary",
    "Tally",
    "Unit",
    "check",
    "decide",
    "declare",
    "experiment_names",
    "finding",
    "for_every",
    "get_experiment",
    "merge_values",
    "merged_values",
    "nest_dotted",
    "register",
    "t_quantile",
    "tally",
]
