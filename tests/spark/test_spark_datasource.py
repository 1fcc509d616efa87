"""format("lakehouse"): reads equal Table.read, writes equal the Python writer, a streaming query
applies every batch once across restarts."""

from __future__ import annotations

import json
import time

import pyarrow as pa
import pytest

import lakehouse
from lakehouse.iceberg import background
from lakehouse.spark.datasource import DEFAULT_IDENTIFIER, SINK_CHECKPOINT_KEY, sink_checkpoint, sink_commits
from tests.iceberg.iceberg_oracle import sync_and_compare
from tests.spark.spark_tables import batch, write_history

pytestmark = pytest.mark.spark


def _rows(table: pa.Table, cols=("id", "city", "ts", "v")) -> list[tuple]:
    return sorted(tuple(r[c] for c in cols) for r in table.select(list(cols)).to_pylist())


def _spark_rows(df, cols=("id", "city", "ts", "v")) -> list[tuple]:
    return sorted(tuple(r[c] for c in cols) for r in df.select(*cols).collect())


@pytest.mark.parametrize("table_type", ["MERGE_ON_READ", "COPY_ON_WRITE"])
def test_reads_equal_the_python_reads(tmp_path, spark, table_type):
    t = write_history(tmp_path / "t", table_type=table_type)
    times = [i.time for i in t.timeline.completed_writes()]
    def read():  # a DataFrameReader keeps the options set on it: a fresh one per query
        return spark.read.format("lakehouse")
    assert _spark_rows(read().load(t.path)) == _rows(t.read())
    assert sorted(read().load(t.path).columns) == sorted(t.read().column_names)
    ro = read().option("hoodie.datasource.query.type", "read_optimized").load(t.path)
    assert _spark_rows(ro) == _rows(t.read(read_optimized=True))
    as_of = read().option("as.of.instant", times[1]).load(t.path)
    assert _spark_rows(as_of) == _rows(t.read(as_of=times[1]))
    inc = (read().option("hoodie.datasource.query.type", "incremental")
           .option("hoodie.datasource.read.begin.instanttime", times[0])
           .option("hoodie.datasource.read.end.instanttime", times[2]).load(t.path))
    assert _spark_rows(inc) == _rows(t.read_changes(times[0], times[2]))


def test_bad_read_options_are_refused_naming_the_option(tmp_path, spark):
    t = write_history(tmp_path / "t")
    with pytest.raises(Exception, match="hoodie.datasource.query.type"):
        spark.read.format("lakehouse").option("hoodie.datasource.query.type", "fast").load(t.path).collect()
    with pytest.raises(Exception, match="hoodie.datasource.read.begin.instanttime"):
        spark.read.format("lakehouse").option("hoodie.datasource.query.type", "incremental").load(t.path)


def test_pushable_filters_are_those_arrow_answers_as_spark_does():
    """What PushdownReader takes from Spark: comparisons and IN on string, integer and boolean
    columns; floats (NaN orders differently), NOT IN and nulls (three-valued logic), nested
    columns and what Table.read filters cannot say stay with Spark."""
    from pyspark.sql import datasource as ds
    from lakehouse.spark.datasource import pushable_filters
    schema = pa.schema([("id", pa.string()), ("ts", pa.int64()), ("ok", pa.bool_()), ("fare", pa.float64()),
                        ("at", pa.timestamp("us", "UTC"))])
    keep = [ds.EqualTo(("id",), "k1"), ds.GreaterThanOrEqual(("ts",), 3), ds.LessThan(("ts",), 9),
            ds.In(("id",), ("a", "b")), ds.EqualTo(("ok",), True)]
    leave = [ds.GreaterThan(("fare",), 1.0), ds.EqualTo(("ts",), 1.5), ds.In(("id",), ("a", None)),
             ds.Not(ds.In(("id",), ("a",))), ds.EqualNullSafe(("id",), "a"), ds.IsNull(("id",)),
             ds.StringStartsWith(("id",), "k"), ds.EqualTo(("nested", "x"), 1), ds.EqualTo(("gone",), 1),
             ds.EqualTo(("ts",), True), ds.EqualTo(("at",), 5), ds.In(("id",), ())]
    taken, rest = pushable_filters(keep + leave, schema)
    assert taken == [("id", "=", "k1"), ("ts", ">=", 3), ("ts", "<", 9), ("id", "in", ["a", "b"]), ("ok", "=", True)]
    assert [id(f) for f in rest] == [id(f) for f in leave]


