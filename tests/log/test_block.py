"""Log block encoding and decoding, against Hudi-written log files and the hudi-rs reader."""

from __future__ import annotations

import datetime as dt
import functools
import json
import shutil
import struct
from decimal import Decimal

import fastavro
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakehouse.errors import CorruptFileError, SchemaError
from lakehouse.log import (
    BlockType,
    HeaderKey,
    LogBlock,
    decode_avro_data_block,
    decode_delete_block,
    decode_parquet_data_block,
    encode_avro_data_block,
    encode_block,
    encode_delete_block,
    encode_parquet_data_block,
    encode_rollback_command_block,
    read_log_blocks,
)
from lakehouse.log.delete_record import DELETE_RECORD_LIST_SCHEMA
from lakehouse.schema import arrow_to_avro_schema, avro_to_arrow_schema, conform_table


def fixture_log(hudi_fixtures, kind: str):
    (path,) = (hudi_fixtures / "log_files" / kind).glob(".*.log.*")
    data = path.read_bytes()
    (block,) = read_log_blocks(data, str(path))
    return data, block


# ---------------------------------------------------------------------------------------------
# Hudi's own files


@pytest.mark.interop
def test_fixture_avro_data_block(hudi_fixtures):
    data, block = fixture_log(hudi_fixtures, "valid_log_avro_data")
    assert block.block_type == BlockType.AVRO_DATA and len(data) == 1172
    assert block.instant_time == "20250316025828811"
    table = decode_avro_data_block(block)
    assert table.num_rows == 1
    row = table.to_pylist()[0]
    assert (row["rider"], row["fare"], row["_hoodie_file_name"]) == \
        ("rider-A", 29.1, "ff32ab89-5ad0-4968-83b4-89a34c95d32f-0")
    # fastavro encodes exactly like Java Avro, and the schema string is kept verbatim
    assert encode_avro_data_block(table, block.schema, block.instant_time) == data
    # a schema dict serialises to Hudi's compact JSON too
    assert encode_avro_data_block(table, json.loads(block.schema), block.instant_time) == data


@pytest.mark.interop
def test_fixture_parquet_data_block(hudi_fixtures):
    data, block = fixture_log(hudi_fixtures, "valid_log_parquet_data")
    assert block.block_type == BlockType.PARQUET_DATA
    assert block.instant_time == "20250113230424191"
    assert list(block.header) == [HeaderKey.SCHEMA, HeaderKey.INSTANT_TIME]
    table = decode_parquet_data_block(block)
    assert table.num_rows == 1 and table.column("rider").to_pylist() == ["rider-A"]
    assert table.schema == avro_to_arrow_schema(block.schema)
    # pyarrow's parquet bytes differ from parquet-mr's, but the framing round-trips exactly
    assert encode_block(block.block_type, block.header, block.content, block.footer) == data
    ours = read_log_blocks(encode_parquet_data_block(table, block.schema, block.instant_time))[0]
    assert decode_parquet_data_block(ours).equals(table)


@pytest.mark.interop
def test_fixture_delete_block(hudi_fixtures):
    data, block = fixture_log(hudi_fixtures, "valid_log_delete")
    assert block.block_type == BlockType.DELETE
    deletes = decode_delete_block(block)
    assert deletes.num_rows == 3
    assert set(deletes.column("partition_path").to_pylist()) == {"city=san_francisco"}
    assert deletes.column("unconditional").to_pylist() == [True] * 3
    assert deletes.column("ordering_value").null_count == 3
    re_encoded = encode_delete_block(
        deletes.column("record_key").to_pylist(), deletes.column("partition_path").to_pylist(),
        deletes.column("ordering_value"), block.instant_time, block.schema)
    assert re_encoded == data
    assert encode_delete_block(
        deletes.column("record_key").to_pylist(), deletes.column("partition_path").to_pylist(),
        None, block.instant_time, block.schema) == data


@pytest.mark.interop
def test_fixture_rollback_block(hudi_fixtures):
    data, block = fixture_log(hudi_fixtures, "valid_log_rollback")
    assert block.block_type == BlockType.COMMAND and block.is_rollback
    assert block.instant_time == "20250126040936578"
    assert block.target_instant_time == "20250126040826878"
    assert block.content == b"" and len(data) == 105
    assert encode_rollback_command_block(block.instant_time, block.target_instant_time) == data


