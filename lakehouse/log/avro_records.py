"""Vectorised decoding of an Avro data block's records (Hudi's ``HoodieAvroDataBlock``, content
version 3) into Arrow columns.

Java Hudi writes its log blocks as Avro by default (``hoodie.logfile.data.block.format``), so a
table migrated from Hudi carries them until it is compacted, and every snapshot read and
compaction decodes them again. fastavro builds a dict per record and Arrow then converts the
dicts back: ~10 us a record of the trips schema. Here each record's span comes from its length
prefix, then every field is read at once across all records (one numpy operation per step of
the field's encoding), so a block costs a few dozen array operations per field.

Decoded here: records whose fields are, or are a union of null with, a boolean, int, long,
float, double, string, bytes, enum, fixed (temporal logical types included: they travel as
ints and longs), a decimal (bytes or fixed), or a record, array or map of such values, nested
to any depth (an array or map is read a step at a time: an item of every record, or a block of
fixed-width items; a block that needs more than :data:`MAX_ITEM_STEPS` steps is left to
fastavro). Anything else (wider unions, a named type used again by name) and any payload that
does not parse answers None: the caller decodes it with fastavro, which also names what is
corrupt.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
import pyarrow as pa

from lakehouse.log.avro_vector import (
    binaries,
    floats,
    range_positions,
    repeated_map_keys,
    varints,
)

_I32 = struct.Struct(">i")
_PRIMITIVE = {"boolean", "int", "long", "float", "double", "string", "bytes"}


def _plain_type(t: Any) -> dict[str, Any] | None:
    """The type as {"type": kind, ...}, or None when it is not decoded here."""
    if isinstance(t, str):
        return {"type": t} if t in _PRIMITIVE else None
    if not isinstance(t, dict):
        return None
    kind = t.get("type")
    if kind in ("int", "long"):
        return {"type": kind}  # temporal logical types: the same binary encoding
    if kind in ("boolean", "float", "double", "string") and not t.get("logicalType"):
        return {"type": kind}
    if kind == "string" and t.get("logicalType") == "uuid":
        return {"type": "string"}
    if kind == "bytes" and not t.get("logicalType"):
        return {"type": "bytes"}
    if kind == "enum" and isinstance(t.get("symbols"), list):
        return {"type": "enum", "symbols": t["symbols"]}
    if kind == "fixed" and not t.get("logicalType") and isinstance(t.get("size"), int) and t["size"] >= 0:
        return {"type": "fixed", "size": t["size"]}
    if t.get("logicalType") == "decimal" and isinstance(t.get("precision"), int):
        if kind == "bytes":
            return {"type": "decimal", "size": None}
        if kind == "fixed" and isinstance(t.get("size"), int) and t["size"] >= 0:
            return {"type": "decimal", "size": t["size"]}
    if kind == "record" and isinstance(t.get("fields"), list):
        fields = field_plan(t)
        return None if fields is None else {"type": "record", "fields": fields}
    if kind in ("array", "map"):
        item = _slot(t.get("items" if kind == "array" else "values"))
        return None if item is None else {"type": kind, "item": item}
    return None


def _slot(t: Any) -> tuple[int | None, dict[str, Any]] | None:
    """(union branch index of null or None when not a union, the value's type) of a field's or
    an item's type; None when it is not decoded here."""
    null_at = None
    if isinstance(t, list):
        if len(t) != 2 or "null" not in t or t[0] == t[1]:
            return None
        null_at = t.index("null")
        t = t[1 - null_at]
    plain = _plain_type(t)
    return None if plain is None else (null_at, plain)


def field_plan(schema: dict[str, Any]) -> list[tuple[int | None, dict[str, Any]]] | None:
    """Per field: (union branch index of null or None when not a union, the value's type);
    None when some field is not decoded here."""
    plan = []
    if not schema.get("fields"):
        return None  # a record of no fields: no column says how many rows there are
    names = [f.get("name") for f in schema.get("fields", ())]
    if len(set(names)) != len(names):
        return None  # Avro refuses such a schema; fastavro keeps the last value of a name
    for f in schema.get("fields", ()):
        slot = _slot(f.get("type"))
        if slot is None:
            return None
        plan.append(slot)
    return plan


def record_spans(content, count: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(starts, ends) of the ``count`` length-prefixed records after the 8-byte header, or None
    when they do not tile the content exactly. A record's start depends on every length before
    it, so this one step walks them in Python (the checks that need no order run after)."""
    n = len(content)
    if count > (n - 8) // 4:
        return None  # more records than lengths fit: damaged, and nothing allocated for it
    unpack = _I32.unpack_from
    ends = []
    add = ends.append
    pos, last = 8, n - 4
    for _ in range(count):
        if not 0 <= pos <= last:
            return None
        pos += unpack(content, pos)[0] + 4
        add(pos)
    end = np.array(ends, np.int64)
    start = np.empty(count, np.int64)
    if count:
        start[0] = 12
        start[1:] = end[:-1] + 4
    # A negative length walks back: it shows as a record ending before it starts.
    if pos != n or (end < start).any():
        return None
    return start, end


def decode_records(content, count: int, plan: list[tuple[int | None, dict[str, Any]]],
                   schema: pa.Schema) -> pa.Table | None:
    """The block's records as ``schema`` (the Arrow schema of the block's Avro schema), or None
    when the content is not decoded here."""
    spans = record_spans(content, count)
    if spans is None:
        return None
    pos, ends = spans
    fields = _read_fields(np.frombuffer(content, np.uint8), pos, np.zeros(count, bool), plan, list(schema),
                          _Steps(MAX_ITEM_STEPS))
    if fields is None:
        return None
    columns, pos = fields
    if not (pos == ends).all():
        return None
    return pa.Table.from_arrays(columns, schema=schema)


def _read_fields(d: np.ndarray, pos: np.ndarray, absent: np.ndarray, plan: list, arrow: list[pa.Field],
                 steps: _Steps) -> tuple[list[pa.Array], np.ndarray] | None:
    """A record's fields in order, each across all records; where ``absent`` (the record is a
    null nested record) a field takes no bytes and reads as null."""
    columns = []
    for slot, field in zip(plan, arrow):
        column = _read_slot(d, pos, absent, slot, field.type, steps)
        if column is None:
            return None
        array, pos = column
        columns.append(array)
    return columns, pos


def _read_slot(d: np.ndarray, pos: np.ndarray, absent: np.ndarray, slot: tuple, arrow: pa.DataType,
               steps: _Steps) -> tuple[pa.Array, np.ndarray] | None:
    """One value (a field's, an item's) at each of ``pos``: its union branch when nullable, then
    the value; nothing read where ``absent``."""
    null_at, t = slot
    null = absent
    if null_at is not None:
        branch, size = varints(d, pos, 5)
        if not (absent | ((size > 0) & ((branch == 0) | (branch == 1)))).all():
            return None
        null = absent | (branch == null_at)
        pos = pos + np.where(absent, 0, size)
    return _read_values(d, pos, null, t, arrow, steps)


def _length_prefixed(d: np.ndarray, at: np.ndarray, null: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """The (start, length) of the byte string after each length at ``at`` (Avro's bytes, string
    and bytes decimal); none read where ``null``. None when a length does not parse."""
    length, size = varints(d, at, 5)
    size, length = np.where(null, 0, size), np.where(null, 0, length)
    if not (null | ((size > 0) & (length >= 0))).all():
        return None
    return at + size, length


def _read_decimals(d: np.ndarray, at: np.ndarray, null: np.ndarray, size: int | None,
                   arrow: pa.DataType) -> tuple[pa.Array, np.ndarray] | None:
    """Decimals: the unscaled value as big-endian two's complement bytes (``size`` of them, or a
    length first), made the little-endian 16 or 32 bytes of Arrow's decimal128 or decimal256."""
    if size is None:
        ranges = _length_prefixed(d, at, null)
        if ranges is None:
            return None
        start, length = ranges
    else:
        length, start = np.where(null, 0, size), at
    end = start + length
    width = arrow.byte_width
    if (end > len(d)).any() or (length > width).any():
        return None  # a longer value may still fit once its sign bytes are dropped: fastavro decides
    n = len(at)
    out = np.zeros((n, width), np.uint8)
    # A negative value (top bit of its first byte set) extends with 0xFF bytes.
    out[(length > 0) & (d[np.clip(start, 0, max(len(d) - 1, 0))] >= 0x80)] = 0xFF
    # Each value's bytes right-aligned in its row (big-endian), reversed into Arrow's order below.
    out.reshape(-1)[range_positions(np.arange(n) * width + width - length, length)] = \
        d[range_positions(start, length)]
    if ((length == width) & (out[:, 0] == 0x80) & ~out[:, 1:].any(axis=1)).any():
        return None  # the least value, past every precision, which Arrow's check lets through
    validity = None if not null.any() else pa.array(~null).buffers()[1]
    array = pa.Array.from_buffers(arrow, n, [validity, pa.py_buffer(np.ascontiguousarray(out[:, ::-1]))],
                                  null_count=int(null.sum()))
    try:
        array.validate(full=True)  # a value past the precision: fastavro and Arrow name it
    except pa.ArrowInvalid:
        return None
    return array, end