def test_pushed_filters_plan_again_on_the_timeline_the_query_first_saw(tmp_path, monkeypatch):
    """Spark asks for the reader (the first plan, whose schema it was given) before it pushes
    filters: the plan with the filters reads the same instants, even after a commit in between,
    and does not list the timeline again."""
    from pyspark.sql import datasource as ds
    from lakehouse.spark.datasource import PushdownReader, read_plan
    from lakehouse.timeline.active import ActiveTimeline
    t = write_history(tmp_path / "t")
    options = {"path": t.path}
    first = read_plan(options)
    reader = PushdownReader.__new__(PushdownReader)  # what DataSource.reader builds, sans Spark
    reader.plan, reader.options = first, dict(options)
    t.upsert(batch(["k99999"], 99))
    background.wait_all()  # its Iceberg publisher lists the timeline too: done before counting
    loads = []
    real_load = ActiveTimeline.load
    monkeypatch.setattr(ActiveTimeline, "load", lambda self, *a, **k: loads.append(1) or real_load(self, *a, **k))
    assert list(reader.pushFilters([ds.GreaterThanOrEqual(("ts",), 0)])) == []
    assert loads == []
    assert reader.plan.plan.visible == first.plan.visible
    assert reader.plan.plan.row_filter is not None
    ctx = reader.plan.context()
    rows = pa.concat_tables(x for i in range(len(reader.plan.slices)) for x in reader.plan.read_slice(i, ctx))
    assert "k99999" not in rows.column("id").to_pylist()
    assert _rows(rows) == _rows(t.read(as_of=max(first.plan.visible)))


def test_spark_filters_prune_partitions_and_rows_before_the_jvm(tmp_path, spark):
    """Under lakehouse's session (register: filter pushdown on), a query's filters on the
    partition column skip the other partitions' files (one made unreadable here is never
    opened), filters on other columns are applied after the merge on the executors; the rows
    equal Table.read with the same filters, and a float filter, left to Spark, keeps Spark's NaN
    semantics."""
    import pyspark.sql.functions as F
    from lakehouse.spark.datasource import PUSHDOWN_CONF
    t = write_history(tmp_path / "t")
    assert spark.conf.get(PUSHDOWN_CONF) == "true"
    la = next(p for p in (tmp_path / "t" / "la").iterdir() if p.suffix == ".parquet")
    good = la.read_bytes()
    background.wait_all()  # the Iceberg publisher reads the base files of the groups it publishes
    la.write_bytes(b"not parquet")  # any read of partition la now fails
    with pytest.raises(Exception, match="not a readable parquet file"):
        spark.read.format("lakehouse").load(t.path).count()
    df = spark.read.format("lakehouse").load(t.path)
    got = df.where((F.col("city") == "sf") & (F.col("ts") >= 2) & (F.col("v") < 3020))
    assert _spark_rows(got) == _rows(t.read(filters=[("city", "=", "sf"), ("ts", ">=", 2), ("v", "<", 3020)]))
    assert _spark_rows(got) and _spark_rows(df.where(F.col("city").isin("sf", "nyc"))) == _rows(
        t.read(filters=[("city", "in", ["sf", "nyc"])]))
    la.write_bytes(good)
    # A record key pinned: on this BUCKET table only its bucket's file groups are read.
    key = t.read(filters=[("city", "=", "nyc")]).column("id")[0].as_py()
    assert _spark_rows(df.where(F.col("id") == key)) == _rows(t.read(filters=[("id", "=", key)]))
    # Left to Spark: NaN > 1.0 holds in Spark SQL (NaN is the largest value), not in Arrow.
    f = lakehouse.create_table(str(tmp_path / "f"), name="f", record_key="id", ordering_field="ts")
    f.upsert(pa.table({"id": ["a", "b", "c"], "ts": [1, 1, 1], "fare": [float("nan"), 0.5, 2.0]}))
    assert sorted(r.id for r in spark.read.format("lakehouse").load(f.path).where("fare > 1.0").collect()) == ["a", "c"]


