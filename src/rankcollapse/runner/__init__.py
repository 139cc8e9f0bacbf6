"""Run experiments: validate configs, run or resume units (optionally in parallel), store
results and build reports. The Python API has the power of `rankcollapse run`:

    >>> from rankcollapse.runner import parse_overrides
    >>> parse_overrides(["seeds=[0, 1]"])
    {'seeds': [0, 1]}

    result = run_experiment("toy-collapse", preset="quick", overrides={"seeds": [0, 1]})
    result.results, result.claims, result.report_path
"""

from rankcollapse.runner.run import (
    Plan,
    RunResult,
    config_hash,
    execute,
    load_config_file,
    parse_overrides,
    plan,
    run_all,
    run_experiment,
)

__all__ = [
    "Plan",
    "RunResult",
    "config_hash",
    "execute",
    "load_config_file",
    "parse_overrides",
    "plan",
    "run_all",
    "run_experiment",
]
