"""The Iceberg file formats on their own, checked against pyiceberg's readers and encoders:
schemas with field ids, the name mapping, single-value bounds, manifests and metadata JSON."""

from __future__ import annotations

import datetime as dt
import decimal
import json

import pyarrow as pa
import pytest

pytest.importorskip("pyiceberg", reason="pyiceberg is the reference Iceberg reader")

from pyiceberg import types as it  # noqa: E402
from pyiceberg.conversions import to_bytes as iceberg_to_bytes  # noqa: E402
from pyiceberg.io.pyarrow import PyArrowFileIO, pyarrow_to_schema  # noqa: E402
from pyiceberg.manifest import read_manifest_list as iceberg_read_manifest_list  # noqa: E402
from pyiceberg.schema import Schema as IcebergSchema  # noqa: E402
from pyiceberg.table.metadata import TableMetadataUtil  # noqa: E402
from pyiceberg.table.name_mapping import parse_mapping_from_json  # noqa: E402

from lakehouse.errors import CorruptFileError  # noqa: E402
from lakehouse.iceberg import IcebergSyncError  # noqa: E402
from lakehouse.iceberg.manifest import (ADDED, DELETED, EXISTING, DataFile, Entry, read_manifest,  # noqa: E402
                                        read_manifest_list, write_manifest, write_manifest_list)
from lakehouse.iceberg.metadata import LogEntry, Snapshot, TableMetadata  # noqa: E402
from lakehouse.iceberg.partition import PartitionField, PartitionSpec, to_bytes  # noqa: E402
from lakehouse.field_schema import arrow_to_iceberg, name_mapping, schema_to_json  # noqa: E402
from lakehouse.storage import LocalStorage  # noqa: E402

NESTED = pa.schema([
    pa.field("id", pa.string(), nullable=False),
    pa.field("n", pa.int32()),
    pa.field("tags", pa.list_(pa.int64())),
    pa.field("attrs", pa.map_(pa.string(), pa.float64())),
    pa.field("s", pa.struct([pa.field("x", pa.int64()), pa.field("inner", pa.struct([pa.field("y", pa.string())]))])),
    pa.field("events", pa.list_(pa.struct([pa.field("a", pa.int64())]))),
])


def _pyiceberg_schema(schema) -> IcebergSchema:
    return IcebergSchema.model_validate_json(json.dumps(schema_to_json(schema)))


def test_schema_ids_are_unique_and_kept_across_evolution():
    s0, last = arrow_to_iceberg(NESTED, schema_id=0, previous=None, last_column_id=0)
    ours = _pyiceberg_schema(s0)
    ids = [f.field_id for f in walk(ours)]
    assert last == ours.highest_field_id == 14 and sorted(ids) == list(range(1, 15))
    assert ours.find_field("s").field_id < ours.find_field("s.inner").field_id < ours.find_field("s.inner.y").field_id
    assert ours.find_field("id").required and not ours.find_field("n").required
    assert isinstance(ours.find_field("tags").field_type, it.ListType)
    assert isinstance(ours.find_field("attrs").field_type, it.MapType)
    assert ours.find_field("s.inner.y").field_type == it.StringType()

    evolved = NESTED.append(pa.field("extra", pa.string()))
    evolved = evolved.set(evolved.get_field_index("n"), pa.field("n", pa.int64()))
    evolved = evolved.remove(evolved.get_field_index("tags"))
    evolved = evolved.set(evolved.get_field_index("events"), pa.field(
        "events", pa.list_(pa.struct([pa.field("a", pa.int64()), pa.field("b", pa.string())]))))
    s1, last1 = arrow_to_iceberg(evolved, schema_id=1, previous=s0, last_column_id=last)
    new = _pyiceberg_schema(s1)
    for name in ("id", "n", "attrs", "s", "s.inner.y", "events.element.a"):
        assert new.find_field(name).field_id == ours.find_field(name).field_id
    assert new.find_field("n").field_type == it.LongType()
    assert (new.find_field("events.element.b").field_id, new.find_field("extra").field_id, last1) == (15, 16, 16)

    readded = evolved.append(pa.field("tags", pa.list_(pa.int64())))
    s2, last2 = arrow_to_iceberg(readded, schema_id=2, previous=s1, last_column_id=last1)
    back = _pyiceberg_schema(s2)
    assert (back.find_field("tags").field_id, back.find_field("tags.element").field_id, last2) == (17, 18, 18)


