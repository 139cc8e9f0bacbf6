"""The one output rule of every command that writes (probe, simulate, measure, compare, run,
report, reproduce, paths, qk-rank, plot-training), in the command line's words.

A command writes to a folder it owns: `--out` when given (checked by `files.check_output`: a
folder or one that can be made, never a file, a device or a path under a file; a folder of
someone else's files, of another command or of another config is refused with one line naming
what is there), else its default folder when that is free or holds this command's output of
this config, else a new folder beside it (`NAME-2`, `NAME-3`, ...), said on screen. No file the
command did not write is ever replaced. The checks run before any work; the folder is created
and marked (`files.MARKER`) when the first file is written (`Output.claim`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rich.text import Text

from rankcollapse.cli._console import console

FLAG = "--out"  # how every command names its output folder
MAX_TRIES = 10_000  # NAME-2 ... NAME-10000: far more calls than anyone keeps


@dataclass
class Output:
    """An output folder, checked before any work starts and claimed (created, marked ours)
    when its first file is written."""

    path: Path
    command: str
    config: str | None  # a hash of what decides the outputs, or None (any call of the command)
    label: str | None = None  # what it holds, in words, for `compare` to name its curves by

    def claim(self) -> Path:
        from rankcollapse.files import MARKER, claim_output

        claim_output(self.path, self.command, self.config, flag=FLAG, label=self.label)
        if any(entry.name not in (MARKER, ".lock") for entry in self.path.iterdir()):
            console.print(Text(f"overwriting the earlier results in {self.path}"))
        return self.path


def output_folder(
    out: Path | None,
    default: Path,
    command: str,
    *,
    config: str | None = None,
    fresh: bool = False,
    label: str | None = None,
) -> Output:
    """The folder a command writes to, checked by the one output rule before any work starts.

    `out` is --out (used as given, or refused). Without it: `default` when it is free (missing
    or empty) or, unless `fresh`, holds this command's output of this `config`; else the first
    such `default-2`, `default-3`, ... (a new folder per call with `fresh`, per config without).
    """
    from rankcollapse.files import check_output

    if out is not None:
        check_output(out, command, config, flag=FLAG)
        return Output(out, command, config, label)
    folder = next(
        (
            candidate
            for candidate in _candidates(default)
            if _free(candidate) or (not fresh and _ours(candidate, command, config))
        ),
        None,
    )
    if folder is None:
        from rankcollapse.errors import OutputError

        raise OutputError(
            f"{default}, {default}-2, ... up to -{MAX_TRIES} are all taken; pass {FLAG} "
            "with a new folder."
        )
    if folder != default:
        console.print(Text(f"writing to a new folder {folder} (pass {FLAG} to choose one)"))
    check_output(folder, command, config, flag=FLAG)
    return Output(folder, command, config, label)


def _candidates(default: Path):
    yield default
    for index in range(2, MAX_TRIES + 1):
        yield default.with_name(f"{default.name}-{index}")


def _free(folder: Path) -> bool:
    """Missing, or an empty folder (a name too long or under a file is left to the checks)."""
    try:
        return not folder.exists() or (folder.is_dir() and not any(folder.iterdir()))
    except (OSError, ValueError):
        return True  # check_output names the problem


def _ours(folder: Path, command: str, config: str | None) -> bool:
    """`folder` is marked as this command's output of this config."""
    from rankcollapse.files import read_marker

    marker = read_marker(folder) or {}
    return marker.get("command") == command and marker.get("config") == config
