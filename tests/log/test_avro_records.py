"""The vectorised decoding of Avro data block records (``avro_records.decode_records``) against
fastavro's, the reference it stands in for: Hudi's ``HoodieAvroDataBlock`` (content version 3:
a count, then each record as a 4-byte length and its schemaless Avro bytes), the default log
format of Java Hudi writers. Whatever the fast decoder accepts must decode exactly as fastavro
decodes it; what it declines, fastavro decodes (or names as corrupt)."""

from __future__ import annotations

import json
import struct
from unittest import mock

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakehouse.errors import CorruptFileError
from lakehouse.log import (
    BlockType,
    HeaderKey,
    LogBlock,
    avro_records,
    decode_avro_data_block,
    read_log_blocks,
)
from lakehouse.schema import avro_to_arrow_schema
from tests.log.avro_cases import blocks, fastavro_content


def _block(schema: dict, content: bytes) -> LogBlock:
    header = {HeaderKey.INSTANT_TIME: "1", HeaderKey.SCHEMA: json.dumps(schema)}
    return LogBlock(BlockType.AVRO_DATA, header, {}, content, 0, 0, "x.log")


def _reference(block: LogBlock) -> pa.Table:
    """fastavro's decoding: what ``decode_avro_data_block`` does where the fast decoder declines."""
    return decode_avro_data_block(block, vectorised=False)


def _same(a: pa.Table, b: pa.Table) -> bool:
    """Equal tables, a NaN equal to a NaN (a damaged byte can make one of any float)."""
    if a.schema != b.schema or a.num_rows != b.num_rows:
        return False
    for x, y in zip(a.columns, b.columns):
        if pa.types.is_floating(x.type):
            if not pc.is_nan(x).equals(pc.is_nan(y)):
                return False
            x, y = pc.if_else(pc.is_nan(x), 0.0, x), pc.if_else(pc.is_nan(y), 0.0, y)
        if not x.equals(y):
            return False
    return True


def _fast(block: LogBlock) -> pa.Table | None:
    plan = avro_records.field_plan(json.loads(block.schema))
    assert plan is not None
    _, count = struct.unpack_from(">ii", block.content)
    return avro_records.decode_records(block.content, count, plan, avro_to_arrow_schema(block.schema))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(blocks())
def test_decodes_as_fastavro_does(block_def):
    schema, records = block_def
    block = _block(schema, fastavro_content(schema, records))
    fast = _fast(block)
    assert fast is not None
    reference = _reference(block)
    assert fast.equals(reference), (fast.to_pylist(), reference.to_pylist())
    assert decode_avro_data_block(block).equals(reference)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(blocks(), st.data())
def test_damaged_content_decodes_as_fastavro_does_or_not_at_all(block_def, data):
    schema, records = block_def
    content = bytearray(fastavro_content(schema, records))
    how = data.draw(st.sampled_from(["flip", "drop", "insert", "truncate"]))
    at = data.draw(st.integers(8, max(8, len(content) - 1)))
    if how == "flip" and at < len(content):
        content[at] ^= data.draw(st.integers(1, 255))
    elif how == "drop" and at < len(content):
        del content[at]
    elif how == "insert":
        content.insert(at, data.draw(st.integers(0, 255)))
    else:
        del content[at:]
    block = _block(schema, bytes(content))
    fast = _fast(block)
    if fast is None:
        return
    try:
        reference = _reference(block)
    except CorruptFileError as e:
        pytest.fail(f"the fast decoder read content fastavro rejects: {e!r}")
    assert _same(fast, reference)


@pytest.mark.parametrize("field_type", [
    {"type": "record", "name": "n", "fields": [{"name": "a", "type": {"type": "array", "items": ["int", "string"]}}]},
    {"type": "record", "name": "n", "fields": [{"name": "a", "type": "int"}, {"name": "a", "type": "int"}]},
    {"type": "array", "items": ["null", "int", "string"]},
    {"type": "map", "values": ["null", "int", "string"]},
    ["null", "int", "string"],
    "null",
    {"type": "fixed", "name": "F", "size": -1},
    "E",  # a named type given by name
])
def test_schemas_left_to_fastavro(field_type):
    assert avro_records.field_plan({"type": "record", "name": "r", "fields": [
        {"name": "ok", "type": "long"}, {"name": "x", "type": field_type}]}) is None


def test_a_boolean_byte_other_than_0_or_1_is_left_to_fastavro():
    schema = {"type": "record", "name": "r", "fields": [{"name": "b", "type": "boolean"}]}
    content = struct.pack(">iii", 3, 1, 1) + b"\x02"
    assert _fast(_block(schema, content)) is None
    decode_avro_data_block(_block(schema, content))  # fastavro's answer, whatever it is


