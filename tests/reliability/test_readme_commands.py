"""The README's shell lines paste into bash as written: no `<placeholder>` (bash reads `<hash>`
as a redirection from a file named hash), and every block parses (`bash -n`)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def bash_blocks() -> list[str]:
    return re.findall(r"^```bash\n(.*?)^```", README.read_text(), re.DOTALL | re.MULTILINE)


def test_readme_shell_lines_paste_into_bash_as_written():
    blocks = bash_blocks()
    assert blocks
    for block in blocks:
        code = "\n".join(line.split("  #")[0] for line in block.splitlines())
        assert not re.search(r"<[\w -]+>", code), code
        subprocess.run(["bash", "-n"], input=code, text=True, check=True)
    assert 'rankcollapse report "$RUN"' in "".join(blocks)
