"""The trackers' logs: a W&B run in offline mode and an MLflow run in a local file store hold
every row of the monitor, its per-layer scalars under `collapse/`, and one heat map per metric
from the first measured step on; a resumed run or a second setup keeps the rows the run held; a
run holding the new monitor's steps is refused unless resume=True; bad arguments are one
sentence when the log is made; a missing extra is one line naming the install command."""

from __future__ import annotations

import builtins
import json
import os
import sqlite3

import pandas as pd
import pytest

from rankcollapse.errors import ConfigError, InputError
from rankcollapse.measure.monitor import COLUMNS, scalars, watch
from rankcollapse.nets import NetConfig, ToyNet, random_tokens
from rankcollapse.tracking import MLflowLog, WandbLog


def monitor_with(log, steps=range(5), metrics=("mu_rel", "stable_rank"), close=True):
    net = ToyNet(NetConfig(n_layers=2, d_model=8, skip="on", seed=0))
    x = random_tokens(3, 5, 8, seed=0)
    monitor = watch(net, blocks="blocks", inputs=x, every=2 if close else 1,
                    metrics=list(metrics), logs=[log])  # fmt: skip
    frames = []
    for step in steps:
        for p in net.parameters():  # a "training step": the numbers move
            p.data.mul_(0.9)
        frame = monitor.step(step)
        if frame is not None:
            frames.append(frame)
    if close:
        monitor.close()
    return pd.concat(frames, ignore_index=True)


@pytest.fixture
def offline_wandb(tmp_path, monkeypatch):
    wandb = pytest.importorskip(
        "wandb", reason='the wandb extra is not installed (pip install -e ".[wandb]")'
    )
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.chdir(tmp_path)  # W&B writes its debug logs under ./wandb as well
    return wandb


@pytest.mark.slow
def test_wandb_offline_run_holds_every_row_scalar_and_heatmap_under_one_prefix(
    tmp_path, offline_wandb
):
    run = offline_wandb.init(project="rankcollapse-test", dir=str(tmp_path))
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
    images = sorted(p.relative_to(files / "media" / "images").parent.as_posix()
                    for p in files.rglob("*.png"))  # fmt: skip
    # each metric's heat map at each of the 3 measured steps, as training runs
    assert images == ["collapse/mu_rel"] * 3 + ["collapse/stable_rank"] * 3
    assert summary["collapse/step"] == 4
    last = max(step for step, _, _ in scalars(rows))
    for step, name, value in scalars(rows):
        assert name.startswith(("collapse/mu_rel/transformer/", "collapse/stable_rank/"))
        if step == last:
            assert summary[name] == pytest.approx(value, rel=1e-12)


@pytest.mark.slow
def test_a_wandb_run_holding_the_monitor_s_steps_is_refused_unless_resumed(tmp_path, offline_wandb):
    run = offline_wandb.init(project="rankcollapse-test", dir=str(tmp_path))
    monitor_with(WandbLog(run), steps=range(3))
    monitor_with(WandbLog(run), steps=range(3), metrics=["cos_mean"])  # another setup: fine
    with pytest.raises(InputError, match=rf"the W&B run '{run.id}' already holds steps up to 2 "
                       r".*WandbLog\(run, resume=True\)"):  # fmt: skip
        monitor_with(WandbLog(run), steps=range(1, 3))
    monitor_with(WandbLog(run, resume=True), steps=range(1, 3))
    assert dict(run.summary)["collapse/step"] == 2
    run.finish()


def test_wandb_log_given_a_name_for_its_run_says_what_run_takes(offline_wandb):
    with pytest.raises(ConfigError, match=r"WandbLog\(run='name'\): run takes a wandb run.*"
                       r"not a str; to start a named run pass WandbLog\(name='name'"):  # fmt: skip
        WandbLog(run="name")
    assert offline_wandb.run is None  # nothing was started


@pytest.fixture
def file_store(tmp_path, monkeypatch):
    pytest.importorskip(
        "mlflow", reason='the mlflow extra is not installed (pip install -e ".[mlflow]")'
    )
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 asks for the opt-in
    return (tmp_path / "mlruns").as_uri()


def stored_rows(log, tmp_path):
    folder = tmp_path / f"artifacts-{len(list(tmp_path.glob('artifacts-*')))}"
    folder.mkdir()
    log.client.download_artifacts(log.run_id, "", str(folder))
    return folder, pd.read_csv(folder / "collapse-rows.csv")


