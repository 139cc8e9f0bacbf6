"""The CSV log survives a crash (each measurement whole or not at all, a resumed run records
each step once) and never replaces rows it did not write (a log holding a new monitor's steps is
refused unless resume=True); TensorBoard gets the per-layer means, and the same refusal."""

from __future__ import annotations

import os
import runpy
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from rankcollapse.errors import ConfigError, InputError
from rankcollapse.measure.monitor import COLUMNS, CsvLog, read_log, watch
from rankcollapse.nets import NetConfig, ToyNet, random_tokens

SRC = Path(__file__).resolve().parents[3] / "src"

# A training loop with a checkpoint every 4 steps and the monitor every 2; started with
# RESUME=1 it continues from the last checkpoint. It stops after STEPS steps.
TRAINING = textwrap.dedent(
    """
    import os, sys, time, torch
    from rankcollapse.measure.monitor import CsvLog, watch
    from rankcollapse.nets import NetConfig, ToyNet, random_tokens
    folder, steps, pause = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    net = ToyNet(NetConfig(n_layers=2, d_model=8, skip="on", dtype="float32"))
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-2)
    start, checkpoint = 0, os.path.join(folder, "checkpoint.pt")
    if os.path.exists(checkpoint):
        saved = torch.load(checkpoint)
        net.load_state_dict(saved["net"]); optimizer.load_state_dict(saved["opt"])
        start = saved["step"]
    held_out = random_tokens(2, 5, 8, seed=1, dtype=torch.float32)
    monitor = watch(net, blocks="blocks", inputs=held_out, every=2,
                    logs=[CsvLog(os.path.join(folder, "collapse.csv"), resume=start > 0)])
    monitor.step(start)
    for step in range(start + 1, steps + 1):
        x = random_tokens(4, 5, 8, seed=step, dtype=torch.float32)
        loss = net(x).output.pow(2).mean()
        optimizer.zero_grad(); loss.backward(); optimizer.step()
        monitor.step(step)
        if step % 4 == 0:
            torch.save({"net": net.state_dict(), "opt": optimizer.state_dict(), "step": step},
                       checkpoint + ".tmp")
            os.replace(checkpoint + ".tmp", checkpoint)
        time.sleep(pause)
    """
)


def _run(folder: Path, steps: int, pause: float) -> subprocess.Popen:
    script = folder / "train.py"
    script.write_text(TRAINING)
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    return subprocess.Popen([sys.executable, str(script), str(folder), str(steps), str(pause)],
                            env=env)  # fmt: skip


def _steps_in(path: Path) -> list[int]:
    if not path.exists():
        return []
    return sorted(set(read_log(path)["step"]))


@pytest.mark.slow
def test_a_killed_training_run_resumed_records_each_step_once(tmp_path, monkeypatch):
    log = tmp_path / "collapse.csv"
    killed = _run(tmp_path, steps=40, pause=0.1)
    deadline = time.time() + 120
    while max(_steps_in(log), default=-1) < 14 and time.time() < deadline:
        time.sleep(0.05)
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    assert max(_steps_in(log)) >= 14  # killed past its last checkpoint, before the end
    # the same script resumed, in this process (a second interpreter start costs ~10 s)
    monkeypatch.setattr(sys, "argv", ["train.py", str(tmp_path), "20", "0"])
    runpy.run_path(str(tmp_path / "train.py"), run_name="__main__")
    frame = read_log(log)
    counts = frame.groupby("step").size()
    assert counts.index.tolist() == list(range(0, 21, 2))
    assert (counts == 3 * 2 * 3).all()  # layers x samples x metrics, each step once


def _measure(steps, path, every=1, resume=False):
    net = ToyNet(NetConfig(n_layers=2, d_model=8, skip="on"))
    monitor = watch(net, blocks="blocks", inputs=random_tokens(2, 4, 8, seed=0), every=every,
                    metrics=["mu_rel"], logs=[CsvLog(path, resume=resume)])  # fmt: skip
    for step in steps:
        monitor.step(step)


