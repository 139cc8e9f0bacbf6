"""Where a monitor's measurements go: a list in memory, a CSV file that survives a crash, and
TensorBoard scalars (with the `tensorboard` extra).

Every log is told where its run starts (`resume(step)`); what it holds from that step on came
from a run that was killed or is being redone, and is dropped when the first new measurement
arrives. A resumed training run therefore records each step once.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import pandas as pd

from rankcollapse.errors import InputError, missing_extra
from rankcollapse.files import append_whole, write_atomic
from rankcollapse.measure.monitor.watch import COLUMNS


class MemoryLog:
    """Measurements kept in memory: `log.frame` is every row so far. Example:

    >>> log = MemoryLog()
    >>> log.resume(0)
    >>> log.append(pd.DataFrame({"step": [0], "value": [1.0]}))
    >>> log.frame["value"].tolist()
    [1.0]
    """

    def __init__(self) -> None:
        self.frames: list[pd.DataFrame] = []

    def resume(self, step: int) -> None:
        self.frames = [f for f in self.frames if (f["step"] < step).all()]

    def append(self, frame: pd.DataFrame) -> None:
        self.frames.append(frame)

    def for_rank(self, rank: int) -> MemoryLog:
        """Each process holds its own memory: the log itself."""
        return self

    @property
    def frame(self) -> pd.DataFrame:
        """Every row so far, in step order of arrival (empty with the monitor's columns)."""
        if not self.frames:
            return pd.DataFrame(columns=COLUMNS)
        return pd.concat(self.frames, ignore_index=True)


class CsvLog:
    """The tidy rows appended to one CSV file (columns `COLUMNS`), one measurement at a time.

    Each measurement is appended in one synced write, all of it or none of it
    (`rankcollapse.files.append_whole`). Before the first append of a run the file is checked:
    a partial last line or a last step with fewer rows than a measurement has (a kill during
    the write) is dropped, as is every step at or after the run's start (`resume`); a file of
    another monitor setup (other rows per step) or of another format is refused, never
    overwritten.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.start = 0
        self.checked = False

    def resume(self, step: int) -> None:
        self.start = step
        self.checked = False

    def for_rank(self, rank: int) -> CsvLog:
        """The log of one rank (monitor `ranks="every"`): `collapse.csv` -> `collapse.rank1.csv`."""
        return CsvLog(self.path.with_name(f"{self.path.stem}.rank{rank}{self.path.suffix}"))

    def append(self, frame: pd.DataFrame) -> None:
        if not self.checked:
            self._keep_before_start(len(frame))
            self.checked = True
        new = not self.path.exists() or self.path.stat().st_size == 0
        append_whole(self.path, frame[list(COLUMNS)].to_csv(index=False, header=new).encode())

    def _keep_before_start(self, rows_per_step: int) -> None:
        """Drop a killed write's tail and every row at or after `start`; check the rest."""
        if not self.path.exists():
            return
        text = self.path.read_text(encoding="utf-8")
        stored = parse_log(text, self.path)
        counts = stored.groupby("step").size()
        partial = counts.index[-1] if len(counts) and counts.iloc[-1] < rows_per_step else None
        other = counts[(counts != rows_per_step) & (counts.index != partial)]
        if len(other):
            raise InputError(
                f"{str(self.path)!r} holds {int(other.iloc[0])} rows at step {other.index[0]} but "
                f"this monitor measures {rows_per_step} per step (other metrics, variants, layers "
                "or held-out batch); pass another file, or delete this one to start afresh."
            )
        keep = stored[(stored["step"] < self.start) & (stored["step"] != partial)]
        if len(keep) < len(stored) or not text.endswith("\n"):
            write_atomic(self.path, keep.to_csv(index=False).encode())


def parse_log(text: str, path: str | os.PathLike = "the log") -> pd.DataFrame:
    """The rows of a monitor's CSV text, without a partial last line (a killed write).

    Example:
        >>> parse_log("step,layer,variant,sample,metric,value,at_floor\\n"
        ...           "0,0,transformer,0,mu_rel,0.5,False\\n0,1,transf").shape
        (1, 7)
    """
    if not text.endswith("\n"):
        text = text[: text.rfind("\n") + 1]
    try:
        frame = pd.read_csv(io.StringIO(text)) if text.strip() else pd.DataFrame(columns=COLUMNS)
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as err:
        raise InputError(
            f"{str(path)!r} is not a monitor log ({err}); pass the CSV a "
            "rankcollapse.measure.monitor.CsvLog wrote."
        ) from None
    if list(frame.columns) != list(COLUMNS):
        raise InputError(
            f"{str(path)!r} has columns {list(frame.columns)}, not a monitor log's "
            f"{list(COLUMNS)}; pass the CSV a rankcollapse.measure.monitor.CsvLog wrote, or "
            "another path."
        )
    return frame


def read_log(path: str | os.PathLike) -> pd.DataFrame:
    """A monitor's CSV file as a tidy frame (a clear error for a missing or foreign file)."""
    path = Path(path)
    if not path.is_file():
        raise InputError(
            f"{str(path)!r} is not a file; pass the CSV a monitor wrote (CsvLog(path))."
        )
    return parse_log(path.read_text(encoding="utf-8"), path)


def scalars(frame: pd.DataFrame) -> list[tuple[int, str, float]]:
    """(step, name, value): the mean over the held-out samples not at the dtype floor of each
    (step, variant, metric, layer), named `<metric>/<variant>/layer_<ll>`, the scalar names of
    `TensorBoardLog` and the trackers' logs; a layer whose every sample is at the floor has
    none (never a floor value averaged as signal).

    Example:
        >>> rows = pd.DataFrame({"step": 5, "layer": [1, 1], "variant": "san", "sample": [0, 1],
        ...                      "metric": "mu_rel", "value": [0.2, 1e-9],
        ...                      "at_floor": [False, True]})
        >>> scalars(rows)
        [(5, 'mu_rel/san/layer_01', 0.2)]
    """
    signal = frame[~frame["at_floor"].astype(bool)]
    keys = ["step", "variant", "metric", "layer"]
    means = signal.groupby(keys, sort=False)["value"].mean()
    return [
        (int(step), f"{metric}/{variant}/layer_{int(layer):02d}", float(value))
        for (step, variant, metric, layer), value in means.items()
    ]


class TensorBoardLog:
    """Per-layer means over the held-out samples (`scalars`) as TensorBoard scalars,
    `<metric>/<variant>/layer_<ll>` at each measured step (needs the `tensorboard` extra).

    A resumed run purges the events from its start step on (TensorBoard's `purge_step`).
    """

    def __init__(self, logdir: str | os.PathLike) -> None:
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            raise missing_extra("TensorBoardLog", "tensorboard", "log to a CsvLog only") from None
        self.logdir = Path(logdir)
        self.writer_class = SummaryWriter
        self.writer = None
        self.start = 0

    def resume(self, step: int) -> None:
        self.close()
        self.start = step

    def for_rank(self, rank: int) -> TensorBoardLog:
        """The log of one rank (monitor `ranks="every"`): the folder `rank<r>/` of `logdir`."""
        return TensorBoardLog(self.logdir / f"rank{rank}")

    def append(self, frame: pd.DataFrame) -> None:
        if self.writer is None:
            self.writer = self.writer_class(str(self.logdir), purge_step=self.start)
        for step, name, value in scalars(frame):
            self.writer.add_scalar(name, value, step)
        self.writer.flush()

    def close(self) -> None:
        """Close the event file (a later append opens a new one)."""
        if self.writer is not None:
            self.writer.close()
            self.writer = None
