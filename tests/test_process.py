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