@pytest.mark.interop
def test_delete_schema_matches_hudi(hudi_avro_schemas, hudi_fixtures):
    reference = json.loads((hudi_avro_schemas / "HoodieDeleteRecordList.avsc").read_text())
    canonical = fastavro.schema.to_parsing_canonical_form
    assert canonical(DELETE_RECORD_LIST_SCHEMA) == canonical(reference)

    def logical_types(s, out):  # canonical form drops logical types: compare them apart
        if isinstance(s, dict):
            if "logicalType" in s:
                out.append((s["logicalType"], s.get("precision"), s.get("scale")))
            for v in s.values():
                logical_types(v, out)
        elif isinstance(s, list):
            for v in s:
                logical_types(v, out)
        return out

    assert logical_types(DELETE_RECORD_LIST_SCHEMA, []) == logical_types(reference, [])


# ---------------------------------------------------------------------------------------------
# Round trips


def wide_table() -> pa.Table:
    item = pa.struct([("a", pa.string()), ("b", pa.int32())])
    child = pa.struct([("x", pa.float64()), ("y", pa.bool_())])
    n = 4
    return pa.table({
        "_hoodie_commit_time": ["20240101000000000"] * n,
        "_hoodie_commit_seqno": [f"20240101000000000_0_{i}" for i in range(n)],
        "_hoodie_record_key": [str(i) for i in range(n)],
        "_hoodie_partition_path": [""] * n,
        "_hoodie_file_name": ["f-0"] * n,
        "id": pa.array([1, 2, 3, 4], pa.int32()),
        "byte": pa.array([1, None, -128, 127], pa.int8()),
        "flag": [True, None, False, True],
        "long": pa.array([2**62, None, -1, 0], pa.int64()),
        "fl": pa.array([1.5, None, -0.0, 3.25], pa.float32()),
        "dbl": [2.71828, None, float("-inf"), 1e300],
        "dec": pa.array([Decimal("12345.67891"), None, Decimal("-0.00001"), Decimal("0")],
                        pa.decimal128(10, 5)),
        "dec38": pa.array([Decimal("9" * 38), None, Decimal("-" + "9" * 38), Decimal(1)],
                          pa.decimal128(38, 0)),
        "day": pa.array([dt.date(2024, 2, 29), None, dt.date(1, 1, 1), dt.date(9999, 12, 31)]),
        "ts": pa.array([dt.datetime(2024, 1, 1, 12, 0, 0, 123456), None,
                        dt.datetime(1900, 1, 1), dt.datetime(1970, 1, 1)],
                       pa.timestamp("us", tz="UTC")),
        "bin": pa.array([b"\x00\xff#HUD", None, b"", b"x" * 1000]),
        "txt": ["héllo ☃", None, "", "x"],
        "lst": pa.array([[{"a": "x", "b": 1}, None], None, [], [{"a": None, "b": None}]],
                        pa.list_(item)),
        "m": pa.array([[("k", {"a": None, "b": 2})], None, [], [("z", None), ("y", {"a": "v",
                                                                             "b": 1})]],
                      pa.map_(pa.string(), item)),
        "st": pa.array([{"a": "q", "b": None}, None, {"a": None, "b": 3}, {"a": "", "b": 0}],
                       item),
        "nested": pa.array([{"f": 1, "child": {"x": 1.0, "y": True}}, None,
                            {"f": None, "child": None}, {"f": 2, "child": {"x": None, "y": None}}],
                           pa.struct([("f", pa.int64()), ("child", child)])),
    })


def test_avro_data_block_round_trip_wide_types():
    table = wide_table()
    schema = arrow_to_avro_schema(table.schema, "wide", with_meta_fields=True)
    data = encode_avro_data_block(table, schema, "20240101000000000")
    (block,) = read_log_blocks(data)
    assert block.block_type == BlockType.AVRO_DATA
    assert block.instant_time == "20240101000000000"
    assert json.loads(block.schema) == schema
    back = decode_avro_data_block(block)
    assert back.equals(conform_table(table, avro_to_arrow_schema(schema)))
    assert back.column("byte").type == pa.int32()  # Avro has no byte: Spark's ByteType is int


