"""A command-line process imports without the cyclic garbage collector and freezes what it
loaded (`rankcollapse.process`); a library user's process is left as it is."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from rankcollapse import process
from rankcollapse.process import map_forked

PROGRAM = textwrap.dedent(
    """
    import gc, sys
    sys.path.insert(0, sys.argv[1])
    open(sys.argv[1] + "/records_gc.py", "w").write("import gc\\nDURING = gc.isenabled()\\n")
    import rankcollapse.cli  # a library import changes nothing
    before = gc.isenabled(), gc.get_freeze_count()
    from rankcollapse.process import fast_imports
    fast_imports()
    import records_gc
    print(before, records_gc.DURING, gc.isenabled(), gc.get_freeze_count() > 0)
    """
)


def test_imports_run_without_the_collector_which_is_back_after_them(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, str(tmp_path)], capture_output=True, text=True, check=True
    )
    assert done.stdout.split() == ["(True,", "0)", "False", "True", "True"]


ENDING = textwrap.dedent(
    """
    import atexit, sys
    from pathlib import Path
    from rankcollapse.process import fast_imports, skip_teardown
    fast_imports()
    handler = Path(sys.argv[1])
    atexit.register(handler.write_text, "ran")  # a library's exit handler, registered later
    print("written before the end", end="")  # a pipe: still in the buffer at exit
    sys.exit(skip_teardown(3) if sys.argv[2] == "skip" else 3)
    """
)


def test_skip_teardown_ends_after_every_exit_handler_with_the_status_and_flushed_output(tmp_path):
    for mode in ("skip", "teardown"):  # the second arm shows the teardown the first skips
        handler = tmp_path / mode
        done = subprocess.run(  # -v: the interpreter says "# cleanup" as it tears modules down
            [sys.executable, "-v", "-c", ENDING, str(handler), mode], capture_output=True, text=True
        )
        assert (done.returncode, done.stdout) == (3, "written before the end")
        assert handler.read_text() == "ran"
        assert ("# cleanup" in done.stderr) == (mode == "teardown")


PARENT = os.getpid()  # the process that runs these tests (a pytest-xdist worker, say)
FORK = os.fork
linux = pytest.mark.skipif(sys.platform != "linux", reason="map_forked forks on Linux only")


def where(item: int) -> tuple[bytes, bytes]:
    """(item squared, the process that computed it), as bytes."""
    return str(item * item).encode(), str(os.getpid()).encode()


def decoded(results: list[tuple[bytes, ...]]) -> list[tuple[int, ...]]:
    return [tuple(int(part) for part in parts) for parts in results]


def here_only(item: int) -> tuple[bytes, bytes]:
    if os.getpid() != PARENT:
        raise RuntimeError("a child's failure")
    return where(item)


def killed_in_child(item: int) -> tuple[bytes, bytes]:
    if os.getpid() != PARENT:
        os.kill(os.getpid(), signal.SIGKILL)
    return where(item)


@linux
def test_map_forked_shares_the_items_out_and_returns_them_in_order():
    results = decoded(map_forked(where, range(5), processes=2))
    assert [value for value, _ in results] == [0, 1, 4, 9, 16]
    pids = [pid for _, pid in results]
    assert pids[0::2] == [PARENT] * 3  # this process: items 0, 2, 4
    assert len(set(pids[1::2])) == 1 and pids[1] != PARENT  # one child: items 1, 3


@linux
def test_byte_strings_of_any_number_and_length_come_back_whole():
    def parts(n: int) -> tuple[bytes, ...]:
        return tuple(bytes([n]) * size for size in (0, 1, 1 << 20)[:n])

    assert map_forked(parts, range(4), processes=3) == [parts(n) for n in range(4)]


@linux
@pytest.mark.parametrize("work", [here_only, killed_in_child])
def test_a_failed_or_killed_child_has_its_items_computed_here(work):
    results = decoded(map_forked(work, range(4), processes=3))
    assert results == [(i * i, PARENT) for i in range(4)]


def fails_here(item: int) -> tuple[bytes]:
    if os.getpid() == PARENT and item == 0:
        raise ValueError("item 0")
    return (b"",)


@linux
def test_an_error_here_is_raised_and_leaves_no_child_behind(monkeypatch):
    forked = []

    def fork() -> int:
        pid = FORK()
        forked.append(pid)
        return pid

    monkeypatch.setattr(os, "fork", fork)
    with pytest.raises(ValueError, match="item 0"):
        map_forked(fails_here, range(6), processes=3)
    assert len(forked) == 2
    for pid in forked:  # each child was waited for
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


def says_in_child(item: int) -> tuple[bytes]:
    if os.getpid() != PARENT:
        print(f"drawn apart: {item}", file=sys.stderr)
    return (b"",)


def streams(item: int) -> tuple[bytes, bytes]:
    return str(id(sys.stdout)).encode(), str(id(sys.stderr)).encode()


@linux
def test_what_a_child_says_reaches_the_standard_error_through_streams_of_its_own(capfd):
    assert map_forked(says_in_child, range(2), processes=2) == [(b"",), (b"",)]
    assert capfd.readouterr().err == "drawn apart: 1\n"
    # not the inherited objects, whose locks a thread here may have held at the fork
    here, child = decoded(map_forked(streams, range(2), processes=2))
    assert here == (id(sys.stdout), id(sys.stderr)) and set(child).isdisjoint(here)


def test_one_process_or_one_item_runs_here():
    me = os.getpid()
    assert decoded(map_forked(where, [3], processes=4)) == [(9, me)]
    assert decoded(map_forked(where, [1, 2], processes=1)) == [(1, me), (4, me)]


def test_a_process_that_goes_on_after_its_command_ends_as_it_would_without_a_successor():
    # only the console script says that its process ends with the command
    assert process.hand_over_end("rankcollapse.cli._figures:finish", "1", fds=[]) is False