def walk(schema: IcebergSchema):
    """Every field, list element and map key/value of a pyiceberg schema."""
    out = []

    def visit(t):
        if isinstance(t, it.StructType):
            for f in t.fields:
                out.append(f)
                visit(f.field_type)
        elif isinstance(t, it.ListType):
            out.append(t.element_field)
            visit(t.element_type)
        elif isinstance(t, it.MapType):
            out.extend([t.key_field, t.value_field])
            visit(t.key_type)
            visit(t.value_type)

    visit(schema.as_struct())
    return out


def test_a_type_change_iceberg_cannot_read_is_refused():
    s0, last = arrow_to_iceberg(pa.schema([("v", pa.int64())]), schema_id=0, previous=None, last_column_id=0)
    with pytest.raises(IcebergSyncError, match="changed type from long to double"):
        arrow_to_iceberg(pa.schema([("v", pa.float64())]), schema_id=1, previous=s0, last_column_id=last)
    with pytest.raises(IcebergSyncError, match="type"):
        arrow_to_iceberg(pa.schema([("v", pa.timestamp("ns", tz="UTC"))]), schema_id=0, previous=None,
                         last_column_id=0)


def test_name_mapping_is_what_pyiceberg_expects():
    s0, last = arrow_to_iceberg(NESTED, schema_id=0, previous=None, last_column_id=0)
    s1, _ = arrow_to_iceberg(NESTED.remove(1), schema_id=1, previous=s0, last_column_id=last)
    mapping = parse_mapping_from_json(name_mapping([s0, s1]))
    # pyiceberg gives a file without field ids the ids the mapping names: they must be ours,
    # also for the column the later schema dropped.
    mapped = pyarrow_to_schema(NESTED, name_mapping=mapping)
    assert {f.field_id: str(f.field_type) for f in walk(mapped)} == \
        {f.field_id: str(f.field_type) for f in walk(_pyiceberg_schema(s0))}


@pytest.mark.parametrize("ours,theirs,value", [
    ("boolean", it.BooleanType(), True), ("int", it.IntegerType(), -7), ("long", it.LongType(), 2**40),
    ("float", it.FloatType(), 1.5), ("double", it.DoubleType(), -2.25), ("string", it.StringType(), "sf é"),
    ("date", it.DateType(), 19723), ("timestamp", it.TimestampType(), 1_700_000_000_123_456),
    ("timestamptz", it.TimestamptzType(), -5), ("binary", it.BinaryType(), b"\x00\x01"),
    ("decimal(10, 2)", it.DecimalType(10, 2), decimal.Decimal("-3.10")),
    ("decimal(38, 0)", it.DecimalType(38, 0), decimal.Decimal(10**30)),
    ("decimal(5, 3)", it.DecimalType(5, 3), decimal.Decimal("0.001")),
    # Precision 38: past the default Decimal context's 28 digits, which would round.
    ("decimal(38, 0)", it.DecimalType(38, 0), decimal.Decimal("12345678901234567890123456789012345678")),
    ("decimal(38, 4)", it.DecimalType(38, 4), decimal.Decimal("-1234567890123456789012345678901234.5678")),
])
def test_single_value_bytes_match_pyiceberg(ours, theirs, value):
    assert to_bytes(ours, value) == iceberg_to_bytes(theirs, value)