@pytest.mark.parametrize("codec", ["gzip", "snappy", "zstd", "none"])
def test_parquet_data_block_round_trip_wide_types(codec):
    table = wide_table()
    schema = arrow_to_avro_schema(table.schema, "wide", with_meta_fields=True)
    (block,) = read_log_blocks(encode_parquet_data_block(table, schema, "1", compression=codec))
    back = decode_parquet_data_block(block)
    assert back.equals(conform_table(table, avro_to_arrow_schema(schema)))


def test_empty_data_blocks():
    table = wide_table().slice(0, 0)
    schema = arrow_to_avro_schema(table.schema, "wide", with_meta_fields=True)
    for encode, decode in ((encode_avro_data_block, decode_avro_data_block),
                           (encode_parquet_data_block, decode_parquet_data_block)):
        (block,) = read_log_blocks(encode(table, schema, "1"))
        back = decode(block)
        assert back.num_rows == 0 and back.schema == avro_to_arrow_schema(schema)


row_values = st.fixed_dictionaries({
    "k": st.text(max_size=20),
    "n": st.none() | st.integers(-2**63, 2**63 - 1),
    "x": st.none() | st.floats(allow_nan=False, width=64),
    "dec": st.none() | st.decimals(min_value=-10**6, max_value=10**6, places=3,
                                   allow_nan=False, allow_infinity=False),
    "ts": st.none() | st.integers(-2**62, 2**62),
    "tags": st.none() | st.lists(st.none() | st.text(max_size=5), max_size=4),
    "attrs": st.none() | st.dictionaries(st.text(max_size=5), st.none() | st.integers(-5, 5),
                                         max_size=3),
})
ROW_SCHEMA = pa.schema([
    pa.field("k", pa.string(), nullable=False), ("n", pa.int64()), ("x", pa.float64()),
    ("dec", pa.decimal128(10, 3)), ("ts", pa.timestamp("us", tz="UTC")),
    ("tags", pa.list_(pa.string())), ("attrs", pa.map_(pa.string(), pa.int32())),
])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(row_values, max_size=8))
def test_avro_data_block_round_trip_property(rows):
    table = pa.Table.from_pylist(rows, schema=ROW_SCHEMA)
    schema = arrow_to_avro_schema(ROW_SCHEMA, "p", with_meta_fields=False)
    (block,) = read_log_blocks(encode_avro_data_block(table, schema, "1"))
    assert decode_avro_data_block(block).equals(table)


@pytest.mark.parametrize("values,arrow_type", [
    ([True, False, None], pa.bool_()),
    ([1, -5, None], pa.int32()),
    ([2**40, -1, None], pa.int64()),
    ([1.5, -2.25, None], pa.float32()),
    ([1.1, 1e300, None], pa.float64()),
    ([b"\x00", b"ab", None], pa.binary()),
    (["a", "é", None], pa.string()),
    ([dt.date(2024, 1, 2), dt.date(1969, 12, 31), None], pa.date32()),
    ([Decimal("1.5"), Decimal("-123456789012345.123456789012345"), None], pa.decimal128(30, 15)),
    ([dt.time(1, 2, 3, 4), dt.time(0), None], pa.time64("us")),
    ([dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc), dt.datetime(1960, 5, 5, 1, 2, 3, 5,
                                                                  tzinfo=dt.timezone.utc), None],
     pa.timestamp("us", tz="UTC")),
])
def test_delete_block_ordering_values_round_trip(values, arrow_type):
    keys, parts = ["k1", "k2", "k3"], ["p", "p", ""]
    data = encode_delete_block(keys, parts, pa.array(values, arrow_type), "5", {"type": "record",
                               "name": "r", "fields": []})
    (block,) = read_log_blocks(data)
    assert list(block.header) == [HeaderKey.SCHEMA, HeaderKey.INSTANT_TIME]
    deletes = decode_delete_block(block)
    assert deletes.column("record_key").to_pylist() == keys
    assert deletes.column("partition_path").to_pylist() == parts
    assert deletes.column("ordering_value").type == arrow_type
    assert deletes.column("ordering_value").to_pylist() == values
    assert deletes.column("unconditional").to_pylist() == [False, False, True]