def test_a_session_that_turned_pushdown_off_still_reads(tmp_path, spark):
    """spark.sql.python.filterPushdown.enabled=false, set by the user: register keeps it and
    registers the reader that takes no filters (PySpark refuses one that does)."""
    from lakehouse.spark import datasource
    t = write_history(tmp_path / "t")
    spark.conf.set(datasource.PUSHDOWN_CONF, "false")
    try:
        datasource.register(spark)
        assert spark.conf.get(datasource.PUSHDOWN_CONF) == "false"
        got = spark.read.format("lakehouse").load(t.path).where("city = 'sf'")
        assert _spark_rows(got) == _rows(t.read(filters=[("city", "=", "sf")]))
    finally:
        spark.conf.set(datasource.PUSHDOWN_CONF, "true")
        datasource.register(spark)


def _create(path, table_type="MERGE_ON_READ"):
    return lakehouse.create_table(str(path), name="trips", table_type=table_type, record_key="id",
                                  partition_by="city", ordering_field="ts")


@pytest.mark.parametrize("table_type", ["MERGE_ON_READ", "COPY_ON_WRITE"])
@pytest.mark.parametrize("op", ["upsert", "insert", "bulk_insert", "delete", "insert_overwrite",
                                "insert_overwrite_table"])
def test_each_write_operation_equals_the_python_writer(tmp_path, spark, op, table_type):
    ours, ref = _create(tmp_path / "ours", table_type), _create(tmp_path / "ref", table_type)
    first = batch([f"k{i:03d}" for i in range(60)], 1)
    ours.upsert(first)
    ref.upsert(first)
    second = batch([f"k{i:03d}" for i in range(40, 90)], 2)
    if op == "delete":
        second = second.select(["id", "city"])
    ref.write(second, op)
    (spark.createDataFrame(second.to_pandas()).write.format("lakehouse")
     .option("hoodie.datasource.write.operation", op).mode("append").save(ours.path))
    ours = lakehouse.open_table(ours.path)
    assert _rows(ours.read()) == _rows(ref.read())
    assert _rows(ours.read(read_optimized=True)) == _rows(ref.read(read_optimized=True))
    last = ours.timeline.completed_writes().last
    assert ours.active.commit_metadata(last).operation_type == ref.active.commit_metadata(
        ref.timeline.completed_writes().last).operation_type
    assert not list((tmp_path / "ours" / ".hoodie" / ".aux" / "lakehouse" / "staging").glob("*/*"))
    sync_and_compare(ours, f"format('lakehouse') {op} on {table_type}")  # pyiceberg and Daft


def test_a_write_creates_a_missing_table_from_hudis_datasource_keys(tmp_path, spark):
    path = str(tmp_path / "new")
    b = batch([f"k{i:03d}" for i in range(30)], 1)
    (spark.createDataFrame(b.to_pandas()).write.format("lakehouse")
     .option("hoodie.table.name", "trips").option("hoodie.datasource.write.recordkey.field", "id")
     .option("hoodie.datasource.write.partitionpath.field", "city")
     .option("hoodie.datasource.write.precombine.field", "ts").mode("append").save(path))
    t = lakehouse.open_table(path)
    assert t.config.record_key_fields == ("id",) and t.config.partition_fields == ("city",)
    assert _rows(t.read()) == _rows(b)
    # mode("overwrite") replaces the rows, keeping the table and its history.
    b2 = batch([f"k{i:03d}" for i in range(100, 105)], 2)
    spark.createDataFrame(b2.to_pandas()).write.format("lakehouse").mode("overwrite").save(path)
    t = lakehouse.open_table(path)
    assert _rows(t.read()) == _rows(b2) and len(t.timeline.completed_writes()) == 2


