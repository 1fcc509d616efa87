# Everything a fresh machine needs: `make run` and `make test` create .venv and install into it.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-dev

.PHONY: run test bench bench-spark venv clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

run: $(STAMP)
	$(PY) -m lakehouse.demo

test: $(STAMP)
	$(PY) -m pytest -q

bench: $(STAMP)
	$(PY) benchmarks/bench_core.py

bench-spark: $(STAMP)
	$(PY) benchmarks/bench_spark_ingest.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