def test_delete_block_ordering_value_types_from_python_and_schema():
    schema = {"type": "record", "name": "r", "fields": [
        {"name": "small", "type": ["null", "int"], "default": None},
        {"name": "ts", "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}],
         "default": None}]}
    decoded = decode_delete_block(read_log_blocks(
        encode_delete_block(["a"], ["p"], [7], "1", schema))[0])
    assert decoded.column("ordering_value").type == pa.int64()  # Python ints: LongWrapper
    decoded = decode_delete_block(read_log_blocks(
        encode_delete_block(["a"], ["p"], [7], "1", schema, ordering_field="small"))[0])
    assert decoded.column("ordering_value").type == pa.int32()
    decoded = decode_delete_block(read_log_blocks(
        encode_delete_block(["a"], ["p"], [7], "1", schema, ordering_field="ts"))[0])
    assert decoded.column("ordering_value").to_pylist() == [
        dt.datetime(1970, 1, 1, 0, 0, 0, 7, tzinfo=dt.timezone.utc)]
    with pytest.raises(SchemaError):
        encode_delete_block(["a"], ["p"], [1, 2], "1", schema)
    with pytest.raises(SchemaError):
        encode_delete_block(["a"], ["p", "q"], None, "1", schema)
    with pytest.raises(SchemaError):
        encode_delete_block(["a"], ["p"], [7], "1", schema, ordering_field="nope")


def test_avro_block_rejects_rows_that_do_not_fit():
    schema = arrow_to_avro_schema(pa.schema([pa.field("a", pa.int32(), nullable=False)]), "t",
                                  with_meta_fields=False)
    with pytest.raises(SchemaError):
        encode_avro_data_block(pa.table({"a": pa.array([None], pa.int32())}), schema, "1")
    with pytest.raises(SchemaError):
        encode_avro_data_block(pa.table({"a": [1], "b": [2]}), schema, "1")


# ---------------------------------------------------------------------------------------------
# Framing and content errors


def test_encode_block_layout():
    header = {HeaderKey.INSTANT_TIME: "001", 9: "future key"}
    data = encode_block(BlockType.CDC, header, b"xyz", {HeaderKey.BLOCK_IDENTIFIER: "id"})
    assert data[:6] == b"#HUDI#"
    (length,) = struct.unpack_from(">q", data, 6)
    assert len(data) == 6 + 8 + length
    assert struct.unpack_from(">q", data, len(data) - 8)[0] == length + 6
    assert struct.unpack_from(">ii", data, 14) == (1, 6)
    (block,) = read_log_blocks(data)
    assert block.header == header and block.footer == {HeaderKey.BLOCK_IDENTIFIER: "id"}
    assert block.content == b"xyz" and block.size == len(data) and block.offset == 0


def block_with(block_type, content, schema=None):
    header = {HeaderKey.INSTANT_TIME: "1"}
    if schema is not None:
        header[HeaderKey.SCHEMA] = schema
    return LogBlock(block_type, header, {}, content, 0, 0, "x.log")


SCHEMA = json.dumps({"type": "record", "name": "r", "fields": [{"name": "a", "type": "long"}]})


@pytest.mark.parametrize("content", [
    b"", b"\x00\x00\x00\x03", struct.pack(">ii", 3, 2) + struct.pack(">i", 1) + b"\x02",
    struct.pack(">ii", 3, 1) + struct.pack(">i", 5) + b"\x02",  # record shorter than its length
    struct.pack(">ii", 3, 1) + struct.pack(">i", 1) + b"\x02" + b"junk",
    struct.pack(">ii", 9, 0), struct.pack(">ii", 3, 1) + struct.pack(">i", 1) + b"\x80",
])
def test_corrupt_avro_content_raises(content):
    with pytest.raises(CorruptFileError, match="x.log"):
        decode_avro_data_block(block_with(BlockType.AVRO_DATA, content, SCHEMA))


def test_avro_content_missing_or_bad_schema():
    one = struct.pack(">ii", 3, 1) + struct.pack(">i", 1) + b"\x04"
    assert decode_avro_data_block(block_with(BlockType.AVRO_DATA, one, SCHEMA)).column(
        "a").to_pylist() == [2]
    with pytest.raises(CorruptFileError, match="SCHEMA"):
        decode_avro_data_block(block_with(BlockType.AVRO_DATA, one))
    with pytest.raises(CorruptFileError):
        decode_avro_data_block(block_with(BlockType.AVRO_DATA, one, "{not json"))


