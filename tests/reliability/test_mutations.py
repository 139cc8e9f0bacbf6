"""A mutation fuzzer over a valid results folder: every file of a finished run (and of a
`simulate` folder beside it) truncated, emptied, bit-flipped, deleted, given binary or
absurdly long lines, its JSON values swapped for other types, its YAML given a `!!python`
tag, a file swapped for a folder and a folder for a file. Then `report`, `report --index`,
`reproduce` and `compare` read it. Each case must end with exit 0, or with exit 2 and one
line naming what is damaged; never a traceback; and no file but the command's own outputs
may change.
"""

from __future__ import annotations

import json
import random
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runner"))
from tiny_experiment import TINY

from rankcollapse.cli import main
from rankcollapse.experiments import _registry
from rankcollapse.report.build import RECORD
from rankcollapse.runner import run_experiment

TYPES = ([], {}, "x", 1, None, 1.5, True)  # what a JSON value is swapped for, in turn


@pytest.fixture(scope="module")
def valid(tmp_path_factory) -> Path:
    """root/tiny/<hash>/ (a finished tiny run) and root/simulate/sim/ (a simulate folder)."""
    root = tmp_path_factory.mktemp("valid") / "root"
    log = root.parent / "log"
    log.mkdir()
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(_registry._REGISTRY, "tiny", TINY)
        run_experiment(TINY, overrides={"log_dir": str(log), "items": 2}, results_root=root)
        argv = ["simulate", "--n-layers", "2", "--n-tokens", "4", "--n-samples", "2",
                "--metrics", "res_comp_rel", "--out", str(root / "simulate" / "sim")]  # fmt: skip
        assert main(argv) == 0
    return root


def _json_cases(name: str, path_of: Callable[[Path], Path], value) -> list[tuple]:
    """The whole value swapped for each type, then each key's value swapped for one type."""
    cases = [(f"{name}=json-{type(t).__name__}", path_of, _writer(t)) for t in TYPES[:5]]
    record = value[0] if isinstance(value, list) else value
    for i, key in enumerate(record):
        swap = TYPES[i % len(TYPES)]
        changed = (
            [{**record, key: swap}, *value[1:]] if isinstance(value, list) else {**value, key: swap}
        )
        cases.append((f"{name}:{key}={json.dumps(swap)}", path_of, _writer(changed)))
    return cases


def _writer(value) -> Callable[[Path], None]:
    return lambda path: path.write_text(json.dumps(value))


def _flip(seed: int) -> Callable[[Path], None]:
    def flip(path: Path) -> None:
        data = bytearray(path.read_bytes())
        rng = random.Random(seed)
        for _ in range(3):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        path.write_bytes(bytes(data))

    return flip


