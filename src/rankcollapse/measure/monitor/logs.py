"""Where a monitor's measurements go: a list in memory, a CSV file that survives a crash, and
TensorBoard scalars (with the `tensorboard` extra).

A log only appends what this process measures: rows another run or setup wrote are never
replaced. Every log is told where its run starts (`resume(step)`): a log that already holds
rows of this monitor's metrics and variants at that step or later is refused with a sentence
(the file or run, the steps, the fix), unless it was made with `resume=True` (a run restarted
from a checkpoint): then those rows, written by the run being redone, are dropped when the
first new measurement arrives and each step is recorded once.
"""

from __future__ import annotations

import io
import json
import os
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from rankcollapse.errors import ConfigError, InputError, missing_extra
from rankcollapse.files import append_whole, write_atomic
from rankcollapse.measure.monitor.watch import COLUMNS
from rankcollapse.reading import MiB, open_bounded, read_bytes, read_json, text_lines

if TYPE_CHECKING:
    from torch.utils.tensorboard import SummaryWriter

Keys = tuple[list[str], list[str]] | None
"""A monitor's (metrics, variants): the rows it writes; None when not told."""

PREFIX = "collapse"
"""The one prefix of every scalar, image and table a log names: `collapse/<metric>/...`."""


def setup_keys(setup: Mapping[str, Any] | None) -> Keys:
    """(metrics, variants) of a monitor's setup (None: not told, every row counts)."""
    if setup is None:
        return None
    return [str(m) for m in setup["metrics"]], [str(v) for v in setup["variants"]]


def again(frame: pd.DataFrame, start: int, keys: Keys) -> pd.Series:
    """True for the rows of `frame` a monitor starting at `start` would write again: at or
    after `start`, of its metrics and variants (`keys`; None: every row)."""
    rows = frame["step"] >= start
    if keys is not None:
        rows &= frame["metric"].isin(keys[0]) & frame["variant"].isin(keys[1])
    return rows


def held_steps(frame: pd.DataFrame, start: int, keys: Keys) -> list[int]:
    """The steps of the rows `again` finds."""
    return sorted({int(s) for s in frame.loc[again(frame, start, keys), "step"]})


def steps_text(steps: list[int]) -> str:
    """`0, 5, 10`, or `0 to 990 (100 steps)` for many."""
    if len(steps) <= 6:
        return ", ".join(map(str, steps))
    return f"{steps[0]} to {steps[-1]} ({len(steps)} steps)"


def refuse_held(where: str, steps: list[int] | str, start: int, redo: str, other: str) -> None:
    """The refusal of a log that holds steps a new monitor would write (no `resume=True`);
    `steps`: the steps held, or words for them (nothing held: no refusal)."""
    if steps:
        held = (
            steps if isinstance(steps, str) else f"step{'s' * (len(steps) > 1)} {steps_text(steps)}"
        )
        raise InputError(
            f"{where} already holds {held} of this monitor's metrics, at or after its first "
            f"step ({start}); a log never replaces rows it did not write. Pass {redo} to "
            f"record them again from step {start} (a run restarted from a checkpoint; the "
            f"rows before it are kept), or {other}. Nothing was changed."
        )


class MemoryLog:
    """Measurements kept in memory: `log.frame` is every row so far. Example:

    >>> log = MemoryLog()
    >>> log.resume(0)
    >>> log.append(pd.DataFrame({"step": [0], "value": [1.0]}))
    >>> log.frame["value"].tolist()
    [1.0]

    Args:
        resume: a second monitor on this log may start at a step it holds: its rows from
            that step on are dropped (False: such a monitor is refused).
    """

    def __init__(self, *, resume: bool = False) -> None:
        self.frames: list[pd.DataFrame] = []
        self.redo = check_resume(resume, "MemoryLog")
        self.keys: Keys = None

    def check(self, setup: Mapping[str, Any]) -> None:
        """Note the metrics and variants of the monitor writing here (`watch` calls it)."""
        self.keys = setup_keys(setup)

    def resume(self, step: int) -> None:
        if not self.frames:
            return
        frame = self.frame
        if not self.redo:
            refuse_held(
                "this MemoryLog",
                held_steps(frame, step, self.keys),
                step,
                "MemoryLog(resume=True)",
                "give the new monitor its own MemoryLog()",
            )
        self.frames = [frame[~again(frame, step, self.keys)]]

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


