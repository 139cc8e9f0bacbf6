"""Deprecated name of `rankcollapse.measure.monitor.trainer` (kept for one release)."""

import warnings

from rankcollapse.measure.monitor.trainer import MonitorCallback

warnings.warn(
    "rankcollapse.monitor.trainer is deprecated and goes in the next release; import "
    "MonitorCallback from rankcollapse.measure.monitor.trainer instead.",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = ["MonitorCallback"]
