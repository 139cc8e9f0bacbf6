"""A real Ray cluster started the standard way (`ray start --head`, with token authentication as
Ray 2.5x enables it once a token exists), joined by `rankcollapse run --backend ray --address`;
and the addresses that must fail fast with a clear error."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from rankcollapse.errors import ConfigError
from rankcollapse.runner.backends import check_address, ray_session

ROOT = Path(__file__).resolve().parents[2]
RANKCOLLAPSE = [sys.executable, "-m", "rankcollapse.cli"]
SMALL = ["--set", "n_layers=2", "n_heads=1", "d_model=4", "n_tokens=4", "n_samples=2",
         "seeds=[0]", "variants=[san,san+skip]"]  # fmt: skip
SAME_FILES = ("results.csv", "claims.json")


def free_ports(n: int) -> list[int]:
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def ray_executable() -> str:
    pytest.importorskip("ray", reason='Ray is not installed (pip install -e ".[ray]")')
    ray = Path(sys.executable).with_name("ray")
    if not ray.exists():
        pytest.skip(f"the `ray` command is not installed beside {sys.executable}")
    return str(ray)


@pytest.fixture
def cluster(tmp_path: Path):
    """`ray start --head --block` on 127.0.0.1 with its own temporary folder, ports and home
    (whose ~/.ray/auth_token turns token authentication on); stopped by its process group."""
    ray = ray_executable()
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home)}
    env.pop("RAY_AUTH_MODE", None)
    env.pop("RAY_ADDRESS", None)
    subprocess.run([ray, "get-auth-token", "--generate"], env=env, check=True,
                   capture_output=True, timeout=600)  # fmt: skip
    assert (home / ".ray" / "auth_token").is_file()
    temp = Path(tempfile.mkdtemp(prefix="rc-ray-", dir="/tmp"))  # Ray's socket paths are short
    ports = free_ports(9)
    gcs, dashboard, node, objects, client, agent, agent_grpc, runtime, metrics = ports
    # the 41 worker ports must not hold another component's port (Ray refuses to start)
    low = next(p for p in free_ports(64) if not any(p <= q <= p + 40 for q in ports))
    command = [
        ray, "start", "--head", "--block", "--node-ip-address", "127.0.0.1", "--port", str(gcs),
        "--temp-dir", str(temp), "--num-cpus", "2", "--include-dashboard", "false",
        "--dashboard-port", str(dashboard), "--disable-usage-stats",
        "--node-manager-port", str(node), "--object-manager-port", str(objects),
        "--ray-client-server-port", str(client), "--dashboard-agent-listen-port", str(agent),
        "--dashboard-agent-grpc-port", str(agent_grpc), "--runtime-env-agent-port", str(runtime),
        "--metrics-export-port", str(metrics),
        "--min-worker-port", str(low), "--max-worker-port", str(low + 40),
    ]  # fmt: skip
    log = tmp_path / "ray-start.log"
    with open(log, "wb") as out:
        head = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 600  # minutes: a loaded 2-core machine starts Ray slowly
        while "Ray runtime started" not in log.read_text(errors="replace"):
            assert head.poll() is None, f"ray start ended:\n{log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"ray start hung:\n{log.read_text()[-3000:]}"
            time.sleep(0.5)
        assert "Token authentication is enabled" in log.read_text()
        yield f"127.0.0.1:{gcs}", env
    finally:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(head.pid, sig)  # the group of the process started here, only
            except ProcessLookupError:
                break
            time.sleep(3)
        head.wait(timeout=300)
        shutil.rmtree(temp, ignore_errors=True)


@pytest.mark.slow
def test_a_cluster_started_with_ray_start_is_joined_and_gives_the_files_of_jobs_1(
    cluster, tmp_path
):
    address, env = cluster
    env = {**env, "PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1"}
    joined = subprocess.run(
        [*RANKCOLLAPSE, "run", "toy-collapse", *SMALL, "--backend", "ray", "--address", address,
         "--out", str(tmp_path / "ray")],
        env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert joined.returncode == 0, joined.stderr[-3000:]
    alone = subprocess.run(
        [*RANKCOLLAPSE, "run", "toy-collapse", *SMALL, "--jobs", "1", "--out",
         str(tmp_path / "one")],
        env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert alone.returncode == 0, alone.stderr[-3000:]
    for name in SAME_FILES:
        assert (tmp_path / "ray" / name).read_bytes() == (tmp_path / "one" / name).read_bytes()
    manifest = json.loads((tmp_path / "ray" / "manifest.json").read_text())
    assert {w["backend"] for w in manifest["units_where"]} == {"ray"}


@pytest.mark.parametrize(
    "address", ["not an address", "127.0.0.1", "127.0.0.1:0", "127.0.0.1:65536", ":6379", "h:p"]
)
def test_an_address_that_is_not_host_and_port_is_refused(address):
    with pytest.raises(ConfigError, match=r"is not HOST:PORT .* e\.g\. 127\.0\.0\.1:6379"):
        check_address(address)


def test_host_and_port_are_read_from_an_address():
    assert check_address("[::1]:6379") == ("::1", 6379)
    assert check_address("head-node.local:10001") == ("head-node.local", 10001)


def test_a_closed_port_fails_within_seconds_with_a_clear_error():
    pytest.importorskip("ray", reason='Ray is not installed (pip install -e ".[ray]")')
    (port,) = free_ports(1)
    start = time.monotonic()
    with (
        pytest.raises(ConfigError, match=f"no Ray cluster answers at 127.0.0.1:{port}"),
        ray_session(1, f"127.0.0.1:{port}"),
    ):
        pass
    assert time.monotonic() - start < 10


def test_a_port_that_accepts_but_is_not_ray_fails_within_seconds_with_a_clear_error():
    pytest.importorskip("ray", reason='Ray is not installed (pip install -e ".[ray]")')
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def answer_http() -> None:
        connection, _ = server.accept()
        connection.sendall(b"HTTP/1.0 400 Bad Request\r\n\r\n")
        connection.close()

    threading.Thread(target=answer_http, daemon=True).start()
    start = time.monotonic()
    try:
        with (
            pytest.raises(ConfigError, match="is not a Ray cluster"),
            ray_session(1, f"127.0.0.1:{port}"),
        ):
            pass
    finally:
        server.close()
    assert time.monotonic() - start < 10
