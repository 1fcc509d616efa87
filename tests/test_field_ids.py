"""Parquet field ids in base files (lakehouse.field_ids): every base file carries the ids
of the Iceberg schema it is published under, so Daft (which reads by field id only, no name
mapping) reads what lakehouse's read-optimized read reads; ids survive schema evolution, a table
published before ids existed keeps its numbering, and two writers adding columns at once never
share an id."""

from __future__ import annotations

import glob
import json
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lakehouse
from lakehouse.errors import CommitConflictError
from lakehouse import field_ids
from lakehouse.iceberg import sync_iceberg
from lakehouse.errors import IcebergSyncError
from lakehouse.field_schema import Field, Schema, check_evolution
from lakehouse.field_schema import FIELD_ID
from lakehouse.timeline.commit_metadata import CommitMetadata
from tests.iceberg.iceberg_oracle import MANUAL_SYNC, daft_read, assert_same_table, static_table, sync_and_compare
from tests.interop.hudi_oracle import assert_same_rows, hudi_read

MAP = pa.map_(pa.string(), pa.int64())


def batch(ids, ts, *, extra: bool = False) -> pa.Table:
    n = len(ids)
    cols = {"id": ids, "city": ["sf" if i < "m" else "la" for i in ids], "ts": [ts] * n,
            "tags": [[f"t{ts}"]] * n,
            "attrs": pa.array([[("k", ts)]] * n, MAP),
            "loc": pa.array([{"lat": float(ts)}] * n)}
    if extra:
        cols["note"] = [f"n{ts}"] * n
    return pa.table(cols)


def parquet_ids(path: str) -> dict[tuple[str, ...], int]:
    """Column path -> field id, as the parquet footer holds them (Iceberg's path names)."""
    out: dict[tuple[str, ...], int] = {}

    def walk(f: pa.Field, parent: tuple[str, ...], name: str | None = None) -> None:
        path = parent + (name or f.name,)
        meta = f.metadata or {}
        if FIELD_ID in meta:
            out[path] = int(meta[FIELD_ID])
        t = f.type
        if pa.types.is_struct(t):
            for c in t:
                walk(c, path)
        elif pa.types.is_list(t) or pa.types.is_large_list(t):
            walk(t.value_field, path, "element")
        elif pa.types.is_map(t):
            walk(t.key_field, path, "key")
            walk(t.item_field, path, "value")

    for f in pq.read_schema(path):
        walk(f, ())
    return out


def iceberg_ids(location) -> dict[tuple[str, ...], int]:
    """Column path -> field id in the current schema, as pyiceberg reads the metadata."""
    from pyiceberg.types import ListType, MapType, StructType

    out: dict[tuple[str, ...], int] = {}

    def walk(t, path):
        if isinstance(t, StructType):
            for f in t.fields:
                out[path + (f.name,)] = f.field_id
                walk(f.field_type, path + (f.name,))
        elif isinstance(t, ListType):
            out[path + ("element",)] = t.element_id
            walk(t.element_type, path + ("element",))
        elif isinstance(t, MapType):
            out[path + ("key",)] = t.key_id
            out[path + ("value",)] = t.value_id
            walk(t.value_type, path + ("value",))

    walk(static_table(location).schema().as_struct(), ())
    return out


