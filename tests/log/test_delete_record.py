"""The vectorised decoding of delete block records (``delete_record.decode_records``) against
fastavro's, the reference it stands in for: Hudi's ``HoodieDeleteBlock`` (version 3) content is
one schemaless Avro ``HoodieDeleteRecordList``, and whatever the fast decoder accepts must decode
exactly as fastavro decodes it; what it declines, fastavro decodes (or names as corrupt)."""

from __future__ import annotations

import datetime as dt
import io
import math
import struct
from decimal import Decimal
from unittest import mock

import fastavro
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakehouse.errors import CorruptFileError, SchemaError
from lakehouse.log import (
    BlockType,
    HeaderKey,
    LogBlock,
    decode_delete_block,
    delete_record,
    encode_delete_block,
    read_log_blocks,
)
from lakehouse.log.delete_record import DELETE_RECORD_LIST_SCHEMA, NAMESPACE

_SCHEMA = fastavro.parse_schema(DELETE_RECORD_LIST_SCHEMA)
_VERSION = 3


def _payload(records: list[dict]) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, _SCHEMA, {"deleteRecordList": records})
    return buf.getvalue()


def _block(payload: bytes) -> LogBlock:
    content = struct.pack(">ii", _VERSION, len(payload)) + payload
    return LogBlock(BlockType.DELETE, {HeaderKey.INSTANT_TIME: "1"}, {}, content, 0, 0, "x.log")


def _reference(payload: bytes) -> pa.Table:
    """fastavro's decoding: what ``decode_delete_block`` does where the fast decoder declines."""
    return decode_delete_block(_block(payload), vectorised=False)


def _record(key, part, ordering=None) -> dict:
    return {"recordKey": key, "partitionPath": part, "orderingVal": ordering}


def _wrapped(name: str, value) -> tuple[str, dict]:
    return (f"{NAMESPACE}.{name}", {"value": value})


# Strings whose UTF-8 holds the bytes that start a record (0 and 2) and lengths past one
# varint byte (64 bytes and more), where a parser that lost its place would show it.
_text = st.text(alphabet=st.sampled_from("ab\x00\x02\x04é€😀-"), max_size=80)
_nullable_text = st.one_of(st.none(), _text)

_KIND_VALUES = {
    "BooleanWrapper": st.booleans(),
    "IntWrapper": st.integers(-2**31, 2**31 - 1),
    "LongWrapper": st.integers(-2**63, 2**63 - 1),
    "FloatWrapper": st.floats(width=32, allow_nan=False),
    "DoubleWrapper": st.floats(allow_nan=False),
    "StringWrapper": _text,
    "DateWrapper": st.integers(-700_000, 2_900_000),
    "TimeMicrosWrapper": st.times(),
    "TimestampMicrosWrapper": st.integers(-2**62, 2**62),
}


@st.composite
def _records(draw) -> list[dict]:
    kind = draw(st.sampled_from(sorted(_KIND_VALUES)))
    ordering = st.one_of(st.none(), st.just(_wrapped("IntWrapper", 0)),
                         _KIND_VALUES[kind].map(lambda v: _wrapped(kind, v)))
    return draw(st.lists(st.builds(_record, _nullable_text, _nullable_text, ordering), max_size=40))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_records())
def test_decodes_as_fastavro_does(records):
    payload = _payload(records)
    assert delete_record.decode_records(payload) is not None
    fast = decode_delete_block(_block(payload))
    assert fast.equals(_reference(payload)), (fast.to_pylist(), _reference(payload).to_pylist())
    assert fast.num_rows == len(records)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_records(), st.integers(1, 64))
def test_decodes_as_fastavro_does_a_window_at_a_time(records, window):
    """Blocks are parsed a window of bytes at a time: records cross windows, some are longer
    than a window."""
    payload = _payload(records)
    with mock.patch.object(delete_record, "_WINDOW", window):
        assert delete_record.decode_records(payload) is not None
        assert decode_delete_block(_block(payload)).equals(_reference(payload))


def test_a_block_of_many_windows():
    records = [_record(f"key-{i:08d}", f"city-{i % 7}", _wrapped("IntWrapper", 0)) for i in range(60_000)]
    payload = _payload(records)
    assert len(payload) > delete_record._WINDOW
    assert decode_delete_block(_block(payload)).equals(_reference(payload))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_records(), st.data())
