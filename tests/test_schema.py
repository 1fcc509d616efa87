"""Arrow <-> Avro schema and value conversion, checked against the schemas Hudi wrote."""

from __future__ import annotations

import datetime as dt
import json
import re
import struct
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakehouse.errors import SchemaError
from lakehouse.columns import META_FIELDS
from lakehouse.schema import arrow_table_to_avro_records, arrow_to_avro_schema, avro_records_to_arrow, avro_to_arrow_schema, conform_table


def compact(schema: dict) -> str:
    return json.dumps(schema, separators=(",", ":"))


def java_properties(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        if line.startswith("#") or "=" not in line:
            continue
        key, value = line.split("=", 1)
        out[key] = re.sub(r"\\(.)", r"\1", value)
    return out


def first_log_block_schema(path) -> str:
    data = path.read_bytes()
    # header of the first block: magic, length, version, type, count, then entries
    pos = 6 + 8 + 4 + 4
    (count,) = struct.unpack_from(">i", data, pos)
    pos += 4
    for _ in range(count):
        key, length = struct.unpack_from(">ii", data, pos)
        pos += 8
        if key == 2:
            return data[pos:pos + length].decode()
        pos += length
    raise AssertionError("no SCHEMA header")


WIDE = "sample_table/mor/parquet/v6_nonpartitioned"


@pytest.fixture(scope="module")
def wide_table_root(fixture_tables):
    return fixture_tables[WIDE]


@pytest.mark.interop
def test_commit_metadata_schema_is_reproduced_exactly(wide_table_root):
    commit = json.loads((wide_table_root / ".hoodie/20250117083125837.deltacommit").read_text())
    hudi_schema = commit["extraMetadata"]["schema"]
    arrow = avro_to_arrow_schema(hudi_schema)
    assert compact(arrow_to_avro_schema(arrow, "v6_nonpartitioned", with_meta_fields=False)) \
        == hudi_schema


@pytest.mark.interop
def test_log_block_and_footer_schema_with_meta_fields_is_reproduced(fixture_tables):
    # The footer of a base file written by Hudi's Avro writer (the COW table of the same schema)
    cow = fixture_tables["sample_table/cow/v6_nonpartitioned"]
    footers = [pq.ParquetFile(p).metadata.metadata.get(b"parquet.avro.schema")
               for p in sorted(cow.glob("*.parquet"))]
    footer = next(f for f in footers if f).decode()
    arrow = avro_to_arrow_schema(footer)
    assert arrow.names[:5] == list(META_FIELDS)
    assert compact(arrow_to_avro_schema(arrow, "v6_nonpartitioned", with_meta_fields=True)) \
        == footer
    # and the SCHEMA header of a log block of the quickstart table
    trips = fixture_tables["quickstart_trips_table/mor/avro/v6_trips_8i1u"]
    header = first_log_block_schema(next(trips.rglob(".*.log.*")))
    assert compact(arrow_to_avro_schema(avro_to_arrow_schema(header), "v6_trips_8i1u",
                                        with_meta_fields=True)) == header


@pytest.mark.interop
def test_create_schema_with_null_last_reads_like_the_commit_schema(fixture_tables):
    root = fixture_tables["sample_table/cow/v6_timebasedkeygen_nonhivestyle"]
    props = java_properties((root / ".hoodie/hoodie.properties").read_text())
    create = avro_to_arrow_schema(props["hoodie.table.create.schema"])
    commit_file = next(iter(sorted((root / ".hoodie").glob("*.commit"))))
    commit = avro_to_arrow_schema(json.loads(commit_file.read_text())["extraMetadata"]["schema"])
    assert create.equals(commit)
    assert create.field("decimalField").type == pa.decimal128(10, 5)
    assert create.field("timestampField").type == pa.timestamp("us", tz="UTC")
    assert create.field("arrayField").type.value_field.nullable


@pytest.mark.interop
def test_arrow_schema_matches_what_pyarrow_reads_from_hudi_parquet(wide_table_root):
    spark_written = next(p for p in sorted(wide_table_root.glob("*.parquet"))
                         if b"parquet.avro.schema" not in pq.ParquetFile(p).metadata.metadata)
    commit = json.loads((wide_table_root / ".hoodie/20250117083125837.deltacommit").read_text())
    ours = avro_to_arrow_schema(arrow_to_avro_schema(
        avro_to_arrow_schema(commit["extraMetadata"]["schema"]), "t", with_meta_fields=True))
    assert pq.read_schema(spark_written).remove_metadata().equals(ours)


def field_type(avro: dict, name: str):
    return next(f for f in avro["fields"] if f["name"] == name)["type"]


def test_type_mapping():
    schema = pa.schema([
        ("i8", pa.int8()), ("i16", pa.int16()), ("u32", pa.uint32()), ("f32", pa.float32()),
        ("f64", pa.float64()), ("s", pa.large_string()), ("b", pa.binary()),
        ("d", pa.date32()), ("ts", pa.timestamp("us")), ("tstz", pa.timestamp("us", tz="UTC")),
        ("tsms", pa.timestamp("ms")), ("tsns", pa.timestamp("ns")), ("t", pa.time64("us")),
        ("dict", pa.dictionary(pa.int32(), pa.string())),
        pa.field("req", pa.int64(), nullable=False),
    ])
    avro = arrow_to_avro_schema(schema, "tbl", with_meta_fields=False)
    assert avro["name"] == "tbl_record" and avro["namespace"] == "hoodie.tbl"
    expected = {
        "i8": "int", "i16": "int", "u32": "long", "f32": "float", "f64": "double",
        "s": "string", "b": "bytes", "dict": "string",
        "d": {"type": "int", "logicalType": "date"},
        "ts": {"type": "long", "logicalType": "timestamp-micros"},
        "tstz": {"type": "long", "logicalType": "timestamp-micros"},
        "tsms": {"type": "long", "logicalType": "timestamp-millis"},
        "tsns": {"type": "long", "logicalType": "timestamp-micros"},
        "t": {"type": "long", "logicalType": "time-micros"},
    }
    for name, avro_type in expected.items():
        assert field_type(avro, name) == ["null", avro_type], name
        assert next(f for f in avro["fields"] if f["name"] == name)["default"] is None
    req = next(f for f in avro["fields"] if f["name"] == "req")
    assert req == {"name": "req", "type": "long"}


@pytest.mark.parametrize("precision,size", [(1, 1), (2, 1), (3, 2), (9, 4), (10, 5), (18, 8),
                                            (19, 9), (28, 12), (38, 16)])
def test_decimal_is_fixed_of_spark_size(precision, size):
    avro = arrow_to_avro_schema(pa.schema([("x", pa.decimal128(precision, 2))]), "t",
                                with_meta_fields=False)
    fixed = field_type(avro, "x")[1]
    assert fixed == {"type": "fixed", "name": "fixed", "namespace": "hoodie.t.t_record.x",
                     "size": size, "logicalType": "decimal", "precision": precision, "scale": 2}
    # the largest value of that precision fits the size as a signed big-endian integer
    assert (10 ** precision - 1).bit_length() < 8 * size


def test_nested_names_follow_spark():
    inner = pa.struct([("leaf", pa.decimal128(5, 1))])
    schema = pa.schema([
        ("s", pa.struct([("child", inner), ("n", pa.int32())])),
        ("arr", pa.list_(pa.field("item", inner, nullable=False))),
        ("m", pa.map_(pa.string(), inner)),
    ])
    avro = arrow_to_avro_schema(schema, "t", with_meta_fields=True)
    assert [f["name"] for f in avro["fields"][:5]] == list(META_FIELDS)
    assert avro["fields"][0] == {"name": "_hoodie_commit_time", "type": ["null", "string"],
                                 "doc": "", "default": None}
    s = field_type(avro, "s")[1]
    assert (s["name"], s["namespace"]) == ("s", "hoodie.t.t_record")
    child = s["fields"][0]["type"][1]
    assert (child["name"], child["namespace"]) == ("child", "hoodie.t.t_record.s")
    assert child["fields"][0]["type"][1]["namespace"] == "hoodie.t.t_record.s.child.leaf"
    arr = field_type(avro, "arr")[1]
    assert arr["type"] == "array" and arr["items"]["name"] == "arr"  # element not nullable
    m = field_type(avro, "m")[1]
    assert m["type"] == "map" and m["values"][1]["name"] == "m"
    back = avro_to_arrow_schema(avro)
    assert back.field("arr").type.value_field.nullable is False
    assert back.field("m").type.item_field.nullable is True
    assert back.field("s").type.field("child").type.field("leaf").type == pa.decimal128(5, 1)


def test_meta_columns_in_the_input_are_not_duplicated():
    schema = pa.schema([(n, pa.string()) for n in META_FIELDS] + [("id", pa.int64())])
    with_meta = arrow_to_avro_schema(schema, "t", with_meta_fields=True)
    assert [f["name"] for f in with_meta["fields"]] == [*META_FIELDS, "id"]
    without = arrow_to_avro_schema(schema, "t", with_meta_fields=False)
    assert [f["name"] for f in without["fields"]] == ["id"]


@pytest.mark.parametrize("schema", [
    pa.schema([("m", pa.map_(pa.int32(), pa.string()))]),
    pa.schema([("bad name", pa.int32())]),
    pa.schema([("d", pa.duration("s"))]),
    pa.schema([("x", pa.decimal256(40, 2))]),
])
def test_unsupported_arrow_schemas_raise(schema):
    with pytest.raises(SchemaError):
        arrow_to_avro_schema(schema, "t", with_meta_fields=False)


def test_avro_specials():
    avro = {"type": "record", "name": "r", "namespace": "n", "fields": [
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}},
        {"name": "e2", "type": ["null", "E"]},
        {"name": "f", "type": {"type": "fixed", "name": "F", "size": 3}},
        {"name": "bd", "type": {"type": "bytes", "logicalType": "decimal", "precision": 30,
                                "scale": 15}},
        {"name": "lts", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
        {"name": "nl", "type": "null"},
    ]}
    schema = avro_to_arrow_schema(json.dumps(avro))
    assert schema.field("e").type == pa.string() and not schema.field("e").nullable
    assert schema.field("e2").type == pa.string() and schema.field("e2").nullable
    assert schema.field("f").type == pa.binary(3)
    assert schema.field("bd").type == pa.decimal128(30, 15)
    assert schema.field("lts").type == pa.timestamp("ms")
    with pytest.raises(SchemaError):
        avro_to_arrow_schema({"type": "record", "name": "r", "fields": [
            {"name": "u", "type": ["int", "string"]}]})
    with pytest.raises(SchemaError):
        avro_to_arrow_schema("[1, 2]")


