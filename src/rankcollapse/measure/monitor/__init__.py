"""Watch rank collapse while a model trains.

    monitor = watch(model, every=50, logs=[CsvLog("collapse.csv")])   # any HF model in memory
    monitor.step(0)                      # before training: the initialisation
    ...; optimizer.step(); monitor.step(step)                       # after each step

`watch` checks every option and picks the held-out batch once; `Monitor.step` measures at
multiples of `every` (rows: step, layer, variant, sample, metric, value, at_floor). Logs:
`MemoryLog`, `CsvLog` (survives a crash), `TensorBoardLog` (the `tensorboard` extra), and
`rankcollapse.tracking`'s `WandbLog` and `MLflowLog`; each only appends what its monitor
measures: a log holding the steps a new monitor would write is refused, unless made with
`resume=True` (a run restarted from a checkpoint records them again). `read_log` reads a CSV
back, `scalars` gives the per-layer means the trackers log (`collapse/<metric>/...`). Under torch.distributed one rank measures, or each into its own logs (`distributed`). Integrations:
`rankcollapse.measure.monitor.trainer.MonitorCallback` (Hugging Face Trainer) and
`rankcollapse.measure.monitor.lightning.MonitorCallback` (the `lightning` extra), imported from
their modules so this package needs neither.
"""

from rankcollapse.measure.monitor.logs import (
    CsvLog,
    MemoryLog,
    TensorBoardLog,
    parse_log,
    read_log,
    scalars,
)
from rankcollapse.measure.monitor.watch import COLUMNS, MONITOR_METRICS, Log, Monitor, watch

__all__ = [
    "COLUMNS",
    "MONITOR_METRICS",
    "CsvLog",
    "Log",
    "MemoryLog",
    "Monitor",
    "TensorBoardLog",
    "parse_log",
    "read_log",
    "scalars",
    "watch",
]
