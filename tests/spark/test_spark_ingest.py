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


@pytest.mark.parametrize("point", ["write.after_results", pytest.param("commit.after_complete", marks=pytest.mark.long)])
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


@pytest.mark.parametrize("index", ["BUCKET", pytest.param("SIMPLE", marks=pytest.mark.long)])
def test_a_write_task_lost_after_writing_is_retried_by_spark(tmp_path, spark_submit, index, reliability):
    """An executor's Python worker dies after its task wrote files: Spark runs the task again
    (local[2,2]: two attempts), the new attempt writes under its own write token, and the commit
    removes the lost attempt's files; the batch is in once, with no file left over."""
    case = reliability.case("crash", f"Spark write task's worker killed after its files, task "
                            f"retried by Spark ({index} index)", "spark.write_task.after_files",
                            detail="the lost attempt's files removed by the commit; batch in once")
    src, path = tmp_path / "in", tmp_path / "trips"
    demo.write_batches(str(src), 1, demo.DemoStream(rows=400))
    spark_submit("ingest", path, "--source-dir", src, "--create", "--commit", "--index", index, *OPTS)
    demo.write_batches(str(src), 1, demo.DemoStream(rows=400))  # updates: MOR log appends
    env = dict(spark_submit.env, LAKEHOUSE_FAULTS=f"spark.write_task.after_files:kill@{tmp_path}/once")
    run = spark_submit("ingest", path, "--source-dir", src, "--commit", "--index", index, *OPTS,
                       master="local[2,2]", env=env)
    assert run.returncode == 0 and run.doc["status"] == "ok", run.explain()
    assert (tmp_path / "once").exists()  # the fault did fire
    t = lakehouse.open_table(str(path))
    assert rows(t) == reference(tmp_path / "ref", src)
    committed = {s.path for i in t.timeline.completed_writes() for s in t.active.commit_metadata(i).write_stats()}
    on_disk = {str(p.relative_to(path)) for p in path.rglob("*") if p.is_file()
               and ".hoodie" not in p.parts and not p.name.startswith(".hoodie_partition_metadata")}
    assert on_disk == committed
    case.records_checked = t.read(columns=["_hoodie_record_key"]).num_rows