def check_resume(resume: Any, log: str) -> bool:
    """`resume` of a log's constructor: True or False."""
    if not isinstance(resume, bool):
        raise ConfigError(
            f"{log}(resume={resume!r}): resume is True (a run restarted from a checkpoint "
            "records its steps again) or False (the default)."
        )
    return resume


LOG_LIMIT = 256 * MiB
"""The largest monitor log read back (about 4 million rows); a longer run starts a new log."""
SETUP_LIMIT = MiB
SETUP_FORMAT = "rankcollapse monitor log setup"
KEY = ["layer", "variant", "sample", "metric"]


class CsvLog:
    """The tidy rows appended to one CSV file (columns `COLUMNS`), one measurement at a time,
    with the monitor's setup beside it (`<file>.setup.json`: metrics, variants, model, held-out
    batch; written atomically before the first row).

    Each measurement is appended in one synced write, all of it or none of it
    (`rankcollapse.files.append_whole`). `watch` checks an existing file once (`check`): a log
    of another setup, a foreign or damaged file (read within `LOG_LIMIT` bytes through
    `rankcollapse.reading`) is refused, naming what differs, and never trimmed, continued or
    overwritten. Before the first append of a run, a partial last step (a kill during the
    write) is dropped. A log that holds steps at or after the run's first step is refused,
    unless made with `resume=True`: then those rows (the run being redone) are dropped.

    Args:
        path: the CSV file (created with its folder's permission; the folder must exist).
        resume: the training run restarts from a checkpoint: the log's rows from its first
            step on are recorded again (False: such a log is refused, nothing changed).
    """

    def __init__(self, path: str | os.PathLike, *, resume: bool = False) -> None:
        self.path = Path(path)
        self.redo = check_resume(resume, "CsvLog")
        self.start = 0
        self.checked = False
        self.setup: dict[str, Any] | None = None

    @property
    def setup_path(self) -> Path:
        """Where the setup of the monitor writing this log is kept."""
        return self.path.with_name(self.path.name + ".setup.json")

    def check(self, setup: Mapping[str, Any]) -> None:
        """Refuse this log if it holds another monitor's rows (`setup`: plain JSON values).
        A log without a setup file (an older version's) is checked by the metrics and
        variants its rows name, and gets the setup file with its next row."""
        plain: dict[str, Any] = json.loads(json.dumps(dict(setup)))
        if self.path.is_dir() or not self.path.parent.is_dir():
            where = "is a folder" if self.path.is_dir() else "is in a folder that does not exist"
            raise ConfigError(
                f"CsvLog({str(self.path)!r}) {where}; pass the path of a CSV file in an "
                "existing folder."
            )
        if not os.access(self.path.parent, os.W_OK):
            raise ConfigError(
                f"CsvLog({str(self.path)!r}) is in a read-only folder; pass the path of a CSV "
                "file in a folder you can write."
            )
        if os.path.lexists(self.setup_path):
            stored = read_json(self.setup_path, SETUP_LIMIT, error=_error(self.setup_path))
            if not isinstance(stored, dict) or stored.pop("format", None) != SETUP_FORMAT:
                raise _error(self.setup_path)("not the setup file of a monitor log")
            _same_setup(self, stored, plain)
        elif os.path.lexists(self.path):
            rows = read_log(self.path)
            if len(rows):
                named = {
                    "metrics": sorted(set(rows["metric"])),
                    "variants": sorted(set(rows["variant"])),
                }
                _same_setup(self, named, {key: sorted(plain[key]) for key in named})
        self.setup = plain

    def resume(self, step: int) -> None:
        """The run starts at `step`: a log holding steps from there on is refused (unless
        `resume=True`), before anything is measured."""
        if not self.redo and os.path.lexists(self.path):
            refuse_held(
                repr(str(self.path)),
                held_steps(read_log(self.path), step, None),
                step,
                f"CsvLog({str(self.path)!r}, resume=True)",
                "log to another file, e.g. CsvLog('collapse-2.csv')",
            )
        self.start = step
        self.checked = False

    def for_rank(self, rank: int) -> CsvLog:
        """The log of one rank (monitor `ranks="every"`): `collapse.csv` -> `collapse.rank1.csv`."""
        name = f"{self.path.stem}.rank{rank}{self.path.suffix}"
        return CsvLog(self.path.with_name(name), resume=self.redo)

    def append(self, frame: pd.DataFrame) -> None:
        if not self.checked:
            self._keep_before_start(frame)
            self.checked = True
        if self.setup is not None and not os.path.lexists(self.setup_path):
            record = {"format": SETUP_FORMAT, **self.setup}
            write_atomic(self.setup_path, (json.dumps(record, indent=1) + "\n").encode())
        new = not self.path.exists() or self.path.stat().st_size == 0
        append_whole(self.path, frame[list(COLUMNS)].to_csv(index=False, header=new).encode())

    def _keep_before_start(self, frame: pd.DataFrame) -> None:
        """Drop a killed write's last step and every row at or after `start`; a step whose
        rows are not those of `frame` (another setup, a damaged file) is refused."""
        if not os.path.lexists(self.path):
            return
        stored = read_log(self.path)
        expected = pd.MultiIndex.from_frame(frame[KEY].astype({"layer": int, "sample": int}))
        inside = pd.MultiIndex.from_frame(stored[KEY]).isin(expected)
        counts = stored.groupby("step", sort=False).size()
        partial = counts.index[-1] if len(counts) and counts.iloc[-1] < len(expected) else None
        other = counts[(counts != len(expected)) & (counts.index != partial)]
        if not inside.all() or len(other):
            row = stored[~inside].iloc[0] if not inside.all() else None
            what = (
                f"a row ({', '.join(f'{k} {row[k]}' for k in KEY)}) this monitor never writes"
                if row is not None
                else f"{int(other.iloc[0])} rows at step {other.index[0]}, not this "
                f"monitor's {len(expected)} per step"
            )
            raise InputError(
                f"{str(self.path)!r} holds {what} (other metrics, variants, layers or held-out "
                "batch, or a damaged file); pass another file, or delete it (and its "
                ".setup.json) to start afresh. Nothing was changed."
            )
        keep = stored[(stored["step"] < self.start) & (stored["step"] != partial)]
        if len(keep) < len(stored) or len(keep) == 0 or not _ends_with_newline(self.path):
            write_atomic(self.path, keep.to_csv(index=False).encode())