def test_damaged_payloads_decode_as_fastavro_does_or_not_at_all(records, data):
    """A flipped, dropped or added byte: what the fast decoder still accepts must be what
    fastavro reads there; otherwise fastavro decides (and a corrupt block is named)."""
    payload = bytearray(_payload(records))
    how = data.draw(st.sampled_from(["flip", "drop", "insert", "truncate"]))
    at = data.draw(st.integers(0, len(payload) - 1))
    if how == "flip":
        payload[at] ^= data.draw(st.integers(1, 255))
    elif how == "drop":
        del payload[at]
    elif how == "insert":
        payload.insert(at, data.draw(st.integers(0, 255)))
    else:
        del payload[at:]
    payload = bytes(payload)
    with mock.patch.object(delete_record, "_WINDOW", data.draw(st.sampled_from([8, 1 << 20]))):
        fast = delete_record.decode_records(payload)
    if fast is None:
        return
    try:
        reference = _reference(payload)
    except (CorruptFileError, OverflowError, ValueError) as e:
        pytest.fail(f"the fast decoder read a payload fastavro rejects: {e!r}")
    assert _same(decode_delete_block(_block(payload)), reference)


def _same(a: pa.Table, b: pa.Table) -> bool:
    """Equal tables, a NaN equal to a NaN (a flipped byte can make an ordering value NaN, which
    both decoders read alike and ``Table.equals`` never calls equal)."""
    def norm(v):
        return "NaN" if isinstance(v, float) and math.isnan(v) else v

    def rows(t: pa.Table) -> list[dict]:
        # A flipped byte can make a date or time no Python value holds: compare their integers.
        cols = [c.cast(pa.int32() if c.type.bit_width == 32 else pa.int64()) if pa.types.is_temporal(c.type)
                else c for c in t.columns]
        return [{k: norm(v) for k, v in r.items()}
                for r in pa.Table.from_arrays(cols, names=t.column_names).to_pylist()]
    return a.schema == b.schema and rows(a) == rows(b)


def test_common_shape_every_delete_unconditional():
    records = [_record(f"key-{i}", f"p{i % 3}", _wrapped("IntWrapper", 0)) for i in range(1000)]
    table = decode_delete_block(_block(_payload(records)))
    assert table.equals(_reference(_payload(records)))
    assert table.column("unconditional").to_pylist() == [True] * 1000
    assert table.column("ordering_value").null_count == 1000
    assert table.column("record_key").to_pylist() == [f"key-{i}" for i in range(1000)]


def test_array_in_several_blocks_with_and_without_sizes():
    """Avro lets a writer split an array into blocks, a negative count followed by the block's
    byte size (Java's blocking encoders); Hudi's own writer uses one block."""
    one = _payload([_record("a", "p", _wrapped("LongWrapper", 5))])[1:-1]  # an item's bytes
    two = _payload([_record("bb", None), _record(None, "q", _wrapped("LongWrapper", -7))])[1:-1]

    def zigzag(n: int) -> bytes:
        out, v = b"", (n << 1) ^ (n >> 63)
        while v >= 0x80:
            out, v = out + bytes([v & 0x7F | 0x80]), v >> 7
        return out + bytes([v])

    payload = zigzag(1) + one + zigzag(-2) + zigzag(len(two)) + two + b"\x00"
    assert delete_record.decode_records(payload) is not None
    table = decode_delete_block(_block(payload))
    assert table.equals(_reference(payload))
    assert table.column("record_key").to_pylist() == ["a", "bb", None]
    assert table.column("ordering_value").to_pylist() == [5, None, -7]


@pytest.mark.parametrize("orderings", [
    [_wrapped("IntWrapper", 3), _wrapped("LongWrapper", 4)],  # widened to one type: fastavro's path
    [_wrapped("BytesWrapper", b"\x00\x01")],
    [_wrapped("DecimalWrapper", Decimal("1.500000000000000"))],
])
def test_shapes_left_to_fastavro(orderings):
    payload = _payload([_record(f"k{i}", "p", o) for i, o in enumerate(orderings)])
    assert delete_record.decode_records(payload) is None
    assert decode_delete_block(_block(payload)).num_rows == len(orderings)


def test_a_payload_with_bytes_left_over_is_not_decoded_here():
    payload = _payload([_record("a", "p")]) + b"\x00"
    assert delete_record.decode_records(payload) is None
    with pytest.raises(CorruptFileError, match="follow the delete records"):
        decode_delete_block(_block(payload))