def check_files(table, res) -> None:
    """Every data file of the current snapshot carries exactly the published ids of its columns."""
    published = iceberg_ids(res)
    files = [t.file.file_path.removeprefix("file://") for t in static_table(res).scan().plan_files()]
    assert files
    for f in files:
        ids = parquet_ids(f)
        assert ids, f"{f} carries no field ids"
        for path, fid in ids.items():
            assert published.get(path) == fid, f"{f}: column {'.'.join(path)} has id {fid}, published {published.get(path)}"


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_daft_reads_every_service_of_a_default_table(tmp_path, table_type):
    """A table with defaults (MOR: BUCKET index, logs), nested columns, a column added,
    compacted, cleaned, a write rolled back: Daft and pyiceberg read the
    read-optimized rows after each step, and every file's ids are the published ones."""
    t = lakehouse.create_table(str(tmp_path / "t"), name="trips", record_key="id", partition_by="city",
                               ordering_field="ts", table_type=table_type, options=MANUAL_SYNC)
    steps = [
        ("insert", lambda: t.upsert(batch(["a", "b", "x", "y"], 1))),
        ("upsert", lambda: t.upsert(batch(["a", "z"], 2))),
        ("column added", lambda: t.upsert(batch(["b", "q"], 3, extra=True))),
        ("upsert after", lambda: t.upsert(batch(["a", "y"], 4, extra=True))),
        ("compaction", lambda: t.compact(force=True) if table_type == "MERGE_ON_READ" else None),
        ("clean", lambda: t.clean(options={"hoodie.cleaner.commits.retained": "1"})),
    ]
    for what, step in steps:
        step()
        res = sync_and_compare(t, what)
        check_files(t, res)
    ids_before = iceberg_ids(res)
    pending = t.upsert(batch(["a"], 9, extra=True), commit=False)
    t.rollback(pending)
    res = sync_and_compare(t, "rollback")
    assert iceberg_ids(res) == ids_before
    if table_type == "MERGE_ON_READ":
        # Compaction wrote base files with logs folded in: they must carry ids too.
        assert any("compaction" == s.summary["hudi.action"] for s in static_table(res).metadata.snapshots)
    # hudi-rs reads the files with ids as it reads any Hudi table.
    assert_same_rows(t.read(), hudi_read(t.path), f"{table_type} with field ids, hudi-rs")


def test_ids_stay_stable_as_the_schema_grows(tmp_path):
    t = lakehouse.create_table(str(tmp_path / "t"), name="trips", record_key="id", partition_by="city",
                               ordering_field="ts", options=MANUAL_SYNC)
    t.upsert(batch(["a"], 1))
    first = iceberg_ids(sync_iceberg(t))
    t.upsert(batch(["b"], 2, extra=True))
    second = iceberg_ids(sync_iceberg(t))
    assert {p: i for p, i in second.items() if p in first} == first, "an existing column changed its id"
    new = {p: i for p, i in second.items() if p not in first}
    assert set(new) == {("note",)}
    assert min(new.values()) > max(first.values()), "a new column reused an id"
    # The commit recorded the ids its files carry, next to Hudi's schema.
    last = t.timeline.completed_writes().instants[-1]
    stored = field_ids.FieldIds.of_commit(t.active.commit_metadata(last))
    assert stored is not None and stored.paths == second


def test_a_table_published_before_ids_keeps_its_numbering(tmp_path, fixture_tables):
    """A table Hudi wrote (no field ids in its files), published, then written by lakehouse with
    a column added: the new files carry the published ids, the new column the next one."""
    root = tmp_path / "v6_nonpartitioned"
    shutil.copytree(fixture_tables["sample_table/cow/v6_nonpartitioned"], root)
    t = lakehouse.open_table(str(root))
    before = iceberg_ids(sync_iceberg(t))
    rows = t.read().slice(0, 1)
    data = rows.drop_columns([c for c in rows.column_names if c.startswith("_hoodie_")])
    data = data.append_column("added", pa.array([7], pa.int64()))
    t.upsert(data, options={"hoodie.write.set.null.for.missing.columns": "true"})
    res = sync_iceberg(t)
    after = iceberg_ids(res)
    assert {p: i for p, i in after.items() if p in before} == before
    assert after[("added",)] > max(before.values())
    newest = [f for f in glob.glob(str(root / "*.parquet"))
              if t.timeline.completed_writes().instants[-1].time in f]
    assert newest, "the upsert wrote no base file"
    for f in newest:
        assert parquet_ids(f) == {p: after[p] for p in parquet_ids(f)}
        assert set(parquet_ids(f)) == set(after) - {p for p in after if p[-1] == "array"}
    assert_same_table(static_table(res).scan().to_arrow(), t.read(read_optimized=True), "pyiceberg")
    # hudi-rs reads the Hudi-written files (no ids) and lakehouse's (ids) side by side.
    assert_same_rows(t.read(), hudi_read(t.path), "mixed files, hudi-rs")