def _same_setup(log: CsvLog, stored: Mapping[str, Any], setup: Mapping[str, Any]) -> None:
    """Refuse `log` when the setup it was written with differs, naming each difference."""
    differ = [
        f"{key}: the log's {stored.get(key)!r}, this monitor's {setup.get(key)!r}"
        for key in sorted(set(stored) | set(setup))
        if stored.get(key) != setup.get(key)
    ]
    if differ:
        raise InputError(
            f"{str(log.path)!r} is the log of another monitor setup ({'; '.join(differ)}); "
            "pass another file, e.g. CsvLog('collapse-2.csv'), or delete it and "
            f"{log.setup_path.name!r} to start afresh. Nothing was changed."
        )


def _ends_with_newline(path: Path) -> bool:
    with open_bounded(path, LOG_LIMIT, error=_error(path)) as f:
        size = os.fstat(f.fileno()).st_size
        f.seek(max(size - 1, 0))
        return size == 0 or f.read(1) == b"\n"


def _error(path: Path):
    """The refusal of a file that cannot be a monitor log, in the reader's words (a missing
    file as `measure` says it: `no file at ...`)."""
    fix = "pass the CSV a monitor wrote (CsvLog(path)), or another path."
    return lambda problem: InputError(
        f"no file at {str(path)!r}; {fix}"
        if problem == "missing"
        else f"{str(path)!r} cannot be read as a monitor log ({problem}); {fix}"
    )