def test_a_partial_tail_of_a_killed_write_is_dropped_before_the_next_append(tmp_path):
    path = tmp_path / "collapse.csv"
    _measure(range(3), path)
    whole = path.read_text()
    last_step = whole.splitlines()[-6:]  # step 2: 3 layers x 2 samples
    path.write_text(whole[: whole.index("\n".join(last_step))] + "\n".join(last_step[:2]) + "\n2,")
    assert read_log(path).groupby("step").size().to_dict() == {0: 6, 1: 6, 2: 2}
    _measure(range(2, 4), path, resume=True)  # the run goes on from its last complete step
    assert read_log(path).groupby("step").size().to_dict() == {0: 6, 1: 6, 2: 6, 3: 6}


def test_a_log_holding_the_new_monitor_s_steps_is_refused_unless_resumed(tmp_path):
    path = tmp_path / "collapse.csv"
    _measure(range(5), path)
    before = path.read_bytes()
    held = (
        r"already holds steps 2, 3, 4 of this monitor's metrics, at or after its first step \(2\)"
    )
    fix = r"Pass CsvLog\('.*collapse.csv', resume=True\) to record them again from step 2"
    with pytest.raises(InputError, match=f"{held}.*{fix}.*another file"):
        _measure(range(2, 4), path)
    assert path.read_bytes() == before  # nothing measured, nothing changed
    _measure(range(5, 7), path)  # a run going on past the log's last step appends
    assert read_log(path)["step"].unique().tolist() == list(range(7))
    _measure(range(2), path, resume=True)  # asked: the steps from 0 on are recorded again
    assert read_log(path)["step"].unique().tolist() == [0, 1]


def test_resume_takes_true_or_false(tmp_path):
    with pytest.raises(ConfigError, match=r"CsvLog\(resume='yes'\): resume is True"):
        CsvLog(tmp_path / "collapse.csv", resume="yes")


def test_a_log_of_another_setup_or_format_is_refused_not_overwritten(tmp_path):
    path = tmp_path / "collapse.csv"
    _measure(range(3), path)
    net = ToyNet(NetConfig(n_layers=2, d_model=8))
    before = path.read_text()
    with pytest.raises(InputError, match=r"another monitor setup \(metrics: the log's \['mu_rel'\], "
                       r"this monitor's \['mu_rel', 'cos_mean'\]\)"):  # fmt: skip
        watch(net, blocks="blocks", inputs=random_tokens(2, 4, 8, seed=0),
              metrics=["mu_rel", "cos_mean"], logs=[CsvLog(path)])  # fmt: skip
    assert path.read_text() == before
    foreign = tmp_path / "notes.csv"
    foreign.write_text("a,b\n1,2\n")
    with pytest.raises(InputError, match="not a monitor log's"):
        read_log(foreign)
    with pytest.raises(InputError, match="^no file at '.*missing.csv'; pass the CSV a monitor"):
        read_log(tmp_path / "missing.csv")


def test_the_csv_holds_the_monitor_columns_and_exact_values(tmp_path):
    path = tmp_path / "collapse.csv"
    net = ToyNet(NetConfig(n_layers=2, d_model=8))
    monitor = watch(net, blocks="blocks", inputs=random_tokens(2, 4, 8, seed=0),
                    logs=[CsvLog(path)])  # fmt: skip
    rows = monitor.step(0)
    stored = read_log(path)
    assert list(stored.columns) == list(COLUMNS)
    assert stored["value"].tolist() == rows["value"].tolist()
    assert stored["at_floor"].tolist() == rows["at_floor"].tolist()


