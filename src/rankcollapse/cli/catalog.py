"""What `rankcollapse list` and `probe --help` show, read from a table generated from the
registries, so that neither imports an experiment module, torch or transformers.

`rankcollapse/data/catalog.json` holds every experiment's one-line description and presets,
every named model's family and sizes, and the model families. `python -m rankcollapse.cli.catalog`
writes it (run it after adding or changing an experiment or a named model);
tests/cli/test_startup.py fails, naming that command, when the file differs from the registries.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

PATH = Path(__file__).parents[1] / "data" / "catalog.json"


def read_catalog() -> dict[str, Any]:
    """{"experiments": {name: {description, presets}}, "models": {name: {family, n_layers,
    n_heads, d_model, pretrained, description}}, "families": [...]}, as stored."""
    return json.loads(PATH.read_text())


def catalog_text() -> str:
    """The text of catalog.json, from the experiment and model registries (imports them all)."""
    from rankcollapse.experiments import experiment_names, get_experiment
    from rankcollapse.hf import ARCHITECTURES, MODELS

    experiments = {}
    for name in experiment_names():
        exp = get_experiment(name)
        experiments[name] = {"description": exp.description, "presets": list(exp.presets)}
    models = {
        spec.name: {
            "family": spec.family,
            "n_layers": spec.n_layers,
            "n_heads": spec.n_heads,
            "d_model": spec.d_model,
            "pretrained": spec.pretrained,
            "description": spec.description,
        }
        for spec in MODELS.values()
    }
    catalog = {"experiments": experiments, "models": models, "families": sorted(ARCHITECTURES)}
    return json.dumps(catalog, indent=1) + "\n"


if __name__ == "__main__":
    PATH.write_text(catalog_text())
    print(f"wrote {PATH}", file=sys.stderr)