def wide_table() -> pa.Table:
    item = pa.struct([("a", pa.string()), ("b", pa.int32())])
    return pa.table({
        "i8": pa.array([1, None, -128], pa.int8()),
        "l": pa.array([2**62, None, -1], pa.int64()),
        "f": pa.array([1.5, None, float("inf")], pa.float32()),
        "dec": pa.array([Decimal("12345.67891"), None, Decimal("-0.00001")],
                        pa.decimal128(10, 5)),
        "big": pa.array([Decimal("9" * 38), Decimal("-" + "9" * 38), None], pa.decimal128(38, 0)),
        "d": pa.array([dt.date(2024, 2, 29), None, dt.date(1, 1, 1)], pa.date32()),
        "ts": pa.array([dt.datetime(2024, 1, 1, 12, 0, 0, 123456), None,
                        dt.datetime(1900, 1, 1)], pa.timestamp("us")),
        "tsms": pa.array([0, None, -1], pa.timestamp("ms", tz="UTC")),
        "bin": pa.array([b"\x00\xff", None, b""], pa.binary()),
        "s": pa.array(["héllo", None, ""], pa.string()),
        "lst": pa.array([[{"a": "x", "b": 1}, None], None, []], pa.list_(item)),
        "m": pa.array([[("k", {"a": None, "b": 2})], None, [("z", None)]],
                      pa.map_(pa.string(), item)),
        "st": pa.array([{"a": "q", "b": None}, None, {"a": None, "b": 3}], item),
    })