# An array or map is read a step at a time (an item of every record, or a block of fixed-width
# items); past this many steps in one data block, nested arrays included, fastavro (~1 us an
# item) is the faster reader.
MAX_ITEM_STEPS = 256


class _Steps:
    """The steps one data block's arrays and maps may still take."""

    __slots__ = ("left",)

    def __init__(self, left: int) -> None:
        self.left = left

    def take(self) -> bool:
        self.left -= 1
        return self.left >= 0


_FIXED_WIDTH = {"float": 4, "double": 8}


def _read_items(d: np.ndarray, at: np.ndarray, null: np.ndarray, t: dict[str, Any],
                arrow: pa.DataType, steps: _Steps) -> tuple[pa.Array, np.ndarray] | None:
    """Arrays and maps: blocks of items, each a count (negative: its byte size follows), the
    items, until a count of 0."""
    n = len(at)
    pos = at.copy()
    active = ~null
    left = np.zeros(n, np.int64)  # items left in each record's current block
    is_map = t["type"] == "map"
    null_at, item = t["item"]
    width = _FIXED_WIDTH.get(item["type"], item.get("size") if item["type"] == "fixed" else None)
    # Zero-width items take no bytes, so nothing bounds their count: an item a step for them.
    bulk = null_at is None and bool(width) and not is_map
    owner, parts = [], []
    while True:
        need = np.flatnonzero(active & (left == 0))
        if len(need):
            count, size = varints(d, pos[need])
            if not (size > 0).all():
                return None
            pos[need] += size
            sized = count < 0
            if sized.any():  # a block's byte size, which the reader does not need
                nbytes, size = varints(d, pos[need[sized]])
                if not (size > 0).all() or (nbytes < 0).any():
                    return None
                pos[need[sized]] += size
                count = np.abs(count)
            if (count < 0).any():
                return None  # -2**63 has no positive twin
            active[need[count == 0]] = False
            left[need] = count
        rows = np.flatnonzero(active)
        if not len(rows):
            break
        if not steps.take():
            return None
        if bulk:
            # Items of one width: every item left in each record's block at once. Their bytes
            # must fit what is left of the content, each block's and all together, before any
            # position is allocated (a count may claim 2**62 items).
            counts = left[rows]
            if (counts > (len(d) - pos[rows]) // width).any() or int(counts.sum()) > len(d) // width:
                return None
            starts = np.repeat(pos[rows], counts) + width * (
                np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts))
            values = _read_values(d, starts, np.zeros(len(starts), bool), item, arrow.value_type, steps)
            if values is None:
                return None
            parts.append(values[0])
            owner.append(np.repeat(rows, counts))
            pos[rows] += counts * width
            left[rows] = 0
            continue
        p = pos[rows]
        if is_map:
            key = _read_values(d, p, np.zeros(len(rows), bool), {"type": "string"}, pa.string(), steps)
            if key is None:
                return None
            key_array, p = key
        value = _read_slot(d, p, np.zeros(len(rows), bool), t["item"],
                           arrow.item_type if is_map else arrow.value_type, steps)
        if value is None:
            return None
        value_array, pos[rows] = value
        parts.append((key_array, value_array) if is_map else value_array)
        owner.append(rows)
        left[rows] -= 1
    who = np.concatenate(owner) if owner else np.zeros(0, np.int64)
    if len(who) >= 2**31:
        return None
    ordered = np.argsort(who, kind="stable")  # record by record, items in order
    order = pa.array(ordered)
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(np.bincount(who, minlength=n), out=offsets[1:])
    mask = pa.array(null) if null.any() else None
    if is_map:
        keys = (pa.concat_arrays([k for k, _ in parts]) if parts else pa.array([], pa.string())).take(order)
        items = pa.concat_arrays([v for _, v in parts]) if parts else pa.array([], arrow.item_type)
        if repeated_map_keys(who[ordered], keys):
            # fastavro's dict keeps the last value at the first key's place, which this layout
            # cannot say; leave it to fastavro.
            return None
        return pa.MapArray.from_arrays(pa.array(offsets), keys, items.take(order), type=arrow, mask=mask), pos
    values = pa.concat_arrays(parts) if parts else pa.array([], arrow.value_type)
    return pa.ListArray.from_arrays(pa.array(offsets), values.take(order), type=arrow, mask=mask), pos


