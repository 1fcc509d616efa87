"""Java Hudi (0.15.0 and 0.14.0) reads lakehouse tables beyond the defaults: each index (which decides the file
layout: bucket file groups or Hudi's UUID ones, inserts into base files or logs), the timeline
operations (savepoint and restore, rollback of a completed write, insert_overwrite and
delete_partitions, which are replace commits) and every column type lakehouse's writer takes.
Snapshot, read-optimized and incremental reads equal the model and lakehouse's own reads."""

from __future__ import annotations

import datetime as dt
import decimal
import pathlib

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lakehouse
from tests.interop.hudi_oracle import canonical
from tests.judges.environment import HUDI_LINES, find_hudi
from tests.judges.test_java_hudi_reads import (CITIES, SCHEMA, Model, history, java, output,
                                               read_with_each_hudi, rows, same)

pytestmark = pytest.mark.judges

INDEXES = [("MERGE_ON_READ", "SIMPLE"), ("MERGE_ON_READ", "BLOOM"), ("MERGE_ON_READ", "GLOBAL_SIMPLE"),
           ("COPY_ON_WRITE", "BUCKET"), ("COPY_ON_WRITE", "GLOBAL_BLOOM")]
KINDS = ("MERGE_ON_READ", "COPY_ON_WRITE")
MODES = ("EVENT_TIME_ORDERING", "COMMIT_TIME_ORDERING", "PARTIAL_UPDATE")


def operations(path: pathlib.Path, table_type: str,
               options: dict | None = None) -> tuple[lakehouse.Table, Model, dict]:
    """Savepoint, later writes, restore to the savepoint; a write rolled back after it
    completed; a partition overwritten and one dropped (replace commits); a clean."""
    t = lakehouse.create_table(str(path), name=path.name, table_type=table_type, record_key="id",
                               ordering_field="ts", partition_by="city", options=options)
    m = Model()
    marks = {}

    def upsert(keys, ts):
        batch = rows(keys, ts)
        m.upsert(batch)
        return t.upsert(batch)

    marks["first"] = upsert(list(range(240)), 1)
    saved = upsert(list(range(0, 260, 4)), 2)
    t.create_savepoint(saved)
    at_savepoint = dict(m.rows)
    upsert(list(range(1, 300, 3)), 3)
    t.delete(pa.table({"id": ["k0008", "k0012"], "city": [CITIES[8 % 3], CITIES[12 % 3]]}))
    t.restore(saved)
    m.rows = dict(at_savepoint)
    before = dict(m.rows)
    upsert(list(range(2, 280, 5)), 4)
    t.rollback()  # the upsert just completed
    m.rows = before
    marks["before_replace"] = upsert(list(range(3, 270, 6)), 5)
    # insert_overwrite: the partitions of the batch hold exactly its rows afterwards.
    over = pa.Table.from_pylist([r for r in rows(list(range(500, 530)), 6).to_pylist()
                                 if r["city"] == "sf"], schema=SCHEMA)
    t.insert_overwrite(over)
    m.rows = {k: r for k, r in m.rows.items() if r["city"] != "sf"}
    m.upsert(over)
    t.delete_partitions(["la"])
    m.rows = {k: r for k, r in m.rows.items() if r["city"] != "la"}
    upsert([k for k in range(600, 640) if CITIES[k % 3] == "nyc"], 7)
    t.clean()
    marks["last"] = t.timeline.completed_writes().last.time
    return t, m, marks


WIDE = pa.schema([
    ("id", pa.string()), ("ts", pa.int64()), ("part", pa.string()),
    ("i8", pa.int8()), ("i16", pa.int16()), ("u32", pa.uint32()), ("f32", pa.float32()),
    ("bin", pa.binary()), ("big", pa.large_string()),
    ("ms", pa.timestamp("ms", tz="UTC")), ("dec0", pa.decimal128(5, 0)), ("dec38", pa.decimal128(38, 10)),
    ("ints", pa.list_(pa.int32())), ("names", pa.list_(pa.string())),
    ("attrs", pa.map_(pa.string(), pa.float64())),
    ("point", pa.struct([("x", pa.float64()), ("label", pa.string())])),
    ("events", pa.list_(pa.struct([("at", pa.timestamp("us", tz="UTC")), ("n", pa.int64())]))),
    ("nested", pa.list_(pa.list_(pa.int64()))),
])


