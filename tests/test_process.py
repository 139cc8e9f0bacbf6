"""A command-line process imports without the cyclic garbage collector and freezes what it
loaded (`rankcollapse.process`); a library user's process is left as it is."""

from __future__ import annotations

import subprocess
import sys
import textwrap

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
