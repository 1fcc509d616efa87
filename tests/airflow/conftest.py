"""Airflow for the tests: one home and one SQLite metadata database per test session, set up
before anything imports airflow, and a Spark connection to local[2] (spark-submit from the venv)."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from tests.servers import free_port

REPO = Path(__file__).resolve().parents[2]
_HOME = tempfile.mkdtemp(prefix="lakehouse-airflow-")
# Airflow reads its configuration when first imported: this must come first.
os.environ.update({
    "AIRFLOW_HOME": _HOME,
    "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{_HOME}/airflow.db",
    "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
    "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
    "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
    "AIRFLOW__CORE__PARALLELISM": "4",
    "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING",
    "AIRFLOW_CONN_SPARK_DEFAULT": '{"conn_type": "spark", "host": "local[2]", "extra": {"deploy-mode": "client"}}',
    "SPARK_LOCAL_IP": "127.0.0.1",
    "PYSPARK_PYTHON": sys.executable,
})
# spark-submit's driver and executors import lakehouse from the source tree when not installed.
os.environ["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))])


def _require_airflow() -> None:
    pytest.importorskip("airflow", reason="Airflow is needed for the DAG tests (pip install '.[airflow]')")
    pytest.importorskip("airflow.providers.apache.spark", reason="the Apache Spark provider is needed")


@pytest.fixture(scope="session")
def airflow_db():
    """The session's metadata database, created once (~1 s)."""
    _require_airflow()
    from airflow.utils import db
    db.initdb()
    yield _HOME
    shutil.rmtree(_HOME, ignore_errors=True)


@pytest.fixture(scope="session")
def spark_submit_ready():
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Spark needs Java (17 or later) on PATH or in JAVA_HOME")
    sub = Path(sys.executable).parent / "spark-submit"
    if not sub.exists() and shutil.which("spark-submit") is None:
        pytest.skip("spark-submit is not installed beside the interpreter (pip install pyspark)")
    # The Spark hook runs `spark-submit` from PATH: the venv's own.
    os.environ["PATH"] = os.pathsep.join([str(sub.parent), os.environ.get("PATH", "")])


DEMO_REGISTRY = """
defaults: {{retries: 1, retry_delay_s: 5}}
catalog: {{uri: "sqlite:///catalog.db", namespace: lakehouse}}
tables:
  trips:
    path: tables/trips
    options: {{hoodie.bucket.index.num.buckets: 2}}
    source: {{kind: demo, dir: landing/trips, demo_rows: 500}}
    schedule: {{ingest: null, compaction: {{after_commits: 3}}, clean: null}}
    clean_options: {{hoodie.cleaner.policy: KEEP_LATEST_FILE_VERSIONS, hoodie.cleaner.fileversions.retained: 1}}
  live:
    path: tables/live
    options: {{hoodie.bucket.index.num.buckets: 2}}
    source: {{kind: demo, mode: stream, dir: landing/live, demo_rows: 300}}
    schedule: {{ingest: null, compaction: {{after_commits: 3}}, clean: null}}
"""


@pytest.fixture(scope="session")
def platform(spark_submit_ready, tmp_path_factory):
    """`make run`'s platform, started once per session on a free port with a registry of its own
    (a demo MOR table ingested in batches, one streamed) and its first cycle run; stopped by its process group at the end."""
    _require_airflow()
    from deploy import platform as plat
    work = tmp_path_factory.mktemp("platform")
    reg = work / "tables.yaml"
    reg.write_text(DEMO_REGISTRY.format())
    layout = plat.Layout(REPO, free_port(), var=work / "var", registry_file=reg)
    said: list[str] = []
    try:
        started = plat.start(layout, cycle=True, echo=said.append)
        started["said"] = said
    except BaseException:
        plat.stop(layout)
        raise
    pgid = started["pgid"]
    try:
        yield layout, started, work
    finally:
        plat.stop(layout)
    # Stopped means gone: no process of the group is left.
    with pytest.raises(ProcessLookupError):
        os.killpg(pgid, 0)
