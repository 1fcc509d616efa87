"""The vectorised encoding of Avro data block records (``avro_encoder.encode_records``) against
fastavro's, the reference it stands in for (``encode_avro_data_block(vectorised=False)``): the
blocks of Hudi's ``HoodieAvroDataBlock`` (content version 3), which Java Hudi reads and writes by
default. Whatever the fast encoder encodes must be the very bytes fastavro writes; what it
declines, fastavro encodes."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings

from lakehouse.errors import SchemaError
from lakehouse.log import (
    BlockType,
    HeaderKey,
    LogBlock,
    avro_encoder,
    decode_avro_data_block,
    encode_avro_data_block,
    read_log_blocks,
)
from lakehouse.schema import avro_physical_table
from tests.log.avro_cases import blocks, fastavro_content


def _table(schema: dict, records: list[dict]) -> pa.Table:
    """The records as the table a writer hands over (fastavro's decoding of fastavro's bytes)."""
    header = {HeaderKey.INSTANT_TIME: "1", HeaderKey.SCHEMA: json.dumps(schema)}
    block = LogBlock(BlockType.AVRO_DATA, header, {}, fastavro_content(schema, records), 0, 0, "x.log")
    return decode_avro_data_block(block, vectorised=False)


def _encodes(table: pa.Table, schema: dict) -> bytes | None:
    return avro_encoder.encode_records(avro_physical_table(table, json.dumps(schema)), schema)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(blocks())
def test_records_encode_as_fastavro_does(block_def):
    """Every type, nullable either way round or not, and records, arrays and maps of them to any
    depth: the vectorised bytes are fastavro's, and decode back to the table."""
    schema, records = block_def
    table = _table(schema, records)
    assert _encodes(table, schema) == fastavro_content(schema, records)[8:]
    block = encode_avro_data_block(table, schema, "1")
    assert block == encode_avro_data_block(table, schema, "1", vectorised=False)
    (decoded,) = read_log_blocks(block)
    assert decode_avro_data_block(decoded).equals(table)


def test_a_null_record_writes_nothing_of_its_fields():
    """The fields of a null record hold values in Arrow (here 7 and "x"): none may be written."""
    inner = {"type": "record", "name": "In", "fields": [
        {"name": "n", "type": "long"}, {"name": "s", "type": "string"}, {"name": "o", "type": ["null", "string"]}]}
    schema = {"type": "record", "name": "r", "fields": [{"name": "a", "type": ["null", inner]},
                                                         {"name": "b", "type": "int"}]}
    child = pa.StructArray.from_arrays([pa.array([1, 7, 3]), pa.array(["p", "x", "q"]), pa.array([None, "y", "z"])],
                                       names=["n", "s", "o"], mask=pa.array([False, True, False]))
    table = pa.table({"a": child, "b": pa.array([1, 2, 3], pa.int32())})
    assert _encodes(table, schema) is not None
    assert encode_avro_data_block(table, schema, "1") == encode_avro_data_block(table, schema, "1", vectorised=False)
    sliced = table.slice(1, 2)
    assert encode_avro_data_block(sliced, schema, "1") == encode_avro_data_block(sliced, schema, "1", vectorised=False)


def test_columns_of_several_chunks_and_sliced_arrays():
    schema = {"type": "record", "name": "r", "fields": [
        {"name": "s", "type": ["null", "string"]}, {"name": "n", "type": "long"},
        {"name": "d", "type": ["double", "null"]}]}
    whole = pa.table({"s": pa.array(["a", None, "ccc", "", "é😀"] * 3),
                      "n": pa.array([0, -1, 2**63 - 1, -2**63, 64] * 3, pa.int64()),
                      "d": pa.array([1.5, None, -0.0, float("inf"), 2.0] * 3)})
    table = pa.concat_tables([whole.slice(1, 6), whole.slice(9, 5)])
    assert table.column("s").num_chunks == 2
    assert encode_avro_data_block(table, schema, "1") == encode_avro_data_block(table, schema, "1", vectorised=False)


def test_nan_floats_encode_as_fastavro_writes_them():
    """fastavro takes a float as a Python float, which makes a signalling NaN quiet."""
    schema = {"type": "record", "name": "r", "fields": [
        {"name": "f", "type": "float"}, {"name": "d", "type": ["null", "double"]}]}
    signalling = np.array([0x7F800001, 0xFFA00000, 0x7FC00000], np.uint32).view(np.float32)
    table = pa.table({"f": pa.array(signalling), "d": pa.array([float("nan"), None, -float("nan")])})
    assert _encodes(table, schema) is not None
    assert encode_avro_data_block(table, schema, "1") == encode_avro_data_block(table, schema, "1", vectorised=False)


def test_an_enum_value_that_is_no_symbol_is_refused_as_fastavro_refuses_it():
    schema = {"type": "record", "name": "r", "fields": [
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}}]}
    table = pa.table({"e": ["A", "Z"]})
    assert _encodes(table, schema) is None
    with pytest.raises(SchemaError, match="Avro schema"):
        encode_avro_data_block(table, schema, "1")


def test_no_rows():
    schema = {"type": "record", "name": "r", "fields": [{"name": "a", "type": "int"}]}
    table = pa.table({"a": pa.array([], pa.int32())})
    assert encode_avro_data_block(table, schema, "1") == encode_avro_data_block(table, schema, "1", vectorised=False)


