# Everything a fresh machine needs: `make run` and `make test` create .venv and install into it.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-dev
RUN_STAMP := $(VENV)/.installed-run

.PHONY: run stop status cluster cluster-stop postgresql demo demo-api demo-cli test test-long test-cluster judges bench bench-read bench-avro bench-backlog bench-growth bench-requests bench-view bench-spark reliability venv clean

$(STAMP): pyproject.toml
	@echo "installing lakehouse with its test and benchmark tools into $(VENV) (about 2.5 GB; minutes the first time) ..."
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

# What `make run` needs (Airflow, PySpark, the Iceberg catalog), not dev's test and benchmark
# tools: 1.2 GB instead of 2.5, about half a minute from pip's cache. A venv with dev has it all.
$(RUN_STAMP): pyproject.toml
	@if [ -f $(STAMP) ] && [ $(STAMP) -nt pyproject.toml ]; then touch $@; else \
		echo "installing lakehouse, Airflow and PySpark into $(VENV) (about 1.2 GB; a few minutes the first time) ..." \
		&& $(PYTHON) -m venv $(VENV) && $(PY) -m pip install --quiet --upgrade pip \
		&& $(PY) -m pip install --quiet -e '.[airflow,catalog]' && touch $@; fi

venv: $(STAMP)

# Airflow on this machine (SQLite, local Spark, a sample table under var/ fed by the demo source):
# starts it, runs a first ingest/compaction/clean cycle, prints the URL and login.
run: $(RUN_STAMP)
	$(PY) -m deploy.platform start

stop:
	@if [ -x $(PY) ]; then $(PY) -m deploy.platform stop; else echo "not running"; fi

status: $(RUN_STAMP)
	$(PY) -m deploy.platform status

# docker-compose.yml's platform as processes on 127.0.0.1 (Postgres, Airflow, a Spark master and two
# workers, an S3 API server; the tables of deploy/tables.yaml on s3://), then a first cycle.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo "sudo -n")
cluster: $(STAMP) postgresql
	$(PY) -m deploy.cluster start

# Debian's PostgreSQL server, for make cluster (Airflow's metadata and the Iceberg catalog).
postgresql:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null \
		|| $(SUDO) apt-get install -y -q postgresql >/dev/null \
		|| { $(SUDO) apt-get update -q >/dev/null && $(SUDO) apt-get install -y -q postgresql >/dev/null; }

cluster-stop:
	@if [ -x $(PY) ]; then $(PY) -m deploy.cluster stop; else echo "not running"; fi

# A streaming query (format("lakehouse")) writes trips_live while Airflow's compaction DAG compacts
# it; starts the platform of `make run` if it is not running, and leaves it running.
demo: $(STAMP)
	$(PY) -m deploy.stream_demo

# The Python API walk-through (no Airflow): each step's Python printed, then run, on a local
# table under ./demo-api-tables.
demo-api: $(STAMP)
	$(PY) -m deploy.demo_api

# The same kind of story told with the `lakehouse` command, under ./demo-tables.
demo-cli: $(STAMP)
	$(PY) -m deploy.demo

test: $(STAMP)
	$(PY) -m pytest -q -m "not cluster and not long and not judges"

# The other variants of make test's slowest scenarios (S3 for the concurrent writers, a second
# index, crash point or kill for the Spark crash tests): ~8 min on 2 cores.
test-long: $(STAMP)
	$(PY) -m pytest -q -m long

# Apache Hudi and Apache Iceberg themselves as judges: PySpark 3.5 and 3.4 in environments of their
# own, Hudi's Spark bundles (0.15.0, 0.14.0) and Iceberg's Spark runtime from Maven Central (pinned
# versions and checksums, cached under ~/.cache/lakehouse-judges), then the tests where Java Hudi
# reads, writes and services lakehouse tables and Iceberg reads their metadata (~15 min after the
# first set-up's ~1 GB download). Offline, the set-up says why and the tests skip, saying so.
judges: $(STAMP)
	$(PY) -m tests.judges.environment setup || echo "the judges could not be set up (see above): their tests skip"
	$(PY) -m pytest -q -m judges

# make cluster for real, under test: the end-to-end and fault tests (12-17 min on 2 cores; CI runs it after make test).
test-cluster: $(STAMP) postgresql
	$(PY) -m pytest -q -m cluster

# The core benchmark, then lakehouse beside delta-rs, pyiceberg and plain parquet (bench-out/peers.*)
# at N=1M, and lakehouse MOR and delta-rs again at N=5M; every table with lakehouse's defaults;
# then where a snapshot read of pending logs spends its time (bench-read).
bench: $(STAMP)
	$(PY) benchmarks/bench_core.py
	$(PY) benchmarks/bench_peers.py -n 1000000,5000000
	$(PY) benchmarks/bench_read_bound.py
	$(PY) benchmarks/bench_avro_blocks.py
	$(PY) benchmarks/bench_growth.py
	$(PY) benchmarks/bench_growth.py --grow 5000000 --max-file-size 0 --out bench-out/growth-5m.json
	$(PY) benchmarks/bench_requests.py --check

# A default MOR table's snapshot read of pending logs against the least a merge by key must do
# (bench-out/read_bound.json, ~20 s).
bench-read: $(STAMP)
	$(PY) benchmarks/bench_read_bound.py

# Avro log content (Java Hudi's default data blocks, every delete block): the vectorised
# decoders against fastavro in one process (bench-out/avro_blocks.json, ~5 s).
bench-avro: $(STAMP)
	$(PY) benchmarks/bench_avro_blocks.py

# The reliability suite at full length (500 sustained commits, hypothesis's nightly profile, the
# Spark task-loss scenario), then its report into docs/reliability.md. `make test` runs the same
# tests shorter.
reliability: $(STAMP)
	rm -rf reliability-out
	LAKEHOUSE_SUSTAINED_COMMITS=500 LAKEHOUSE_HYPOTHESIS_PROFILE=nightly $(PY) -m pytest -q \
		tests/reliability tests/spark/test_spark_ingest.py::test_a_write_task_lost_after_writing_is_retried_by_spark
	cp reliability-out/reliability.md docs/reliability.md

# Memory of merging a large log backlog (one file group, many rounds of updates in its logs).
# A default Merge-On-Read table written with one row, then grown by 400k rows (1 MiB files):
# its largest base file and a 2k-row upsert's cost, consistent hashing against the SIMPLE
# engine (bench-out/growth.json, ~1 min)
bench-growth: $(STAMP)
	$(PY) benchmarks/bench_growth.py

# Requests per step against an S3 API server on 127.0.0.1, lakehouse and delta-rs, at 4 and 64
# partitions (bench-out/requests.json, ~1 min)
bench-requests: $(STAMP)
	$(PY) benchmarks/bench_requests.py --check

bench-backlog: $(STAMP)
	$(PY) benchmarks/bench_backlog.py

# The Lakehouse view's serving time over 10 tables, one with 1,000 instants (bench-out/view.json)
bench-view: $(STAMP)
	$(PY) benchmarks/bench_view.py

bench-spark: $(STAMP)
	$(PY) benchmarks/bench_spark_ingest.py
	$(PY) benchmarks/bench_spark_read.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