def test_records_that_do_not_tile_the_content_are_corrupt():
    schema = {"type": "record", "name": "r", "fields": [{"name": "a", "type": "long"}]}
    good = fastavro_content(schema, [{"a": 1}, {"a": 300}])
    for content in (good + b"\x00", good[:-1], good[:8] + struct.pack(">i", 2) + good[12:]):
        assert _fast(_block(schema, content)) is None
        with pytest.raises(CorruptFileError, match="x.log"):
            decode_avro_data_block(_block(schema, content))


@pytest.mark.interop
def test_hudi_written_avro_block_takes_the_fast_path(hudi_fixtures):
    (path,) = (hudi_fixtures / "log_files" / "valid_log_avro_data").glob(".*.log.*")
    (block,) = read_log_blocks(path.read_bytes(), str(path))
    assert avro_records.field_plan(json.loads(block.schema)) is not None
    fast = _fast(block)
    assert fast is not None and fast.equals(_reference(block))


def test_uuid_strings_read_as_strings_on_both_paths():
    """fastavro turns a ``uuid`` string into a ``uuid.UUID``, which Arrow does not take: both
    paths read the string (a nested field sends this block to fastavro)."""
    uid = "e3e70682-c209-4cac-629f-6fbed82c07cd"
    for extra in ([], [{"name": "n", "type": {"type": "array", "items": "int"}}]):
        schema = {"type": "record", "name": "r", "fields": [
            {"name": "u", "type": {"type": "string", "logicalType": "uuid"}}, *extra]}
        record = {"u": uid, **({"n": [1]} if extra else {})}
        table = decode_avro_data_block(_block(schema, fastavro_content(schema, [record])))
        assert table.column("u").to_pylist() == [uid]


def test_duplicate_field_names_are_left_to_fastavro():
    assert avro_records.field_plan({"type": "record", "name": "r", "fields": [
        {"name": "a", "type": "int"}, {"name": "a", "type": "string"}]}) is None


def test_a_count_more_than_the_content_can_hold_is_declined_before_allocating():
    schema = {"type": "record", "name": "r", "fields": [{"name": "a", "type": "long"}]}
    content = struct.pack(">iii", 3, 2**31 - 1, 1) + b"\x02"
    assert avro_records.record_spans(content, 2**31 - 1) is None
    with pytest.raises(CorruptFileError, match="x.log"):
        decode_avro_data_block(_block(schema, content))


@pytest.mark.parametrize("size", [0, 1, 5])
def test_fixed_of_every_size(size):
    schema = {"type": "record", "name": "r", "fields": [
        {"name": "f", "type": ["null", {"type": "fixed", "name": "F", "size": size}]},
        {"name": "s", "type": "string"}]}
    records = [{"f": bytes(range(size)), "s": "a"}, {"f": None, "s": "b"}, {"f": b"\xff" * size, "s": ""}]
    block = _block(schema, fastavro_content(schema, records))
    fast = _fast(block)
    assert fast is not None and fast.equals(_reference(block))
    assert fast.column("f").to_pylist() == [r["f"] for r in records]