@pytest.mark.slow
def test_mlflow_file_store_holds_every_row_every_scalar_and_each_metric_s_heatmap(
    tmp_path, file_store
):
    log = MLflowLog(tracking_uri=file_store, experiment="collapse")
    monitor_with(log, steps=range(1), close=False)  # the heat maps are there while it trains
    names = {f.path for f in log.client.list_artifacts(log.run_id, "collapse")}
    assert names == {f"collapse/training-heatmap-{m}.png" for m in ("mu_rel", "stable_rank")}
    sparse = MLflowLog(tracking_uri=file_store, heatmaps_every=2)
    monitor_with(sparse, steps=range(1), close=False)
    assert sparse.client.list_artifacts(sparse.run_id, "collapse") == []
    sparse.close()  # at close, whatever the count
    assert len(sparse.client.list_artifacts(sparse.run_id, "collapse")) == 2
    with pytest.raises(ConfigError, match=r"MLflowLog\(heatmaps_every=0\): .* an int >= 1"):
        MLflowLog(tracking_uri=file_store, heatmaps_every=0)
    log = MLflowLog(tracking_uri=file_store, experiment="collapse")
    rows = monitor_with(log)
    client = log.client
    expected = scalars(rows)
    for name in {name for _, name, _ in expected}:
        assert name.startswith("collapse/")
        history = {m.step: m.value for m in client.get_metric_history(log.run_id, name)}
        want = {step: value for step, n, value in expected if n == name}
        assert history == pytest.approx(want, rel=1e-12)
    folder, stored = stored_rows(log, tmp_path)
    pd.testing.assert_frame_equal(stored, rows[list(COLUMNS)], check_dtype=False)
    for metric in ("mu_rel", "stable_rank"):
        image = folder / "collapse" / f"training-heatmap-{metric}.png"
        assert image.read_bytes().startswith(b"\x89PNG")
    assert client.get_run(log.run_id).info.status == "FINISHED"


@pytest.mark.slow
def test_a_resumed_mlflow_run_and_a_second_setup_keep_the_rows_the_run_held(tmp_path, file_store):
    first = MLflowLog(tracking_uri=file_store)
    monitor_with(first, steps=range(2), close=False)
    first.close()  # steps 0-1
    resumed = MLflowLog(first.run_id, tracking_uri=file_store)
    monitor_with(resumed, steps=range(2, 6), close=False)
    resumed.close()  # steps 2-5
    other = MLflowLog(first.run_id, tracking_uri=file_store)  # another setup, same run
    monitor_with(other, steps=range(3), metrics=["cos_mean"], close=False)
    other.close()
    _, stored = stored_rows(other, tmp_path)
    steps = stored.groupby("metric")["step"].unique().map(list).to_dict()
    assert steps == {"mu_rel": list(range(6)), "stable_rank": list(range(6)),
                     "cos_mean": [0, 1, 2]}  # fmt: skip
    assert stored["step"].is_monotonic_increasing


@pytest.mark.slow
def test_an_mlflow_run_holding_the_monitor_s_steps_is_refused_unless_resumed(tmp_path, file_store):
    first = MLflowLog(tracking_uri=file_store)
    monitor_with(first, steps=range(4), close=False)
    first.close()
    _, before = stored_rows(first, tmp_path)
    with pytest.raises(InputError, match=rf"the MLflow run '{first.run_id}' already holds steps "
                       rf"2, 3 .*MLflowLog\('{first.run_id}', resume=True\)"):  # fmt: skip
        monitor_with(MLflowLog(first.run_id, tracking_uri=file_store), steps=range(2, 4))
    _, after = stored_rows(first, tmp_path)
    pd.testing.assert_frame_equal(after, before)
    redo = MLflowLog(first.run_id, tracking_uri=file_store, resume=True)
    rows = monitor_with(redo, steps=range(2, 5), close=False)
    redo.close()
    _, stored = stored_rows(redo, tmp_path)
    assert stored["step"].unique().tolist() == [0, 1, 2, 3, 4]
    assert stored.query("step >= 2")["value"].tolist() == pytest.approx(rows["value"].tolist())


def test_mlflow_stores_that_cannot_be_used_are_one_sentence_when_made(
    tmp_path, file_store, monkeypatch
):
    notes = tmp_path / "notes.txt"
    notes.write_text("mine\n")
    for uri in (notes.as_uri(), str(notes)):
        with pytest.raises(ConfigError, match=r"'.*notes.txt' is a file, not a folder"):
            MLflowLog(tracking_uri=uri)
    with pytest.raises(ConfigError, match=r"is inside the file '.*notes.txt'"):
        MLflowLog(tracking_uri=f"sqlite:///{notes}/mlflow.db")
    database = tmp_path / "mlflow.db"
    sqlite3.connect(database).close()
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: (  # a read-only store (as root, modes
        mode != os.W_OK and real_access(p, mode)))  # fmt: skip  # do not bind: os.access does
    with pytest.raises(ConfigError, match=r"'.*mlflow.db' is read-only; pass a store you can"):
        MLflowLog(tracking_uri=f"sqlite:///{database}")
    monkeypatch.setattr(os, "access", real_access)
    database.write_bytes(b"not a database\n" * 100)
    with pytest.raises(ConfigError, match=r"tracking_uri='sqlite:///.*mlflow.db'\) cannot use "
                       r"its store \(.*\); pass a store you can write"):  # fmt: skip
        MLflowLog(tracking_uri=f"sqlite:///{database}")
    with pytest.raises(ConfigError, match=r"MLflowLog\(run_id='nope'.*cannot use its store"):
        MLflowLog("nope", tracking_uri=file_store)
    assert notes.read_text() == "mine\n"


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