def parse_log(text: str, path: str | os.PathLike = "the log") -> pd.DataFrame:
    """The rows of a monitor's CSV text, without a partial last line (a killed write); a
    text that is not a monitor log (other columns, a step, layer or sample that is not a whole
    number >= 0, steps going back, a flag not True/False, a value that is text, not a number,
    NaN or Inf) is refused.

    Example:
        >>> parse_log("step,layer,variant,sample,metric,value,at_floor\\n"
        ...           "0,0,transformer,0,mu_rel,0.5,False\\n0,1,transf").shape
        (1, 7)
    """
    fail = _error(Path(path))
    if not text.endswith("\n"):
        text = text[: text.rfind("\n") + 1]
    if not text.strip():
        return pd.DataFrame({c: pd.Series(dtype=object) for c in COLUMNS})
    try:
        frame = pd.read_csv(io.StringIO(text), dtype={"variant": str, "metric": str})
    except (pd.errors.ParserError, ValueError) as err:
        raise fail(" ".join(str(err).split())) from None
    if list(frame.columns) != list(COLUMNS):
        raise InputError(
            f"{str(path)!r} has columns {list(frame.columns)}, not a monitor log's "
            f"{list(COLUMNS)}; pass the CSV a rankcollapse.measure.monitor.CsvLog wrote, or "
            "another path."
        )
    for column in ("step", "layer", "sample"):
        values = pd.to_numeric(frame[column], errors="coerce")
        bad = values.isna() | (values < 0) | (values % 1 != 0)
        if bad.any():
            line = int(bad.to_numpy().argmax()) + 2
            raise fail(
                f"line {line}: {column} {str(frame[column].iloc[line - 2])!r} is not a whole number >= 0"
            )
        frame[column] = values.astype("int64")
    if (frame["step"].diff() < 0).any():
        raise fail("its steps go back; a monitor writes them in order")
    flags = frame["at_floor"].astype(str)
    if not flags.isin(["True", "False"]).all():
        raise fail("its at_floor column holds values other than True and False")
    frame["at_floor"] = flags == "True"
    values = pd.to_numeric(frame["value"], errors="coerce")
    worded = (
        values.isna() & frame["value"].notna() & (frame["value"].astype(str).str.lower() != "nan")
    )
    if worded.any():
        line = int(worded.to_numpy().argmax()) + 2
        raise fail(
            f"line {line}: value {str(frame['value'].iloc[line - 2])!r} is not a number "
            f"({int(worded.sum())} of {len(frame)} values are text)"
        )
    frame["value"] = values.astype(float)
    return frame


def read_log(path: str | os.PathLike) -> pd.DataFrame:
    """A monitor's CSV file as a tidy frame. Read through `rankcollapse.reading` within
    `LOG_LIMIT` bytes, lines of at most `reading.MAX_CSV_LINE` bytes, never a folder, FIFO
    or device; anything that is not a monitor log is a clear error."""
    path = Path(path)
    fail = _error(path)
    lines = list(text_lines(path, LOG_LIMIT, error=fail))
    try:
        text = b"".join(lines).decode("utf-8")
    except UnicodeDecodeError as err:
        raise fail(f"not UTF-8 text: {err.reason} at byte {err.start}") from None
    return parse_log(text, path)


def scalars(frame: pd.DataFrame) -> list[tuple[int, str, float]]:
    """(step, name, value): the mean over the held-out samples not at the dtype floor of each
    (step, variant, metric, layer), named `collapse/<metric>/<variant>/layer_<ll>` (`PREFIX`:
    one group in TensorBoard, W&B and MLflow), the scalar names of `TensorBoardLog` and the
    trackers' logs; a layer whose every sample is at the floor has none (never a floor value
    averaged as signal).

    Example:
        >>> rows = pd.DataFrame({"step": 5, "layer": [1, 1], "variant": "san", "sample": [0, 1],
        ...                      "metric": "mu_rel", "value": [0.2, 1e-9],
        ...                      "at_floor": [False, True]})
        >>> scalars(rows)
        [(5, 'collapse/mu_rel/san/layer_01', 0.2)]
    """
    signal = frame[~frame["at_floor"].astype(bool)]
    keys = ["step", "variant", "metric", "layer"]
    means = signal.groupby(keys, sort=False)["value"].mean()
    return [
        (int(step), f"{PREFIX}/{metric}/{variant}/layer_{int(layer):02d}", float(value))
        for (step, variant, metric, layer), value in means.items()
    ]


def prefixes(keys: Keys) -> tuple[str, ...]:
    """The starts of the scalar names a monitor of `keys` writes (`scalars`)."""
    if keys is None:
        return (f"{PREFIX}/",)
    return tuple(f"{PREFIX}/{m}/{v}/" for m in keys[0] for v in keys[1])


