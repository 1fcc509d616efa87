"""write_dataframe: a DataFrame written by Spark executors gives the table the Python path gives."""

from __future__ import annotations

import os
import random

import pyarrow as pa
import pytest

import lakehouse
from lakehouse.errors import RecordKeyError
from lakehouse.file_group.naming import bucket_of_file_id
from tests.spark.spark_tables import assert_same_rows, assert_same_tables

pytestmark = pytest.mark.spark
CITIES = ("sf", "la", "nyc")
BUCKETS = 4


def create(path, table_type, index="BUCKET"):
    """With the BUCKET index: the SIMPLE engine's fixed count (consistent hashing's rings:
    test_a_consistent_hashing_table_same_as_python_path_before_and_after_a_resize)."""
    opts = {"hoodie.bucket.index.num.buckets": BUCKETS, "hoodie.index.bucket.engine": "SIMPLE"} if index == "BUCKET" else {}
    return lakehouse.create_table(str(path), name="trips", table_type=table_type, record_key="id",
                                  partition_by="city", ordering_field="ts", index=index, options=opts)


def rows_for(keys, ts, rnd):
    # Some keys appear twice in a batch, some with the same ts: precombine must keep the one
    # the Python path keeps (the later row on a tie), so the executors must keep input order.
    keys = list(keys) + rnd.sample(list(keys), min(len(keys), 300))
    return pa.table({"id": [f"k{k:06d}" for k in keys], "city": [CITIES[k % 3] for k in keys],
                     "ts": [ts + (rnd.random() < 0.5) for _ in keys],
                     "v": [rnd.randrange(10**9) for _ in keys]})


