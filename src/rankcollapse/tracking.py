"""The monitor's logs to experiment trackers: Weights & Biases (`WandbLog`, the `wandb` extra)
and MLflow (`MLflowLog`, the `mlflow` extra).

    monitor = watch(model, tokenizer=tok, logs=[CsvLog("collapse.csv"), WandbLog(project="lm")])
    ...; monitor.step(step)
    monitor.close()        # the heat map and the table of every row go to the run

Each takes the run the training already logs to (W&B: the active `wandb.run`; MLflow: the
active run) or starts its own. At each measured step it logs the per-layer means under the
names `TensorBoardLog` uses (`rankcollapse.measure.monitor.scalars`: `<metric>/<variant>/layer_<ll>`);
at `close` the tidy rows of the whole run (the columns of `CsvLog`, one row per step, layer,
variant, sample and metric) and `plot.training_heatmap` of the first metric as a PNG image,
then it ends a run it started. A tracker keeps what it has logged: a resumed run logs its
scalars again from its start step (W&B: start the run with `resume_from` to rewind it), and its
table holds each step once.
"""

from __future__ import annotations

import io
from typing import Any

import pandas as pd

from rankcollapse import plot
from rankcollapse.errors import missing_extra
from rankcollapse.measure.monitor import COLUMNS, MemoryLog, scalars

HEATMAP_NAME = "training-heatmap"
ROWS_NAME = "collapse-rows"


def _figure(frame: pd.DataFrame) -> Any:
    """The heat map of the first metric measured, one panel per variant when there are
    several."""
    metric = str(frame["metric"].iloc[0])
    panel = "variant" if frame["variant"].nunique() > 1 else None
    return plot.training_heatmap(frame, metric=metric, panel=panel)


class WandbLog(MemoryLog):
    """Per-layer means as W&B scalars at each measured step; at `close`, the rows as the table
    `collapse-rows` and the heat map as the image `training-heatmap` (the `wandb` extra; works
    offline with WANDB_MODE=offline).

    Args:
        run: a `wandb` run (None: the active `wandb.run`, else a new one from `init`).
        init: keyword arguments of `wandb.init` for a new run (project, name, dir, ...).
    """

    def __init__(self, run: Any = None, **init: Any) -> None:
        super().__init__()
        try:
            import wandb
        except ImportError:
            raise missing_extra("WandbLog", "wandb", "log to a CsvLog") from None
        self.wandb = wandb
        self.owned = run is None and wandb.run is None
        self.run = run if run is not None else (wandb.run or wandb.init(**init))

    def append(self, frame: pd.DataFrame) -> None:
        super().append(frame)
        for step, values in _by_step(frame):
            self.run.log(values, step=step)

    def close(self) -> None:
        """Log the table of every row and the heat map; finish a run this log started."""
        frame = self.frame
        if len(frame):
            image = _png_image(_figure(frame))
            table = self.wandb.Table(dataframe=frame[list(COLUMNS)])
            self.run.log({ROWS_NAME: table, HEATMAP_NAME: self.wandb.Image(image)})
        if self.owned:
            self.run.finish()


class MLflowLog(MemoryLog):
    """Per-layer means as MLflow metrics at each measured step; at `close`, the rows as the
    artifact `collapse-rows.csv` and the heat map as `training-heatmap.png` (the `mlflow`
    extra).

    Args:
        run_id: the run to log to (None: the active run, else a new one in `experiment`).
        tracking_uri: where the runs are stored (None: MLflow's own setting), e.g.
            "sqlite:///mlflow.db", or a local folder's `file://` URI (MLflow 3 keeps its file
            store behind MLFLOW_ALLOW_FILE_STORE=true).
        experiment: the experiment of a new run.
    """

    def __init__(
        self,
        run_id: str | None = None,
        *,
        tracking_uri: str | None = None,
        experiment: str = "rankcollapse",
    ) -> None:
        super().__init__()
        try:
            import mlflow
        except ImportError:
            raise missing_extra("MLflowLog", "mlflow", "log to a CsvLog") from None
        self.metric_class = mlflow.entities.Metric
        self.client = mlflow.MlflowClient(tracking_uri)
        active = mlflow.active_run() if tracking_uri is None else None
        self.owned = run_id is None and active is None
        if run_id is None:
            run_id = active.info.run_id if active else self._new_run(experiment)
        self.run_id = run_id

    def _new_run(self, experiment: str) -> str:
        found = self.client.get_experiment_by_name(experiment)
        experiment_id = found.experiment_id if found else self.client.create_experiment(experiment)
        return self.client.create_run(experiment_id).info.run_id

    def append(self, frame: pd.DataFrame) -> None:
        super().append(frame)
        metrics = [self.metric_class(name, value, 0, step) for step, name, value in scalars(frame)]
        for start in range(0, len(metrics), 1000):  # MLflow's limit per batch
            self.client.log_batch(self.run_id, metrics=metrics[start : start + 1000])

    def close(self) -> None:
        """Store the rows and the heat map as artifacts; end a run this log started."""
        frame = self.frame
        if len(frame):
            rows = frame[list(COLUMNS)].to_csv(index=False)
            self.client.log_text(self.run_id, rows, f"{ROWS_NAME}.csv")
            self.client.log_image(self.run_id, _png_image(_figure(frame)), f"{HEATMAP_NAME}.png")
        if self.owned:
            self.client.set_terminated(self.run_id)


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
