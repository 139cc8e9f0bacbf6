"""Test-wide settings: nothing may reach a model hub, or any other host.

Besides the offline variables, every test runs with outgoing connections to any address but
this machine's loopback refused (`no_network`), so a code path that reaches for a hub fails
its test instead of passing on a machine that happens to be online.

Every draw a test makes is seeded: through its own `torch.Generator().manual_seed(...)` or
the `rng` fixture (a fresh generator per test), never the global stream, whose state depends
on which tests ran before (`make test-shuffled` runs the suite in random order);
tests/test_seeded_draws.py checks it. Property tests draw their examples from a seed their
source fixes (the `seeded` Hypothesis profile); `HYPOTHESIS_PROFILE=explore` draws new ones.
"""

import ipaddress
import os
import socket

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("MPLBACKEND", "Agg")

try:
    from hypothesis import settings
except ImportError:  # the dev extra brings it
    pass
else:
    settings.register_profile("seeded", derandomize=True, database=None)
    settings.register_profile("explore", derandomize=False)
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "seeded"))


class NetworkBlocked(OSError):
    """A test tried to open a connection to another host."""


def is_local(family: int, address) -> bool:
    """True for Unix sockets and loopback addresses (127.0.0.0/8, ::1, localhost)."""
    if family == getattr(socket, "AF_UNIX", None):
        return True
    host = address[0] if isinstance(address, tuple) else address
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(str(host).split("%")[0]).is_loopback
    except ValueError:  # a host name: it would need a lookup, and a lookup is network
        return False


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    """Make socket.connect/connect_ex to any non-loopback address raise NetworkBlocked."""
    real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex

    def guard(sock: socket.socket, address) -> None:
        if not is_local(sock.family, address):
            raise NetworkBlocked(f"tests may not reach the network; tried {address!r}")

    def connect(sock, address):
        guard(sock, address)
        return real_connect(sock, address)

    def connect_ex(sock, address):
        guard(sock, address)
        return real_connect_ex(sock, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)


@pytest.fixture
def rng():
    """A torch generator seeded afresh for each test: its draws never depend on test order."""
    import torch

    return torch.Generator().manual_seed(0)


@pytest.fixture
def no_hang():
    """A test whose reader opens a FIFO fails after 60 s instead of hanging (`fifos.no_hang`)."""
    from fifos import no_hang as guard

    with guard():
        yield


@pytest.fixture
def one_torch_thread():
    """One torch thread, as the runner's units use: tiny ops lose more to thread syncs than
    they gain. The count is put back after the test."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