def history(seed=5, n=20_000):
    """(operation, batch) pairs: inserts, updates with new keys, deletes, re-inserts."""
    rnd = random.Random(seed)
    gone = rnd.sample(range(n), n * 3 // 40)
    return [
        ("upsert", rows_for(range(n), 1, rnd)),
        ("upsert", rows_for(rnd.sample(range(n), n // 5) + list(range(n, n + n // 10)), 10, rnd)),
        ("delete", pa.table({"id": [f"k{k:06d}" for k in gone], "city": [CITIES[k % 3] for k in gone]})),
        ("upsert", rows_for(rnd.sample(range(n + n // 10), n * 3 // 20) + gone[:n // 40], 20, rnd)),
    ]


def bucket_groups(path):
    t = lakehouse.open_table(str(path))
    return {(s.partition, s.file_id) for s in t.file_system_view().latest_slices()}


@pytest.mark.parametrize("table_type", ["MERGE_ON_READ", "COPY_ON_WRITE"])
def test_bucket_table_same_as_python_path(tmp_path, spark, table_type):
    from lakehouse.spark.write import write_dataframe

    ours, ref = create(tmp_path / "ours", table_type), create(tmp_path / "ref", table_type)
    ours.write = None  # the bucket index must take the executors' path, not the fallback
    for op, batch in history():
        ref.write(batch, op)
        df = spark.createDataFrame(batch)
        assert df.rdd.getNumPartitions() > 1  # so input order across tasks matters
        t = write_dataframe(ours, df, op)
        assert ours.timeline.get(t).is_completed
    assert_same_tables(tmp_path / "ours", tmp_path / "ref")
    groups = bucket_groups(tmp_path / "ours")
    buckets = {(p, bucket_of_file_id(f)) for p, f in groups}
    assert None not in {b for _, b in buckets}
    # One file group per (partition, bucket), the same buckets the Python path uses.
    assert len(buckets) == len(groups) == len(CITIES) * BUCKETS
    assert buckets == {(p, bucket_of_file_id(f)) for p, f in bucket_groups(tmp_path / "ref")}


def test_phase_one_only_then_commit(tmp_path, spark):
    from lakehouse.spark.write import write_dataframe

    ours, ref = create(tmp_path / "ours", "MERGE_ON_READ"), create(tmp_path / "ref", "MERGE_ON_READ")
    op, batch = history(n=2000)[0]
    ref.write(batch, op, extra_metadata={"source": "x"})
    t = write_dataframe(ours, spark.createDataFrame(batch), op, commit=False, extra_metadata={"source": "x"})
    assert ours.timeline.get(t).is_inflight and ours.read().num_rows == 0
    ours.commit(t)
    assert_same_tables(tmp_path / "ours", tmp_path / "ref")
    meta = ours.active.commit_metadata(ours.timeline.get(t))
    assert meta.extra_metadata["source"] == "x" and "schema" in meta.extra_metadata


def test_empty_dataframe_commits_an_empty_instant(tmp_path, spark):
    from lakehouse.spark.write import write_dataframe

    t = create(tmp_path / "t", "COPY_ON_WRITE")
    schema = pa.schema([("id", pa.string()), ("city", pa.string()), ("ts", pa.int64()), ("v", pa.int64())])
    instant = write_dataframe(t, spark.createDataFrame(schema.empty_table()))
    assert t.timeline.get(instant).is_completed and t.read().num_rows == 0


def _failing_write_task(job):
    from lakehouse.spark import write as w
    real = w._real_write_task(job)

    def per_task(batches):
        yield from real(batches)  # the task's data files are written, then it dies
        raise RuntimeError("executor lost")
    return per_task


def test_failed_executor_rolls_the_instant_back(tmp_path, spark, monkeypatch):
    from lakehouse.errors import WriteError
    from lakehouse.spark import write as w

    t = create(tmp_path / "t", "MERGE_ON_READ")
    first, second = history(n=2000)[:2]
    w.write_dataframe(t, spark.createDataFrame(first[1]))
    before = sorted(t.read(columns=["id", "ts", "v"]).to_pylist(), key=repr)
    files_before = files_outside_timeline(tmp_path / "t")
    monkeypatch.setattr(w, "_real_write_task", w._write_task, raising=False)
    monkeypatch.setattr(w, "_write_task", _failing_write_task)
    with pytest.raises(WriteError, match="executor lost|failed"):
        w.write_dataframe(t, spark.createDataFrame(second[1]))
    t = lakehouse.open_table(str(tmp_path / "t"))
    assert not [i for i in t.timeline.instants if not i.is_completed]
    assert sorted(t.read(columns=["id", "ts", "v"]).to_pylist(), key=repr) == before
    assert files_outside_timeline(tmp_path / "t") == files_before


def files_outside_timeline(path):
    return sorted(os.path.relpath(os.path.join(d, f), path) for d, _, fs in os.walk(path)
                  for f in fs if ".hoodie" not in os.path.relpath(d, path).split(os.sep)[0])


def test_null_key_fails_before_the_instant(tmp_path, spark):
    from lakehouse.spark.write import write_dataframe

    t = create(tmp_path / "t", "MERGE_ON_READ")
    timeline_before = sorted(os.listdir(tmp_path / "t" / ".hoodie"))
    batch = pa.table({"id": ["a", None, "c"], "city": ["sf", "la", "sf"], "ts": [1, 2, 3], "v": [1, 2, 3]})
    with pytest.raises(RecordKeyError, match="null"):
        write_dataframe(t, spark.createDataFrame(batch))
    assert sorted(os.listdir(tmp_path / "t" / ".hoodie")) == timeline_before
    assert len(lakehouse.open_table(str(tmp_path / "t")).timeline.instants) == 0
    assert files_outside_timeline(tmp_path / "t") == []
    batch = batch.set_column(0, "id", pa.array(["a", "b", "c"])).set_column(
        2, "ts", pa.array([1, None, 3], pa.int64()))
    with pytest.raises(RecordKeyError, match="ordering field"):
        write_dataframe(t, spark.createDataFrame(batch))
    assert files_outside_timeline(tmp_path / "t") == []


def moving_history(seed=7, n=4000):
    """Like history(), and some updates carry another city: a global index moves those records
    (delete in the old partition, insert in the new), a partitioned one stores them twice."""
    rnd = random.Random(seed)
    out = history(seed, n)
    moved = rnd.sample(range(n), n // 20)
    out.append(("upsert", pa.table({"id": [f"k{k:06d}" for k in moved],
                                    "city": [CITIES[(k + 1) % 3] for k in moved],
                                    "ts": [30 - (i % 4 == 0) * 29 for i in range(len(moved))],
                                    "v": [rnd.randrange(10**9) for _ in moved]})))
    out.append(("insert", rows_for(range(n + n // 10, n + n // 5), 40, rnd)))
    out.append(("bulk_insert", pa.table({"id": [f"b{k:06d}" for k in range(n // 4)],
                                         "city": [CITIES[k % 3] for k in range(n // 4)],
                                         "ts": [50] * (n // 4), "v": list(range(n // 4))})))
    return out


# Small files and a low file size, so inserts fill small file groups and spill into new ones.
SIZES = {"hoodie.parquet.small.file.limit": "100000", "hoodie.parquet.max.file.size": "200000",
         "hoodie.copyonwrite.record.size.estimate": "200", "hoodie.index.bloom.num_entries": "1000"}


@pytest.mark.parametrize("table_type,index", [
    ("MERGE_ON_READ", "SIMPLE"), ("COPY_ON_WRITE", "BLOOM"),
    ("MERGE_ON_READ", "GLOBAL_BLOOM"), ("COPY_ON_WRITE", "GLOBAL_SIMPLE")])
def test_indexed_table_same_as_python_path(tmp_path, spark, table_type, index):
    from lakehouse.spark.write import write_dataframe

    ours = create(tmp_path / "ours", table_type, index=index)
    ref = create(tmp_path / "ref", table_type, index=index)
    ours.write = None  # the executors' path, not the driver fallback
    for op, batch in moving_history():
        ref.write(batch, op, options=SIZES)
        write_dataframe(ours, spark.createDataFrame(batch), op, options=SIZES)
    assert_same_rows(tmp_path / "ours", tmp_path / "ref", same_layout=False)
    a, b = lakehouse.open_table(str(tmp_path / "ours")), lakehouse.open_table(str(tmp_path / "ref"))
    # The same insert plan: inserts spread over several file groups per partition, about as
    # many as the Python path makes (a hash may leave a planned group empty; a bulk insert's
    # range shuffle may cut a partition's run once more).
    fa, fb = a.stats().file_groups, b.stats().file_groups
    assert fb >= 2 * len(CITIES) and fb - 3 <= fa <= fb + len(CITIES)
    keys = a.read(columns=["id"]).column("id")
    if index.startswith("GLOBAL"):
        assert len(keys) == len(set(keys.to_pylist()))  # moved, never stored twice
    # The executors' base files carry the Iceberg field ids (lakehouse.field_ids):
    # Daft, which reads by field id only, reads the table as pyiceberg and lakehouse do.
    from tests.iceberg.iceberg_oracle import sync_and_compare
    sync_and_compare(a, f"Spark-written {table_type}/{index}")


def test_insert_overwrite_falls_back(tmp_path, spark):
    from lakehouse.spark.write import write_dataframe

    ours, ref = create(tmp_path / "ours", "COPY_ON_WRITE"), create(tmp_path / "ref", "COPY_ON_WRITE")
    for op, batch in history(n=1000)[:2] + [("insert_overwrite", history(seed=9, n=500)[0][1])]:
        ref.write(batch, op)
        write_dataframe(ours, spark.createDataFrame(batch), op)
    assert_same_rows(tmp_path / "ours", tmp_path / "ref")


def test_a_conflicting_write_is_redone_as_the_python_writer_does(tmp_path, spark, monkeypatch):
    """The Spark writer goes through WriteClient.run: with several writers
    (hoodie.write.concurrency.mode=OPTIMISTIC_CONCURRENCY_CONTROL) a conflict at commit redoes
    the whole write under a new instant, up to hoodie.write.num.retries.on.conflict.failures."""
    from lakehouse.spark.write import write_dataframe
    from lakehouse.write.client import WriteClient

    occ = {"hoodie.write.concurrency.mode": "OPTIMISTIC_CONCURRENCY_CONTROL",
           "hoodie.write.num.retries.on.conflict.failures": "2",
           "hoodie.write.commit.retry.min_wait_ms": "1"}
    lakehouse.create_table(str(tmp_path / "t"), name="t", record_key="id", partition_by="city",
                           ordering_field="ts", merge_mode="COMMIT_TIME_ORDERING", index="SIMPLE",
                           options=occ)
    t = lakehouse.open_table(str(tmp_path / "t"))

    def batch(ids, v):
        return pa.table({"id": ids, "city": ["sf"] * len(ids), "ts": [1] * len(ids), "v": [v] * len(ids)})
    t.upsert(batch(["k1", "k2"], 0))
    other = t.upsert(batch(["k1"], 1), commit=False)  # another writer, between its phases
    phase_ones: list[str] = []
    real = WriteClient.write_prepared

    def other_commits_first(self, prepared, **kw):
        inst = real(self, prepared, **kw)
        if not phase_ones:
            t.commit(other)  # same file group: our commit now conflicts
        phase_ones.append(inst)
        return inst
    monkeypatch.setattr(WriteClient, "write_prepared", other_commits_first)
    ours = write_dataframe(t, spark.createDataFrame(batch(["k2"], 2)), "upsert")
    assert len(phase_ones) == 2 and ours == phase_ones[1] > other, "the write was not redone"
    assert t.timeline.get(phase_ones[0]) is None  # the conflicting attempt was rolled back
    assert sorted((r["id"], r["v"]) for r in t.read().to_pylist()) == [("k1", 1), ("k2", 2)]


def test_a_first_write_sizes_the_bucket_count_as_the_python_writer_does(tmp_path, spark):
    """A Merge-On-Read table created with defaults (lakehouse.write.bucket_sizing): the Spark
    writer's first write fixes the provisional bucket count too, before any file is written."""
    from lakehouse.properties import read_table_config
    from lakehouse.spark.write import write_dataframe
    from lakehouse.write import bucket_sizing

    t = lakehouse.create_table(str(tmp_path / "t"), name="t", record_key="id", partition_by="city",
                               ordering_field="ts")
    assert bucket_sizing.is_provisional(t.config)
    op, b = history(n=2000)[0]
    write_dataframe(t, spark.createDataFrame(b), op)
    stored = read_table_config(t.storage)
    assert not bucket_sizing.is_provisional(stored) and stored.bucket_num >= 1
    # Each partition's ring starts with the count fixed (consistent hashing, the default).
    from lakehouse.consistent_hashing import HashingMetadata
    assert bucket_groups(tmp_path / "t") <= {(p, n.file_id) for p in CITIES
                                             for n in HashingMetadata.initial(p, stored.bucket_num).nodes}


def _spying_write_task(marks: str):
    """A write task that notes, in ``marks``, each spilled write it makes (the real task runs in
    a Spark worker: the spy is set there and taken off after)."""
    def make(job):
        from lakehouse.spark import write as w
        real = w._real_write_task(job)

        def per_task(batches):
            from lakehouse.write import spill
            write_groups = spill.write_groups

            def noting(*a, **kw):
                sp = a[3]
                big = sum(size > spill._split_above(a[7]) for size in sp.sizes.values())
                open(os.path.join(marks, f"{os.getpid()}-{id(sp)}-{len(sp.groups)}-{big}"), "w").close()
                return write_groups(*a, **kw)
            spill.write_groups = noting
            try:
                yield from real(batches)
            finally:
                spill.write_groups = write_groups
        return per_task
    return make


@pytest.mark.parametrize("table_type,index,ops", [
    ("MERGE_ON_READ", "BUCKET", "history"), ("COPY_ON_WRITE", "BUCKET", "history"),
    ("COPY_ON_WRITE", "SIMPLE", "moving"), ("MERGE_ON_READ", "GLOBAL_BLOOM", "moving")])
def test_write_tasks_larger_than_the_budget_spill_and_write_the_same_table(tmp_path, spark, monkeypatch,
                                                                          table_type, index, ops):
    """Issue 40, point 6: a write task whose rows pass write.task.max.size spills them by file
    group and writes one group at a time, a large one in parts (lakehouse.write.spill), into the
    file groups the driver planned: the table the Python writer makes of the batches whole."""
    from lakehouse.spark import write as w

    marks = tmp_path / "marks"
    marks.mkdir()
    monkeypatch.setattr(w, "_real_write_task", w._write_task, raising=False)
    monkeypatch.setattr(w, "_write_task", _spying_write_task(str(marks)))
    ours = create(tmp_path / "ours", table_type, index=index)
    ref = create(tmp_path / "ref", table_type, index=index)
    steps = history(n=4000) if ops == "history" else moving_history(n=3000)
    # Wide rows (~250 bytes): each task takes 2-6x the budget below.
    steps = [(op, b if op == "delete" else b.append_column("pad", pa.array([f"{v:0200d}" for v in b.column("v").to_pylist()])))
             for op, b in steps]
    budget = {"write.task.max.size": "0.0625"}  # MB, the least it takes
    for op, batch in steps:
        ref.write(batch, op, options=SIZES)
        w.write_dataframe(ours, spark.createDataFrame(batch), op, options={**SIZES, **budget})
    spilled = [m.name.split("-") for m in marks.iterdir()]
    assert len(spilled) >= len(steps) - 1, "the write tasks held their rows"  # (not the deletes)
    assert any(int(big) for *_, big in spilled), "no group was written in parts"
    assert_same_rows(tmp_path / "ours", tmp_path / "ref", same_layout=index == "BUCKET")
    keys = lakehouse.open_table(str(tmp_path / "ours")).read(columns=["id", "city"])
    pairs = list(zip(keys.column("id").to_pylist(), keys.column("city").to_pylist()))
    assert len(pairs) == len(set(pairs))


def test_a_consistent_hashing_table_same_as_python_path_before_and_after_a_resize(tmp_path, spark):
    """The executors route by each partition's hash ring, as the Python path does; after a
    clustering split the buckets, by the new rings."""
    from lakehouse.consistent_hashing import committed_ring, record_hashes, ring_committed
    from lakehouse.spark.write import write_dataframe

    def make(name):
        return lakehouse.create_table(str(tmp_path / name), name="trips", table_type="MERGE_ON_READ",
                                      record_key="id", partition_by="city", ordering_field="ts", options={
                                          "hoodie.index.bucket.engine": "CONSISTENT_HASHING",
                                          "hoodie.bucket.index.num.buckets": 2,
                                          "hoodie.parquet.max.file.size": 16 * 1024,
                                          "hoodie.parquet.small.file.limit": 0})
    ours, ref = make("ours"), make("ref")
    ours.write = None
    steps = history()
    for op, batch in steps[:2]:
        ref.write(batch, op)
        write_dataframe(ours, spark.createDataFrame(batch), op)
    assert_same_tables(tmp_path / "ours", tmp_path / "ref")
    assert bucket_groups(tmp_path / "ours") == bucket_groups(tmp_path / "ref")  # the initial rings' ids
    for t in (ours, ref):
        assert t.cluster(force=True).committed
    for op, batch in steps[2:]:
        ref.write(batch, op)
        write_dataframe(ours, spark.createDataFrame(batch), op)
    assert_same_rows(tmp_path / "ours", tmp_path / "ref", same_layout=False)
    table = lakehouse.open_table(str(tmp_path / "ours"))
    rows = table.read(columns=["_hoodie_record_key", "_hoodie_partition_path", "_hoodie_file_name"]).to_pylist()
    timeline = table.meta_client.active.load()
    for city in CITIES:
        ring = committed_ring(table.meta_client.storage, city, ring_committed(timeline))
        assert ring.seq_no == 1 and len(ring.nodes) > 2
        mine = [r for r in rows if r["_hoodie_partition_path"] == city]
        nodes = ring.locate(record_hashes(pa.array([r["_hoodie_record_key"] for r in mine]), ("id",), ("id",)))
        assert [ring.nodes[i].file_id for i in nodes.tolist()] == \
            [r["_hoodie_file_name"].split("_")[0].lstrip(".") for r in mine]
