"""Bad input: a typed error naming the problem and what to do, before any file is written."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

import lakehouse
from lakehouse.iceberg import background
from lakehouse.errors import (ConfigError, CorruptFileError, LakehouseError, RecordKeyError,
                              SchemaError, TableExistsError, TableNotFoundError)


def snapshot_files(path) -> dict[str, int]:
    background.wait_all()  # the Iceberg publishing of earlier commits (in the background) first
    out = {}
    for root, _, files in os.walk(path):
        for f in files:
            p = os.path.join(root, f)
            out[os.path.relpath(p, path)] = os.path.getsize(p)
    return out


@pytest.fixture
def table(tmp_path):
    t = lakehouse.create_table(str(tmp_path / "t"), name="bad", record_key="id", partition_by="city",
                               ordering_field="ts", table_type="MERGE_ON_READ")
    t.upsert(pa.table({"id": ["a"], "city": ["sf"], "ts": [1], "v": [1.0]}))
    background.wait_all()  # published to Iceberg before a test damages a file
    return t


def expect_no_write(table, exc, batch, op="upsert", match=None):
    before = snapshot_files(table.storage.root)
    with pytest.raises(exc, match=match) as info:
        table.write(batch, op)
    assert snapshot_files(table.storage.root) == before, "a file was written before the error"
    assert "Help:" in str(info.value)
    return info.value


def test_null_record_key(table):
    e = expect_no_write(table, RecordKeyError, pa.table({"id": ["b", None], "city": ["sf", "sf"], "ts": [1, 1]}))
    assert "'id'" in e.message and "null" in e.message


def test_missing_record_key_column(table):
    expect_no_write(table, RecordKeyError, pa.table({"city": ["sf"], "ts": [1]}), match="record key column 'id'")


def test_missing_partition_column(table):
    expect_no_write(table, RecordKeyError, pa.table({"id": ["b"], "ts": [1]}), match="partition column 'city'")


def test_missing_or_null_ordering_value(table):
    expect_no_write(table, RecordKeyError, pa.table({"id": ["b"], "city": ["sf"]}), match="ordering field 'ts'")
    expect_no_write(table, RecordKeyError, pa.table({"id": ["b"], "city": ["sf"], "ts": pa.array([None], pa.int64())}),
                    match="null")


def test_incompatible_schema_change(table):
    e = expect_no_write(table, SchemaError, pa.table({"id": ["b"], "city": ["sf"], "ts": [1], "v": ["text"]}))
    assert "'v'" in e.message


def test_narrowing_type_is_refused(table):
    e = expect_no_write(table, SchemaError, pa.table({"id": ["b"], "city": ["sf"], "ts": [1.5]}))
    assert "'ts'" in e.message and "double" in e.message


def test_widening_type_is_accepted(table):
    table.upsert(pa.table({"id": ["b"], "city": ["sf"], "ts": pa.array([2], pa.int32()),
                           "v": pa.array([7], pa.int32())}))
    assert table.read(columns=["id", "v"]).sort_by("id").column("v").to_pylist() == [1.0, 7.0]


def test_new_nullable_column_evolves_the_schema(table):
    table.upsert(pa.table({"id": ["b"], "city": ["sf"], "ts": [2], "v": [2.0], "extra": ["x"]}))
    rows = table.read(columns=["id", "extra"]).sort_by("id").to_pylist()
    assert rows == [{"id": "a", "extra": None}, {"id": "b", "extra": "x"}]
    assert "extra" in table.schema().names


def test_unsupported_type(table):
    expect_no_write(table, SchemaError, pa.table({"id": ["b"], "city": ["sf"], "ts": [1],
                                                  "u": pa.array([1], pa.uint64())}))


def test_not_a_table(tmp_path):
    with pytest.raises(TableNotFoundError, match="not a table") as info:
        lakehouse.open_table(str(tmp_path))
    assert isinstance(info.value, LakehouseError) and "Help:" in str(info.value)


def test_table_exists(table):
    with pytest.raises(TableExistsError):
        lakehouse.create_table(table.storage.root, name="bad", record_key="id", ordering_field="ts")


@pytest.mark.parametrize("kwargs,match", [
    ({"options": {"hoodie.parquet.max.file.sze": 1}}, "unknown option"),
    ({"options": {"hoodie.parquet.max.file.size": "big"}}, "not an integer"),
    ({"options": {"hoodie.parquet.max.file.size": 10, "hoodie.parquet.small.file.limit": 20}}, "exceeds"),
    ({"table_type": "MERGE_ON_WRITE"}, "MERGE_ON_WRITE"),
    ({"merge_mode": "EVENT_TIME_ORDERING", "ordering_field": None}, "ordering field"),
    # A payload class that orders by a field, given without one (the merge mode left to default).
    ({"ordering_field": None,
      "options": {"hoodie.compaction.payload.class":
                  "org.apache.hudi.common.model.DefaultHoodieRecordPayload"}}, "ordering field"),
    ({"index": "HBASE"}, "HBASE"),
    ({"options": {"hoodie.bucket.index.num.buckets": 0}}, "minimum"),
])
def test_bad_options_fail_before_anything_is_created(tmp_path, kwargs, match):
    args = dict(name="t", record_key="id", ordering_field="ts")
    args.update(kwargs)
    with pytest.raises(ConfigError, match=match):
        lakehouse.create_table(str(tmp_path / "t"), **args)
    assert not (tmp_path / "t").exists()


def test_unknown_write_option(table):
    before = snapshot_files(table.storage.root)
    with pytest.raises(ConfigError, match="unknown option"):
        table.write(pa.table({"id": ["b"], "city": ["sf"], "ts": [1]}), "upsert",
                    options={"hoodie.combine.before.upsrt": "true"})
    assert snapshot_files(table.storage.root) == before


def test_corrupt_completed_commit_names_the_file(table):
    inst = table.timeline.completed_writes().last
    path = os.path.join(table.storage.root, ".hoodie", inst.file_name)
    with open(path, "wb") as f:
        f.write(b"{not json")
    t = lakehouse.open_table(table.storage.root)
    with pytest.raises(CorruptFileError) as info:
        t.read()
    assert inst.file_name in str(info.value)


def test_bad_checksum_is_refused(table):
    p = os.path.join(table.storage.root, ".hoodie", "hoodie.properties")
    text = open(p).read().replace("hoodie.table.name=bad", "hoodie.table.name=other")
    open(p, "w").write(text)
    with pytest.raises(CorruptFileError, match="checksum"):
        lakehouse.open_table(table.storage.root)


def test_bad_read_arguments(table):
    with pytest.raises(SchemaError, match="nope"):
        table.read(columns=["nope"])
    with pytest.raises(SchemaError, match="nope"):
        table.read(filters=[("nope", "=", 1)])
    with pytest.raises(ConfigError):
        table.read(filters=[("id", "=")])


@pytest.mark.parametrize("key, value, match", [
    ("hoodie.cleaner.commits.retained", "three", "not an integer"),
    ("hoodie.cleaner.policy", "NOPE", "NOPE"),
    ("hoodie.compact.inline.max.delta.commits", "five", "not an integer"),
    ("hoodie.keep.max.commits", "x", "not an integer"),
])
def test_ill_typed_service_option_on_a_write(table, key, value, match):
    """Service options a write carries (for the services run with it) are checked like the
    write's own: an ill-typed one is refused before any file is written, not ignored."""
    before = snapshot_files(table.storage.root)
    with pytest.raises(ConfigError, match=match) as info:
        table.upsert(pa.table({"id": ["b"], "city": ["sf"], "ts": [1]}), options={key: value})
    assert key in str(info.value) and "Help:" in str(info.value)
    assert snapshot_files(table.storage.root) == before


