"""The monitor's logs to experiment trackers: Weights & Biases (`WandbLog`, the `wandb` extra)
and MLflow (`MLflowLog`, the `mlflow` extra).

    monitor = watch(model, tokenizer=tok, logs=[CsvLog("collapse.csv"), WandbLog(project="lm")])
    ...; monitor.step(step)
    monitor.close()        # the table of every row goes to the run; a run it started ends

Each takes the run the training already logs to (W&B: the active `wandb.run`; MLflow: the
active run) or starts its own, and checks its arguments when it is made. Everything it logs is
named under one prefix, `collapse/`: at each measured step the per-layer means
(`rankcollapse.measure.monitor.scalars`: `collapse/<metric>/<variant>/layer_<ll>`) and one heat
map per metric (`plot.training_heatmap`, layer x step, every step so far): W&B's image
`collapse/<metric>/heatmap` (a slider over steps), MLflow's artifact
`collapse/training-heatmap-<metric>.png`. At `close` the tidy rows (the columns of `CsvLog`):
W&B's table `collapse/rows`, MLflow's artifact `collapse-rows.csv`, where the rows the run held
before (another setup, a run resumed from a checkpoint) are kept and this process's appended.

A run that already holds this monitor's metrics at or after its first step is refused with a
sentence, unless the log is made with `resume=True` (a training run restarted from a
checkpoint): then MLflow's `collapse-rows.csv` drops those rows and takes the new ones, and the
scalars are logged again at those steps (a tracker keeps what it has logged).
"""

from __future__ import annotations

import io
import os
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import urlparse
from urllib.request import url2pathname

import pandas as pd

from rankcollapse import plot
from rankcollapse.errors import ConfigError, InputError, missing_extra
from rankcollapse.measure.monitor import COLUMNS, MemoryLog, read_log, scalars
from rankcollapse.measure.monitor.logs import (
    PREFIX,
    again,
    check_resume,
    held_steps,
    prefixes,
    refuse_held,
)

ROWS_NAME = "collapse-rows"
STEP_KEY = f"{PREFIX}/step"


def heatmaps(frame: pd.DataFrame) -> dict[str, Any]:
    """{metric: PIL image of its `plot.training_heatmap`} for every metric of `frame`, one
    panel per variant when there are several."""
    panel = "variant" if frame["variant"].nunique() > 1 else None
    return {
        str(metric): _png_image(plot.training_heatmap(frame, metric=str(metric), panel=panel))
        for metric in frame["metric"].drop_duplicates()
    }


