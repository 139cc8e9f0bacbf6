"""`python tiny_cli.py ARGS...`: the rankcollapse CLI with only the tiny experiment registered,
for tests that need a real second process (concurrency, kills, Ray)."""

import sys

from tiny_experiment import TINY

from rankcollapse import cli
from rankcollapse.experiments import _registry

if __name__ == "__main__":
    _registry._REGISTRY.clear()
    _registry._REGISTRY["tiny"] = TINY
    sys.exit(cli.main(sys.argv[1:]))
