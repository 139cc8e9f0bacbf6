"""Where units run: in this process, in spawned worker processes, or as Ray tasks.

Every backend calls `finished(i, rows, seconds, where)` in the driver as task `i` finishes (so
the driver alone writes unit files, and progress counts units as they finish), runs the
`FollowUp` it may return (a report: on a pool worker before any unit not yet started, else in
the driver), and runs every
unit through `call_unit`: its torch threads, its time, the node and device it ran on, and a
failure as data (type, message, traceback) rather than an exception that must cross processes.
The tasks may come from several experiments (`run all`): one set of workers runs them all, in
the order given.

    process, jobs=1   in this process, tasks in order
    process, jobs=N   N spawned processes (fork is unsafe with torch's threads); units on a GPU
                      share it, N at a time
    ray, jobs=N       one Ray task per unit (num_cpus=1, and num_gpus=1/N for a unit on a
                      GPU, so N share one): a local Ray instance with N CPUs, started and shut
                      down here, or the cluster at `address`

A worker unpickles `run_unit` by reference, which imports that experiment's module alone (see
`rankcollapse.experiments`), and keeps what it loaded (pretrained models are cached per
process) for the next unit it gets. A CPU unit runs with `UNIT_THREADS` (one) torch thread,
whatever `jobs` is, so its rows do not depend on `jobs` (a test compares the files of 1 and 2
workers byte for byte); `default_jobs` is one worker per core (a unit on an accelerator: one
worker), so a default run uses every core.

On the first failure no new unit starts; units already running finish and are stored (process
pool) or are cancelled (Ray), and the failure is raised as `UnitFailure`. Ctrl-C cancels every
outstanding unit; whatever finished is stored. Pool workers whose driver is killed outright exit
within a second (`exit_with_parent`). Workers import without the garbage collector
(`rankcollapse.process`).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import multiprocessing
import os
import pickle
import platform
import re
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import (
    FIRST_COMPLETED,
    BrokenExecutor,
    Future,
    ProcessPoolExecutor,
    wait,
)
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, overload

from pydantic import BaseModel

from rankcollapse.lazy import lazy_module
from rankcollapse.errors import ConfigError, install_extra, missing_extra
from rankcollapse.process import cpu_cores, fast_imports

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy_module("pandas")

BACKENDS = ("process", "ray")
RAY_EXTRA = install_extra("ray")


@dataclass(frozen=True)
class FollowUp:
    """Work that a finished unit makes due (an experiment's report, once its last unit is
    stored): `done(function())` in the driver. Pool workers run it before any unit not yet
    started, so reports are built on every core, beside the units; other backends run it here.
    """

    function: Callable[[], Any]  # picklable: it may run in a worker
    done: Callable[[Any], None]

    def run_here(self) -> None:
        self.done(self.function())


# (task, rows, seconds, where) -> the follow-up it makes due, if any
Finished = Callable[[int, "pd.DataFrame", float, dict], FollowUp | None]


@dataclass
class Failed:
    """A unit that raised, as plain text (it crosses process and node boundaries)."""

    kind: str
    message: str
    traceback: str
    died: bool = False  # the worker died (out of memory, a signal): a rerun may well succeed


class UnitFailure(Exception):
    """Task `index` raised; `failed` holds what it raised and where."""

    def __init__(self, index: int, failed: Failed) -> None:
        super().__init__(f"task {index}: {failed.kind}: {failed.message}")
        self.index, self.failed = index, failed


def check_backend(backend: str, jobs: int) -> None:
    """Raise ConfigError for an unknown backend, jobs < 1, or Ray without its extra."""
    if backend not in BACKENDS:
        raise ConfigError(f"backend is {backend!r}; choose one of {', '.join(BACKENDS)}.")
    if jobs < 1:
        raise ConfigError(f"jobs is {jobs}; it must be at least 1 (the number of workers).")
    if backend == "ray":
        _import_ray()


UNIT_THREADS = 1
"""Torch (OpenMP, BLAS) threads of a CPU unit, whatever `jobs` is. Results depend on the thread
count (a sum or product split over threads adds in another order): with 2 threads instead of
1, the quick presets' results moved by up to 1e-15 (float64 metrics) and, through training, by
0.03 (dong2021-circle). One thread per unit keeps every run's files byte-identical for any
`jobs`; the machine's cores are used by running one unit per core (`default_jobs`)."""