def test_read_instants_must_be_instants(table):
    """A string that is no instant time would be compared with instant times as it is:
    "yesterday" sorts after all of them and read as the latest table."""
    from lakehouse.errors import InstantNotFoundError, TimelineError
    for bad in ("yesterday", "2026-13-45", "20261345000000000", "123456789012345678", "2024"):
        with pytest.raises(TimelineError, match="neither an instant time") as info:
            table.read(as_of=bad)
        assert "Help:" in str(info.value)
        if bad != "2024":  # a prefix: Hudi's incremental reads compare instant times as strings
            with pytest.raises(TimelineError, match="neither an instant time"):
                table.read_changes(bad)
    first = table.timeline.completed_writes().first.time
    # ISO date-times (UTC) and datetimes mean the instant they name.
    from lakehouse.timeline.instant_time import parse_instant_time
    when = parse_instant_time(first)
    iso = when.strftime("%Y-%m-%dT%H:%M:%S.") + first[14:]
    assert table.read(as_of=iso).num_rows == table.read(as_of=first).num_rows == 1
    assert table.read(as_of=when).num_rows == 1
    assert table.read_changes(iso).num_rows == 0 and table.read_changes(None, iso).num_rows == 1
    assert table.read_changes("000").num_rows == 1  # Hudi's usual "from the start"
    # Before the first commit: no table to show (Iceberg and Delta refuse it too).
    with pytest.raises(InstantNotFoundError, match=f"first commit is {first}"):
        table.read(as_of="2000-01-01")
    table.upsert(pa.table({"id": ["b"], "city": ["sf"], "ts": [2], "v": [2.0]}))
    last = table.timeline.completed_writes().last.time
    with pytest.raises(ConfigError, match="start is after its end"):
        table.read_changes(last, first)


def test_bad_filters_are_typed_errors(table):
    with pytest.raises(SchemaError, match="ts is int64") as info:
        table.read(filters=[("ts", ">", "abc")])
    assert "Help:" in str(info.value)
    with pytest.raises(SchemaError, match="ts is int64"):
        table.read(filters=[("ts", "=", "5")])
    with pytest.raises(ConfigError, match="takes a list"):
        table.read(filters=[("city", "in", "sf")])
    with pytest.raises(ConfigError, match="'equals' is not a filter operator"):
        table.read(filters=[("city", "equals", "sf")])
    # What is right still reads: numbers compare across int and float, operators in any case.
    assert table.read(filters=[("ts", ">", 0.5), ("city", "IN", ["sf"])]).num_rows == 1
