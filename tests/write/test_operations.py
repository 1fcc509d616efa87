"""Write operations and layouts, each checked through lakehouse and hudi-rs."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lakehouse
from lakehouse.file_group.naming import BaseFileName, LogFileName
from tests.interop.hudi_oracle import hudi_read


def rows(t, cols=("id", "v")):
    return sorted(tuple(r[c] for c in cols) for r in t.read(columns=list(cols)).to_pylist())


def hrows(path, cols=("id", "v")):
    h = hudi_read(path)
    return sorted(tuple(r[c] for c in cols) for r in h.select(list(cols)).to_pylist()) if h else []


def files(path, pred):
    out = []
    for root, dirs, names in os.walk(path):
        dirs[:] = [d for d in dirs if d != ".hoodie"]
        out += [os.path.join(root, n) for n in names if pred(n)]
    return out


@pytest.mark.parametrize("table_type", ["MERGE_ON_READ", "COPY_ON_WRITE"])
def test_insert_overwrite_replaces_only_the_batch_partitions(tmp_path, table_type):
    p = tmp_path / "t"
    t = lakehouse.create_table(str(p), name="o", table_type=table_type, record_key="id",
                               partition_by="city", ordering_field="ts")
    t.upsert(pa.table({"id": ["a", "b", "c"], "city": ["sf", "sf", "la"], "ts": [1, 1, 1], "v": [1, 2, 3]}))
    instant = t.insert_overwrite(pa.table({"id": ["z"], "city": ["sf"], "ts": [2], "v": [9]}))
    assert t.timeline.get(instant).action == "replacecommit"
    assert rows(t) == [("c", 3), ("z", 9)]
    assert hrows(p) == rows(t)
    first = t.timeline.completed_writes().first.time
    assert rows(t.__class__(t.storage, t.config)) == rows(t)
    assert sorted(r["id"] for r in t.read(as_of=first, columns=["id"]).to_pylist()) == ["a", "b", "c"]


@pytest.mark.parametrize("index", ["GLOBAL_SIMPLE", "GLOBAL_BLOOM"])
def test_global_index_moves_a_record_whose_partition_changes(tmp_path, index):
    p = tmp_path / "t"
    t = lakehouse.create_table(str(p), name="g", table_type="MERGE_ON_READ", record_key="id",
                               partition_by="city", ordering_field="ts", index=index)
    t.upsert(pa.table({"id": ["a", "b"], "city": ["sf", "sf"], "ts": [1, 1], "v": [1, 2]}))
    t.upsert(pa.table({"id": ["a"], "city": ["la"], "ts": [2], "v": [10]}))
    assert rows(t, ("id", "city", "v")) == [("a", "la", 10), ("b", "sf", 2)]
    assert hrows(p, ("id", "city", "v")) == rows(t, ("id", "city", "v"))


def test_global_index_without_partition_update_keeps_the_old_partition(tmp_path):
    p = tmp_path / "t"
    t = lakehouse.create_table(str(p), name="g", table_type="COPY_ON_WRITE", record_key="id",
                               partition_by="city", ordering_field="ts", index="GLOBAL_SIMPLE",
                               options={"hoodie.simple.index.update.partition.path": "false"})
    t.upsert(pa.table({"id": ["a"], "city": ["sf"], "ts": [1], "v": [1]}))
    t.upsert(pa.table({"id": ["a"], "city": ["la"], "ts": [2], "v": [10]}))
    got = t.read(columns=["id", "v", "_hoodie_partition_path"]).to_pylist()
    assert got == [{"id": "a", "v": 10, "_hoodie_partition_path": "sf"}]


@pytest.mark.parametrize("index", ["SIMPLE", "BLOOM"])
def test_a_key_deleted_in_a_log_then_inserted_again_is_upserted_once(tmp_path, index):
    """Found by the reliability suite's state machine (nightly profile): delete (a log block),
    insert (no lookup: a new file group), upsert. Java Hudi's base-file-only lookup would tag
    the upsert to both file groups; the merged view must not."""
    t = lakehouse.create_table(str(tmp_path / "t"), name="d", table_type="MERGE_ON_READ", record_key="id",
                               ordering_field="ts", partition_by="p", index=index)
    b = lambda ks, ts: pa.table({"id": ks, "p": ["x"] * len(ks), "ts": [ts] * len(ks), "v": [ts] * len(ks)})  # noqa: E731
    t.upsert(b(["k4", "k1"], 1))
    t.delete(pa.table({"id": ["k4"], "p": ["x"]}))
    t.insert(b(["k4"], 3))
    t.upsert(b(["k4"], 4))
    assert rows(t, ("id", "v")) == [("k1", 1), ("k4", 4)]
    assert hrows(tmp_path / "t", ("id", "v")) == rows(t, ("id", "v"))


def test_non_global_index_keeps_one_record_per_partition(tmp_path):
    t = lakehouse.create_table(str(tmp_path / "t"), name="g", record_key="id", partition_by="city",
                               ordering_field="ts", index="SIMPLE")
    t.upsert(pa.table({"id": ["a"], "city": ["sf"], "ts": [1], "v": [1]}))
    t.upsert(pa.table({"id": ["a"], "city": ["la"], "ts": [2], "v": [10]}))
    assert rows(t, ("id", "city", "v")) == [("a", "la", 10), ("a", "sf", 1)]


@pytest.mark.parametrize("mode", ["GLOBAL_SORT", "NONE"])
def test_bulk_insert_sort_modes_and_file_sizes(tmp_path, mode):
    p = tmp_path / "t"
    t = lakehouse.create_table(str(p), name="b", table_type="MERGE_ON_READ", record_key="id",
                               partition_by="city", ordering_field="ts", index="SIMPLE",
                               options={"hoodie.parquet.max.file.size": 20_000,
                                        "hoodie.parquet.small.file.limit": 10_000,
                                        "hoodie.copyonwrite.record.size.estimate": 100,
                                        "hoodie.bulkinsert.sort.mode": mode})
    n = 1000
    ids = [f"id{(i * 7919) % n:05d}" for i in range(n)]
    cities = ["sf" if i % 2 else "la" for i in range(n)]
    t.bulk_insert(pa.table({"id": ids, "city": cities, "ts": list(range(n)), "v": list(range(n))}))
    bases = files(p, lambda n: n.endswith(".parquet"))
    assert len(bases) >= 4, "200 records per file at 100 bytes each means several files per partition"
    by_city: dict[str, list[list[str]]] = {}
    for f in sorted(bases, key=lambda f: int(pq.read_table(f, columns=["_hoodie_commit_seqno"])
                    .column(0)[0].as_py().split("_")[1])):
        keys = pq.read_table(f, columns=["_hoodie_record_key"]).column(0).to_pylist()
        by_city.setdefault(os.path.basename(os.path.dirname(f)), []).append(keys)
    for city, parts in by_city.items():
        given = [k for k, c in zip(ids, cities) if c == city]
        if mode == "GLOBAL_SORT":
            assert [k for keys in parts for k in keys] == sorted(given), \
                "GLOBAL_SORT: files in key order, each a narrow key range"
        else:
            assert [k for keys in parts for k in keys] == given, "NONE keeps the batch's order"
    assert len(rows(t)) == n and hrows(p) == rows(t)


def test_inserts_fill_small_files_before_new_file_groups(tmp_path):
    p = tmp_path / "t"
    # Hudi-sized footers (the bloom filter alone is ~430 KB) make every tiny file a few hundred KB.
    opts = {"hoodie.parquet.max.file.size": 5_000_000, "hoodie.parquet.small.file.limit": 4_000_000}
    t = lakehouse.create_table(str(p), name="s", table_type="COPY_ON_WRITE", record_key="id",
                               ordering_field="ts", options=opts)
    t.insert(pa.table({"id": [f"a{i}" for i in range(100)], "ts": [1] * 100, "v": list(range(100))}))
    first = files(p, lambda n: n.endswith(".parquet"))
    assert len(first) == 1
    t.insert(pa.table({"id": [f"b{i}" for i in range(100)], "ts": [1] * 100, "v": list(range(100))}))
    fids = {BaseFileName.parse(os.path.basename(f)).file_id for f in files(p, lambda n: n.endswith(".parquet"))}
    assert len(fids) == 1, "the second batch went into the small file group, not a new one"
    assert len(rows(t)) == 200 and hrows(p) == rows(t)


def test_log_files_roll_over_at_the_max_size(tmp_path):
    p = tmp_path / "t"
    t = lakehouse.create_table(str(p), name="r", table_type="MERGE_ON_READ", record_key="id",
                               ordering_field="ts", index="BUCKET",
                               options={"hoodie.bucket.index.num.buckets": 1,
                                        "hoodie.logfile.max.size": 4096,
                                        "hoodie.logfile.data.block.max.size": 2048})
    t.upsert(pa.table({"id": [f"k{i}" for i in range(300)], "ts": [1] * 300, "v": list(range(300))}))
    t.upsert(pa.table({"id": [f"k{i}" for i in range(300)], "ts": [2] * 300, "v": [i + 1000 for i in range(300)]}))
    logs = [LogFileName.parse(os.path.basename(f)) for f in files(p, lambda n: ".log." in n)]
    assert len(logs) > 1 and sorted(l.version for l in logs) == list(range(1, len(logs) + 1))
    assert all(os.path.getsize(f) <= 4096 * 2 for f in files(p, lambda n: ".log." in n))
    assert rows(t) == sorted((f"k{i}", i + 1000) for i in range(300)) == hrows(p)


def test_torn_last_log_block_is_skipped(tmp_path):
    p = tmp_path / "t"
    t = lakehouse.create_table(str(p), name="r", table_type="MERGE_ON_READ", record_key="id",
                               ordering_field="ts", index="BUCKET", options={"hoodie.bucket.index.num.buckets": 1})
    t.upsert(pa.table({"id": ["a"], "ts": [1], "v": [1]}))
    t.upsert(pa.table({"id": ["a"], "ts": [2], "v": [2]}))
    (log,) = files(p, lambda n: ".log." in n)
    good = open(log, "rb").read()
    # A later writer (an instant never completed) died mid-append: half its block follows.
    # (A torn block of a committed instant is an error: tests/reliability/test_torn_files.py.)
    theirs = good.replace(t.timeline.completed_writes().last.time.encode(), b"20991231235959999")
    with open(log, "ab") as f:
        f.write(theirs[: len(theirs) // 2])
    assert rows(lakehouse.open_table(str(p))) == [("a", 2)]


@pytest.mark.parametrize("table_type", ["MERGE_ON_READ", "COPY_ON_WRITE"])
def test_complex_keys_and_timestamp_partitions(tmp_path, table_type):
    p = tmp_path / "t"
    t = lakehouse.create_table(str(p), name="c", table_type=table_type, record_key=["id", "name"],
                               partition_by="event_ms", ordering_field="ts", hive_style_partitioning=False,
                               options={"hoodie.keygen.timebased.timestamp.type": "EPOCHMILLISECONDS",
                                        "hoodie.keygen.timebased.output.dateformat": "yyyy/MM/dd"})
    day = 1_700_000_000_000
    t.upsert(pa.table({"id": [1, 1, 2], "name": ["x", "y", "x"], "event_ms": [day, day, day + 86_400_000],
                       "ts": [1, 1, 1], "v": [1, 2, 3]}))
    t.upsert(pa.table({"id": [1], "name": ["y"], "event_ms": [day], "ts": [2], "v": [20]}))
    got = rows(t, ("_hoodie_record_key", "_hoodie_partition_path", "v"))
    assert got == [("id:1,name:x", "2023/11/14", 1), ("id:1,name:y", "2023/11/14", 20),
                   ("id:2,name:x", "2023/11/15", 3)]
    assert hrows(p, ("_hoodie_record_key", "_hoodie_partition_path", "v")) == got
    assert os.path.exists(p / "2023" / "11" / "14" / ".hoodie_partition_metadata")


def test_non_partitioned_table(tmp_path):
    p = tmp_path / "t"
    t = lakehouse.create_table(str(p), name="n", table_type="MERGE_ON_READ", record_key="id",
                               ordering_field="ts")
    t.upsert(pa.table({"id": ["a", "b"], "ts": [1, 1], "v": [1, 2]}))
    t.upsert(pa.table({"id": ["b"], "ts": [2], "v": [3]}))
    assert rows(t) == [("a", 1), ("b", 3)] == hrows(p)
    assert (p / ".hoodie_partition_metadata").read_text().count("partitionDepth=0") == 1
    assert t.config.key_generator_type.value == "NON_PARTITION"


def test_duplicates_in_a_batch_are_precombined_by_ordering_value(tmp_path):
    t = lakehouse.create_table(str(tmp_path / "t"), name="d", record_key="id", ordering_field="ts",
                               table_type="COPY_ON_WRITE")
    t.upsert(pa.table({"id": ["a", "a", "a"], "ts": [5, 9, 7], "v": [5, 9, 7]}))
    assert rows(t) == [("a", 9)]


def test_commit_time_ordering_takes_the_last_write(tmp_path):
    t = lakehouse.create_table(str(tmp_path / "t"), name="d", record_key="id", ordering_field="ts",
                               merge_mode="COMMIT_TIME_ORDERING", table_type="MERGE_ON_READ")
    t.upsert(pa.table({"id": ["a"], "ts": [9], "v": [1]}))
    t.upsert(pa.table({"id": ["a"], "ts": [1], "v": [2]}))
    assert rows(t) == [("a", 2)] == hrows(tmp_path / "t")


@pytest.mark.parametrize("engine", ["SIMPLE", "CONSISTENT_HASHING"])
@pytest.mark.parametrize("op", ["bulk_insert", "insert_overwrite"])
def test_bucket_index_bulk_writes_land_in_bucket_file_groups(tmp_path, op, engine):
    from lakehouse.consistent_hashing import committed_ring, ring_committed
    p = tmp_path / "t"
    t = lakehouse.create_table(str(p), name="b", table_type="MERGE_ON_READ", record_key="id",
                               ordering_field="ts", index="BUCKET",
                               options={"hoodie.bucket.index.num.buckets": 4, "hoodie.index.bucket.engine": engine})
    t.write(pa.table({"id": [f"k{i}" for i in range(100)], "ts": [1] * 100, "v": list(range(100))}), op)
    fids = {BaseFileName.parse(os.path.basename(f)).file_id for f in files(p, lambda n: n.endswith(".parquet"))}
    if engine == "SIMPLE":
        assert {f[:8] for f in fids} <= {f"{b:08d}" for b in range(4)} and len(fids) <= 4
    else:  # the nodes of the ring (renewed by insert_overwrite)
        ring = committed_ring(t.meta_client.storage, "", ring_committed(t.meta_client.active.load()))
        assert fids <= {n.file_id for n in ring.nodes} and len(ring.nodes) == 4
    # The upsert finds every key by its bucket: no duplicates.
    t.upsert(pa.table({"id": [f"k{i}" for i in range(100)], "ts": [2] * 100, "v": [i + 1 for i in range(100)]}))
    assert rows(t) == sorted((f"k{i}", i + 1) for i in range(100)) == hrows(p)


def test_record_size_estimate_ignores_commits_below_the_threshold(tmp_path):
    from lakehouse.write.client import WriteClient
    t = lakehouse.create_table(str(tmp_path / "t"), name="e", record_key="id", ordering_field="ts",
                               table_type="COPY_ON_WRITE",
                               options={"hoodie.parquet.small.file.limit": 4_000_000,
                                        "hoodie.parquet.max.file.size": 5_000_000})
    t.insert(pa.table({"id": [f"a{i}" for i in range(50)], "ts": [1] * 50}))
    # ~450 KB written, under 1.0 x the 4 MB small-file limit: too small to tell, keep the default.
    assert WriteClient(t).avg_record_size(t.timeline) == 1024
    small = WriteClient(t, {"hoodie.parquet.small.file.limit": 100_000})
    written = t.active.commit_metadata(t.timeline.completed_writes().last).total("total_write_bytes")
    assert small.avg_record_size(t.timeline) == written // 50


@pytest.mark.parametrize("table_type", ["MERGE_ON_READ", "COPY_ON_WRITE"])
def test_base_file_footers_are_what_hudi_writes(tmp_path, table_type):
    from lakehouse.bloom_filter import footer_metadata
    p = tmp_path / "t"
    # The SIMPLE index: tables whose index may read the filter carry it by default.
    t = lakehouse.create_table(str(p), name="f", record_key="id", ordering_field="ts", table_type=table_type,
                               index="SIMPLE")
    t.upsert(pa.table({"id": [f"k{i:03d}" for i in range(200)], "ts": [1] * 200}))
    t.upsert(pa.table({"id": ["k005", "zzz"], "ts": [2, 2]}))
    for f in files(p, lambda n: n.endswith(".parquet")):
        md = pq.read_metadata(f).metadata
        keys = pq.read_table(f, columns=["_hoodie_record_key"]).column(0)
        # Byte-identical to what Hudi's writer puts there for the same keys in the same order.
        for k, v in footer_metadata(keys).items():
            assert md[k] == v, k
        assert b"parquet.avro.schema" in md and b"ARROW:schema" not in md


@pytest.mark.parametrize("index", ["SIMPLE", "BUCKET", "BLOOM"])
def test_bloom_filter_in_footers_can_be_turned_off_unless_the_index_needs_it(tmp_path, index):
    p = tmp_path / "t"
    t = lakehouse.create_table(str(p), name="f", record_key="id", ordering_field="ts",
                               table_type="MERGE_ON_READ", index=index,
                               options={"hoodie.parquet.bloom.filter.enabled": "false"})
    t.bulk_insert(pa.table({"id": [f"k{i:03d}" for i in range(50)], "ts": [1] * 50}))
    t.upsert(pa.table({"id": ["k005", "zzz"], "ts": [2, 2]}))
    t.compact()
    bases = files(p, lambda n: n.endswith(".parquet"))
    assert len(bases) >= 2
    for f in bases:
        md = pq.read_metadata(f).metadata
        assert (b"org.apache.hudi.bloomfilter" in md) == (index == "BLOOM"), f
    assert hrows(p, ("id", "ts")) == rows(t, ("id", "ts")) and len(rows(t, ("id",))) == 51


@pytest.mark.parametrize("table_type", ["MERGE_ON_READ", "COPY_ON_WRITE"])
def test_deletes_on_tables_with_nested_columns(tmp_path, table_type):
    p = tmp_path / "t"
    t = lakehouse.create_table(str(p), name="n", table_type=table_type, record_key="id",
                               partition_by="city", ordering_field="ts")
    t.upsert(pa.table({
        "id": ["a", "b"], "city": ["sf", "sf"], "ts": [1, 1],
        "lst": pa.array([[{"q": "x"}], []], pa.list_(pa.struct([("q", pa.string())]))),
        "m": pa.array([[("k", 1)], []], pa.map_(pa.string(), pa.int32())),
        "s": pa.array([{"a": [1]}, {"a": []}], pa.struct([("a", pa.list_(pa.int64()))]))}))
    t.delete(pa.table({"id": ["a"], "city": ["sf"]}))
    assert rows(t, ("id", "s")) == [("b", {"a": []})]
    assert hrows(p, ("id",)) == [("b",)]


@pytest.mark.parametrize("log_format", ["avro", "parquet"])
def test_nested_columns_in_logs_read_by_hudi_rs_as_written(tmp_path, log_format):
    """Log blocks of records, lists, maps and decimals (nulls at every level), Avro as Java Hudi
    writes them by default or parquet, merged over the base: hudi-rs reads what lakehouse reads."""
    from decimal import Decimal
    n = 400
    batch = pa.table({
        "id": [f"k{i}" for i in range(n)], "city": ["sf" if i % 2 else "la" for i in range(n)],
        "ts": pa.array(range(n), pa.int64()),
        "loc": pa.array([None if i % 5 == 0 else {"lat": i / 2, "lon": None if i % 3 == 0 else -float(i)}
                         for i in range(n)]),
        "tags": pa.array([None if i % 7 == 0 else [f"t{j}" for j in range(i % 4)] for i in range(n)]),
        "attrs": pa.array([[("x", i), ("y", None)] if i % 2 else [] for i in range(n)],
                          pa.map_(pa.string(), pa.int64())),
        "fare": pa.array([Decimal(i) / 100 - 3 for i in range(n)], pa.decimal128(10, 2))})
    p = tmp_path / "t"
    t = lakehouse.create_table(str(p), name="n", table_type="MERGE_ON_READ", record_key="id",
                               partition_by="city", ordering_field="ts",
                               options={"hoodie.logfile.data.block.format": log_format})
    t.bulk_insert(batch)
    changed = batch.slice(0, 150).set_column(2, "ts", pa.array(range(1000, 1150), pa.int64()))
    changed = changed.set_column(4, "tags", pa.array([["new"]] * 150))
    t.upsert(changed)
    assert files(p, lambda f: ".log." in f)
    cols = ("id", "ts", "loc", "tags", "attrs", "fare")
    ours = rows(t, cols)
    assert len(ours) == n and ours[0][1] == 1000 and ours[0][3] == ["new"]
    assert hrows(p, cols) == ours


def test_empty_and_null_partition_values_are_never_pruned(tmp_path):
    t = lakehouse.create_table(str(tmp_path / "t"), name="e", record_key="id", partition_by="city",
                               ordering_field="ts")
    t.upsert(pa.table({"id": ["a", "b", "c"], "city": ["sf", "", None], "ts": [1, 1, 1], "v": [1, 2, 3]}))
    assert rows(t.__class__(t.storage, t.config)) == [("a", 1), ("b", 2), ("c", 3)]
    got = t.read(columns=["id"], filters=[("city", "=", "")]).column("id").to_pylist()
    assert got == ["b"]
    assert sorted(t.read(columns=["id"], filters=[("city", "!=", "sf")]).column("id").to_pylist()) == ["b"]


def test_naive_timestamps_are_stored_as_utc_instants(tmp_path):
    from datetime import datetime
    t = lakehouse.create_table(str(tmp_path / "t"), name="n", record_key="id", ordering_field="ts")
    t.upsert(pa.table({"id": ["a"], "ts": [1], "at": pa.array([datetime(2024, 1, 1, 1)], pa.timestamp("us"))}))
    t.upsert(pa.table({"id": ["b"], "ts": [1], "at": pa.array([datetime(2024, 1, 2)], pa.timestamp("us"))}))
    assert t.schema().field("at").type == pa.timestamp("us", tz="UTC")
    got = t.read(columns=["id"], filters=[("at", "=", datetime(2024, 1, 1, 1))]).column("id").to_pylist()
    assert got == ["a"]
    for f in files(tmp_path / "t", lambda n: n.endswith(".parquet")):
        assert pq.read_schema(f).field("at").type == pa.timestamp("us", tz="UTC")


def test_tables_without_meta_fields_are_read_only(tmp_path, fixture_tables):
    import shutil
    from lakehouse.errors import ConfigError, UnsupportedTableError
    p = tmp_path / "t"
    shutil.copytree(fixture_tables["sample_table/mor/parquet/v6_simplekeygen_hivestyle_no_metafields"], p)
    t = lakehouse.open_table(str(p))
    assert t.read().num_rows == 4
    with pytest.raises(UnsupportedTableError, match="populate.meta.fields"):
        t.delete(pa.table({"id": [1], "byteField": [10]}))
    with pytest.raises(ConfigError, match="populate.meta.fields"):
        lakehouse.create_table(str(tmp_path / "u"), name="u", record_key="id", ordering_field="ts",
                               options={"hoodie.populate.meta.fields": "false"})


@pytest.mark.parametrize("table_type", ["MERGE_ON_READ", "COPY_ON_WRITE"])
@pytest.mark.parametrize("index", ["GLOBAL_SIMPLE", "GLOBAL_BLOOM"])
def test_global_index_stale_moves_and_moves_back(tmp_path, table_type, index):
    p = tmp_path / "t"
    t = lakehouse.create_table(str(p), name="g", table_type=table_type, record_key="id",
                               partition_by="city", ordering_field="ts", index=index)
    t.upsert(pa.table({"id": ["a", "b"], "city": ["sf", "sf"], "ts": [5, 5], "v": [1, 2]}))
    t.upsert(pa.table({"id": ["a"], "city": ["la"], "ts": [1], "v": [99]}))  # older: must not move
    assert rows(t, ("id", "city", "v")) == [("a", "sf", 1), ("b", "sf", 2)]
    t.upsert(pa.table({"id": ["a"], "city": ["la"], "ts": [6], "v": [10]}))
    t.upsert(pa.table({"id": ["a"], "city": ["sf"], "ts": [7], "v": [20]}))  # and back again
    assert rows(t, ("id", "city", "v")) == [("a", "sf", 20), ("b", "sf", 2)]
    assert hrows(p, ("id", "city", "v")) == rows(t, ("id", "city", "v"))


@pytest.mark.parametrize("table_type", ["MERGE_ON_READ", "COPY_ON_WRITE"])
def test_a_key_stored_twice_is_updated_and_deleted_everywhere(tmp_path, table_type):
    p = tmp_path / "t"
    t = lakehouse.create_table(str(p), name="d", table_type=table_type, record_key="id",
                               partition_by="city", ordering_field="ts", index="SIMPLE")
    t.bulk_insert(pa.table({"id": ["a"], "city": ["sf"], "ts": [1], "v": [1]}))
    t.bulk_insert(pa.table({"id": ["a"], "city": ["sf"], "ts": [1], "v": [2]}))  # inserts may duplicate
    t.upsert(pa.table({"id": ["a"], "city": ["sf"], "ts": [5], "v": [50]}))
    assert rows(t) == [("a", 50), ("a", 50)] == hrows(p)
    t.delete(pa.table({"id": ["a"], "city": ["sf"]}))
    assert rows(t) == [] == hrows(p)


@pytest.mark.parametrize("n", [0, 1, 9, 10, 11, 999, 1000, 12345])
def test_sequence_numbers_are_hudis_commit_seqno_format(n):
    """HoodieRecord.generateSequenceId: <instant>_<task partition>_<record index>."""
    from lakehouse.io.handles import sequence_numbers
    assert sequence_numbers("20240101000000000_3_", n).to_pylist() == \
        [f"20240101000000000_3_{i}" for i in range(n)]