def default_jobs(configs: Iterable[BaseModel]) -> int:
    """Workers when none are asked for: one per core for CPU units (each then has one thread,
    which small units run fastest with); one when a unit runs on an accelerator (`--jobs N`
    shares it among N)."""
    if any(_device_type(config) != "cpu" for config in configs):
        return 1
    return cpu_cores()


# Memory one pool worker takes (torch, the experiment's module, one small unit); measured
# about 350 MB on 2 cores (issue 34: 200 units of --jobs 10000 passed 6 GB in 24 s).
WORKER_BYTES = 350_000_000


def cap_jobs(jobs: int, *, remote: bool = False) -> tuple[int, str | None]:
    """`jobs` capped by this machine: at most one worker per core and as many as the available
    memory holds at `WORKER_BYTES` each (at least 1). Returns the jobs and, when capped, a
    sentence saying why; a remote Ray cluster (`remote`) brings its own cores: no cap.

    Example:
        >>> cap_jobs(1)
        (1, None)
    """
    from rankcollapse.process import available_memory
    from rankcollapse.sizes import gigabytes

    if remote:
        return jobs, None
    cores, memory = cpu_cores(), available_memory()
    limit = max(1, min(cores, memory // WORKER_BYTES))
    if jobs <= limit:
        return jobs, None
    return limit, (
        f"--jobs {jobs} capped to {limit}: this machine has {cores} core(s) and "
        f"{gigabytes(memory)} of memory available, about {gigabytes(WORKER_BYTES)} per worker"
    )


def call_unit(
    run_unit: Callable, config: BaseModel, unit: dict, threads: int = 1
) -> tuple[Any, float, dict]:
    """Run one unit: (rows or Failed, seconds, where it ran). A CPU unit runs with `threads`
    torch threads and subnormal numbers flushed to zero.

    Flushed subnormals (below the smallest normal float: their entries are at the floor,
    flagged so by the metric suite): CPU arithmetic on them is slow, so a 128-layer BERT
    without skips or norms, whose query-key products underflow float32 from about layer 40,
    ran 18 x slower (measured 141.8 s against 7.7 s for one curve of 4 windows). Both settings
    return to torch's defaults afterwards (flushing off); a unit on an accelerator keeps them.
    """
    import torch

    on_cpu = _device_type(config) == "cpu"
    before = torch.get_num_threads()
    if on_cpu:
        torch.set_num_threads(threads)
        torch.set_flush_denormal(True)
    start = time.perf_counter()
    try:
        rows = run_unit(config, unit)
    except Exception as err:  # noqa: BLE001 - any error of a unit is reported, with its traceback
        rows = Failed(type(err).__name__, str(err), traceback.format_exc())
    finally:
        if on_cpu:
            torch.set_num_threads(before)
            torch.set_flush_denormal(False)
    return rows, time.perf_counter() - start, {"node": platform.node(), "device": _device(config)}


def _device(config: BaseModel) -> str:
    """The device a unit ran on: its config's `device` field (a `Device` field is parsed with
    the config; a plain name, "auto" included, by the same `parse_device`), else the CPU."""
    from rankcollapse.devices import parse_device

    return str(parse_device(getattr(config, "device", "cpu")))


def _device_type(config: BaseModel) -> str:
    """The kind of device a unit of `config` runs on: cpu, cuda or mps (`device_kind`: a
    device given by name is answered without importing torch)."""
    from rankcollapse.devices import device_kind

    return device_kind(getattr(config, "device", "cpu"))


@dataclass(frozen=True)
class Task:
    """One unit to run: `run_unit(config, unit)`."""

    run_unit: Callable
    config: BaseModel
    unit: dict


def run_units(
    backend: str, tasks: Sequence[Task], finished: Finished, jobs: int, address: str | None = None
) -> None:
    """Run `tasks` on `backend` with `jobs` workers, calling `finished` as each one ends."""
    if backend == "ray":
        with ray_session(jobs, address):
            _run_ray(tasks, finished, jobs)
    elif jobs == 1:
        for i, t in enumerate(tasks):
            rows = call_unit(t.run_unit, t.config, t.unit, UNIT_THREADS)
            if follow_up := _deliver(i, *rows, finished):
                follow_up.run_here()
    else:
        _run_processes(tasks, finished, jobs)


# A dead pool process fails every unit it had not finished, so the pool cannot say whose it was.
POOL_DIED = "a worker process (running this unit or another one started with it)"
RAY_DIED = "the Ray worker running this unit"


def _result(get: Callable[[], Any], died: type[BaseException], who: str) -> tuple[Any, float, dict]:
    """What a unit's worker returned, or a `Failed` when `who` died before returning (killed
    for memory or by a signal, or its node lost): `died` is the backend's error for that."""
    try:
        return get()
    except died as err:
        message = (
            f"{who} died before it returned (out of memory, killed by a signal, or its node "
            "lost); finished units are kept: rerun the same command to resume"
        )
        return Failed(type(err).__name__, message, str(err), died=True), 0.0, {}


def _deliver(i: int, rows: Any, seconds: float, where: dict, finished: Finished) -> FollowUp | None:
    if isinstance(rows, Failed):
        raise UnitFailure(i, rows)
    return finished(i, rows, seconds, where)


def _run_processes(tasks: Sequence[Task], finished: Finished, jobs: int) -> None:
    for t in {id(t.config): t for t in tasks}.values():
        try:
            pickle.dumps((t.run_unit, t.config))  # a check only: workers receive them pickled
        except Exception as err:
            raise TypeError(
                f"run_unit and Config must be module-level (picklable) to run with jobs > 1 "
                f"({err}); use jobs=1 or move them to module level."
            ) from err
    with process_pool(jobs) as pool:
        waiting = deque(range(len(tasks)))  # units not yet submitted, in the order given
        follow_ups: deque[FollowUp] = deque()
        futures: dict[Future, tuple[int, int | FollowUp]] = {}  # -> (submission, what)
        submitted, failure = itertools.count(), None

        def submit() -> None:
            """Every worker busy and one task queued (a follow-up waits for one unit at most);
            follow-ups first; after a failure, no new unit."""
            what: int | FollowUp
            while len(futures) <= jobs and (follow_ups or (waiting and not failure)):
                if follow_ups:
                    what = follow_ups.popleft()
                    future = pool.submit(what.function)
                else:
                    what, t = waiting[0], tasks[waiting.popleft()]
                    future = pool.submit(call_unit, t.run_unit, t.config, t.unit, UNIT_THREADS)
                futures[future] = (next(submitted), what)

        try:
            submit()
            while futures:
                done, _ = wait(futures, return_when=FIRST_COMPLETED)
                for future in sorted(done, key=lambda f: futures[f][0]):
                    _, what = futures.pop(future)
                    if future.cancelled():
                        continue
                    if isinstance(what, FollowUp):
                        what.done(future.result())
                        continue
                    try:
                        rows = _result(future.result, BrokenExecutor, POOL_DIED)
                        if follow_up := _deliver(what, *rows, finished):
                            follow_ups.append(follow_up)
                    except UnitFailure as err:
                        failure = failure or err
                if failure:  # let running units finish and be stored; start no new ones
                    for future, (_, what) in futures.items():
                        if not isinstance(what, FollowUp):
                            future.cancel()
                submit()
        except BaseException:
            for future in futures:
                future.cancel()
            raise
    if failure:
        raise failure


_POOLS: dict[int, ProcessPoolExecutor] = {}  # open process sessions, by number of workers
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


@contextlib.contextmanager
def environment(values: dict[str, str]) -> Iterator[None]:
    """os.environ with `values` set inside the block, restored after it."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextlib.contextmanager
def process_pool(jobs: int) -> Iterator[ProcessPoolExecutor]:
    """The pool of the enclosing process session with `jobs` workers, else a new one for the
    block. A session lets every experiment of `run all` share workers that are already up."""
    if jobs in _POOLS:
        yield _POOLS[jobs]
        return
    # spawn: a fresh interpreter per worker, safe with torch's own threads (fork is not).
    # Workers start when tasks are submitted and read the thread limits from the environment
    # as they load their libraries, so the variables are set while the pool lives.
    with environment(dict.fromkeys(THREAD_VARIABLES, str(UNIT_THREADS))):
        pool = ProcessPoolExecutor(
            jobs,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=start_worker,
            initargs=(os.getpid(),),
        )
        _POOLS[jobs] = pool
        try:
            yield pool
        finally:
            del _POOLS[jobs]
            pool.shutdown(wait=True, cancel_futures=True)


def start_worker(parent: int) -> None:
    """A pool worker's initializer: imports without the garbage collector
    (`rankcollapse.process`), and an exit once process `parent` is gone."""
    fast_imports()
    exit_with_parent(parent)


def exit_with_parent(parent: int, poll_seconds: float = 0.5) -> None:
    """Make this worker exit once process `parent` is gone.

    A driver killed by SIGKILL or SIGTERM cannot shut its pool down, and an orphaned worker
    would compute its unit to the end (minutes, gigabytes) for nobody: a daemon thread polls
    the parent id, which changes when the parent dies, and ends the worker at once.
    """

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_seconds)
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise missing_extra("--backend ray", "ray", "use --backend process") from None
    return ray


@contextlib.contextmanager
def ray_session(jobs: int, address: str | None = None) -> Iterator[None]:
    """Join the Ray cluster at `address`, or start a local one with `jobs` CPUs; shut down
    after only what was started here (an already initialised Ray is used as it is)."""
    ray = _import_ray()
    if ray.is_initialized():
        yield
        return
    if address:
        _join_cluster(ray, address)
    else:
        # Workers import what this process imports (e.g. a source checkout before the install);
        # a local instance listens on the loopback only, not on the machine's network.
        path = os.pathsep.join(p for p in sys.path if p)
        ray.init(
            num_cpus=jobs,
            include_dashboard=False,
            log_to_driver=False,
            runtime_env={
                "env_vars": {
                    "PYTHONPATH": path,
                    **dict.fromkeys(THREAD_VARIABLES, str(UNIT_THREADS)),
                }
            },
            _node_ip_address="127.0.0.1",
        )
    try:
        yield
    finally:
        ray.shutdown()


def gpu_share(config: BaseModel, jobs: int) -> float:
    """The GPUs a Ray task of `config` asks for: 1/jobs on CUDA (jobs units share one GPU),
    none elsewhere."""
    return 1.0 / jobs if _device_type(config) == "cuda" else 0.0


# HOST:PORT, the address `ray start --head` prints; HOST a name, an IPv4 or a [bracketed] IPv6.
RAY_ADDRESS = re.compile(
    r"(?P<host>[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\])"
    r":(?P<port>[0-9]{1,5})"
)
RAY_CONNECT_SECONDS = 10  # a TCP handshake takes milliseconds; a silent port must not hang


@overload
def check_address(address: str) -> tuple[str, int]: ...
@overload
def check_address(address: None) -> None: ...
def check_address(address: str | None) -> tuple[str, int] | None:
    """(host, port) of a Ray cluster address written HOST:PORT, or ConfigError; None for None.

    Example:
        >>> check_address("127.0.0.1:6379")
        ('127.0.0.1', 6379)
    """
    if address is None:
        return None
    match = RAY_ADDRESS.fullmatch(address.strip())
    if not match or not 1 <= int(match["port"]) <= 65535:
        raise ConfigError(
            f"--address {address!r} is not HOST:PORT with a port in 1-65535; pass the address "
            "`ray start --head` printed, e.g. 127.0.0.1:6379."
        )
    return match["host"].strip("[]"), int(match["port"])


def _join_cluster(ray: Any, address: str) -> None:
    """ray.init at `address`, bounded: a closed port, a silent one or one that does not answer
    gRPC (RAY_CONNECT_SECONDS), and a cluster that refuses this client (Ray's own 30 s) end in
    a ConfigError.

    A cluster with token authentication (Ray 2.5x enables it on `ray start --head` once a token
    exists) is joined with the token Ray finds: RAY_AUTH_TOKEN, the file at
    RAY_AUTH_TOKEN_PATH, or ~/.ray/auth_token; RAY_AUTH_MODE, when set, decides.
    """
    host, port = check_address(address)
    try:
        speaks_grpc = _answers_grpc(host, port)
    except OSError as err:
        raise ConfigError(
            f"no Ray cluster answers at {address} ({err.strerror or err}); start one with "
            "`ray start --head` and pass the address it prints, or leave out --address to start "
            "a local Ray."
        ) from None
    if not speaks_grpc:
        raise ConfigError(
            f"something listens at {address} but it is not a Ray cluster (no gRPC reply); pass "
            "the address `ray start --head` printed (its GCS port, 6379 by default)."
        )
    _use_token_if_found()
    try:  # Ray itself gives up on a port that answers but is not its GCS after about 30 s
        ray.init(address=f"{host}:{port}", log_to_driver=False)
    except Exception as err:  # noqa: BLE001 - ConnectionError, AuthenticationError, ...
        with contextlib.suppress(Exception):
            ray.shutdown()
        reason = " ".join(str(err).split())[:400] or type(err).__name__
        raise ConfigError(
            f"could not join the Ray cluster at {address} ({type(err).__name__}: {reason}); "
            "check the address `ray start --head` printed and, for a cluster with token "
            "authentication, that its token is in RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or "
            "~/.ray/auth_token."
        ) from None


# An HTTP/2 client's preface and an empty SETTINGS frame: a gRPC server (Ray's GCS) answers
# with its own SETTINGS frame (frame type 4 in byte 3 of the 9-byte header).
HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])


def _answers_grpc(host: str, port: int) -> bool:
    """Whether a gRPC server (as Ray's GCS) answers at host:port within RAY_CONNECT_SECONDS;
    OSError when nothing accepts the connection. Ray's own client waits minutes on a port that
    accepts but never answers gRPC."""
    import socket

    with socket.create_connection((host, port), timeout=RAY_CONNECT_SECONDS) as connection:
        connection.sendall(HTTP2_PREFACE)
        head = b""
        while len(head) < 9:
            try:
                chunk = connection.recv(9 - len(head))
            except TimeoutError:
                break
            if not chunk:
                break
            head += chunk
    return len(head) == 9 and head[3] == 4


def _use_token_if_found() -> None:
    """Token authentication on, as Ray does for a local cluster it finds itself, when a token
    is available and RAY_AUTH_MODE is unset (Ray does not do this for an explicit address)."""
    try:
        from ray._private.authentication import authentication_token_setup as auth
    except ImportError:  # a Ray without token authentication
        return
    quiet = logging.getLogger(auth.__name__)
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # its "token authentication is enabled" notice
    try:
        auth.maybe_enable_token_auth_if_token_available(warn_if_disabled=False)
    finally:
        quiet.setLevel(level)


def _run_ray(tasks: Sequence[Task], finished: Finished, jobs: int) -> None:
    ray = _import_ray()
    remote = ray.remote(num_cpus=1, max_retries=0)(call_unit)
    refs: dict[int, tuple[Any, Any]] = {}  # id(config) -> (run_unit, config) in the object store
    for t in tasks:
        if id(t.config) not in refs:
            refs[id(t.config)] = (ray.put(t.run_unit), ray.put(t.config))
    pending = {
        remote.options(num_gpus=gpu_share(t.config, jobs)).remote(
            *refs[id(t.config)], t.unit, UNIT_THREADS
        ): i
        for i, t in enumerate(tasks)
    }
    try:
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                rows = _result(partial(ray.get, ref), ray.exceptions.RayError, RAY_DIED)
                if follow_up := _deliver(pending.pop(ref), *rows, finished):
                    follow_up.run_here()  # in the driver, while the cluster runs units
    except BaseException:  # a failed unit, Ctrl-C, a lost node: nothing else may start
        for ref in pending:
            ray.cancel(ref)  # the worker stays up; its unit stops with KeyboardInterrupt
        for ref in pending:  # return only once no cancelled unit can still be computing
            with contextlib.suppress(Exception):
                ray.get(ref, timeout=30)
        raise
