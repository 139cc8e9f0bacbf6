"""Deprecated name of `rankcollapse.measure.monitor.lightning` (kept for one release; needs the
`lightning` extra)."""

import warnings

from rankcollapse.measure.monitor.lightning import MonitorCallback

warnings.warn(
    "rankcollapse.monitor.lightning is deprecated and goes in the next release; import "
    "MonitorCallback from rankcollapse.measure.monitor.lightning instead.",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = ["MonitorCallback"]