def wide_rows(keys: list[int], ts: int) -> pa.Table:
    t0 = dt.datetime(2024, 3, 1, tzinfo=dt.timezone.utc)
    out = []
    for k in keys:
        null = k % 7 == 0  # every nullable column null now and then
        out.append({
            "id": f"w{k:04d}", "ts": ts, "part": ("p0", "p1")[k % 2],
            "i8": None if null else (k % 256) - 128, "i16": -k * 3, "u32": 4_000_000_000 - k,
            "f32": k / 8, "bin": None if null else bytes([k % 256, 0, 255]), "big": "x" * (k % 5) + str(ts),
            "ms": t0 + dt.timedelta(milliseconds=k * 1001 + ts), "dec0": decimal.Decimal(k * 3),
            "dec38": decimal.Decimal(f"{k}.{ts:010d}"), "ints": None if null else [k, -k, ts],
            "names": [] if k % 5 == 0 else [f"n{k}", None], "attrs": {"a": k / 2, "b": None},
            "point": None if null else {"x": k * 0.5, "label": f"p{k}"},
            "events": [{"at": t0 + dt.timedelta(seconds=k), "n": ts}],
            "nested": [[k], [], [ts, k]],
        })
    return pa.Table.from_pylist(out, schema=WIDE)


def wide(path: pathlib.Path, table_type: str, options: dict | None = None) -> tuple[lakehouse.Table, dict]:
    t = lakehouse.create_table(str(path), name=path.name, table_type=table_type, record_key="id",
                               ordering_field="ts", partition_by="part", options=options)
    latest: dict[str, dict] = {}
    for keys, ts in ((list(range(120)), 1), (list(range(0, 140, 3)), 2)):
        batch = wide_rows(keys, ts)
        t.upsert(batch)
        latest.update({r["id"]: r for r in batch.to_pylist()})
    return t, latest


def merging(path: pathlib.Path, table_type: str, mode: str) -> lakehouse.Table:
    """Writes whose ordering values go down and tie: which version wins is the merge mode's
    call, in the writer (Copy-On-Write) or in the reader's merge of base file and log blocks
    (Merge-On-Read, no compaction: the versions sit in several log blocks)."""
    t = lakehouse.create_table(str(path), name=path.name, table_type=table_type, record_key="id",
                               ordering_field="ts", partition_by="city", merge_mode=mode)

    def write(keys, ts, fare_null=False):
        batch = rows(keys, ts)
        if fare_null:
            batch = batch.set_column(batch.schema.get_field_index("fare"), "fare",
                                     pa.array([None if k % 2 else k * 1.5 for k in keys], pa.float64()))
        t.upsert(batch)

    write(list(range(60)), 5)
    write(list(range(40)), 9)
    write(list(range(20, 60)), 3, fare_null=True)
    write(list(range(10)), 9)
    write(list(range(50, 70)), 4, fare_null=True)
    return t


@pytest.fixture(scope="module")
def matrix(tmp_path_factory):
    found = {v: find_hudi(v) for v in HUDI_LINES}
    if not any(j for j, _ in found.values()):
        pytest.skip("; ".join(why for _, why in found.values()))
    root = tmp_path_factory.mktemp("matrix")
    built, reads = {}, []

    def queue(name, t, marks):
        reads.extend([{"kind": "read", "name": f"{name}.snapshot", "path": t.path, "query": "snapshot"},
                      {"kind": "read", "name": f"{name}.read_optimized", "path": t.path, "query": "read_optimized"}])
        if marks:
            reads.append({"kind": "read", "name": f"{name}.incremental", "path": t.path, "query": "incremental",
                          "begin": marks["first"], "end": marks["last"]})

    for tt, index in INDEXES:
        name = f"{tt.lower()}_{index.lower()}"
        t, m, marks = history(root / name, tt, True, {"hoodie.index.type": index})
        assert t.config.index_type.value == index
        built[name] = (t, m, marks)
        queue(name, t, marks)
    for tt in KINDS:
        name = f"ops_{tt.lower()}"
        t, m, marks = operations(root / name, tt)
        built[name] = (t, m, marks)
        queue(name, t, marks)
        name = f"wide_{tt.lower()}"
        t, latest = wide(root / name, tt)
        built[name] = (t, latest, None)
        queue(name, t, None)
    for tt in KINDS:
        name = f"clustered_{tt.lower()}"
        t, m, marks = clustered(root / name, tt)
        built[name] = (t, m, marks)
        queue(name, t, marks)
    t, m, marks = resized(root / "resized")
    built["resized"] = (t, m, marks)
    queue("resized", t, marks)
    for tt in KINDS:
        for mode in MODES:
            name = f"merge_{tt.lower()}_{mode.lower()}"
            t = merging(root / name, tt, mode)
            built[name] = (t, None, None)
            queue(name, t, None)
    return built, read_with_each_hudi(found, root, reads)


