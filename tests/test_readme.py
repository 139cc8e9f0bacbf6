"""The README's promises: every experiment is listed, and the two setup commands are the real ones."""

from pathlib import Path

from rankcollapse.experiments import experiment_names

ROOT = Path(__file__).resolve().parents[1]


def test_readme_lists_every_registered_experiment():
    readme = (ROOT / "README.md").read_text()
    missing = [name for name in experiment_names() if f"`{name}`" not in readme]
    assert missing == []


def test_ci_runs_the_readme_test_command_and_make_defines_both():
    readme = (ROOT / "README.md").read_text()
    assert "make demo" in readme and "make test" in readme
    assert "make test" in (ROOT / ".ci" / "run").read_text()
    makefile = (ROOT / "Makefile").read_text()
    assert "\ndemo:" in makefile and "\ntest:" in makefile
    assert "torch==2.13.0" in makefile