def test_options_under_the_commit_metadata_prefix_go_into_the_commit(tmp_path, spark):
    """HoodieSparkSqlWriter: option keys starting with hoodie.datasource.write.commitmeta.key.prefix
    (default "_") are the commit's extra metadata; other unknown keys are still refused."""
    t = _create(tmp_path / "t")
    df = spark.createDataFrame(batch(["k1", "k2"], 1).to_pandas())
    df.write.format("lakehouse").option("_source", "landing/2026-11-24").mode("append").save(t.path)
    (df.write.format("lakehouse").option("hoodie.datasource.write.commitmeta.key.prefix", "job.")
     .option("job.id", "42").mode("append").save(t.path))
    t = lakehouse.open_table(t.path)
    first, second = [t.active.commit_metadata(i).extra_metadata for i in t.timeline.completed_writes()]
    assert first["_source"] == "landing/2026-11-24" and "job.id" not in first
    assert second["job.id"] == "42" and "_source" not in second
    assert "hoodie.datasource.write.commitmeta.key.prefix" not in second
    with pytest.raises(Exception, match="job.id"):  # not under the (default) prefix: refused
        df.write.format("lakehouse").option("job.id", "42").mode("append").save(t.path)
    with pytest.raises(Exception, match="_source"):  # nor under another prefix
        (df.write.format("lakehouse").option("hoodie.datasource.write.commitmeta.key.prefix", "job.")
         .option("_source", "x").mode("append").save(t.path))
    with pytest.raises(Exception, match="commitmeta.key.prefix is empty"):
        df.write.format("lakehouse").option("hoodie.datasource.write.commitmeta.key.prefix", "").mode(
            "append").save(t.path)
    assert len(lakehouse.open_table(t.path).timeline.completed_writes()) == 2


def test_a_bad_write_fails_before_anything_is_written(tmp_path, spark):
    t = _create(tmp_path / "t")
    df = spark.createDataFrame(pa.table({"id": ["a"], "ts": [1], "v": [1]}).to_pandas())  # no city
    with pytest.raises(Exception, match="city"):
        df.write.format("lakehouse").mode("append").save(t.path)
    with pytest.raises(Exception, match="hoodie.datasource.write.operation"):
        (spark.createDataFrame(batch(["k1"], 1).to_pandas()).write.format("lakehouse")
         .option("hoodie.datasource.write.operation", "merge_everything").mode("append").save(t.path))
    assert len(lakehouse.open_table(t.path).timeline) == 0


def _checkpoints(t) -> list[int]:
    """Batch ids as Hudi's CommitUtils.readCheckpointValue reads them: a map of the sink's
    identifier to the batch id."""
    out = []
    for inst in t.timeline.completed_writes():
        v = t.active.commit_metadata(inst).extra_metadata.get(SINK_CHECKPOINT_KEY)
        if v:
            pairs = json.loads(v)
            assert list(pairs) == [DEFAULT_IDENTIFIER], pairs
            out.append(int(pairs[DEFAULT_IDENTIFIER]))
    return out


def test_the_sink_checkpoint_is_hudis_and_the_one_lakehouse_wrote_before_is_still_read(tmp_path):
    """CommitUtils.getCheckpointValueAsString / readCheckpointValue: {identifier: batch id}. A
    table a Hudi streaming sink (or lakehouse before it wrote Hudi's layout) committed to holds
    the batches the query must skip on restart."""
    t = _create(tmp_path / "t")
    assert json.loads(sink_checkpoint("q1", 7)) == {"q1": "7"}
    t.upsert(batch(["k001"], 1), extra_metadata={SINK_CHECKPOINT_KEY: '{"q1": "3", "other": "9"}'})  # Hudi's
    t.upsert(batch(["k002"], 2), extra_metadata={SINK_CHECKPOINT_KEY: '{"4": "q1"}'})  # lakehouse's old one
    t.upsert(batch(["k003"], 3), extra_metadata={SINK_CHECKPOINT_KEY: '{"other": "11"}'})
    assert [b for _, b in sink_commits(t, "q1")] == [3, 4]
    assert [b for _, b in sink_commits(t, "other")] == [9, 11]
    assert sink_commits(t, "nobody") == []
    # A checkpoint that is not a map fails loudly (CommitUtils.readCheckpointValue throws too):
    # skipping it could apply a batch twice.
    t.upsert(batch(["k004"], 4), extra_metadata={SINK_CHECKPOINT_KEY: "[3]"})
    with pytest.raises(lakehouse.errors.CorruptFileError, match=SINK_CHECKPOINT_KEY):
        sink_commits(t, "q1")