@pytest.mark.parametrize("hudi", list(HUDI_LINES))
@pytest.mark.parametrize("table_type, index", INDEXES)
def test_java_hudi_reads_a_table_of_each_index(matrix, table_type, index, hudi):
    built, outs = matrix
    out, judge = output(outs, hudi), f"Hudi {hudi}"
    name = f"{table_type.lower()}_{index.lower()}"
    t, m, marks = built[name]
    got = java(out, f"{name}.snapshot")
    assert canonical(got.select(SCHEMA.names), SCHEMA.names) == m.table()
    same(t.read(), got, f"{name} snapshot", judge)
    same(t.read(read_optimized=True), java(out, f"{name}.read_optimized"), f"{name} read-optimized", judge)
    same(t.read_changes(marks["first"], marks["last"]), java(out, f"{name}.incremental"), f"{name} incremental", judge)


@pytest.mark.parametrize("hudi", list(HUDI_LINES))
@pytest.mark.parametrize("table_type", KINDS)
def test_java_hudi_reads_after_restore_rollback_and_replace(matrix, table_type, hudi):
    built, outs = matrix
    out, judge = output(outs, hudi), f"Hudi {hudi}"
    name = f"ops_{table_type.lower()}"
    t, m, marks = built[name]
    got = java(out, f"{name}.snapshot")
    assert canonical(got.select(SCHEMA.names), SCHEMA.names) == m.table()
    assert set(got.column("city").to_pylist()) == {"sf", "nyc"}
    keys = got.column("_hoodie_record_key")
    assert pc.count_distinct(keys).as_py() == len(keys)
    same(t.read(), got, f"{name} snapshot", judge)
    same(t.read(read_optimized=True), java(out, f"{name}.read_optimized"), f"{name} read-optimized", judge)
    same(t.read_changes(marks["first"], marks["last"]), java(out, f"{name}.incremental"), f"{name} incremental", judge)


def clustered(path: pathlib.Path, table_type: str) -> tuple[lakehouse.Table, Model, dict]:
    """The history, clustered (sorted by fare: a replacecommit with operation CLUSTER replacing
    every file group), then written to again (on Merge-On-Read: logs on the new file groups)."""
    t, m, marks = history(path, table_type, True, {"hoodie.index.type": "SIMPLE",
                                                   "hoodie.parquet.small.file.limit": 0})
    if t.timeline.pending_compactions().instants:
        t.run_compaction()
        t.commit_compaction()
    res = t.cluster(force=True, options={"hoodie.clustering.plan.strategy.sort.columns": "fare"})
    assert res.committed and res.file_groups_replaced > 3
    batch = rows(list(range(3, 340, 19)) + [450], 9)
    m.upsert(batch)
    marks["last"] = t.upsert(batch)
    return t, m, marks


@pytest.mark.parametrize("hudi", list(HUDI_LINES))
@pytest.mark.parametrize("table_type", KINDS)
def test_java_hudi_reads_a_clustered_table(matrix, table_type, hudi):
    built, outs = matrix
    out, judge = output(outs, hudi), f"Hudi {hudi}"
    name = f"clustered_{table_type.lower()}"
    t, m, marks = built[name]
    got = java(out, f"{name}.snapshot")
    assert canonical(got.select(SCHEMA.names), SCHEMA.names) == m.table()
    same(t.read(), got, f"{name} snapshot", judge)
    same(t.read(read_optimized=True), java(out, f"{name}.read_optimized"), f"{name} read-optimized", judge)
    same(t.read_changes(marks["first"], marks["last"]), java(out, f"{name}.incremental"), f"{name} incremental", judge)