def test_invalid_utf8_key_is_corrupt():
    payload = bytearray(_payload([_record("ab", "p")]))
    payload[payload.index(b"ab")] = 0xFF
    assert delete_record.decode_records(bytes(payload)) is None
    with pytest.raises(CorruptFileError, match="x.log"):
        decode_delete_block(_block(bytes(payload)))


def test_time_and_timestamp_values_typed_as_the_reference():
    records = [_record("a", "p", _wrapped("TimeMicrosWrapper", dt.time(1, 2, 3, 4))), _record("b", "p")]
    assert decode_delete_block(_block(_payload(records))).column("ordering_value").to_pylist() == \
        [dt.time(1, 2, 3, 4), None]
    records = [_record("a", "p", _wrapped("TimestampMicrosWrapper", 7))]
    assert decode_delete_block(_block(_payload(records))).column("ordering_value").to_pylist() == \
        [dt.datetime(1970, 1, 1, 0, 0, 0, 7, tzinfo=dt.UTC)]


def test_a_long_of_more_than_64_bits_is_left_to_fastavro():
    """A varint's tenth byte may carry only bit 63 (Java's ``BinaryDecoder.readLong`` rejects
    more); such a payload is not decoded here."""
    payload = bytearray(_payload([_record("a", "p", _wrapped("LongWrapper", 2**63 - 1))]))
    assert delete_record.decode_records(bytes(payload)) is not None
    payload[-2] = 0x7F  # the value's tenth byte, before the array's end
    assert delete_record.decode_records(bytes(payload)) is None


# ---------------------------------------------------------------------------------------------
# Encoding: deletes without ordering values, byte for byte as fastavro writes them

_unconditional = st.lists(st.tuples(_text, _text), max_size=60)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_unconditional)
def test_encodes_as_fastavro_does(rows):
    keys, parts = [k for k, _ in rows], [p for _, p in rows]
    ours = delete_record.encode_unconditional(pa.array(keys, pa.string()), pa.array(parts, pa.string()))
    assert ours == _payload([_record(k, p, delete_record.UNCONDITIONAL) for k, p in rows])
    assert decode_delete_block(_block(ours)).column("record_key").to_pylist() == keys


def test_encoding_long_strings_and_many_records_as_fastavro_does():
    """Lengths and counts past one varint byte (64, 8192, 2**20...)."""
    keys = ["k" * n for n in (0, 63, 64, 8191, 8192, 70_000)] + [f"{i}" for i in range(9000)]
    parts = ["p" * (i % 200) for i in range(len(keys))]
    ours = delete_record.encode_unconditional(pa.array(keys), pa.array(parts).slice(0))
    assert ours == _payload([_record(k, p, delete_record.UNCONDITIONAL) for k, p in zip(keys, parts)])
    sliced = pa.array(["x"] + keys).slice(1)  # an array with an offset into its buffers
    assert delete_record.encode_unconditional(sliced, pa.array(parts)) == ours


def test_null_keys_are_left_to_fastavro():
    assert delete_record.encode_unconditional(pa.array(["a", None]), pa.array(["p", "p"])) is None
    assert delete_record.encode_unconditional(pa.array(["a"]), pa.array([None], pa.string())) is None
    data = encode_delete_block(["a", None], ["p", "p"], None, "1",
                               {"type": "record", "name": "r", "fields": []})
    (blk,) = read_log_blocks(data)
    assert decode_delete_block(blk).column("record_key").to_pylist() == ["a", None]


def _zigzag(n: int) -> bytes:
    out, v = b"", (n << 1) ^ (n >> 63)
    while v >= 0x80:
        out, v = out + bytes([v & 0x7F | 0x80]), v >> 7
    return out + bytes([v])


_ITEM = _payload([_record("a", "p")])[1:-1]  # one record's bytes


@pytest.mark.parametrize("item, expected", [
    # time-micros of -1 and of a day: fastavro's conversion decides (it does not wrap them)
    (b"\x02\x02a\x02\x02p" + _zigzag(10) + _zigzag(-1), None),
    (b"\x02\x02a\x02\x02p" + _zigzag(10) + _zigzag(86_400_000_000), None),
    # an IntWrapper past 32 bits: not an int
    (b"\x02\x02a\x02\x02p" + _zigzag(2) + _zigzag(2**32), None),
    # a StringWrapper of negative length
    (b"\x02\x02a\x02\x02p" + _zigzag(7) + _zigzag(-1), None),
])
def test_values_fastavro_would_read_otherwise_are_left_to_it(item, expected):
    payload = _zigzag(1) + item + b"\x00"
    assert delete_record.decode_records(payload) is expected


