"""The trackers' logs: a W&B run in offline mode and an MLflow run in a local file store hold
every row of the monitor, its per-layer scalars under the names of the other logs, and the heat
map image; a missing extra is one line naming the install command."""

from __future__ import annotations

import builtins
import json

import pandas as pd
import pytest

from rankcollapse.errors import ConfigError
from rankcollapse.measure.monitor import COLUMNS, scalars, watch
from rankcollapse.nets import NetConfig, ToyNet, random_tokens
from rankcollapse.tracking import MLflowLog, WandbLog


def monitor_with(log):
    net = ToyNet(NetConfig(n_layers=2, d_model=8, skip="on", seed=0))
    x = random_tokens(3, 5, 8, seed=0)
    monitor = watch(net, blocks="blocks", inputs=x, every=2, metrics=["mu_rel", "stable_rank"],
                    logs=[log])  # fmt: skip
    frames = []
    for step in range(5):
        for p in net.parameters():  # a "training step": the numbers move
            p.data.mul_(0.9)
        frame = monitor.step(step)
        if frame is not None:
            frames.append(frame)
    monitor.close()
    return pd.concat(frames, ignore_index=True)


@pytest.mark.slow
def test_wandb_offline_run_holds_every_row_every_scalar_and_the_heatmap(tmp_path, monkeypatch):
    wandb = pytest.importorskip(
        "wandb", reason='the wandb extra is not installed (pip install -e ".[wandb]")'
    )
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.chdir(tmp_path)  # W&B writes its debug logs under ./wandb as well
    run = wandb.init(project="rankcollapse-test", dir=str(tmp_path))
    files = tmp_path.joinpath(run.dir)
    log = WandbLog(run)
    rows = monitor_with(log)
    summary = dict(run.summary)
    run.finish()
    tables = list(files.rglob("*.table.json"))
    assert len(tables) == 1
    stored = json.loads(tables[0].read_text())
    assert stored["columns"] == list(COLUMNS)
    table = pd.DataFrame(stored["data"], columns=stored["columns"])
    pd.testing.assert_frame_equal(table, rows[list(COLUMNS)], check_dtype=False)
    assert len(list(files.rglob("*.png"))) == 1
    last = max(step for step, _, _ in scalars(rows))
    for step, name, value in scalars(rows):
        if step == last:
            assert summary[name] == pytest.approx(value, rel=1e-12)


@pytest.mark.slow
def test_mlflow_file_store_holds_every_row_every_scalar_and_the_heatmap(tmp_path, monkeypatch):
    pytest.importorskip(
        "mlflow", reason='the mlflow extra is not installed (pip install -e ".[mlflow]")'
    )
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 asks for the opt-in
    uri = (tmp_path / "mlruns").as_uri()
    log = MLflowLog(tracking_uri=uri, experiment="collapse")
    rows = monitor_with(log)
    client = log.client
    expected = scalars(rows)
    for name in {name for _, name, _ in expected}:
        history = {m.step: m.value for m in client.get_metric_history(log.run_id, name)}
        want = {step: value for step, n, value in expected if n == name}
        assert history == pytest.approx(want, rel=1e-12)
    folder = tmp_path / "artifacts"
    client.download_artifacts(log.run_id, "", str(folder.mkdir() or folder))
    stored = pd.read_csv(folder / "collapse-rows.csv")
    pd.testing.assert_frame_equal(stored, rows[list(COLUMNS)], check_dtype=False)
    assert (folder / "training-heatmap.png").read_bytes().startswith(b"\x89PNG")
    assert client.get_run(log.run_id).info.status == "FINISHED"


@pytest.mark.parametrize(("log", "extra"), [(WandbLog, "wandb"), (MLflowLog, "mlflow")])
def test_a_missing_tracker_names_the_extra_to_install(log, extra, monkeypatch):
    real_import = builtins.__import__

    def without(name, *args, **kwargs):
        if name.split(".")[0] == extra:
            raise ImportError(f"No module named '{extra}'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", without)
    named = rf'needs the {extra} extra.*pip install -e "\.\[{extra}\]"'
    with pytest.raises(ConfigError, match=named):
        log()
