"""The vectorised encoding of Avro data block records (``avro_encoder.encode_records``) against
fastavro's, the reference it stands in for (``encode_avro_data_block(vectorised=False)``): the
blocks of Hudi's ``HoodieAvroDataBlock`` (content version 3), which Java Hudi reads and writes by
default. Whatever the fast encoder encodes must be the very bytes fastavro writes; what it
declines, fastavro encodes."""

from __future__ import annotations

import io
import json
import struct

import fastavro
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
from tests.log.avro_cases import blocks


def _fastavro_content(schema: dict, records: list[dict]) -> bytes:
    parsed = fastavro.parse_schema(json.loads(json.dumps(schema)))
    out = [struct.pack(">ii", 3, len(records))]
    for r in records:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, r)
        out += [struct.pack(">i", len(buf.getvalue())), buf.getvalue()]
    return b"".join(out)


def _table(schema: dict, records: list[dict]) -> pa.Table:
    """The records as the table a writer hands over (fastavro's decoding of fastavro's bytes)."""
    header = {HeaderKey.INSTANT_TIME: "1", HeaderKey.SCHEMA: json.dumps(schema)}
    block = LogBlock(BlockType.AVRO_DATA, header, {}, _fastavro_content(schema, records), 0, 0, "x.log")
    return decode_avro_data_block(block, vectorised=False)


def _encodes(table: pa.Table, schema: dict) -> bytes | None:
    return avro_encoder.encode_records(avro_physical_table(table, json.dumps(schema)), schema)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(blocks(nested=False))
def test_flat_records_encode_as_fastavro_does(block_def):
    schema, records = block_def
    table = _table(schema, records)
    fast = _encodes(table, schema)
    is_decimal = any("decimal" in json.dumps(f["type"]) for f in schema["fields"])
    if is_decimal:
        assert fast is None  # decimals are left to fastavro
    else:
        assert fast is not None
        assert fast == _fastavro_content(schema, records)[8:]
    block = encode_avro_data_block(table, schema, "1")
    assert block == encode_avro_data_block(table, schema, "1", vectorised=False)
    (decoded,) = read_log_blocks(block)
    assert decode_avro_data_block(decoded).equals(table)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(blocks(nested=True))
def test_nested_records_are_left_to_fastavro(block_def):
    schema, records = block_def
    table = _table(schema, records)
    nested = any(isinstance(t, dict) and t.get("type") in ("record", "array", "map")
                 for f in schema["fields"] for t in (f["type"] if isinstance(f["type"], list) else [f["type"]]))
    if nested:
        assert _encodes(table, schema) is None
    assert encode_avro_data_block(table, schema, "1") == encode_avro_data_block(table, schema, "1", vectorised=False)


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