def test_long_and_short_values_mixed():
    """Values past a few hundred bytes (several length bytes, copied a value at a time) beside
    empty ones (copied by position)."""
    schema = {"type": "record", "name": "r", "fields": [{"name": "s", "type": ["null", "string"]},
                                                        {"name": "b", "type": "bytes"}]}
    records = [{"s": "x" * n, "b": bytes([n % 256]) * (n // 3)} for n in (0, 1, 300, 20_000, 0, 70_000)]
    records += [{"s": None, "b": b""}, {"s": "é" * 5, "b": b"\x00"}]
    block = _block(schema, fastavro_content(schema, records))
    fast = _fast(block)
    assert fast is not None and fast.equals(_reference(block))


@pytest.mark.parametrize("field_type, raw", [
    ("int", b"\x80\x80\x80\x80\x10"),  # 2**31 as a zigzag varint: not an int
    ({"type": "enum", "name": "E", "symbols": ["A", "B"]}, b"\x04"),  # symbol 2 of 2
    ({"type": "enum", "name": "E", "symbols": ["A", "B"]}, b"\x01"),  # symbol -1
])
def test_values_out_of_range_are_left_to_fastavro(field_type, raw):
    schema = {"type": "record", "name": "r", "fields": [{"name": "a", "type": field_type}]}
    content = struct.pack(">iii", 3, 1, len(raw)) + raw
    assert _fast(_block(schema, content)) is None


def test_float_nan_payloads_as_fastavro_gives_them():
    schema = {"type": "record", "name": "r", "fields": [{"name": "f", "type": "float"}]}
    content = struct.pack(">iii", 3, 1, 4) + struct.pack("<I", 0x7F800001)  # a signalling NaN
    fast, reference = _fast(_block(schema, content)), _reference(_block(schema, content))
    as_bits = [c.column("f").chunk(0).buffers()[1].to_pybytes() for c in (fast, reference)]
    assert as_bits[0] == as_bits[1]


def test_decode_avro_data_block_takes_the_vectorised_path():
    schema, records = {"type": "record", "name": "r", "fields": [{"name": "a", "type": "long"}]}, [{"a": 5}]
    block = _block(schema, fastavro_content(schema, records))
    real, answers = avro_records.decode_records, []

    def spy(*args):
        answers.append(real(*args))
        return answers[-1]

    with mock.patch.object(avro_records, "decode_records", side_effect=spy):
        assert decode_avro_data_block(block).column("a").to_pylist() == [5]
        assert len(answers) == 1 and answers[0] is not None
        decode_avro_data_block(block, vectorised=False)
        assert len(answers) == 1


def _long(v: int) -> bytes:
    """Avro's zigzag varint."""
    z, out = (v << 1) ^ (v >> 63), bytearray()
    while True:
        if z < 0x80:
            return bytes(out + bytes([z]))
        out.append((z & 0x7F) | 0x80)
        z >>= 7


@pytest.mark.parametrize("items, encode", [
    ("long", _long),
    ("double", lambda v: struct.pack("<d", v)),
])
def test_arrays_written_in_several_blocks_with_byte_sizes(items, encode):
    """Avro lets a writer split an array into blocks, a negative count followed by the block's
    byte size (Java's BlockingBinaryEncoder does): every block's items, in order."""
    schema = {"type": "record", "name": "r", "fields": [
        {"name": "a", "type": {"type": "array", "items": items}}, {"name": "z", "type": "int"}]}
    values = [[1, 2, 3], [], [300, -5]]
    records = []
    for i, vs in enumerate(values):
        body = b""
        if vs:
            first = b"".join(encode(v) for v in vs[:2])
            body += _long(-len(vs[:2])) + _long(len(first)) + first
            if vs[2:]:
                body += _long(len(vs[2:])) + b"".join(encode(v) for v in vs[2:])
        records.append(body + _long(0) + _long(i))
    content = struct.pack(">ii", 3, len(records)) + b"".join(struct.pack(">i", len(r)) + r for r in records)
    block = _block(schema, content)
    fast = _fast(block)
    assert fast is not None and fast.equals(_reference(block))
    assert fast.column("a").to_pylist() == values and fast.column("z").to_pylist() == [0, 1, 2]


def test_long_arrays_of_variable_width_items_go_to_fastavro():
    schema = {"type": "record", "name": "r", "fields": [{"name": "a", "type": {"type": "array", "items": "long"}}]}
    records = [{"a": list(range(avro_records.MAX_ITEM_STEPS + 1))}, {"a": [7]}]
    block = _block(schema, fastavro_content(schema, records))
    assert _fast(block) is None
    assert decode_avro_data_block(block).column("a").to_pylist() == [r["a"] for r in records]


def test_nested_arrays_share_one_step_budget():
    """An array of arrays takes its inner arrays' steps once per outer item: the budget is the
    block's, so 256 x 255 items stop at the budget instead of taking 65,000 steps."""
    schema = {"type": "record", "name": "r", "fields": [
        {"name": "a", "type": {"type": "array", "items": {"type": "array", "items": "int"}}}]}
    records = [{"a": [list(range(255))] * 256}]
    block = _block(schema, fastavro_content(schema, records))
    assert _fast(block) is None
    assert decode_avro_data_block(block).column("a").to_pylist() == [records[0]["a"]]


def test_many_one_item_blocks_count_against_the_budget():
    """A blocking encoder may write a long array as many small blocks: each is a step."""
    schema = {"type": "record", "name": "r", "fields": [{"name": "a", "type": {"type": "array", "items": "double"}}]}
    body = (_long(1) + struct.pack("<d", 1.5)) * (avro_records.MAX_ITEM_STEPS + 1) + _long(0)
    block = _block(schema, struct.pack(">iii", 3, 1, len(body)) + body)
    assert _fast(block) is None
    assert decode_avro_data_block(block).column("a").to_pylist() == [[1.5] * (avro_records.MAX_ITEM_STEPS + 1)]


@pytest.mark.parametrize("claim, records", [(2**62, 4), (2**63 - 1, 2), (10**6, 1)])
def test_item_counts_past_the_content_are_declined_before_allocating(claim, records):
    """Counts that sum past int64, or claim more doubles than the content holds: the fast path
    declines (it crashed or allocated first), fastavro's path names the block corrupt."""
    schema = {"type": "record", "name": "r", "fields": [{"name": "a", "type": {"type": "array", "items": "double"}}]}
    body = _long(claim) + struct.pack("<d", 1.0) + _long(0)
    block = _block(schema, struct.pack(">ii", 3, records) + (struct.pack(">i", len(body)) + body) * records)
    assert _fast(block) is None
    with pytest.raises(CorruptFileError):
        decode_avro_data_block(block)


@pytest.mark.parametrize("schema", [
    {"type": "record", "name": "r", "fields": [
        {"name": "e", "type": {"type": "record", "name": "E", "fields": []}}, {"name": "i", "type": "int"}]},
    {"type": "record", "name": "r", "fields": [{"name": "e", "type": {"type": "record", "name": "E", "fields": []}}]},
    {"type": "record", "name": "r", "fields": [
        {"name": "a", "type": {"type": "array", "items": {"type": "record", "name": "E", "fields": []}}}]},
])
def test_records_without_fields_go_to_fastavro(schema):
    value = {"e": {}, "i": 1} if len(schema["fields"]) == 2 else ({"e": {}} if schema["fields"][0]["name"] == "e"
                                                                    else {"a": [{}, {}]})
    block = _block(schema, fastavro_content(schema, [value, value]))
    assert avro_records.field_plan(schema) is None
    assert decode_avro_data_block(block).num_rows == 2


def test_a_map_holding_a_key_twice_goes_to_fastavro():
    """Valid Avro (a damaged key can make it): fastavro's dict keeps the last value."""
    schema = {"type": "record", "name": "r", "fields": [{"name": "m", "type": {"type": "map", "values": "int"}}]}
    body = _long(2) + _long(1) + b"k" + _long(1) + _long(1) + b"k" + _long(2) + _long(0)
    block = _block(schema, struct.pack(">iii", 3, 1, len(body)) + body)
    assert _fast(block) is None
    assert decode_avro_data_block(block).column("m").to_pylist() == [[("k", 2)]]


def test_long_arrays_of_fixed_width_items_are_read_a_block_at_a_time():
    """An embedding of 1,000 doubles per record: past the item rounds, read as whole blocks."""
    schema = {"type": "record", "name": "r", "fields": [
        {"name": "e", "type": ["null", {"type": "array", "items": "double"}]},
        {"name": "f", "type": {"type": "array", "items": {"type": "fixed", "name": "F", "size": 2}}}]}
    records = [{"e": [i + j / 7 for j in range(1000)], "f": [bytes([i, j % 256]) for j in range(300)]}
               for i in range(3)] + [{"e": None, "f": []}]
    block = _block(schema, fastavro_content(schema, records))
    fast = _fast(block)
    assert fast is not None and fast.equals(_reference(block))


@pytest.mark.parametrize("raw", [
    b"",  # fastavro reads no bytes as 0
    b"\xff",  # -1 in one byte
    b"\x80" + b"\x00" * 15,  # the least 16-byte value
    b"\x00" * 17,  # longer than 16 bytes: left to fastavro
])
def test_decimal_byte_strings_decode_as_fastavro_reads_them(raw):
    schema = {"type": "record", "name": "r", "fields": [
        {"name": "d", "type": {"type": "bytes", "logicalType": "decimal", "precision": 38, "scale": 4}}]}
    body = _long(len(raw)) + raw
    block = _block(schema, struct.pack(">ii", 3, 1) + struct.pack(">i", len(body)) + body)
    fast = _fast(block)
    try:
        reference = _reference(block)
    except CorruptFileError:
        assert fast is None  # past the precision: fastavro's path names it
        return
    if len(raw) > 16:
        assert fast is None
    else:
        assert fast is not None and fast.equals(reference)


def test_a_decimal_past_its_precision_is_named_corrupt():
    schema = {"type": "record", "name": "r", "fields": [
        {"name": "d", "type": {"type": "bytes", "logicalType": "decimal", "precision": 4, "scale": 2}}]}
    raw = (10**4).to_bytes(3, "big", signed=True)  # 100.00 needs 5 digits
    body = _long(len(raw)) + raw
    block = _block(schema, struct.pack(">ii", 3, 1) + struct.pack(">i", len(body)) + body)
    assert _fast(block) is None
    with pytest.raises(CorruptFileError, match="x.log"):
        decode_avro_data_block(block)