def test_a_streaming_query_applies_each_batch_once_and_skips_a_replayed_batch(tmp_path, spark):
    """Hudi's HoodieStreamingSink: the batch id goes into the commit's extra metadata
    (_hudi_streaming_sink_checkpoint); a batch the table already holds is skipped."""
    from lakehouse.spark.datasource import LakehouseStreamWriter, Sink, Staged

    t = _create(tmp_path / "t")
    src = tmp_path / "src"
    src.mkdir()
    schema = "id string, city string, ts long, v long"
    query = (spark.readStream.schema(schema).json(str(src)).writeStream.format("lakehouse")
             .option("checkpointLocation", str(tmp_path / "ck")).trigger(processingTime="200 milliseconds")
             .start(t.path))
    try:
        for n in range(3):
            b = batch([f"k{i:03d}" for i in range(n * 10, n * 10 + 15)], n + 1)
            (src / f"b{n}.json").write_text("\n".join(json.dumps(r) for r in b.to_pylist()))
            deadline = time.time() + 120
            while len(_checkpoints(lakehouse.open_table(t.path))) < n + 1:
                assert time.time() < deadline, "the stream did not commit the batch"
                time.sleep(0.2)
    finally:
        query.stop()
    t = lakehouse.open_table(t.path)
    assert _checkpoints(t) == [0, 1, 2]
    # Each batch's commit returned with its Iceberg snapshot published (Spark may end the Python
    # worker that ran it as soon as it returns): nobody waited, the view is at the last batch.
    from lakehouse.iceberg.store import MetadataStore
    md = MetadataStore(t.storage).load()[1]
    assert md is not None and md.current_snapshot.instant == t.timeline.completed_writes().last.time
    expected = {}
    for n in range(3):
        for r in batch([f"k{i:03d}" for i in range(n * 10, n * 10 + 15)], n + 1).to_pylist():
            expected[r["id"]] = (r["id"], r["city"], r["ts"], r["v"])
    assert _rows(t.read()) == sorted(expected.values())
    # The query restarted after its commit but before its own checkpoint replays batch 2:
    writes = len(t.timeline.completed_writes())
    sink = Sink.of({"path": t.path}, spark.createDataFrame([], schema).schema, False, streaming=True)
    replay = LakehouseStreamWriter(sink)
    replay.commit([Staged(None, 0)], 2)
    assert len(lakehouse.open_table(t.path).timeline.completed_writes()) == writes
    replay.commit([Staged(None, 0)], 3)  # a new batch id commits
    assert _checkpoints(lakehouse.open_table(t.path)) == [0, 1, 2, 3]


def _land(src, batches):
    src.mkdir()
    for n, b in enumerate(batches):
        (src / f"b{n:02d}.json").write_text("\n".join(json.dumps(r) for r in b.to_pylist()))


