"""Deprecated name of `rankcollapse.measure.monitor` (kept for one release): import `watch`,
the logs and the callbacks from `rankcollapse.measure.monitor` instead."""

import warnings

from rankcollapse.measure.monitor import (
    COLUMNS,
    MONITOR_METRICS,
    CsvLog,
    Log,
    MemoryLog,
    Monitor,
    TensorBoardLog,
    parse_log,
    read_log,
    scalars,
    watch,
)

warnings.warn(
    "rankcollapse.monitor is deprecated and goes in the next release; import from "
    "rankcollapse.measure.monitor instead (same names).",
    DeprecationWarning,
    stacklevel=2,
)

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
