"""Run experiments: validate configs, run or resume units (in this process, in worker
processes or on Ray), store results and build reports, or estimate a run's time before it
starts. The Python API has the power of `rankcollapse run`:

    >>> from rankcollapse.runner import parse_overrides
    >>> parse_overrides(["seeds=[0, 1]"])
    {'seeds': [0, 1]}

    result = run_experiment("toy-collapse", preset="quick", overrides={"seeds": [0, 1]})
    result.results, result.claims, result.report_path
    run_experiment("toy-collapse", jobs=2, backend="ray")       # address="HOST:PORT" joins
    run_all(preset="quick", jobs=2)   # the units of every experiment on one pool of 2 workers
    dry_run(plan("toy-collapse", preset="paper")).wall_seconds(2)  # seconds on 2 workers
"""

from rankcollapse.runner.backends import (
    BACKENDS,
    RAY_EXTRA,
    UNIT_THREADS,
    cap_jobs,
    default_jobs,
)
from rankcollapse.runner.costs import makespan
from rankcollapse.runner.estimate import (
    DryRun,
    dry_run,
    startup_seconds,
    stored_dry_run,
)
from rankcollapse.runner.run import (
    Plan,
    RunResult,
    config_hash,
    execute,
    execute_all,
    experiments_with_preset,
    load_config_file,
    parse_overrides,
    plan,
    run_all,
    run_experiment,
    session,
)

__all__ = [
    "BACKENDS",
    "RAY_EXTRA",
    "UNIT_THREADS",
    "DryRun",
    "Plan",
    "RunResult",
    "cap_jobs",
    "config_hash",
    "default_jobs",
    "dry_run",
    "execute",
    "execute_all",
    "experiments_with_preset",
    "load_config_file",
    "makespan",
    "parse_overrides",
    "plan",
    "run_all",
    "run_experiment",
    "session",
    "startup_seconds",
    "stored_dry_run",
]