def _driver(src, t, ck, env):
    import subprocess
    import sys
    return subprocess.Popen([sys.executable, "-m", "tests.spark.stream_driver", str(src), t.path, str(ck)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


@pytest.mark.parametrize("crash", [pytest.param("commit_worker_killed_with_the_batch_staged", marks=pytest.mark.long),
                                   "commit_worker_killed_after_commit", "driver_sigkilled"])
def test_a_streaming_query_killed_and_restarted_applies_every_row_once(tmp_path, spark_env, crash):
    """SIGKILL mid-batch, then the query restarted from its checkpoint: Spark replays the batch it
    had not recorded; the table holds each batch once (its batch id once among the commits),
    equal to a model of the upserts, and hudi-rs reads it identically."""
    import os
    import signal

    from tests.interop.hudi_oracle import canonical, hudi_read

    t = lakehouse.create_table(str(tmp_path / "t"), name="trips", record_key="id", partition_by="city",
                               ordering_field="ts")
    batches = [batch([f"k{i:03d}" for i in range(n * 7, n * 7 + 12)], n + 1) for n in range(5)]
    _land(tmp_path / "src", batches)
    ck = tmp_path / "ck"
    env = dict(spark_env)
    if crash.startswith("commit_worker_killed"):
        # The process committing batch 0 dies with its rows staged and nothing committed, or once
        # the instant is complete but before Spark records the batch: the restarted query
        # replays it, and applies it only in the first case.
        point = "datasource.before_commit" if "staged" in crash else "commit.after_complete"
        env["LAKEHOUSE_FAULTS"] = f"{point}:kill@{tmp_path / 'fired'}"
        first = _driver(tmp_path / "src", t, ck, env)
        assert first.wait(timeout=300) != 0
        assert (tmp_path / "fired").exists(), "the fault point was not reached"
        assert _checkpoints(lakehouse.open_table(t.path)) == ([] if "staged" in crash else [0])
    else:
        first = _driver(tmp_path / "src", t, ck, env)
        deadline = time.time() + 300
        while not _checkpoints(lakehouse.open_table(t.path)):
            assert first.poll() is None and time.time() < deadline, first.stderr.read()[-3000:]
            time.sleep(0.05)
        os.killpg(first.pid, signal.SIGKILL)  # the driver, its JVM and its Python workers
        assert first.wait(timeout=60) == -signal.SIGKILL
        assert len(_checkpoints(lakehouse.open_table(t.path))) < len(batches), "killed after the last batch"
    env.pop("LAKEHOUSE_FAULTS", None)
    again = _driver(tmp_path / "src", t, ck, env)
    assert again.wait(timeout=300) == 0, again.stderr.read()[-3000:]
    t = lakehouse.open_table(t.path)
    assert sorted(_checkpoints(t)) == list(range(5)), _checkpoints(t)
    model = {}
    for b in batches:
        for r in b.to_pylist():
            model[r["id"]] = (r["id"], r["city"], r["ts"], r["v"])
    assert _rows(t.read()) == sorted(model.values())
    cols = ["id", "city", "ts", "v"]
    assert canonical(hudi_read(t.path.removeprefix("file://")), cols) == canonical(t.read(), cols)
    sync_and_compare(t, f"streamed, {crash}")  # pyiceberg and Daft


def test_a_table_the_write_would_create_is_not_created_for_a_batch_lacking_its_key(tmp_path, spark):
    path = tmp_path / "new"
    with pytest.raises(Exception, match="uuid"):
        (spark.createDataFrame(batch(["k1"], 1).to_pandas()).write.format("lakehouse")
         .option("hoodie.table.name", "trips").option("hoodie.datasource.write.recordkey.field", "uuid")
         .mode("append").save(str(path)))
    assert not (path / ".hoodie" / "hoodie.properties").exists()


def test_inline_compaction_compacts_once_its_trigger_is_met(tmp_path, spark):
    """hoodie.compact.inline (Hudi's HoodieCompactionConfig.INLINE_COMPACT): after a write whose
    delta commits reach hoodie.compact.inline.max.delta.commits, the write compacts."""
    t = _create(tmp_path / "t")
    opts = {"hoodie.compact.inline": "true", "hoodie.compact.inline.max.delta.commits": "2"}
    expected = {}
    for n in range(3):
        b = batch([f"k{i:03d}" for i in range(n * 5, n * 5 + 10)], n + 1)
        expected.update({r["id"]: (r["id"], r["city"], r["ts"], r["v"]) for r in b.to_pylist()})
        spark.createDataFrame(b.to_pandas()).write.format("lakehouse").options(**opts).mode("append").save(t.path)
        t = lakehouse.open_table(t.path)
        compactions = [i for i in t.timeline.completed_writes() if t.timeline.is_compaction(i.time)]
        assert len(compactions) == (1 if n >= 1 else 0), (n, compactions)
    assert _rows(t.read()) == sorted(expected.values())
    # The compacted slices hold what the snapshot before the third write held.
    assert _rows(t.read(as_of=compactions[0].time, read_optimized=True)) == _rows(t.read(as_of=compactions[0].time))
