#!/usr/bin/env bash
# Wheels that benchmarks/gpu_check.py needs beyond a GPU machine's usual PyTorch stack (torch,
# transformers, numpy, pandas, matplotlib, scipy, rich, pyyaml, safetensors, pillow): pydantic
# and what it needs, for CPython 3.12 on x86-64 Linux, into .whl/ (git ignores it). On the GPU
# machine, offline:
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
#   PYTHONPATH=/tmp/site python3 benchmarks/gpu_check.py
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}  # the versions this checkout's environment has
pins=$("$PY" - <<'PYEOF'
from importlib.metadata import version
names = ["pydantic", "pydantic_core", "annotated-types", "typing-inspection"]
print(" ".join(f"{name}=={version(name)}" for name in names))
PYEOF
)
# shellcheck disable=SC2086
python3 -m pip download -q --no-deps --only-binary=:all: --python-version "${PYTHON_VERSION:-3.12}" \
  --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 -d .whl $pins
ls .whl