@pytest.mark.interop
def test_java_hudis_avro_block_is_encoded_byte_for_byte(hudi_fixtures):
    """Hudi's own HoodieAvroDataBlock (the trips schema with meta fields), re-encoded by the
    vectorised encoder, is the file Java wrote."""
    (path,) = (hudi_fixtures / "log_files" / "valid_log_avro_data").glob(".*.log.*")
    data = path.read_bytes()
    (block,) = read_log_blocks(data, str(path))
    table = decode_avro_data_block(block)
    assert _encodes(table, json.loads(block.schema)) is not None
    assert encode_avro_data_block(table, block.schema, block.instant_time) == data


@pytest.mark.parametrize("avro, arrow_type", [
    ({"type": "bytes", "logicalType": "decimal", "precision": 38, "scale": 0}, pa.decimal128(38, 0)),
    ({"type": "bytes", "logicalType": "decimal", "precision": 60, "scale": 0}, pa.decimal256(60, 0)),
    ({"type": "fixed", "name": "D", "size": 9, "logicalType": "decimal", "precision": 20, "scale": 0},
     pa.decimal128(20, 0)),
    ({"type": "fixed", "name": "D", "size": 20, "logicalType": "decimal", "precision": 38, "scale": 0},
     pa.decimal128(38, 0)),
])
def test_decimals_at_every_byte_boundary(avro, arrow_type):
    """fastavro sizes a bytes decimal by its magnitude's bit length (-128 takes two bytes, as
    128 does) and sign-extends a fixed one: each boundary on both sides of zero."""
    from decimal import Decimal
    top = 10 ** arrow_type.precision - 1
    values = {0, 1, -1, top, -top}
    for bits in range(1, top.bit_length() + 1):
        for v in (2 ** bits - 1, 2 ** bits, 2 ** bits + 1):
            if v <= top:
                values |= {v, -v}
    schema = {"type": "record", "name": "r", "fields": [{"name": "d", "type": ["null", avro]}]}
    column = pa.array([Decimal(v) for v in sorted(values)] + [None], arrow_type)
    table = pa.table({"d": column})
    assert _encodes(table, schema) is not None
    assert encode_avro_data_block(table, schema, "1") == encode_avro_data_block(table, schema, "1", vectorised=False)


def test_a_map_holding_a_key_twice_is_refused_as_fastavro_refuses_it():
    schema = {"type": "record", "name": "r", "fields": [{"name": "m", "type": {"type": "map", "values": "long"}}]}
    table = pa.table({"m": pa.array([[("a", 1), ("b", 2)], [("a", 1), ("a", 2)]], pa.map_(pa.string(), pa.int64()))})
    assert _encodes(table, schema) is None
    with pytest.raises(SchemaError):
        encode_avro_data_block(table, schema, "1")
    fine = table.slice(0, 1)  # the same key in two rows is no repeat
    assert _encodes(fine, schema) is not None


def test_lists_sliced_and_null_lists_backed_by_items():
    """A null list may still own items in Arrow (offsets that differ): none may be written."""
    schema = {"type": "record", "name": "r", "fields": [
        {"name": "l", "type": ["null", {"type": "array", "items": ["null", "string"]}]}]}
    values = pa.array(["a", None, "bc", "d", "e", "", "f"])
    offsets = pa.array([0, 2, 4, 4, 7], pa.int32())
    lists = pa.ListArray.from_arrays(offsets, values, mask=pa.array([False, True, False, False]))
    assert lists.to_pylist() == [["a", None], None, [], ["e", "", "f"]]
    for table in (pa.table({"l": lists}), pa.table({"l": lists}).slice(1, 3),
                  pa.concat_tables([pa.table({"l": lists}).slice(2, 2), pa.table({"l": lists}).slice(0, 1)])):
        assert _encodes(table.combine_chunks(), schema) is not None
        assert encode_avro_data_block(table, schema, "1") == encode_avro_data_block(table, schema, "1", vectorised=False)


@pytest.mark.parametrize("field_type", [
    {"type": "enum", "name": "E", "symbols": ["A", "A"]},
    {"type": "enum", "name": "E", "symbols": ["a-b"]},
])
def test_a_schema_avro_refuses_is_refused_before_either_encoder(field_type):
    """fastavro's schema parse checks both paths' schema (found by the review fuzzer: the
    vectorised encoder wrote blocks of schemas Avro readers refuse)."""
    schema = {"type": "record", "name": "r", "fields": [{"name": "e", "type": field_type}]}
    table = pa.table({"e": [field_type["symbols"][0]]})
    for vectorised in (True, False):
        with pytest.raises(SchemaError, match="not valid"):
            encode_avro_data_block(table, schema, "1", vectorised=vectorised)


def test_strings_that_are_not_utf8_go_to_fastavro():
    bad = pa.Array.from_buffers(pa.string(), 1, [None, pa.py_buffer(np.array([0, 2], np.int32).tobytes()),
                                                 pa.py_buffer(b"\xff\xfe")])
    schema = {"type": "record", "name": "r", "fields": [{"name": "s", "type": "string"}]}
    assert _encodes(pa.table({"s": bad}), schema) is None
    with pytest.raises(SchemaError):
        encode_avro_data_block(pa.table({"s": bad}), schema, "1")


def test_an_int_field_holding_a_64_bit_value_goes_to_fastavro():
    """A 64-bit logical type on an Avro int maps to a 64-bit column; a value past int32 fits no
    branch of the union, which fastavro reports."""
    schema = {"type": "record", "name": "r", "fields": [
        {"name": "a", "type": ["null", {"type": "int", "logicalType": "time-micros"}]}]}
    table = pa.table({"a": pa.array([2**40], pa.time64("us"))})
    assert _encodes(table, schema) is None
    with pytest.raises(SchemaError):
        encode_avro_data_block(table, schema, "1")