def test_value_round_trip():
    table = wide_table()
    avro = arrow_to_avro_schema(table.schema, "t", with_meta_fields=False)
    records = arrow_table_to_avro_records(table, avro)
    assert records[0]["ts"] == 1704110400123456  # micros, handed to fastavro as integers
    assert records[0]["d"] == 19782
    assert records[0]["m"] == {"k": {"a": None, "b": 2}}
    target = avro_to_arrow_schema(avro)
    back = avro_records_to_arrow(records, target)
    assert back.equals(conform_table(table, target))
    # without a schema the table's own types decide
    assert avro_records_to_arrow(arrow_table_to_avro_records(table), target).equals(back)


def test_conform_table_rules():
    schema = pa.schema([("a", pa.int64()), ("b", pa.string()),
                        pa.field("c", pa.int32(), nullable=False)])
    got = conform_table(pa.table({"c": pa.array([1], pa.int8()), "a": [5]}), schema)
    assert got.schema == schema and got.to_pylist() == [{"a": 5, "b": None, "c": 1}]
    with pytest.raises(SchemaError):
        conform_table(pa.table({"a": [1]}), schema)  # c is required
    with pytest.raises(SchemaError):
        conform_table(pa.table({"c": [1], "zz": [1]}), schema)
    assert conform_table(pa.table({"c": [1], "zz": [1]}), schema, extra="drop").num_columns == 3
    with pytest.raises(SchemaError):
        conform_table(pa.table({"c": ["x"]}), schema)


def test_duplicate_map_keys_cannot_be_written():
    table = pa.table({"m": pa.array([[("a", 1), ("a", 2)]], pa.map_(pa.string(), pa.int64()))})
    with pytest.raises(SchemaError):
        arrow_table_to_avro_records(table)
