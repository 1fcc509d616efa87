"""compaction-execute on a standalone cluster (a master and a worker on 127.0.0.1), with
lakehouse shipped to the executors as a --py-files zip only."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from lakehouse.spark.package import build_py_files
from lakehouse.spark.package import main as package_main
from tests.spark.spark_tables import assert_same_tables, write_history

pytestmark = pytest.mark.spark


def _python_without_lakehouse(folder: Path) -> str:
    """This interpreter with its installed packages (pyarrow, fastavro, pyspark) but not an
    editable lakehouse: -S skips site and so the .pth files that editable installs rely on; the
    site-packages folders are added back as plain path entries, after Spark's own."""
    paths = os.pathsep.join(dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]))
    script = folder / "python-without-lakehouse"
    script.write_text(f'#!/bin/sh\nPYTHONPATH="${{PYTHONPATH:+$PYTHONPATH{os.pathsep}}}{paths}" '
                      f'exec "{sys.executable}" -S "$@"\n')
    script.chmod(0o755)
    return str(script)


def _env_without_pythonpath(env: dict[str, str]) -> dict[str, str]:
    # PYSPARK_PYTHON stays: spark-submit finds SPARK_HOME through it; --conf
    # spark.pyspark.python overrides it for the executors.
    return {k: v for k, v in env.items() if k != "PYTHONPATH"}


def test_compaction_execute_on_standalone_cluster_with_py_files(tmp_path, spark_submit, spark_cluster):
    ours = write_history(tmp_path / "spark")
    reference = write_history(tmp_path / "python")
    planned = ours.schedule_compaction(force=True)
    assert planned.scheduled

    # What `python -m lakehouse.spark.package DIR` writes: the zip and a copy of submit.py.
    assert package_main([str(tmp_path / "dist")]) == 0
    zip_path, app_file = str(tmp_path / "dist" / "lakehouse.zip"), str(tmp_path / "dist" / "submit.py")
    assert Path(build_py_files(tmp_path / "again")).read_bytes() == Path(zip_path).read_bytes(), \
        "the zip is reproducible"
    python = _python_without_lakehouse(tmp_path)
    env = _env_without_pythonpath(spark_submit.env)
    # The executors' interpreter cannot import lakehouse by itself, and can from the zip.
    probe = "import lakehouse, pyarrow, fastavro; print(lakehouse.__file__)"
    alone = subprocess.run([python, "-c", probe], env=env, cwd=tmp_path, capture_output=True, text=True)
    if alone.returncode == 0:
        pytest.skip(f"lakehouse is installed in site-packages ({alone.stdout.strip()}), so the "
                    "executors would not need the zip: install it editable (make test does)")
    shipped = subprocess.run([python, "-c", probe], env={**env, "PYTHONPATH": zip_path}, cwd=tmp_path,
                             capture_output=True, text=True)
    assert shipped.returncode == 0 and shipped.stdout.startswith(zip_path), shipped.stderr

    r = spark_submit(
        "compaction-execute", ours.path, "--parallelism", str(planned.operations),
        master=spark_cluster.master_url, env=env, app_file=app_file,
        spark_args=("--deploy-mode", "client", "--total-executor-cores", "2", "--executor-memory", "512m",
                    "--py-files", zip_path,
                    "--conf", f"spark.pyspark.python={python}",
                    "--conf", f"spark.pyspark.driver.python={sys.executable}"))
    assert r.returncode == 0 and r.doc["status"] == "ok", r.explain()
    assert r.doc["instant"] == planned.instant and r.doc["operations"] == planned.operations
    assert r.doc["spark"] == {"master": spark_cluster.master_url, "app_id": r.doc["spark"]["app_id"],
                              "tasks": planned.operations}
    # The work ran in an executor the worker launched for this application.
    executor_logs = list((spark_cluster.logs / "work" / r.doc["spark"]["app_id"]).glob("*/stderr"))
    assert executor_logs, f"no executor ran for {r.doc['spark']['app_id']}"
    assert "lakehouse.zip" in "".join(p.read_text(errors="replace") for p in executor_logs)

    assert ours.commit_compaction(planned.instant).committed
    assert reference.compact(force=True).committed
    assert_same_tables(ours.path, reference.path)


def test_ingest_on_standalone_cluster(tmp_path, spark_submit, spark_cluster):
    import lakehouse
    from lakehouse.sources import demo
    from lakehouse.sources.files import ingest

    src = tmp_path / "in"
    demo.write_batches(str(src), 2, demo.DemoStream(rows=400, seed=5))
    # The write runs on the executors: they get lakehouse from the --py-files zip.
    zip_path = build_py_files(tmp_path / "dist")
    r = spark_submit("ingest", tmp_path / "trips", "--source-dir", src, "--create", "--commit",
                     "--option", "hoodie.bucket.index.num.buckets=2", master=spark_cluster.master_url,
                     spark_args=("--deploy-mode", "client", "--total-executor-cores", "2",
                                 "--executor-memory", "512m", "--py-files", str(zip_path)))
    assert r.returncode == 0 and r.doc["status"] == "ok" and r.doc["files"] == 2, r.explain()
    reference = lakehouse.create_table(str(tmp_path / "ref"), name="ref", table_type="MERGE_ON_READ",
                                       index="BUCKET", schema=demo.SCHEMA,
                                       options={"hoodie.bucket.index.num.buckets": 2}, **demo.TABLE_OPTIONS)
    ingest(reference, str(src))
    assert_same_tables(tmp_path / "trips", tmp_path / "ref")
