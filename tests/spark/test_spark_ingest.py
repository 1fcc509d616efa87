"""The ingest application through spark-submit: same table as the Python API, exactly once."""

from __future__ import annotations

import pytest

import lakehouse
from lakehouse.sources import demo
from lakehouse.sources.files import ingest
from tests.interop.hudi_oracle import hudi_read

pytestmark = pytest.mark.spark
COLS = ["trip_id", "event_ts", "fare"]
OPTS = ("--option", "hoodie.bucket.index.num.buckets=2")


def rows(t):
    return sorted(tuple(r[c] for c in COLS) for r in t.read(columns=COLS).to_pylist())


def reference(path, src):
    t = lakehouse.create_table(str(path), name="ref", table_type="MERGE_ON_READ", index="BUCKET",
                               schema=demo.SCHEMA, options={"hoodie.bucket.index.num.buckets": 2},
                               **demo.TABLE_OPTIONS)
    ingest(t, str(src))
    return rows(t)


def test_ingest_then_commit_as_two_jobs_and_a_crashed_ingest_rerun(tmp_path, spark_submit):
    src, path = tmp_path / "in", tmp_path / "trips"
    run = spark_submit("ingest", path, "--source-dir", src, "--demo-batches", "2", "--demo-rows", "300",
                       "--create", *OPTS)
    assert run.returncode == 0, run.explain()
    assert run.doc["status"] == "ok" and run.doc["files"] == 2 and run.doc["committed"] is False
    t = lakehouse.open_table(str(path))
    assert t.timeline.get(run.doc["instant"]).is_inflight   # phase 1 only: nothing visible yet
    assert t.read().num_rows == 0
    run = spark_submit("commit", path)
    assert run.returncode == 0, run.explain()
    assert rows(t) == reference(tmp_path / "ref", src)

    # The next batch lands; the ingest job dies half-way through writing a data file.
    demo.write_batches(str(src), 1, demo.DemoStream(rows=300))
    env = dict(spark_submit.env, LAKEHOUSE_FAULTS="write.mid_data_file:kill")
    crashed = spark_submit("ingest", path, "--source-dir", src, "--commit", *OPTS, env=env)
    assert crashed.returncode != 0, crashed.explain()
    rerun = spark_submit("ingest", path, "--source-dir", src, "--commit", *OPTS)
    assert rerun.returncode == 0 and rerun.doc["files"] == 1, rerun.explain()
    nothing = spark_submit("ingest", path, "--source-dir", src, "--commit", *OPTS)
    assert nothing.doc["status"] == "nothing_to_do", nothing.explain()
    expected = reference(tmp_path / "ref2", src)
    assert rows(lakehouse.open_table(str(path))) == expected
    h = hudi_read(path)
    assert sorted(tuple(r[c] for c in COLS) for r in h.select(COLS).to_pylist()) == expected


@pytest.mark.parametrize("point", ["write.after_results", "commit.after_complete"])
def test_spark_ingest_killed_on_the_driver_is_applied_once(tmp_path, spark_submit, point):
    src, path = tmp_path / "in", tmp_path / "trips"
    demo.write_batches(str(src), 2, demo.DemoStream(rows=200))
    env = dict(spark_submit.env, LAKEHOUSE_FAULTS=f"{point}:kill")
    crashed = spark_submit("ingest", path, "--source-dir", src, "--create", "--commit", *OPTS, env=env)
    assert crashed.returncode != 0, crashed.explain()
    rerun = spark_submit("ingest", path, "--source-dir", src, "--commit", *OPTS)
    assert rerun.returncode == 0, rerun.explain()
    # Killed after the commit: the batch is in, the rerun has nothing to do; before: it redoes it.
    assert rerun.doc["status"] == ("nothing_to_do" if point == "commit.after_complete" else "ok")
    assert rows(lakehouse.open_table(str(path))) == reference(tmp_path / "ref", src)
