"""The copyable torchrun example of the README (examples/monitor_ddp.py) runs as documented:
two CPU processes (gloo) train, rank 0 writes one log of every measured step; started again on
the same folder it is refused, nothing changed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from rankcollapse.measure.monitor import read_log

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "monitor_ddp.py"


def torchrun(out: Path, *options: str) -> subprocess.CompletedProcess:
    """`torchrun --standalone --nproc_per_node 2 examples/monitor_ddp.py OUT ...`, killed
    (torchrun and both workers) past a deadline fit for a loaded 2-core machine."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node",
               "2", str(EXAMPLE), str(out), *options]  # fmt: skip
    run = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, start_new_session=True)  # fmt: skip
    try:
        output, _ = run.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        os.killpg(run.pid, signal.SIGKILL)
        run.communicate()
        pytest.fail("the 2-process example hung (killed after 300 s)")
    return subprocess.CompletedProcess(command, run.returncode, output)


@pytest.mark.slow
@pytest.mark.skipif(
    not torch.distributed.is_available(), reason="this torch build has no torch.distributed"
)
def test_the_torchrun_example_writes_rank_0_s_log_and_a_second_start_is_refused(tmp_path):
    out = tmp_path / "ddp-out"
    done = torchrun(out, "--steps", "4", "--every", "2")
    assert done.returncode == 0, done.stdout[-2000:]
    log = read_log(out / "collapse.csv")
    assert sorted(p.name for p in out.glob("*.csv")) == ["collapse.csv"]
    # 3 layers x 4 samples x 3 metrics, every measured step once
    assert log.groupby("step").size().to_dict() == {0: 36, 2: 36, 4: 36}
    before = (out / "collapse.csv").read_bytes()
    again = torchrun(out, "--steps", "4", "--every", "2")
    assert again.returncode != 0
    assert "already holds steps 0, 2, 4" in again.stdout and "resume=True" in again.stdout
    assert (out / "collapse.csv").read_bytes() == before