def _read_values(d: np.ndarray, at: np.ndarray, null: np.ndarray, t: dict[str, Any],
                 arrow: pa.DataType, steps: _Steps) -> tuple[pa.Array, np.ndarray] | None:
    """One field's values at ``at`` (nothing where ``null``), as ``arrow``; and where each ends."""
    kind = t["type"]
    mask = null if null.any() else None
    if kind in ("array", "map"):
        return _read_items(d, at, null, t, arrow, steps)
    if kind == "decimal":
        return _read_decimals(d, at, null, t["size"], arrow)
    if kind == "record":
        fields = _read_fields(d, at, null, t["fields"], list(arrow), steps)
        if fields is None:
            return None
        children, end = fields
        return pa.StructArray.from_arrays(children, fields=list(arrow),
                                          mask=None if mask is None else pa.array(mask)), end
    if kind in ("int", "long", "enum"):
        value, size = varints(d, at, 5 if kind != "long" else 10)
        size = np.where(null, 0, size)
        if not (null | (size > 0)).all():
            return None
        value = np.where(null, 0, value)
        if kind == "enum":
            symbols = t["symbols"]
            if ((value < 0) | (value >= len(symbols))).any():
                return None
            indices = pa.array(value.astype(np.int32), mask=mask)
            array = pa.DictionaryArray.from_arrays(indices, pa.array(symbols, pa.string())).cast(arrow)
            return array, at + size
        if kind == "int":
            if ((value < -2**31) | (value >= 2**31)).any():
                return None
            storage = pa.array(value.astype(np.int32), pa.int32(), mask=mask)
        else:
            storage = pa.array(value, pa.int64(), mask=mask)
        try:
            return (storage if storage.type == arrow else storage.view(arrow)), at + size
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, TypeError):
            return None
    if kind == "boolean":
        if len(d) == 0 or (~null & (at >= len(d))).any():
            return None
        raw = d[np.minimum(at, len(d) - 1)]
        if (~null & (raw > 1)).any():
            return None  # not a boolean: fastavro decides what it reads
        return pa.array(raw == 1, pa.bool_(), mask=mask), at + np.where(null, 0, 1)
    if kind in ("float", "double", "fixed"):
        width = {"float": 4, "double": 8}.get(kind) or t["size"]
        end = at + np.where(null, 0, width)
        if (end > len(d)).any():
            return None
        if kind == "fixed":
            try:
                return binaries(d, null, at, np.where(null, 0, width)).cast(arrow), end
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                return None
        return pa.array(floats(d, at, width), arrow, mask=mask), end
    # string, bytes: a length, then the bytes
    ranges = _length_prefixed(d, at, null)
    if ranges is None:
        return None
    start, length = ranges
    end = start + length
    if (end > len(d)).any():
        return None
    try:
        array = binaries(d, null, start, length)
        array = array.cast(arrow)  # to a string: UTF-8 checked
    except pa.ArrowInvalid:
        return None  # not UTF-8: fastavro names the record
    return array, end
