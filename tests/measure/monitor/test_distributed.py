"""The monitor under torch.distributed: a 2-process `torchrun` DDP training on the CPU (gloo)
finishes with one log written by rank 0 and no hang; which rank measures and which logs it
writes (per-rank files with ranks="every") is decided at the first step; a sharded model is
refused."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from rankcollapse.errors import ConfigError
from rankcollapse.measure.monitor import (
    CsvLog,
    MemoryLog,
    TensorBoardLog,
    distributed,
    read_log,
    watch,
)
from rankcollapse.nets import NetConfig, ToyNet, random_tokens

ROOT = Path(__file__).resolve().parents[3]
WORKER = Path(__file__).with_name("ddp_worker.py")


@pytest.mark.slow
def test_torchrun_ddp_training_on_two_cpu_processes_writes_one_log_and_never_hangs(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node",
               "2", str(WORKER), str(tmp_path), "--steps", "6", "--every", "2"]  # fmt: skip
    run = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, start_new_session=True)  # fmt: skip
    try:
        output, _ = run.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        os.killpg(run.pid, signal.SIGKILL)  # torchrun and both workers
        run.communicate()
        pytest.fail("the 2-process run hung (killed after 240 s)")
    assert run.returncode == 0, output[-2000:]
    assert sorted(p.name for p in tmp_path.glob("*.csv")) == ["collapse.csv"]
    log = read_log(tmp_path / "collapse.csv")
    assert log.groupby("step").size().to_dict() == {0: 12, 2: 12, 4: 12, 6: 12}  # 3 layers x 4
    losses = [json.loads((tmp_path / f"rank{r}.json").read_text())["losses"] for r in (0, 1)]
    assert all(len(run) == 6 for run in losses)


def ranked(monkeypatch, rank: int, world: int) -> None:
    monkeypatch.setattr(distributed, "process_rank", lambda: (rank, world))


def toy_monitor(logs, ranks=0):
    net = ToyNet(NetConfig(n_layers=1, d_model=4, skip="on", seed=0))
    return watch(net, blocks="blocks", inputs=random_tokens(2, 3, 4, seed=0), every=1,
                 metrics=["mu_rel"], logs=logs, ranks=ranks)  # fmt: skip


def test_only_the_measuring_rank_measures_and_writes(monkeypatch, tmp_path):
    ranked(monkeypatch, 1, 2)
    other = toy_monitor([CsvLog(tmp_path / "collapse.csv")])
    assert other.step(0) is None and other.measure(1) is None
    assert not (tmp_path / "collapse.csv").exists()
    chosen = toy_monitor([MemoryLog()], ranks=1)
    assert len(chosen.step(0)) == 4


def test_every_rank_writes_its_own_logs(monkeypatch, tmp_path):
    ranked(monkeypatch, 1, 2)
    memory = MemoryLog()
    monitor = toy_monitor([CsvLog(tmp_path / "collapse.csv"), memory], ranks="every")
    monitor.step(0)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["collapse.rank1.csv"]
    assert len(memory.frame) == 4
    assert TensorBoardLog.for_rank.__doc__ and callable(TensorBoardLog.for_rank)


@pytest.mark.parametrize(
    ("ranks", "world", "message"),
    [(2, 2, "ranks=2 but this run has 2 processes"), ("all", 1, "ranks must be")],
)
def test_a_rank_outside_the_run_is_refused(monkeypatch, ranks, world, message):
    ranked(monkeypatch, 0, world)
    with pytest.raises(ConfigError, match=message):
        toy_monitor([MemoryLog()], ranks=ranks).step(0)


def test_a_log_that_cannot_split_per_rank_is_refused_with_every(monkeypatch):
    ranked(monkeypatch, 0, 2)

    class Plain:
        def resume(self, step):
            pass

        def append(self, frame):
            pass

    with pytest.raises(ConfigError, match="cannot be split per rank"):
        toy_monitor([Plain()], ranks="every").step(0)


def test_a_sharded_model_is_refused_before_any_step():
    class FullyShardedDataParallel(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList([nn.Linear(4, 4)])

    with pytest.raises(ConfigError, match="sharded"):
        watch(FullyShardedDataParallel(), blocks="blocks", inputs=torch.zeros(1, 3, 4))


@pytest.mark.parametrize(("rank", "rows"), [(0, 4), (1, 0)])
def test_the_trainer_and_lightning_callbacks_step_every_process_and_the_monitor_picks(
    monkeypatch, rank, rows
):
    from types import SimpleNamespace

    from rankcollapse.measure.monitor.trainer import MonitorCallback as TrainerCallback

    ranked(monkeypatch, rank, 2)
    callbacks = [(TrainerCallback, lambda cb: cb.on_train_begin(None, SimpleNamespace(
        global_step=0, is_world_process_zero=rank == 0), None))]  # fmt: skip
    try:
        from rankcollapse.measure.monitor.lightning import MonitorCallback as LightningCallback
    except ImportError:
        pass  # the lightning extra is missing: the Trainer callback alone
    else:
        trainer = SimpleNamespace(global_step=0, is_global_zero=rank == 0)
        callbacks.append((LightningCallback, lambda cb: cb.on_train_start(trainer, None)))
    for callback, start in callbacks:
        log = MemoryLog()
        start(callback(toy_monitor([log])))
        assert len(log.frame) == rows, callback.__module__