def test_manifest_and_list_read_by_pyiceberg(tmp_path):
    storage = LocalStorage(str(tmp_path))
    schema, _ = arrow_to_iceberg(pa.schema([("id", pa.string()), ("day", pa.date32()), ("amt", pa.decimal128(9, 2))]),
                                 schema_id=0, previous=None, last_column_id=0)
    spec = PartitionSpec(0, (PartitionField(2, 1000, "day"), PartitionField(3, 1001, "amt")))
    files = [DataFile(storage.uri(f"f{i}.parquet"), (19723 + i, decimal.Decimal(f"{i}.25")), 10 * i, 100 + i)
             for i in range(3)]
    entries = [Entry(EXISTING, 11, 4, 3, files[0]), Entry(DELETED, 12, 5, 5, files[1]),
               Entry(ADDED, 12, None, None, files[2])]
    m = write_manifest(storage, "m.avro", entries, spec=spec, schema=schema, snapshot_id=12, sequence_number=7)
    assert (m.added_files, m.existing_files, m.deleted_files) == (1, 1, 1)
    assert (m.added_rows, m.existing_rows, m.deleted_rows, m.min_sequence_number) == (20, 0, 10, 4)
    write_manifest_list(storage, "list.avro", [m], snapshot_id=12, parent_id=11, sequence_number=7)
    assert read_manifest_list(storage, "list.avro") == [m]
    back = read_manifest(storage, "m.avro", m, spec=spec, schema=schema)
    assert back[:2] == entries[:2] and back[2] == Entry(ADDED, 12, 7, 7, files[2])

    io = PyArrowFileIO()
    (theirs,) = list(iceberg_read_manifest_list(io.new_input(storage.uri("list.avro"))))
    assert theirs.sequence_number == 7 and theirs.added_snapshot_id == 12
    assert theirs.partitions[0].lower_bound == (19723).to_bytes(4, "little")
    got = theirs.fetch_manifest_entry(io, discard_deleted=False)
    assert [(e.status.value, e.snapshot_id, e.sequence_number, e.file_sequence_number) for e in got] == \
        [(0, 11, 4, 3), (2, 12, 5, 5), (1, 12, 7, 7)]
    assert [e.data_file.file_path for e in got] == [f.path for f in files]
    assert [tuple(e.data_file.partition) for e in got] == [f.partition for f in files]
    assert [e.data_file.record_count for e in got] == [0, 10, 20]


def test_metadata_json_round_trip_and_pyiceberg_parse(tmp_path):
    schema, last = arrow_to_iceberg(pa.schema([("id", pa.string()), ("city", pa.string())]), schema_id=0,
                                    previous=None, last_column_id=0)
    snaps = (Snapshot(5, None, 1, 1000, "file:///t/m1.avro", 0, {"operation": "append", "hudi.instant": "1"}),
             Snapshot(6, 5, 2, 2000, "file:///t/m2.avro", 0, {"operation": "overwrite", "hudi.instant": "2"}))
    md = TableMetadata(table_uuid="9c12d441-03fe-4693-9a96-a0705ddf69c1", location="file:///t", last_sequence_number=2,
                       last_updated_ms=3000, last_column_id=last, schemas=(schema,), current_schema_id=0,
                       specs=(PartitionSpec(0, (PartitionField(2, 1000, "city"),)),), default_spec_id=0,
                       properties={"k": "v"}, current_snapshot_id=6, snapshots=snaps,
                       snapshot_log=(LogEntry(1000, 5), LogEntry(2000, 6)),
                       metadata_log=(LogEntry(900, "file:///t/v1.metadata.json"),))
    data = md.to_bytes()
    assert TableMetadata.from_bytes(data, "x") == md
    theirs = TableMetadataUtil.parse_raw(data.decode())
    assert theirs.format_version == 2 and theirs.current_snapshot_id == 6
    assert theirs.refs["main"].snapshot_id == 6 and theirs.last_partition_id == 1000
    assert [s.parent_snapshot_id for s in theirs.snapshots] == [None, 5]
    assert theirs.snapshot_log[-1].snapshot_id == 6 and theirs.metadata_log[0].timestamp_ms == 900
    empty = TableMetadataUtil.parse_raw(TableMetadata(**{**md.__dict__, "current_snapshot_id": None,
                                                         "snapshots": (), "snapshot_log": ()}).to_bytes().decode())
    assert empty.current_snapshot_id is None and not empty.refs
    with pytest.raises(CorruptFileError) as e:
        TableMetadata.from_bytes(b'{"format-version": 2}', "file:///t/v3.metadata.json")
    assert e.value.path == "file:///t/v3.metadata.json"


def test_partition_values_from_fastavro_objects():
    from lakehouse.iceberg.partition import from_avro_value
    assert from_avro_value("date", dt.date(2024, 1, 1)) == 19723
    assert from_avro_value("timestamptz", dt.datetime(1970, 1, 1, 0, 0, 1, 5, tzinfo=dt.timezone.utc)) == 1_000_005
    assert from_avro_value("timestamp", dt.datetime(1969, 12, 31, 23, 59, 59)) == -1_000_000
