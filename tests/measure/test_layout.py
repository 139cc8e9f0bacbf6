"""tests/measure/ mirrors src/rankcollapse/measure/: each module `measure/X/name.py` has its tests
in `tests/measure/X/test_name.py`, or is named in ELSEWHERE with the test file that covers it."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "src" / "rankcollapse" / "measure"
TESTS = ROOT / "tests" / "measure"

# module -> the test file that covers it instead (that file imports the module by name)
ELSEWHERE = {
    # the Trainer and Lightning callbacks each train a tiny model, side by side in one file
    "monitor/trainer.py": "monitor/test_integrations.py",
    "monitor/lightning.py": "monitor/test_integrations.py",
}


def modules() -> list[str]:
    """Public modules of the wing, relative to src/rankcollapse/measure (no `__init__`, `_x`)."""
    found = SOURCE.rglob("*.py")
    return sorted(str(p.relative_to(SOURCE)) for p in found if not p.name.startswith("_"))


def own_test(module: str) -> Path:
    """tests/measure/X/test_name.py for measure/X/name.py."""
    return TESTS / Path(module).with_name(f"test_{Path(module).name}")


def test_every_measure_module_has_its_test_file():
    missing = [m for m in modules() if m not in ELSEWHERE and not own_test(m).is_file()]
    assert not missing, (
        f"no tests/measure/.../test_NAME.py for {missing}; add one (or a row to ELSEWHERE)"
    )


def test_modules_tested_elsewhere_are_named_by_the_file_that_tests_them():
    for module, test_file in ELSEWHERE.items():
        assert (SOURCE / module).is_file() and not own_test(module).is_file(), (
            module
        )  # no stale row
        dotted = "rankcollapse.measure." + module.removesuffix(".py").replace("/", ".")
        assert dotted in (TESTS / test_file).read_text(), (module, test_file)