def test_tensorboard_gets_per_layer_means(tmp_path):
    pytest.importorskip("tensorboard", reason="the tensorboard extra is not installed")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from rankcollapse.measure.monitor import TensorBoardLog

    net = ToyNet(NetConfig(n_layers=2, d_model=8))
    board = TensorBoardLog(tmp_path / "tb")
    monitor = watch(net, blocks="blocks", inputs=random_tokens(3, 4, 8, seed=0), every=2,
                    metrics=["mu_rel"], logs=[board])  # fmt: skip
    frames = [monitor.step(step) for step in range(5)]
    board.close()
    events = EventAccumulator(str(tmp_path / "tb"))
    events.Reload()
    scalars = events.Scalars("collapse/mu_rel/transformer/layer_01")
    assert [s.step for s in scalars] == [0, 2, 4]
    expected = frames[2].query("layer == 1")["value"].mean()
    assert scalars[1].value == pytest.approx(expected, rel=1e-6)  # stored as float32
    assert torch.get_num_threads() >= 1


def _board(logdir, steps, **options):
    from rankcollapse.measure.monitor import TensorBoardLog

    board = TensorBoardLog(logdir, **options)
    net = ToyNet(NetConfig(n_layers=2, d_model=8, skip="on", seed=0))
    monitor = watch(net, blocks="blocks", inputs=random_tokens(2, 4, 8, seed=0),
                    metrics=["mu_rel"], every=1, logs=[board])  # fmt: skip
    for step in steps:
        monitor.step(step)
    monitor.close()


def test_a_tensorboard_folder_holding_the_new_monitor_s_steps_is_refused_unless_resumed(tmp_path):
    pytest.importorskip("tensorboard", reason="the tensorboard extra is not installed")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    logdir = tmp_path / "tb"
    _board(logdir, range(4))
    with pytest.raises(InputError, match=r"the TensorBoard folder '.*tb' already holds steps 2, 3 "
                       r".*TensorBoardLog\('.*tb', resume=True\)"):  # fmt: skip
        _board(logdir, range(2, 5))
    _board(logdir, range(4, 6))  # going on past its last step appends
    _board(logdir, range(5, 7), resume=True)  # asked: step 5 on again (TensorBoard's purge)
    events = EventAccumulator(str(logdir))
    events.Reload()
    steps = [s.step for s in events.Scalars("collapse/mu_rel/transformer/layer_01")]
    assert steps == list(range(7))


def test_a_tensorboard_log_on_a_file_is_refused_when_made(tmp_path):
    pytest.importorskip("tensorboard", reason="the tensorboard extra is not installed")
    from rankcollapse.measure.monitor import TensorBoardLog

    notes = tmp_path / "notes.txt"
    notes.write_text("mine\n")
    with pytest.raises(ConfigError, match=r"TensorBoardLog\('.*notes.txt'\) is a file; pass a fo"):
        TensorBoardLog(notes)
    with pytest.raises(ConfigError, match=r"is inside the file '.*notes.txt'"):
        TensorBoardLog(notes / "runs")
    assert notes.read_text() == "mine\n"


def test_a_log_in_a_read_only_folder_is_refused_before_any_step(tmp_path, monkeypatch):
    real_access = os.access  # as root the modes do not bind: the check is os.access's answer
    monkeypatch.setattr(os, "access", lambda p, mode: mode != os.W_OK and real_access(p, mode))
    net = ToyNet(NetConfig(n_layers=2, d_model=8, skip="on", seed=0))
    with pytest.raises(ConfigError, match=r"CsvLog\('.*collapse.csv'\) is in a read-only folder"):
        watch(net, blocks="blocks", inputs=random_tokens(2, 4, 8, seed=0),
              logs=[CsvLog(tmp_path / "collapse.csv")])  # fmt: skip
    assert list(tmp_path.iterdir()) == []
    pytest.importorskip("tensorboard", reason="the tensorboard extra is not installed")
    from rankcollapse.measure.monitor import TensorBoardLog

    with pytest.raises(ConfigError, match=r"would be made in the read-only folder '.*'; pass a"):
        TensorBoardLog(tmp_path / "runs")