def _to_folder(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
        path.write_text("a file where a folder was\n")
    else:
        path.unlink()
        (path / "inside").mkdir(parents=True)


FILE_MUTATIONS = {
    "deleted": lambda p: shutil.rmtree(p) if p.is_dir() else p.unlink(),
    "empty": lambda p: p.write_bytes(b""),
    "half": lambda p: p.write_bytes(p.read_bytes()[: len(p.read_bytes()) // 2]),
    "last-byte-cut": lambda p: p.write_bytes(p.read_bytes()[:-2]),
    "flipped-1": _flip(1),
    "flipped-2": _flip(2),
    "flipped-3": _flip(3),
    "binary": lambda p: p.write_bytes(b"\x00\xff\xfe\x89PNG\r\n\x1a\n" * 20),
    "swapped-for-a-folder": _to_folder,
}
CSV_MUTATIONS = {
    "header-only": lambda p: p.write_text(p.read_text().splitlines()[0] + "\n"),
    "text-in-value": lambda p: p.write_text(p.read_text().replace(",res,", ",res,abc,", 1)),
    "value-is-a-word": lambda p: p.write_text(
        "\n".join([*p.read_text().splitlines()[:2], "0,0,0,res,abc,False", ""])
    ),
    "other-columns": lambda p: p.write_text("a,b\n1,2\n"),
    "huge-line": lambda p: p.write_text(p.read_text() + "x" * 1_500_000 + "\n"),
    "short-row": lambda p: p.write_text(p.read_text() + "0,0\n"),
    "latin-1": lambda p: p.write_bytes(p.read_bytes() + b"0,0,0,r\xe9s,1.0,False\n"),
}
YAML_MUTATIONS = {
    "python-tag": lambda p: p.write_text("items: !!python/object/apply:os.system ['echo PWNED']\n"),
    "not-yaml": lambda p: p.write_text("items: [1, 2\n"),
    "a-list": lambda p: p.write_text("- 1\n- 2\n"),
    "deeply-nested": lambda p: p.write_text("items: " + "[" * 5000 + "]" * 5000 + "\n"),
    "unknown-key": lambda p: p.write_text(p.read_text() + "nope: 1\n"),
    "other-config": lambda p: p.write_text(p.read_text().replace("items: 2", "items: 3")),
}


def _in_run(name: str) -> Callable[[Path], Path]:
    return lambda root: next((root / "tiny").iterdir()) / name


def cases(valid_root: Path) -> list[tuple[str, Callable[[Path], Path], Callable[[Path], None]]]:
    """(id, the path to mutate in a copy of the root, the mutation)."""
    run = next((valid_root / "tiny").iterdir())
    names = ("manifest.json", "config.yaml", "results.csv", "claims.json", "report.html",
             ".rankcollapse.json", "figures", "tables", "units")  # fmt: skip
    in_run = {name: _in_run(name) for name in names}

    def a_unit(root: Path) -> Path:
        return min((next((root / "tiny").iterdir()) / "units").iterdir())

    def sim_results(root: Path) -> Path:
        return root / "simulate" / "sim" / "results.csv"

    targets = {**in_run, "a-unit-file": a_unit, "simulate-results.csv": sim_results}
    found = []
    for name, path_of in targets.items():
        for what, mutate in FILE_MUTATIONS.items():
            if name in ("figures", "tables", "units") and what not in (
                "deleted",
                "swapped-for-a-folder",
            ):
                continue  # fmt: skip
            found.append((f"{name}:{what}", path_of, mutate))
    for name in ("results.csv", "simulate-results.csv"):
        found += [(f"{name}:{what}", targets[name], m) for what, m in CSV_MUTATIONS.items()]
    found += [
        (f"config.yaml:{what}", in_run["config.yaml"], m) for what, m in YAML_MUTATIONS.items()
    ]
    for name in ("manifest.json", "claims.json", ".rankcollapse.json"):
        value = json.loads((run / name).read_text())
        found += _json_cases(name, in_run[name], value)
    return found


def _snapshot(root: Path) -> dict[str, bytes | None]:
    return {
        str(p.relative_to(root)): p.read_bytes() if p.is_file() else None
        for p in root.rglob("*")
        if p.name != ".lock"
    }


# The files each command reads or writes (by case id); a case on another file would only
# repeat a valid run (and its figures).
READS = {
    "report": ("manifest.json", "config.yaml", "results.csv", "figures", "tables",
               "claims.json:swapped", "report.html:swapped"),
    "index": ("",),
    "reproduce": ("",),
    "compare": ("results.csv", "simulate-results.csv", "manifest.json=", ".rankcollapse.json"),
}  # fmt: skip


# What each command may write (relative to the root copy); nothing else may change.
def _outputs(command: str, run: str) -> tuple[str, ...]:
    return {
        "report": (
            f"{run}/report.html",
            f"{run}/claims.json",
            f"{run}/figures",
            f"{run}/tables",
            f"{run}/{RECORD}",
        ),
        "index": ("index.html",),
        "reproduce": (),
        "compare": (),
    }[command]


def _commands(root: Path, run: Path, out: Path) -> dict[str, list[str]]:
    return {
        "report": ["report", str(run)],
        "index": ["report", "--index", str(root)],
        "reproduce": ["reproduce", "--results", str(root), "--out", str(out / "repro")],
        "compare": ["compare", str(run), str(root / "simulate" / "sim"), "--out", str(out / "cmp")],
    }


@pytest.fixture(scope="module")
def fuzz_cases(valid):
    return cases(valid)


def test_the_fuzzer_has_a_few_hundred_cases(valid):
    n_cases = len(cases(valid))
    assert n_cases >= 100, n_cases
    assert n_cases * len(_commands(valid, valid, valid)) >= 400


@pytest.mark.parametrize("command", ["report", "index", "reproduce", "compare"])
def test_a_damaged_results_folder_gives_one_clear_line_or_works_and_changes_nothing_else(
    valid, fuzz_cases, command, tmp_path, capsys, monkeypatch
):
    monkeypatch.setitem(_registry._REGISTRY, "tiny", TINY)
    monkeypatch.chdir(tmp_path)
    outcomes, skipped, refusals = {0: 0, 2: 0}, 0, []
    relevant = [c for c in fuzz_cases if c[0].startswith(READS[command])]
    for k, (case, path_of, mutate) in enumerate(relevant):
        root = tmp_path / f"case-{k}" / "root"
        shutil.copytree(valid, root, symlinks=True)
        mutate(path_of(root))
        run = next((root / "tiny").iterdir())
        before = _snapshot(root)
        argv = _commands(root, run, root.parent)[command]
        try:
            code = main(argv)
        except SystemExit as exit_:
            code = exit_.code
        out, err = capsys.readouterr()
        where = f"case {case}, `rankcollapse {' '.join(argv)}`"
        assert code in (0, 2), f"{where}: exit {code}\n{err[-2000:]}"
        assert "Traceback" not in out + err, f"{where}: a traceback\n{err[-2000:]}"
        if code == 2:
            errors = [line for line in err.splitlines() if line.startswith("error:")]
            assert len(errors) == 1 and err.strip().endswith(errors[0]), f"{where}: {err!r}"
            notes = err.strip().removesuffix(errors[0]).strip()
            assert not notes or notes.startswith(f"note: skipped {run}"), f"{where}: {err!r}"
            assert str(root) in err or "--out" in err, f"{where}: names no file: {err!r}"
            refusals.append(errors[0])
        allowed = _outputs(command, str(run.relative_to(root))) if code == 0 else ()
        after = _snapshot(root)
        changed = sorted(
            p for p in set(before) | set(after)
            if before.get(p, b"-") != after.get(p, b"-") and not p.startswith(allowed or ("\0",))
        )  # fmt: skip
        assert changed == [], f"{where}: exit {code} changed {changed}"
        outcomes[code] += 1
        skipped += f"note: skipped {run}" in " ".join(err.split())
        shutil.rmtree(root.parent)
    assert sum(outcomes.values()) == len(relevant)
    if command == "index":  # a damaged run is skipped with a line, never fatal
        assert outcomes[2] == 0 and skipped > 0
    elif command == "reproduce":  # skipped with a line; the only run skipped: nothing to read
        assert skipped > 0 and outcomes[0] > 0
        assert all("no complete run of any experiment is stored" in e for e in refusals)
    else:
        assert outcomes[2] > 0 and outcomes[0] > 0