def test_a_boolean_byte_other_than_0_or_1_reads_as_fastavro_reads_it():
    payload = _zigzag(1) + b"\x02\x02a\x02\x02p" + _zigzag(1) + b"\x02" + b"\x00"
    assert delete_record.decode_records(payload) is not None
    assert decode_delete_block(_block(payload)).equals(_reference(payload))
    assert decode_delete_block(_block(payload)).column("ordering_value").to_pylist() == [True]


@pytest.mark.parametrize("count", [-2**63, 2**40, 2**27, -(2**40)])
def test_impossible_counts_are_declined_at_once(count):
    """A count no payload of this size can hold (one damaged byte makes one) is declined before
    anything is allocated for it; fastavro then names the block corrupt."""
    size = _zigzag(len(_ITEM)) if count < 0 else b""
    payload = (b"\xff" * 9 + b"\x01" if count == -2**63 else _zigzag(count)) + size + _ITEM + b"\x00"
    assert delete_record.decode_records(payload) is None
    with pytest.raises(CorruptFileError):
        decode_delete_block(_block(payload))


def test_many_array_blocks_are_left_to_fastavro():
    """Each block costs a pass of its own here; Java and fastavro write one."""
    few = _zigzag(1) + _ITEM + _zigzag(1) + _ITEM + b"\x00"
    assert delete_record.decode_records(few) is not None
    many = b"".join(_zigzag(1) + _ITEM for _ in range(delete_record._MAX_ARRAY_BLOCKS + 1)) + b"\x00"
    assert delete_record.decode_records(many) is None
    assert decode_delete_block(_block(many)).num_rows == delete_record._MAX_ARRAY_BLOCKS + 1


def test_keys_full_of_the_bytes_records_start_with():
    key = "\x00\x02" * 300_000
    payload = _payload([_record(key, "p"), _record("b", "\x00")])
    assert delete_record.decode_records(payload) is not None
    assert decode_delete_block(_block(payload)).column("record_key").to_pylist() == [key, "b"]


@pytest.mark.parametrize("as_arrow", [
    lambda v: pa.chunked_array([pa.array(v[:1]), pa.array([], pa.string()), pa.array(v[1:])]),
    lambda v: pa.array(["x", *v]).slice(1),
    lambda v: pa.array(v, pa.large_string()),
])
def test_encode_delete_block_takes_arrow_columns(as_arrow):
    keys, parts = ["k1", "k\x002", "é"], ["p", "", "q"]
    schema = {"type": "record", "name": "r", "fields": []}
    expected = encode_delete_block(keys, parts, None, "1", schema)
    assert encode_delete_block(as_arrow(keys), as_arrow(parts), None, "1", schema) == expected


def test_bytes_keys_are_refused_as_before():
    with pytest.raises(SchemaError):
        encode_delete_block([b"ab"], ["p"], None, "1", {"type": "record", "name": "r", "fields": []})


def test_decode_delete_block_takes_the_vectorised_path():
    payload = _payload([_record("a", "p", delete_record.UNCONDITIONAL)])
    real, answers = delete_record.decode_records, []

    def spy(*args):
        answers.append(real(*args))
        return answers[-1]

    with mock.patch.object(delete_record, "decode_records", side_effect=spy):
        assert decode_delete_block(_block(payload)).column("record_key").to_pylist() == ["a"]
        assert len(answers) == 1 and answers[0] is not None
        decode_delete_block(_block(payload), vectorised=False)
        assert len(answers) == 1


def test_a_float_ordering_value_keeps_the_nan_bits_fastavro_gives():
    """fastavro hands a FloatWrapper's value over as a Python float, which quiets a signalling
    NaN: the fast path gives the same bits."""
    payload = _zigzag(1) + b"\x02\x02a\x02\x02p" + _zigzag(4) + struct.pack("<I", 0x7F800001) + b"\x00"
    assert delete_record.decode_records(payload) is not None
    fast = decode_delete_block(_block(payload)).column("ordering_value").chunk(0)
    reference = _reference(payload).column("ordering_value").chunk(0)
    assert fast.buffers()[1].to_pybytes() == reference.buffers()[1].to_pybytes()
