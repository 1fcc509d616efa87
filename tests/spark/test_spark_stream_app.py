"""The ``stream`` application (lakehouse/spark/apps/stream.py): landed files into a table through a
Structured Streaming query on ``format("lakehouse")``, run in the session's Spark."""

from __future__ import annotations

import json

import pytest

import lakehouse
from lakehouse.errors import ConfigError
from lakehouse.sources import demo
from lakehouse.sources.files import ingest
from lakehouse.spark.apps import stream
from lakehouse.spark.datasource import sink_commits
from lakehouse.timeline.tags import instant_extra
from tests.interop.hudi_oracle import canonical, hudi_read

pytestmark = pytest.mark.spark
COLS = ["trip_id", "city", "event_ts", "fare", "_hoodie_is_deleted"]


def _run(spark, capsys, *argv: str) -> tuple[int, dict]:
    code = stream.main(list(argv), spark)
    return code, json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_available_now_applies_each_landed_file_once_across_runs(tmp_path, spark, capsys):
    """Each run takes what landed since the last (Spark's checkpoint inside the table), a commit
    per micro-batch with its batch id and the run's tags; the table equals the same files
    ingested with the Python API in the same groups, and hudi-rs reads it identically."""
    land, path = tmp_path / "land", str(tmp_path / "t")
    demo.write_batches(str(land), 3, demo.DemoStream(rows=200))
    args = [path, "--source-dir", str(land), "--create", "--max-files-per-trigger", "2",
            "--option", "hoodie.bucket.index.num.buckets=2"]
    code, doc = _run(spark, capsys, *args, "--tag", "airflow.dag_id=d", "--tag", "airflow.run_id=R1")
    assert code == 0 and doc["status"] == "ok", doc
    assert doc["batches"] == [0, 1] and doc["rows"] == 600 and len(doc["instants"]) == 2
    assert doc["checkpoint"] == f"{path}/.hoodie/.aux/lakehouse/streams/default_single_writer"
    table = lakehouse.open_table(path)
    for t in doc["instants"]:
        tags = instant_extra(table.active, table.timeline.get(t), table.timeline)
        assert (tags["airflow.dag_id"], tags["airflow.run_id"]) == ("d", "R1")

    code, doc = _run(spark, capsys, *args)
    assert code == 0 and doc["status"] == "nothing_to_do" and doc["batches"] == []

    demo.write_batches(str(land), 2, demo.DemoStream(rows=200))
    code, doc = _run(spark, capsys, *args)
    assert code == 0 and doc["batches"] == [2] and doc["rows"] == 400

    table = lakehouse.open_table(path)
    assert [b for _, b in sink_commits(table)] == [0, 1, 2]
    files = stream.source_files(doc["checkpoint"])
    assert [len(files[b]) for b in (0, 1, 2)] == [2, 1, 2]
    ref = lakehouse.create_table(str(tmp_path / "ref"), name="ref", table_type="MERGE_ON_READ", index="BUCKET",
                                 schema=demo.SCHEMA, options={"hoodie.bucket.index.num.buckets": 2},
                                 **demo.TABLE_OPTIONS)
    for n in (2, 1, 2):
        ingest(ref, str(land), max_files=n)
    assert canonical(table.read(), COLS) == canonical(ref.read(), COLS)
    assert canonical(hudi_read(path), COLS) == canonical(table.read(), COLS)


def test_nothing_landed_is_nothing_to_do_and_creates_nothing(tmp_path, spark, capsys):
    (tmp_path / "land").mkdir()
    code, doc = _run(spark, capsys, str(tmp_path / "t"), "--source-dir", str(tmp_path / "land"), "--create")
    assert code == 0 and doc["status"] == "nothing_to_do" and "no files have landed" in doc["reason"]
    assert not (tmp_path / "t").exists()


def test_bad_input_fails_before_the_query_starts(tmp_path, spark, capsys):
    land = tmp_path / "land"
    demo.write_batches(str(land), 1, demo.DemoStream(rows=10))
    (land / "extra.csv").write_text("trip_id\nx\n")
    code, doc = _run(spark, capsys, str(tmp_path / "t"), "--source-dir", str(land), "--create")
    assert code == 1 and "several formats" in doc["reason"]
    (land / "extra.csv").unlink()
    code, doc = _run(spark, capsys, str(tmp_path / "t"), "--source-dir", str(land), "--create",
                     "--tag", "a=1", "--tag", "b=2")
    assert code == 1 and "share no prefix" in doc["reason"]
    assert not (tmp_path / "t").exists()


def test_the_checkpoint_defaults_inside_a_local_table_only():
    assert stream.checkpoint_location("file:///data/t", None, "q1") == "/data/t/.hoodie/.aux/lakehouse/streams/q1"
    assert stream.checkpoint_location("s3://b/t", "/ck/t", "q1") == "/ck/t"
    with pytest.raises(ConfigError, match="not on local storage"):
        stream.checkpoint_location("s3://b/t", None, "q1")
    assert stream.tag_options({"airflow.dag_id": "d", "airflow.run_id": "r"}) == {
        "hoodie.datasource.write.commitmeta.key.prefix": "airflow.", "airflow.dag_id": "d", "airflow.run_id": "r"}
    with pytest.raises(ConfigError):
        stream.tag_options({"hoodie.x": "1", "hoodie.y": "2"})  # would take every hoodie.* option


class _Query:
    """A StreamingQuery's await/status surface: a micro-batch under way for ``active`` polls."""

    def __init__(self, active: int):
        self.active, self.waits = active, []

    def awaitTermination(self, timeout=None):  # noqa: N802 - Spark's name
        self.waits.append(timeout)
        return False

    @property
    def status(self):
        self.active -= 1
        return {"isTriggerActive": self.active >= 0}


def test_a_stop_file_stops_the_query_between_micro_batches_and_run_for_stays_the_limit(tmp_path):
    """--stop-file: the supervisor's graceful stop (make demo ends its query once the compaction DAG
    has compacted); it waits out the micro-batch under way, and --run-for still bounds the run."""
    stop_file = tmp_path / "stop"
    stop_file.touch()
    q = _Query(active=3)
    stream.await_query(q, run_for=60, stop_file=str(stop_file), poll_s=0.01)
    assert len(q.waits) == 4 and q.active == -1  # three polls saw a batch under way, the fourth none
    stop_file.unlink()
    q = _Query(active=0)
    stream.await_query(q, run_for=0.05, stop_file=str(stop_file), poll_s=0.01)
    assert len(q.waits) >= 2 and all(w <= 0.01 for w in q.waits)  # no stop file: until run_for
    q = _Query(active=0)
    stream.await_query(q, run_for=7, stop_file=None)
    assert q.waits == [7]