class TensorBoardLog:
    """Per-layer means over the held-out samples (`scalars`) as TensorBoard scalars,
    `collapse/<metric>/<variant>/layer_<ll>` at each measured step (needs the `tensorboard`
    extra).

    A folder whose event files hold this monitor's scalars at or after its first step is
    refused, unless made with `resume=True`: then TensorBoard purges them (`purge_step`).

    Args:
        logdir: the folder (created if missing; never a file).
        resume: the training run restarts from a checkpoint: its steps are recorded again.
    """

    def __init__(self, logdir: str | os.PathLike, *, resume: bool = False) -> None:
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            raise missing_extra("TensorBoardLog", "tensorboard", "log to a CsvLog only") from None
        self.logdir = Path(logdir)
        self.redo = check_resume(resume, "TensorBoardLog")
        where = _folder_problem(self.logdir)
        if where is not None:
            raise ConfigError(
                f"TensorBoardLog({str(self.logdir)!r}) {where}; pass a folder you can write "
                "(it is created if missing), e.g. TensorBoardLog('runs/')."
            )
        self.writer_class = SummaryWriter
        self.writer: SummaryWriter | None = None
        self.start = 0
        self.keys: Keys = None

    def check(self, setup: Mapping[str, Any]) -> None:
        """Note the metrics and variants of the monitor writing here (`watch` calls it)."""
        self.keys = setup_keys(setup)

    def resume(self, step: int) -> None:
        """The run starts at `step`: event files holding this monitor's scalars from there on
        refuse it (unless `resume=True`)."""
        self.close()
        if not self.redo:
            held = sorted(s for s in event_steps(self.logdir, prefixes(self.keys)) if s >= step)
            refuse_held(
                f"the TensorBoard folder {str(self.logdir)!r}",
                held,
                step,
                f"TensorBoardLog({str(self.logdir)!r}, resume=True)",
                "log to another folder, e.g. TensorBoardLog('runs/2')",
            )
        self.start = step

    def for_rank(self, rank: int) -> TensorBoardLog:
        """The log of one rank (monitor `ranks="every"`): the folder `rank<r>/` of `logdir`."""
        log = TensorBoardLog(self.logdir / f"rank{rank}", resume=self.redo)
        log.keys = self.keys
        return log

    def append(self, frame: pd.DataFrame) -> None:
        if self.writer is None:
            purge = self.start if self.redo else None
            self.writer = self.writer_class(str(self.logdir), purge_step=purge)
        for step, name, value in scalars(frame):
            self.writer.add_scalar(name, value, step)
        self.writer.flush()

    def close(self) -> None:
        """Close the event file (a later append opens a new one)."""
        if self.writer is not None:
            self.writer.close()
            self.writer = None


def _folder_problem(folder: Path) -> str | None:
    """Why `folder` cannot hold a log's files (a file, under a file, read-only), or None."""
    existing = next(p for p in (folder, *folder.parents, Path(".")) if p.exists())
    if existing.is_file():
        return "is a file" if existing == folder else f"is inside the file {str(existing)!r}"
    if not os.access(existing, os.W_OK):
        return (
            "is a read-only folder"
            if existing == folder
            else (f"would be made in the read-only folder {str(existing)!r}")
        )
    return None


def event_steps(logdir: Path, starts: tuple[str, ...]) -> set[int]:
    """The steps of the scalars named `starts...` in the event files of `logdir` (not its
    subfolders), each read through `rankcollapse.reading` within `LOG_LIMIT` bytes. An event
    file is TFRecords: length (uint64), its CRC, the `Event` proto, the proto's CRC."""
    from tensorboard.compat.proto.event_pb2 import Event

    steps: set[int] = set()
    files = sorted(logdir.glob("*tfevents*")) if logdir.is_dir() else []
    for path in files:
        fail = _event_error(path)
        data, at = read_bytes(path, LOG_LIMIT, error=fail), 0
        while at + 12 <= len(data):
            (size,) = struct.unpack_from("<Q", data, at)
            body = data[at + 12 : at + 12 + size]
            if len(body) < size:  # a record cut by a kill: TensorBoard skips it too
                break
            try:
                event = Event.FromString(body)
            except Exception:  # noqa: BLE001 - protobuf's DecodeError, whatever its module
                raise fail(f"a damaged record at byte {at}") from None
            if any(v.tag.startswith(starts) for v in event.summary.value):
                steps.add(int(event.step))
            at += 12 + size + 4
    return steps


def _event_error(path: Path):
    return lambda problem: InputError(
        f"{str(path)!r} cannot be read as a TensorBoard event file ({problem}); move it out of "
        "the folder, or log to another folder."
    )