@pytest.mark.parametrize("content", [
    b"", struct.pack(">ii", 2, 0), struct.pack(">ii", 3, 5) + b"\x00",
    struct.pack(">ii", 3, 1) + b"\x7f", struct.pack(">ii", 3, 2) + b"\x02\x00",
])
def test_corrupt_delete_content_raises(content):
    with pytest.raises(CorruptFileError):
        decode_delete_block(block_with(BlockType.DELETE, content, SCHEMA))


def test_corrupt_parquet_content_raises():
    with pytest.raises(CorruptFileError):
        decode_parquet_data_block(block_with(BlockType.PARQUET_DATA, b"PAR1 not really", SCHEMA))


# ---------------------------------------------------------------------------------------------
# The hudi-rs reader (PyPI `hudi`) reads what we write


def hudi_snapshot(root) -> pa.Table:
    hudi = pytest.importorskip("hudi")
    batches = hudi.HudiTableBuilder.from_base_uri(str(root)).build().read()
    return pa.Table.from_batches(batches)


@pytest.fixture
def trips_table(fixture_tables, tmp_path):
    """A copy of the Hudi-written MOR table whose one log file we overwrite."""
    root = tmp_path / "trips"
    shutil.copytree(fixture_tables["quickstart_trips_table/mor/avro/v6_trips_8i1u"], root)
    (log_path,) = root.rglob(".*.log.*")
    (block,) = read_log_blocks(log_path.read_bytes(), str(log_path))
    return root, log_path, block


def fares(table: pa.Table) -> dict[str, float]:
    return dict(zip(table.column("rider").to_pylist(), table.column("fare").to_pylist()))


@pytest.mark.interop
@pytest.mark.parametrize("encode", [
    encode_avro_data_block, encode_parquet_data_block,
    functools.partial(encode_parquet_data_block, compression="zstd"),
])
def test_hudi_rs_reads_our_data_blocks(trips_table, encode):
    root, log_path, block = trips_table
    assert fares(hudi_snapshot(root))["rider-D"] == 25.0
    update = decode_avro_data_block(block)
    update = update.set_column(update.schema.get_field_index("fare"), "fare",
                               pa.array([61.75]))
    log_path.write_bytes(encode(update, block.schema, block.instant_time))
    got = hudi_snapshot(root)
    assert got.num_rows == 8 and fares(got)["rider-D"] == 61.75


@pytest.mark.interop
def test_hudi_rs_applies_our_delete_block(trips_table):
    root, log_path, block = trips_table
    before = hudi_snapshot(root)
    doomed = before.filter(pc.is_in(before.column("rider"),
                                            pa.array(["rider-A", "rider-C"])))
    log_path.write_bytes(encode_delete_block(
        doomed.column("_hoodie_record_key").to_pylist(),
        doomed.column("_hoodie_partition_path").to_pylist(),
        None, block.instant_time, block.schema))
    after = hudi_snapshot(root)
    assert sorted(fares(after)) == sorted(set(fares(before)) - {"rider-A", "rider-C"})


@pytest.mark.interop
@pytest.mark.parametrize("encode", [encode_avro_data_block, encode_parquet_data_block])
def test_hudi_rs_reads_our_wide_type_blocks(fixture_tables, tmp_path, encode):
    root = tmp_path / "wide"
    shutil.copytree(fixture_tables["sample_table/mor/parquet/v6_nonpartitioned"], root)
    (log_path,) = root.glob(".*.log.*")
    (block,) = read_log_blocks(log_path.read_bytes(), str(log_path))
    before = hudi_snapshot(root).sort_by("id")
    rows = decode_parquet_data_block(block)
    (key,) = rows.column("_hoodie_record_key").to_pylist()
    changed = rows.set_column(rows.schema.get_field_index("decimalField"), "decimalField",
                              pa.array([Decimal("-4321.00001")], pa.decimal128(10, 5)))
    log_path.write_bytes(encode(changed, block.schema, block.instant_time))
    after = hudi_snapshot(root).sort_by("id")
    assert after.schema == before.schema
    for name in before.column_names:
        if name != "decimalField":
            assert after.column(name).equals(before.column(name)), name
    got = dict(zip(after.column("_hoodie_record_key").to_pylist(),
                   after.column("decimalField").to_pylist()))
    assert got[key] == Decimal("-4321.00001")
