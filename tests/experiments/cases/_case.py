"""The shape of a finding's hand-made cases (see README.md beside this file)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd


@dataclass(frozen=True)
class Case:
    passing: pd.DataFrame
    failing: pd.DataFrame
    overrides: dict[str, Any] = field(default_factory=dict)
    untested: pd.DataFrame | None = None
    """A table a real run could produce on which the finding is NOT TESTED (an arm that did not
    learn, a member missing, a preset too small), where the finding has such a gate."""
