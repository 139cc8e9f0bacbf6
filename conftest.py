"""Collection of `src` (doctests): a module that needs an optional extra is not imported where the
extra is missing (its tests in `tests/` skip with the reason); `make test` runs on the two
commands' install alone."""

import importlib.util

OPTIONAL = {  # module -> what it imports
    "src/rankcollapse/measure/monitor/lightning.py": "lightning",
}

collect_ignore = [
    path for path, package in OPTIONAL.items() if not importlib.util.find_spec(package)
]