def check_every(value: Any, log: str) -> int:
    """`heatmaps_every` of a tracker's log: an int >= 1."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(
            f"{log}(heatmaps_every={value!r}): the heat maps are drawn at every k-th "
            "measurement, an int >= 1 (1: each)."
        )
    return value


class WandbLog(MemoryLog):
    """Per-layer means and one heat map per metric at each measured step, against the step
    metric `collapse/step` (W&B's own step is left to the training); at `close`, this process's
    rows as the table `collapse/rows` (the `wandb` extra; works offline with mode="offline").

    Args:
        run: a `wandb` run, the object `wandb.init()` returns (None: the active `wandb.run`,
            else a new one from `init`).
        resume: the training restarts from a checkpoint: the run may hold this monitor's
            steps from its first step on (logged again; False: such a run is refused).
        heatmaps_every: draw the heat maps at every k-th measurement and at `close` (1: at
            each; one 200-dpi PNG per metric, 1.7 s for 13 layers x 20 steps on two cores at a
            load of 11).
        init: keyword arguments of `wandb.init` for a new run (project, name, dir, mode, ...).
    """

    def __init__(
        self, run: Any = None, *, resume: bool = False, heatmaps_every: int = 1, **init: Any
    ) -> None:
        super().__init__(resume=check_resume(resume, "WandbLog"))
        self.heatmaps_every, self.drawn = check_every(heatmaps_every, "WandbLog"), 0
        try:
            import wandb
        except ImportError:
            raise missing_extra("WandbLog", "wandb", "log to a CsvLog") from None
        if run is not None and not all(callable(getattr(run, a, None)) for a in ("log", "finish")):
            raise ConfigError(
                f"WandbLog(run={run!r}): run takes a wandb run, the object wandb.init() "
                f"returns, not a {type(run).__name__}; to start a named run pass "
                f"WandbLog(name={run!r}, project=...), or nothing to log to the active run."
            )
        self.wandb = wandb
        self.owned = run is None and wandb.run is None
        if run is None and wandb.run is None:
            try:
                run = wandb.init(**init)
            except TypeError as err:
                raise ConfigError(
                    f"WandbLog({', '.join(f'{k}=...' for k in init)}): wandb.init refused "
                    f"them ({err}); pass keyword arguments of wandb.init (project, name, dir, "
                    "mode, ...)."
                ) from None
        chosen: Any = run if run is not None else wandb.run
        self.run = chosen
        self.run.define_metric(STEP_KEY)
        self.run.define_metric(f"{PREFIX}/*", step_metric=STEP_KEY)

    def resume(self, step: int) -> None:
        """Refuse a run whose summary shows this monitor's scalars at `step` or later."""
        summary = dict(self.run.summary)
        last = summary.get(STEP_KEY)
        ours = any(str(key).startswith(prefixes(self.keys)) for key in summary)
        if not self.redo and ours and isinstance(last, (int, float)) and last >= step:
            refuse_held(
                f"the W&B run {self.run.id!r}",
                f"steps up to {int(last)}",
                step,
                "WandbLog(run, resume=True)",
                "log to another run (WandbLog(project=...) starts one)",
            )
        super().resume(step)

    def append(self, frame: pd.DataFrame) -> None:
        super().append(frame)
        images = self._images() if len(self.frames) % self.heatmaps_every == 0 else {}
        by_step = _by_step(frame)
        for k, (step, values) in enumerate(by_step):
            last = k == len(by_step) - 1
            self.run.log({STEP_KEY: step, **values, **(images if last else {})})

    def _images(self) -> dict[str, Any]:
        self.drawn = len(self.frames)
        return {
            f"{PREFIX}/{metric}/heatmap": self.wandb.Image(image)
            for metric, image in heatmaps(self.frame).items()
        }

    def close(self) -> None:
        """Log the heat maps (if the last measurement has none) and the table of this
        process's rows; finish a run this log started."""
        frame = self.frame
        if len(frame) and self.drawn < len(self.frames):
            self.run.log({STEP_KEY: int(frame["step"].max()), **self._images()})
        if len(frame):
            table = self.wandb.Table(dataframe=frame[list(COLUMNS)])
            self.run.log({f"{PREFIX}/rows": table})
        if self.owned:
            self.run.finish()


class MLflowLog(MemoryLog):
    """Per-layer means as MLflow metrics and one heat map per metric at each measured step; at
    `close`, the rows as the artifact `collapse-rows.csv`: the rows the run held before, then
    this process's (the `mlflow` extra).

    Args:
        run_id: the run to log to (None: the active run, else a new one in `experiment`).
        tracking_uri: where the runs are stored (None: MLflow's own setting), e.g.
            "sqlite:///mlflow.db", or a local folder's `file://` URI (MLflow 3 keeps its file
            store behind MLFLOW_ALLOW_FILE_STORE=true). Checked here: a file where a folder
            belongs, a missing or read-only folder or database is one sentence.
        experiment: the experiment of a new run.
        resume: the training restarts from a checkpoint: the run may hold this monitor's
            steps from its first step on (recorded again; False: such a run is refused).
        heatmaps_every: draw the heat maps at every k-th measurement and at `close` (1: at
            each; one 200-dpi PNG per metric, 1.7 s for 13 layers x 20 steps on two cores at a
            load of 11).
    """

    def __init__(
        self,
        run_id: str | None = None,
        *,
        tracking_uri: str | os.PathLike | None = None,
        experiment: str = "rankcollapse",
        resume: bool = False,
        heatmaps_every: int = 1,
    ) -> None:
        super().__init__(resume=check_resume(resume, "MLflowLog"))
        self.heatmaps_every = check_every(heatmaps_every, "MLflowLog")
        try:
            import mlflow
        except ImportError:
            raise missing_extra("MLflowLog", "mlflow", "log to a CsvLog") from None
        for name, value in (("run_id", run_id), ("experiment", experiment)):
            if not isinstance(value, str) and (value is not None or name == "experiment"):
                raise ConfigError(
                    f"MLflowLog({name}={value!r}): {name} takes a str, not a "
                    f"{type(value).__name__}."
                )
        uri = check_store(tracking_uri)
        self.metric_class = mlflow.entities.Metric
        self.start, self.before = 0, pd.DataFrame(columns=COLUMNS)
        try:
            self.client = mlflow.MlflowClient(uri)
            active = mlflow.active_run() if uri is None else None
            self.owned = run_id is None and active is None
            if run_id is None:
                run_id = active.info.run_id if active else self._new_run(experiment)
            else:
                self.client.get_run(run_id)  # it exists
        except Exception as err:  # noqa: BLE001 - MLflow's and its database's errors alike
            cause = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise ConfigError(
                f"MLflowLog(run_id={run_id!r}, tracking_uri={uri!r}) cannot use its store "
                f"({cause}); pass a store you can write (e.g. tracking_uri='sqlite:///mlflow.db') "
                "and the id of one of its runs, or none to start a run."
            ) from None
        self.run_id = run_id

    def _new_run(self, experiment: str) -> str:
        found = self.client.get_experiment_by_name(experiment)
        experiment_id = found.experiment_id if found else self.client.create_experiment(experiment)
        return self.client.create_run(experiment_id).info.run_id

    def resume(self, step: int) -> None:
        """Read the rows the run holds; refuse it when it holds this monitor's metrics (rows
        or scalars) at `step` or later, unless `resume=True`."""
        before = self.stored_rows()
        held = set(held_steps(before, step, self.keys)) | self._scalar_steps(step)
        if not self.redo:
            refuse_held(
                f"the MLflow run {self.run_id!r}",
                sorted(held),
                step,
                f"MLflowLog({self.run_id!r}, resume=True)",
                "log to another run (MLflowLog() starts one)",
            )
        self.start, self.before = step, before[~again(before, step, self.keys)]
        super().resume(step)

    def _scalar_steps(self, start: int) -> set[int]:
        """The steps at or after `start` of the run's scalars named as this monitor's."""
        names = [
            k
            for k in self.client.get_run(self.run_id).data.metrics
            if k.startswith(prefixes(self.keys))
        ]
        return {
            m.step
            for name in names
            for m in self.client.get_metric_history(self.run_id, name)
            if m.step >= start
        }

    def stored_rows(self) -> pd.DataFrame:
        """The run's `collapse-rows.csv` (read through `rankcollapse.reading`), or no rows."""
        name = f"{ROWS_NAME}.csv"
        if name not in {f.path for f in self.client.list_artifacts(self.run_id)}:
            return pd.DataFrame(columns=COLUMNS)
        with tempfile.TemporaryDirectory() as folder:
            path = self.client.download_artifacts(self.run_id, name, folder)
            try:
                return read_log(path)
            except InputError as err:
                raise InputError(
                    f"the MLflow run {self.run_id!r} holds a {name} that is not a monitor's "
                    f"rows ({err}); log to another run (MLflowLog() starts one). Nothing was "
                    "changed."
                ) from None

    def append(self, frame: pd.DataFrame) -> None:
        super().append(frame)
        metrics = [self.metric_class(name, value, 0, step) for step, name, value in scalars(frame)]
        for start in range(0, len(metrics), 1000):  # MLflow's limit per batch
            self.client.log_batch(self.run_id, metrics=metrics[start : start + 1000])
        if len(self.frames) % self.heatmaps_every == 0:
            self._log_heatmaps(_joined(self.before, self.frame))

    def _log_heatmaps(self, rows: pd.DataFrame) -> None:
        for metric, image in heatmaps(rows).items():
            self.client.log_image(self.run_id, image, f"{PREFIX}/training-heatmap-{metric}.png")

    def close(self) -> None:
        """Store the rows the run held (read again: another setup may have written since) and
        this process's as `collapse-rows.csv`; end a run this log started."""
        frame = self.frame
        if len(frame):
            held = self.stored_rows()
            if self.redo:
                held = held[~again(held, self.start, self.keys)]
            rows = _joined(held, frame[list(COLUMNS)])
            rows = rows.sort_values("step", kind="stable")  # each setup's rows in step order
            self.client.log_text(self.run_id, rows.to_csv(index=False), f"{ROWS_NAME}.csv")
            self._log_heatmaps(rows)
        if self.owned:
            self.client.set_terminated(self.run_id)


def check_store(uri: Any) -> str | None:
    """A tracking URI whose local store MLflow can use: a file store's folder (not a file,
    writable), a sqlite database's folder (existing, writable) and file (writable)."""
    if uri is None:
        return None
    if not isinstance(uri, (str, os.PathLike)):
        raise ConfigError(
            f"MLflowLog(tracking_uri={uri!r}): a str URI or a folder, e.g. "
            f"'sqlite:///mlflow.db', not a {type(uri).__name__}."
        )
    uri = os.fspath(uri)
    parsed = urlparse(uri)
    fix = "pass a store you can write, e.g. tracking_uri='sqlite:///mlflow.db' in your folder"
    if parsed.scheme == "sqlite":
        path = Path(uri[len("sqlite:///") :] or ":memory:")
        if str(path) == ":memory:":
            return uri
        problem = _not_writable(path, folder=False)
    elif parsed.scheme in ("file", "") or len(parsed.scheme) == 1:  # a Windows drive letter
        path = Path(url2pathname(parsed.path) if parsed.scheme == "file" else uri)
        problem = _not_writable(path, folder=True)
    else:
        return uri  # a server: MLflow reports what it says
    if problem:
        raise ConfigError(f"MLflowLog(tracking_uri={uri!r}): {str(path)!r} {problem}; {fix}.")
    return uri


def _not_writable(path: Path, *, folder: bool) -> str | None:
    """Why MLflow could not write its store at `path` (a folder, or a database file), or
    None."""
    parent = next((p for p in path.parents if p.exists()), Path("."))
    if path.exists() and path.is_dir() != folder:
        return "is a folder, not a database file" if not folder else "is a file, not a folder"
    if not parent.is_dir():
        return f"is inside the file {str(parent)!r}"
    if not folder and not path.parent.is_dir():
        return "is in a folder that does not exist"
    if not os.access(path if path.exists() else parent, os.W_OK) or (
        not folder and not os.access(path.parent, os.W_OK)  # sqlite writes its journal beside
    ):
        return "is read-only"
    return None


def _joined(first: pd.DataFrame, then: pd.DataFrame) -> pd.DataFrame:
    """The rows of `first`, then those of `then` (an empty part left out)."""
    parts = [part for part in (first, then) if len(part)]
    return pd.concat(parts, ignore_index=True) if parts else then


def _by_step(frame: pd.DataFrame) -> list[tuple[int, dict[str, float]]]:
    """The scalars of a measurement grouped by step (W&B logs one dict per step)."""
    steps: dict[int, dict[str, float]] = {}
    for step, name, value in scalars(frame):
        steps.setdefault(step, {})[name] = value
    return sorted(steps.items())


def _png_image(fig: Any) -> Any:
    """The figure as a PIL image of its 200-dpi PNG (`plot.render`)."""
    from PIL import Image

    return Image.open(io.BytesIO(plot.render(fig, ("png",))["png"]))
