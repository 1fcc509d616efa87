"""Vectorised encoding of an Avro data block's records (Hudi's ``HoodieAvroDataBlock``, content
version 3): the inverse of :mod:`lakehouse.log.avro_records`.

A writer on ``hoodie.logfile.data.block.format=avro`` (Java Hudi's default) encodes every log
record. Through fastavro that is a Python dict per record and ~15 us a record of the trips schema,
which made an upsert ~10x slower than with parquet blocks. Here each field becomes, for all
records at once, a few Arrow binary arrays of per-record pieces (a union branch with a varint or
a fixed-width value; a string's bytes), and one Arrow take lays the pieces out record after
record: the bytes fastavro writes, with no per-record Python. An array or map is encoded item by
item the same way; a row's items then lie back to back, so the row's piece is a range of the
items' bytes.

Encoded here: what the decoder reads, namely fields that are, or are a union of null with, a
boolean, int, long, float, double, string, bytes, enum, fixed (temporal logical types included:
they travel as ints and longs), a decimal (bytes or fixed), or a record, array or map of such
values, nested to any depth. Anything else (wider unions, a named type used again by name), a
value fastavro would refuse (a null where the schema has none, a value that is no enum symbol, a
map holding a key twice) answers None: the caller encodes with fastavro, which also says what
does not fit.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse.log.avro_records import field_plan
from lakehouse.log.avro_vector import repeated_map_keys, varint_bytes

_LEAVES = {"boolean", "int", "long", "float", "double", "string", "bytes", "enum", "fixed", "decimal"}


def encode_records(table: pa.Table, schema: dict[str, Any]) -> bytes | None:
    """Every row of ``table`` (already in the schema's fields, order and physical types) as an
    int32 big-endian length and its Avro binary encoding, row after row; None when some field is
    not encoded here."""
    plan = field_plan(schema)
    if plan is None or len(plan) != table.num_columns or not all(_encodable(k) for _, k in plan):
        return None
    n = table.num_rows
    if n == 0:
        return b""
    try:
        columns = [c.combine_chunks() if c.num_chunks != 1 else c.chunk(0) for c in table.columns]
    except pa.ArrowInvalid:
        return None  # strings past 2 GiB in several chunks: fastavro writes them
    record = pa.StructArray.from_arrays(columns, names=table.column_names)
    pieces = _field_pieces(record, None, {"type": "record", "fields": plan}, np.ones(n, bool))
    if pieces is None:
        return None
    sizes = _sizes(pieces, n)
    if int(sizes.max()) >= 2**31:
        return None
    prefix = _binary(sizes.astype(">i4").view(np.uint8), np.full(n, 4, np.int64))
    laid = _interleave([prefix] + [p for p, _ in pieces], n)
    bounds = _offsets(laid)
    return laid.buffers()[2][int(bounds[0]):int(bounds[-1])].to_pybytes()


def _encodable(kind: dict[str, Any]) -> bool:
    if kind["type"] == "record":
        return all(_encodable(k) for _, k in kind["fields"])
    if kind["type"] in ("array", "map"):
        return _encodable(kind["item"][1])
    return kind["type"] in _LEAVES


def _field_pieces(arr: pa.Array, null_at: int | None, kind: dict[str, Any], present: np.ndarray
                  ) -> list[tuple[pa.Array, np.ndarray]] | None:
    """The pieces of one field for every record, each with its byte lengths: nothing where
    ``present`` is false (a field of a null record)."""
    n = len(arr)
    valid = present if not arr.null_count else present & arr.is_valid().to_numpy(zero_copy_only=False)
    if null_at is None and (valid != present).any():
        return None  # a null where the schema has none: fastavro names it
    t = kind["type"]
    head = np.zeros((n, 0), np.uint8)
    head_len = np.zeros(n, np.int64)
    if null_at is not None:
        # The union branch, a zigzag varint of 0 or 1: one byte.
        head = np.where(valid, 2 * (1 - null_at), 2 * null_at).astype(np.uint8)[:, None]
        head_len = present.astype(np.int64)
    body: pa.Array | None = None
    children: list[tuple[pa.Array, np.ndarray]] = []
    value, value_len = np.zeros((n, 0), np.uint8), np.zeros(n, np.int64)
    if t == "boolean":
        value = pc.fill_null(arr, False).to_numpy(zero_copy_only=False).astype(np.uint8)[:, None]
        value_len = np.ones(n, np.int64)
    elif t in ("int", "long"):
        v = pc.fill_null(arr, 0).to_numpy(zero_copy_only=False).astype(np.int64)
        if t == "int" and len(v) and (v.min() < -2**31 or v.max() >= 2**31):
            return None  # no Avro int (a 64-bit logical type on an int): fastavro refuses it
        value, value_len = varint_bytes((v << 1) ^ (v >> 63))
    elif t in ("float", "double"):
        v = pc.fill_null(arr, 0).to_numpy(zero_copy_only=False).astype("<f4" if t == "float" else "<f8")
        if t == "float":
            # fastavro writes a float from a Python float, which holds a signalling NaN quiet.
            bits = v.view(np.uint32)
            bits[((bits & 0x7F800000) == 0x7F800000) & ((bits & 0x007FFFFF) != 0)] |= np.uint32(0x00400000)
        value = v.view(np.uint8).reshape(n, v.itemsize)
        value_len = np.full(n, v.itemsize, np.int64)
    elif t == "enum":
        index = pc.index_in(arr, value_set=pa.array(kind["symbols"], pa.string()))
        if (valid & ~index.is_valid().to_numpy(zero_copy_only=False)).any():
            return None  # a value that is no symbol: fastavro names it
        value, value_len = varint_bytes(2 * pc.fill_null(index, 0).to_numpy(zero_copy_only=False).astype(np.int64))
    elif t in ("string", "bytes", "fixed"):
        if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
            try:
                arr.validate(full=True)  # fastavro refuses what is not UTF-8
            except pa.ArrowInvalid:
                return None
        body = arr.cast(pa.large_binary()) if not pa.types.is_fixed_size_binary(arr.type) \
            else arr.cast(pa.binary()).cast(pa.large_binary())
        if not valid.all():
            # The take copies whole values: what is not written must be empty.
            body = pc.if_else(pa.array(valid), body, pa.scalar(b"", pa.large_binary()))
        length = np.diff(_offsets(body))
        if t == "fixed":
            if (length[valid] != kind["size"]).any():
                return None
        else:
            value, value_len = varint_bytes(2 * length)
    elif t == "record":
        for i, (child_null_at, child_kind) in enumerate(kind["fields"]):
            child = _field_pieces(arr.field(i), child_null_at, child_kind, valid)
            if child is None:
                return None
            children += child
    elif t in ("array", "map"):
        items = _items(arr, kind, valid)
        if items is None:
            return None
        # Avro writes a non-empty array or map as one block: its item count, the items, then
        # the count 0 that ends it; an empty one as that 0 alone.
        body, count = items
        value, value_len = varint_bytes(2 * count)
        tail = valid & (count > 0)
        children = [(_binary(np.zeros(int(tail.sum()), np.uint8), tail.astype(np.int64)), tail.astype(np.int64))]
        length = np.diff(_offsets(body))
    elif t == "decimal":
        value, value_len = _decimals(arr, kind["size"])
    else:
        return None
    # A null is its union branch alone; the value bytes come after the branch.
    small_len = head_len + np.where(valid, value_len, 0)
    pieces = []
    if small_len.any():
        small = np.concatenate([head, value], axis=1) if head.shape[1] else value
        keep = np.arange(small.shape[1]) < small_len[:, None]
        pieces.append((_binary(small[keep], small_len), small_len))
    if body is not None:
        pieces.append((body, length))
    return pieces + children


def _encoded(arr: pa.Array, null_at: int | None, kind: dict[str, Any], present: np.ndarray
             ) -> pa.Array | None:
    """Each value's whole encoding as one large_binary value (empty where not ``present``)."""
    pieces = _field_pieces(arr, null_at, kind, present)
    if pieces is None:
        return None
    n = len(arr)
    if not pieces:
        return _binary(np.zeros(0, np.uint8), np.zeros(n, np.int64))
    if len(pieces) == 1:
        return pieces[0][0]
    laid = _interleave([p for p, _ in pieces], n)
    bounds = np.zeros(n + 1, np.int64)
    np.cumsum(_sizes(pieces, n), out=bounds[1:])
    return pa.Array.from_buffers(pa.large_binary(), n, [None, pa.py_buffer(bounds + _offsets(laid)[0]),
                                                        laid.buffers()[2]])


def _interleave(pieces: list[pa.Array], n: int) -> pa.Array:
    """The values of ``pieces`` (each ``n`` long) record by record: piece k of record i is value
    k * n + i of their concatenation, so one take writes each record's pieces one after another."""
    order = (np.arange(n, dtype=np.int64)[:, None] + np.arange(len(pieces), dtype=np.int64) * n).ravel()
    return pa.concat_arrays(pieces).take(pa.array(order))


def _sizes(pieces: list[tuple[pa.Array, np.ndarray]], n: int) -> np.ndarray:
    return sum((length for _, length in pieces), np.zeros(n, np.int64))


def _offsets(arr: pa.Array) -> np.ndarray:
    """The int64 offsets of a large_binary array, its own slice of them."""
    return np.frombuffer(arr.buffers()[1], np.int64, count=len(arr) + 1, offset=arr.offset * 8)


def _items(arr: pa.Array, kind: dict[str, Any], valid: np.ndarray) -> tuple[pa.Array, np.ndarray] | None:
    """(each row's items encoded back to back, as one large_binary value; the item counts) of an
    array or map column: the items' encodings of a row lie next to each other, so a row's value
    is a range of the items' bytes, with no copy."""
    offsets = arr.offsets.to_numpy(zero_copy_only=False).astype(np.int64)
    first, last = int(offsets[0]), int(offsets[-1])
    count = np.where(valid, np.diff(offsets), 0)
    # Items behind a null row (Arrow allows them) are not written: they encode as nothing.
    owner_valid = np.repeat(valid, np.diff(offsets))
    null_at, item_kind = kind["item"]
    if kind["type"] == "array":
        values, plan = arr.values.slice(first, last - first), (null_at, item_kind)
    else:
        keys = arr.keys.slice(first, last - first)
        owner = np.repeat(np.arange(len(arr)), np.diff(offsets))
        if keys.null_count or repeated_map_keys(owner[owner_valid], keys.filter(pa.array(owner_valid))):
            return None  # fastavro refuses a map holding a key twice
        values = pa.StructArray.from_arrays([keys, arr.items.slice(first, last - first)], names=["k", "v"])
        plan = (None, {"type": "record", "fields": [(None, {"type": "string"}), (null_at, item_kind)]})
    encoded = _encoded(values, plan[0], plan[1], owner_valid)
    if encoded is None:
        return None
    rows = pa.Array.from_buffers(pa.large_binary(), len(arr),
                                 [None, pa.py_buffer(_offsets(encoded)[offsets - first]), encoded.buffers()[2]])
    return rows, count


def _decimals(arr: pa.Array, size: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Avro's decimal bytes as fastavro writes them: for ``bytes``, a length and the two's
    complement big-endian integer in (bit length of its magnitude + 8) // 8 bytes; for a
    ``fixed`` of ``size`` bytes, the integer sign-extended to ``size`` bytes."""
    n, width = len(arr), arr.type.byte_width
    raw = np.frombuffer(arr.buffers()[1], np.uint8, count=(arr.offset + n) * width)[arr.offset * width:]
    be = raw.reshape(n, width)[:, ::-1]  # big-endian two's complement
    negative = be[:, 0] >= 0x80
    if size is not None:
        if size <= width:
            return np.ascontiguousarray(be[:, width - size:]), np.full(n, size, np.int64)
        pad = np.where(negative, 0xFF, 0).astype(np.uint8)[:, None].repeat(size - width, axis=1)
        return np.concatenate([pad, be], axis=1), np.full(n, size, np.int64)
    # The magnitude's bytes: the complement plus one for negative values (carried byte by byte
    # from the least significant).
    magnitude = np.where(negative[:, None], ~be, be).astype(np.uint8)
    carry = negative.copy()
    for j in range(width - 1, -1, -1):
        column = magnitude[:, j].astype(np.uint16) + carry
        magnitude[:, j] = column & 0xFF
        carry = column > 0xFF
    nonzero = magnitude != 0
    lead = np.where(nonzero.any(axis=1), nonzero.argmax(axis=1), width - 1)
    top = magnitude[np.arange(n), lead]
    need = (width - lead) + (top >= 0x80)
    extended = np.concatenate([np.where(negative, 0xFF, 0).astype(np.uint8)[:, None], be], axis=1)
    # The last ``need`` bytes of each, moved to the front of its row.
    cols = np.minimum((width + 1 - need)[:, None] + np.arange(width + 1), width)
    body = extended[np.arange(n)[:, None], cols]
    head, head_len = varint_bytes(2 * need)  # need <= 33: one byte, so the rows stay aligned
    return np.concatenate([head, body], axis=1), head_len + need


def _binary(data: np.ndarray, length: np.ndarray) -> pa.Array:
    """A large_binary array of consecutive values of ``length`` bytes in ``data``."""
    offsets = np.zeros(len(length) + 1, np.int64)
    np.cumsum(length, out=offsets[1:])
    return pa.Array.from_buffers(pa.large_binary(), len(length),
                                 [None, pa.py_buffer(offsets), pa.py_buffer(np.ascontiguousarray(data))])
