"""Start-up does not grow with the package: a command imports what it uses (checked through
sys.modules in a fresh interpreter), and the catalogue `list` and `probe --help` read is the
one the registries give."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from rankcollapse.cli import COMMANDS, build_parser
from rankcollapse.cli.catalog import PATH, catalog_text, read_catalog

HEAVY = ("transformers", "matplotlib", "torch", "pandas", "scipy")

# command -> heavy packages it must not import
MUST_NOT_IMPORT = {
    ("--version",): HEAVY,
    ("--help",): HEAVY,
    ("list",): HEAVY,
    ("probe", "--help"): HEAVY,
    ("run", "--help"): HEAVY,
    ("qk-rank", "--help"): HEAVY,
    ("metrics",): ("transformers", "matplotlib"),
    ("simulate", "--help"): ("transformers", "matplotlib"),
}

PROGRAM = """
import json, sys
from rankcollapse.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(json.dumps(sorted({name.split(".")[0] for name in sys.modules})), file=sys.stderr)
"""


def imported_by(argv: tuple[str, ...]) -> set[str]:
    """Top-level packages in sys.modules after `rankcollapse ARGV` in a fresh interpreter."""
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, *argv], capture_output=True, text=True, check=True
    )
    return set(json.loads(done.stderr.strip().splitlines()[-1]))


@pytest.mark.parametrize("argv", list(MUST_NOT_IMPORT), ids=" ".join)
def test_a_command_imports_only_what_it_uses(argv):
    heavy = set(MUST_NOT_IMPORT[argv]) & imported_by(argv)
    assert heavy == set(), f"`rankcollapse {' '.join(argv)}` imports {sorted(heavy)}"


def test_the_start_up_check_sees_an_import():
    assert {"rankcollapse", "torch"} <= imported_by(("metrics",))


def test_the_catalogue_is_what_the_registries_say():
    assert PATH.read_text() == catalog_text(), (
        "rankcollapse/data/catalog.json is out of date: run python -m rankcollapse.cli.catalog"
    )


def test_list_shows_every_experiment_of_the_registry(capsys):
    from rankcollapse.cli import main
    from rankcollapse.experiments import MODULES

    assert set(read_catalog()["experiments"]) == set(MODULES)
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in MODULES)


def test_top_level_help_lists_every_command_with_its_help_line(capsys):
    with pytest.raises(SystemExit):
        build_parser([]).parse_args(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert all(name in out and " ".join(summary.split()) in out
               for name, (_, summary) in COMMANDS.items())  # fmt: skip


def test_a_command_parses_with_only_its_own_module_built():
    args = build_parser(["probe"]).parse_args(["probe", "minilm", "--n-tokens", "16"])
    assert (args.command, args.model, args.tokens) == ("probe", ["minilm"], 16)


def modules_after(code: str) -> set[str]:
    """Every module in sys.modules after `code` in a fresh interpreter."""
    program = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)), file=sys.stderr)"
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          check=True)  # fmt: skip
    return set(json.loads(done.stderr.strip().splitlines()[-1]))


def test_version_reads_the_installed_version_without_importlib_metadata_or_rich():
    import importlib.metadata

    from rankcollapse import __version__

    try:
        installed = importlib.metadata.version("rankcollapse")
    except importlib.metadata.PackageNotFoundError:  # a source tree without installation
        installed = "0.0.0"
    assert __version__ == installed
    loaded = modules_after("from rankcollapse.cli import main\ntry:\n main(['--version'])\n"
                           "except SystemExit:\n pass")  # fmt: skip
    assert {"importlib.metadata", "rich", "email"}.isdisjoint(loaded)


def test_an_experiment_module_loads_matplotlib_only_when_it_draws():
    """A stored run and a worker that runs units import experiment modules, whose figure
    functions are imported at their top: matplotlib loads at a figure function's first call."""
    loaded = modules_after("import rankcollapse.experiments.toy_collapse as e")
    assert "matplotlib" not in loaded
    drawn = modules_after(
        "from rankcollapse.plot import line_plot\nimport pandas as pd\n"
        "line_plot(pd.DataFrame({'layer': [0, 1], 'value': [1.0, 0.5]}), x='layer', y='value')"
    )
    assert "matplotlib" in drawn


def test_the_probe_loads_neither_the_toy_network_nor_pydantic():
    """The probe's modules leave the toy network and pydantic unloaded (toy curves import
    them when called): about 0.05 s of every probe's start-up."""
    loaded = modules_after("import rankcollapse.measure, rankcollapse.cli.probe")
    assert {"rankcollapse.nets", "pydantic"}.isdisjoint(loaded)
    called = modules_after(
        "from rankcollapse.measure import toy_curves\nfrom rankcollapse.masks import "
        "parse_mask_spec\nfrom rankcollapse.variants import VARIANTS\n"
        "toy_curves([VARIANTS['wu:san']], parse_mask_spec('causal'), n_layers=1, d_model=4, "
        "n_tokens=3, n_samples=1, seed=0)"
    )
    assert {"rankcollapse.nets", "pydantic"} <= called
