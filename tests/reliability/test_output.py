"""Output problems: a folder that cannot be written fails before any unit runs, a write that
fails midway leaves no half-written file, and files get the permissions of the umask."""

from __future__ import annotations

import errno
import os
import stat
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runner"))
from tiny_experiment import TINY

from rankcollapse import files
from rankcollapse.errors import OutputError
from rankcollapse.runner import run_experiment


def run_tiny(tmp_path: Path, out: Path):
    return run_experiment(TINY, overrides={"log_dir": str(tmp_path)}, out=out)


def failing(real, errnum: int, when):
    """`real` (os.open, os.replace, ...), raising OSError(errnum) when `when(args)` holds."""

    def call(*args, **kwargs):
        if when(args):
            raise OSError(errnum, os.strerror(errnum))
        return real(*args, **kwargs)

    return call


def leftovers(folder: Path) -> list[str]:
    return [p.name for p in folder.rglob("*") if p.name.endswith(files.TMP_SUFFIX)]


@pytest.mark.parametrize(
    "errnum, says",
    [
        (errno.EACCES, "the folder is not writable by you; fix its permissions or write elsewhere"),
        (errno.EROFS, "the file system is read-only; write to a writable disk"),
        (errno.ENOSPC, "the disk is full; free some space or write to another disk"),
    ],
)
def test_an_unwritable_output_folder_fails_before_any_unit_runs(
    tmp_path, monkeypatch, errnum, says
):
    out = tmp_path / "run"
    monkeypatch.setattr(files.os, "open", failing(os.open, errnum, lambda a: str(out) in str(a[0])))
    with pytest.raises(
        OutputError, match=f"cannot write '{out}/.write-probe-[0-9a-f]+': .*; {says}"
    ):
        run_tiny(tmp_path, out)
    assert not (tmp_path / "calls.log").exists()  # no unit ran
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("name", ["results.csv", "claims.json", "report.html"])
def test_a_disk_that_fills_while_writing_leaves_no_half_written_file(tmp_path, monkeypatch, name):
    out = tmp_path / "run"
    run_tiny(tmp_path, out)
    before = (out / name).read_bytes()
    (out / name).write_bytes(before + b"an older version\n")
    full = failing(os.fsync, errno.ENOSPC, lambda a: True)
    real_replace = os.replace

    def replace(src, dst, *args, **kwargs):  # the disk fills while `name` is written
        if Path(dst).name == name:
            monkeypatch.setattr(files.os, "fsync", full)
            files.os.fsync(0)
        return real_replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(files.os, "replace", replace)
    with pytest.raises(OutputError, match=f"cannot write '{out / name}': .*disk is full"):
        run_tiny(tmp_path, out)
    assert (out / name).read_bytes() == before + b"an older version\n"  # the old file, whole
    assert leftovers(out) == []


def test_a_write_error_removes_the_temporary_file_and_keeps_the_old_one(tmp_path, monkeypatch):
    target = tmp_path / "a.txt"
    files.write_atomic(target, b"old")
    monkeypatch.setattr(files.os, "fsync", failing(os.fsync, errno.ENOSPC, lambda a: True))
    with pytest.raises(OutputError, match="a.txt'.*disk is full.*No file was left half-written"):
        files.write_atomic(target, b"new")
    assert target.read_bytes() == b"old" and leftovers(tmp_path) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores permissions; simulated above")
def test_a_read_only_folder_fails_with_a_clear_error(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    out.chmod(0o555)
    try:
        with pytest.raises(OutputError, match="not writable by you"):
            run_tiny(tmp_path, out)
    finally:
        out.chmod(0o755)


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_written_files_get_the_permissions_of_the_umask(tmp_path, umask, mode):
    old = os.umask(umask)
    try:
        run_tiny(tmp_path, tmp_path / "run")
    finally:
        os.umask(old)
    written = [p for p in (tmp_path / "run").rglob("*") if p.is_file() and p.name != ".lock"]
    assert len(written) >= 10  # config, manifest, results, claims, report, units, figures, ...
    assert {p.name: stat.S_IMODE(p.stat().st_mode) for p in written} == {
        p.name: mode for p in written
    }


def test_write_changed_writes_only_new_bytes_and_never_through_a_link(tmp_path):
    target = tmp_path / "a.txt"
    assert files.write_changed(target, b"one") and target.read_bytes() == b"one"
    stamp = target.stat().st_mtime_ns, target.stat().st_ino
    assert not files.write_changed(target, b"one")  # the same bytes: left as it is
    assert (target.stat().st_mtime_ns, target.stat().st_ino) == stamp
    assert files.write_changed(target, b"onetwo") and target.read_bytes() == b"onetwo"
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_bytes(b"same")
    link = tmp_path / "link.txt"
    link.symlink_to(elsewhere)
    assert files.write_changed(link, b"same")  # a link is replaced by a file, never followed
    assert not link.is_symlink() and elsewhere.read_bytes() == b"same"


def test_a_run_of_stored_units_probes_its_folder_once_and_keeps_its_config_file(
    tmp_path, monkeypatch
):
    out = tmp_path / "run"
    run_tiny(tmp_path, out)
    config = (out / "config.yaml").stat().st_ino
    opened = []
    real_open = os.open
    monkeypatch.setattr(files.os, "open", lambda path, *a, **k: opened.append(Path(path).name)
                        or real_open(path, *a, **k))  # fmt: skip
    run_tiny(tmp_path, out)
    assert sum(name.startswith(".write-probe-") for name in opened) == 1
    assert (out / "config.yaml").stat().st_ino == config  # not written again