def test_two_writers_adding_columns_at_once_never_share_an_id(tmp_path):
    occ = {"hoodie.write.concurrency.mode": "OPTIMISTIC_CONCURRENCY_CONTROL",
           "hoodie.write.num.retries.on.conflict.failures": "0", **MANUAL_SYNC}
    t = lakehouse.create_table(str(tmp_path / "t"), name="trips", record_key="id", partition_by="city",
                               ordering_field="ts", index="SIMPLE", options=occ)
    t.upsert(batch(["a", "x"], 1))
    one = t.upsert(batch(["b"], 2).append_column("left", pa.array([1])), commit=False)
    two = t.upsert(batch(["y"], 2).append_column("right", pa.array([2])), commit=False)  # another partition
    t.commit(one)
    with pytest.raises(CommitConflictError, match="field id") as e:
        t.commit(two)
    assert "Help:" in str(e.value)
    # Written again (as Table.write's retries do), it numbers its column after the first's.
    t.upsert(batch(["y"], 3).append_column("left", pa.array([None], pa.int64()))
             .append_column("right", pa.array([2])))
    res = sync_and_compare(t, "after the retried writer")
    ids = iceberg_ids(res)
    assert ids[("left",)] != ids[("right",)]
    check_files(t, res)


def test_the_publisher_refuses_files_numbered_otherwise():
    published = Schema(0, (Field(1, "id", False, "string"), Field(2, "v", False, "long")))
    renumbered = Schema(1, (Field(1, "id", False, "string"), Field(3, "v", False, "long")))
    with pytest.raises(IcebergSyncError, match="field id 3 in the files of instant 1.*published") as e:
        check_evolution(published, renumbered, "instant 1")
    assert ".hoodie/iceberg" in str(e.value)
    retyped = Schema(1, (Field(1, "id", False, "string"), Field(2, "v", False, "string")))
    with pytest.raises(IcebergSyncError, match="changed type"):
        check_evolution(published, retyped, "instant 1")


def test_damaged_ids_in_a_commit_are_an_error_not_a_renumbering():
    meta = CommitMetadata(extra_metadata={field_ids.SCHEMA_KEY: "{not json"})
    with pytest.raises(IcebergSyncError, match="unreadable field ids"):
        field_ids.FieldIds.of_commit(meta, "instant 1")
    ok = CommitMetadata(extra_metadata={field_ids.SCHEMA_KEY: json.dumps(
        {"type": "struct", "schema-id": 0, "fields": [{"id": 4, "name": "id", "required": True, "type": "string"}]}),
        field_ids.LAST_COLUMN_ID_KEY: "9"})
    f = field_ids.FieldIds.of_commit(ok)
    assert f.paths == {("id",): 4} and f.last_column_id == 9


def test_daft_cannot_read_files_without_ids_which_is_why_they_carry_them(tmp_path, fixture_tables):
    """The failure this change fixes, kept as a check of the judge: a Hudi-written table (no
    ids in its files) is read by pyiceberg through the name mapping, but not by Daft."""
    root = tmp_path / "v6_simplekeygen_nonhivestyle"
    shutil.copytree(fixture_tables["sample_table/cow/v6_simplekeygen_nonhivestyle"], root)
    t = lakehouse.open_table(str(root))
    res = sync_and_compare(t, "Hudi-written", daft=False)
    with pytest.raises(Exception, match="field ID"):
        daft_read(res)