def resized(path: pathlib.Path) -> tuple[lakehouse.Table, Model, dict]:
    """A consistent-hashing Merge-On-Read table whose buckets a clustering split (new file groups
    at the nodes of each partition's next ring), then written to (logs on the new buckets)."""
    t, m, marks = history(path, "MERGE_ON_READ", True, {"hoodie.index.bucket.engine": "CONSISTENT_HASHING",
                                                        "hoodie.bucket.index.num.buckets": 1,
                                                        "hoodie.parquet.max.file.size": 4096,
                                                        "hoodie.parquet.small.file.limit": 0})
    if t.timeline.pending_compactions().instants:
        t.run_compaction()
        t.commit_compaction()
    res = t.cluster(force=True)
    assert res.committed and res.files_written > res.file_groups_replaced >= 3
    batch = rows(list(range(3, 340, 19)) + [450], 9)
    m.upsert(batch)
    marks["last"] = t.upsert(batch)
    return t, m, marks


@pytest.mark.parametrize("hudi", list(HUDI_LINES))
def test_java_hudi_reads_a_table_whose_buckets_were_split(matrix, hudi):
    """HoodieConsistentHashingMetadata's rings and the resize's replacecommit as Java reads them."""
    built, outs = matrix
    out, judge = output(outs, hudi), f"Hudi {hudi}"
    t, m, marks = built["resized"]
    got = java(out, "resized.snapshot")
    assert canonical(got.select(SCHEMA.names), SCHEMA.names) == m.table()
    same(t.read(), got, "resized snapshot", judge)
    same(t.read(read_optimized=True), java(out, "resized.read_optimized"), "resized read-optimized", judge)
    same(t.read_changes(marks["first"], marks["last"]), java(out, "resized.incremental"), "resized incremental", judge)


@pytest.mark.parametrize("hudi", list(HUDI_LINES))
@pytest.mark.parametrize("table_type", KINDS)
def test_java_hudi_reads_every_column_type(matrix, table_type, hudi):
    built, outs = matrix
    out, judge = output(outs, hudi), f"Hudi {hudi}"
    name = f"wide_{table_type.lower()}"
    t, latest, _ = built[name]
    got = java(out, f"{name}.snapshot")
    expected = pa.Table.from_pylist(list(latest.values()), schema=WIDE)
    assert canonical(got.select(WIDE.names), WIDE.names) == canonical(expected, WIDE.names)
    same(t.read(), got, f"{name} snapshot", judge)


@pytest.mark.parametrize("hudi", list(HUDI_LINES))
@pytest.mark.parametrize("table_type", KINDS)
@pytest.mark.parametrize("mode", MODES)
def test_java_hudi_merges_versions_as_lakehouse_does(matrix, table_type, mode, hudi):
    built, outs = matrix
    out, judge = output(outs, hudi), f"Hudi {hudi}"
    name = f"merge_{table_type.lower()}_{mode.lower()}"
    t = built[name][0]
    ours, theirs = t.read(), java(out, f"{name}.snapshot")
    if (table_type, mode) != ("MERGE_ON_READ", "COMMIT_TIME_ORDERING"):
        same(ours, theirs, f"{name} snapshot", judge)
        return
    # The departure the README's "Hudi's semantics" section gives: Hudi 0.15's log reader
    # (HoodieMergedLogRecordScanner) reduces a key's versions in several log blocks with the
    # payload's preCombine, which for OverwriteWithLatestAvroPayload keeps the greatest ordering
    # value; only base file against logs is latest-wins. lakehouse is latest-wins throughout.
    # Keys 20-39 are the only ones with two log versions whose ordering value went down (9, then
    # 3: the first write made base files, the later ones logs).
    assert all(s.base_file is not None for s in t.file_system_view().latest_slices())
    ours_by = {r["id"]: r for r in ours.to_pylist()}
    theirs_by = {r["id"]: r for r in theirs.to_pylist()}
    assert ours_by.keys() == theirs_by.keys()
    differ = sorted(k for k in ours_by if ours_by[k] != theirs_by[k])
    assert differ == [f"k{k:04d}" for k in range(20, 40)]
    assert {ours_by[k]["ts"] for k in differ} == {3} and {theirs_by[k]["ts"] for k in differ} == {9}
