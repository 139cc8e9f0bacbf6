"""The README's family table is what `rankcollapse variants` prints (one registry, no copy)."""

from pathlib import Path

from rankcollapse.cli.variants import family_rows


def test_readme_family_table_matches_the_registry():
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    start = readme.index("| family | model_type |")
    table = readme[start : readme.index("\n\n", start)].splitlines()
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in table[2:]]
    expected = [[f"`{r['family']}`", *list(r.values())[1:]] for r in family_rows()]
    assert rows == expected
