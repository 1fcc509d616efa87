"""The Avro schema of a delete block's content and the ordering-value wrappers in it.

Hudi 0.14/0.15 serialise the deleted keys as one schemaless ``HoodieDeleteRecordList`` record. The
ordering value is a union of null and single-field wrapper records, because an Avro union cannot
hold two branches of the same primitive type (and Java needs the class back to compare values).
Only the binary encoding matters to readers, so docs and Java string hints are left out here.
The union order below is the on-disk branch index and must never change.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from lakehouse.log.avro_vector import (
    floats,
    range_positions,
    strings,
    varint_bytes,
    varints,
)

NAMESPACE = "org.apache.hudi.avro.model"

# (wrapper record name, Avro type of its "value", Arrow type lakehouse decodes it to)
WRAPPERS: list[tuple[str, Any, pa.DataType]] = [
    ("BooleanWrapper", "boolean", pa.bool_()),
    ("IntWrapper", "int", pa.int32()),
    ("LongWrapper", "long", pa.int64()),
    ("FloatWrapper", "float", pa.float32()),
    ("DoubleWrapper", "double", pa.float64()),
    ("BytesWrapper", "bytes", pa.binary()),
    ("StringWrapper", "string", pa.string()),
    # Hudi comments out the logical type of DateWrapper and TimestampMicrosWrapper: the values
    # are plain days / microseconds since the epoch.
    ("DateWrapper", "int", pa.date32()),
    ("DecimalWrapper", {"type": "bytes", "logicalType": "decimal", "precision": 30, "scale": 15},
     pa.decimal128(30, 15)),
    ("TimeMicrosWrapper", {"type": "long", "logicalType": "time-micros"}, pa.time64("us")),
    ("TimestampMicrosWrapper", "long", pa.timestamp("us", tz="UTC")),
]
WRAPPER_ARROW_TYPES = {f"{NAMESPACE}.{name}": arrow for name, _, arrow in WRAPPERS}

# Hudi's merge treats an Integer 0 as "no ordering value": the delete wins unconditionally.
UNCONDITIONAL = (f"{NAMESPACE}.IntWrapper", {"value": 0})


def _nullable_string() -> list[str]:
    return ["null", "string"]


DELETE_RECORD_LIST_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "HoodieDeleteRecordList",
    "namespace": NAMESPACE,
    "fields": [{
        "name": "deleteRecordList",
        "type": {"type": "array", "items": {
            "type": "record",
            "name": "HoodieDeleteRecord",
            "fields": [
                {"name": "recordKey", "type": _nullable_string(), "default": None},
                {"name": "partitionPath", "type": _nullable_string(), "default": None},
                {"name": "orderingVal",
                 "type": ["null"] + [{"type": "record", "name": name,
                                      "fields": [{"name": "value", "type": value}]}
                                     for name, value, _ in WRAPPERS],
                 "default": None},
            ],
        }},
    }],
}


def wrapper_for(t: pa.DataType) -> tuple[str, pa.DataType, pa.DataType]:
    """(wrapper full name, Arrow type to cast to first, Arrow type whose Python values fastavro
    takes) for ordering values of Arrow type ``t``; Java picks the wrapper from the value's class,
    which follows the column type the same way."""
    if pa.types.is_dictionary(t):
        t = t.value_type
    if pa.types.is_boolean(t):
        name, cast, physical = "BooleanWrapper", pa.bool_(), pa.bool_()
    elif t in (pa.int8(), pa.int16(), pa.int32(), pa.uint8(), pa.uint16()):
        name, cast, physical = "IntWrapper", pa.int32(), pa.int32()
    elif pa.types.is_integer(t):
        name, cast, physical = "LongWrapper", pa.int64(), pa.int64()
    elif t in (pa.float16(), pa.float32()):
        name, cast, physical = "FloatWrapper", pa.float32(), pa.float32()
    elif pa.types.is_floating(t):
        name, cast, physical = "DoubleWrapper", pa.float64(), pa.float64()
    elif pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        name, cast, physical = "StringWrapper", pa.string(), pa.string()
    elif (pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t)
          or pa.types.is_fixed_size_binary(t)):
        name, cast, physical = "BytesWrapper", pa.binary(), pa.binary()
    elif pa.types.is_date(t):
        name, cast, physical = "DateWrapper", pa.date32(), pa.int32()
    elif pa.types.is_decimal(t):
        name, cast, physical = "DecimalWrapper", t, t
    elif pa.types.is_time(t):
        name, cast, physical = "TimeMicrosWrapper", pa.time64("us"), pa.int64()
    elif pa.types.is_timestamp(t):
        name, cast, physical = ("TimestampMicrosWrapper", pa.timestamp("us", tz=t.tz),
                                pa.int64())
    else:
        raise TypeError(f"ordering values of type {t} have no Hudi wrapper")
    return f"{NAMESPACE}.{name}", cast, physical


# ---------------------------------------------------------------------------------------------
# Vectorised decoding
#
# fastavro builds a dict per deleted key (~2.5 us each, holding the GIL), and every snapshot read
# and compaction of a file slice decodes its delete blocks again. The content is a run of small
# records whose sizes depend on their bytes, so a record's start is only known once the records
# before it are parsed. This decoder parses a record at every position that can start one (a
# record starts with its key's union index: byte 0 or 2), links each to the position after it,
# and follows the links from the first record by pointer doubling; every step is one numpy
# operation over the block. It decodes the common shapes (keys and partition paths as strings or
# nulls, ordering values of one wrapper type other than bytes and decimals) and answers None
# for anything else, where the caller falls back to fastavro, which also names what is corrupt.

_WINDOW = 1 << 20  # bytes of a delete block parsed at a time
_MAX_ARRAY_BLOCKS = 16
# Per union branch of orderingVal (0 = null): how its value is encoded.
_NULL, _BOOL, _VARINT, _F4, _F8, _LEN = range(6)
_ENCODING = np.array([_NULL] + [
    {"boolean": _BOOL, "int": _VARINT, "long": _VARINT, "float": _F4, "double": _F8,
     "bytes": _LEN, "string": _LEN}[v if isinstance(v, str) else v["type"]]
    for _, v, _ in WRAPPERS], np.int64)
_BRANCH_NAMES = [None] + [f"{NAMESPACE}.{name}" for name, _, _ in WRAPPERS]
_INT_WRAPPER = _BRANCH_NAMES.index(f"{NAMESPACE}.IntWrapper")
_INT32 = {f"{NAMESPACE}.{n}" for n in ("IntWrapper", "DateWrapper")}
_FAST_KINDS = {f"{NAMESPACE}.{n}" for n in ("BooleanWrapper", "IntWrapper", "LongWrapper", "FloatWrapper",
                                            "DoubleWrapper", "StringWrapper", "DateWrapper",
                                            "TimeMicrosWrapper", "TimestampMicrosWrapper")}


def _nullable_strings(d: np.ndarray, at: np.ndarray):
    """The ``["null", "string"]`` union at ``at``: (is null, data start, data length, end, ok)."""
    inside = at < len(d)
    tag = d[np.where(inside, at, 0)]
    null = tag == 0
    ok = inside & (null | (tag == 2))
    length, size = varints(d, at + 1, 5)
    ok &= null | ((size > 0) & (length >= 0))
    length = np.where(null | ~ok, 0, length)
    start = at + 1 + np.where(null, 0, size)
    return null, start, length, start + length, ok


def _record_ends(d: np.ndarray, at: np.ndarray):
    """Parse a HoodieDeleteRecord at each of ``at``; the parts and where each ends (-1: none)."""
    key = _nullable_strings(d, at)
    part = _nullable_strings(d, key[3])
    branch, bsize = varints(d, part[3], 5)
    ok = key[4] & part[4] & (bsize > 0) & (branch >= 0) & (branch < len(_ENCODING))
    branch = np.where(ok, branch, 0)
    enc = _ENCODING[branch]
    vstart = part[3] + bsize
    value, vsize = varints(d, vstart)
    fixed = np.select([enc == _NULL, enc == _BOOL, enc == _F4, enc == _F8], [0, 1, 4, 8], -1)
    ok &= (fixed >= 0) | (vsize > 0)
    ok &= (enc != _LEN) | (value >= 0)
    vlen = np.select([fixed >= 0, enc == _VARINT], [fixed, vsize], vsize + np.maximum(value, 0))
    end = vstart + vlen
    ok &= end <= len(d)
    return key, part, branch, vstart, value, vsize, np.where(ok, end, -1)


def decode_records(payload) -> tuple[pa.Array, pa.Array, np.ndarray, pa.Array | None] | None:
    """The records of a delete block's Avro payload as (record keys, partition paths,
    unconditional flags, ordering values or None when every delete is unconditional); None when
    the payload is not of a shape decoded here."""
    d = np.frombuffer(payload, np.uint8)
    if not len(d):
        return None
    pos, firsts = 0, []
    while True:
        (count,), (size,) = varints(d, np.array([pos]))
        if not size:
            return None
        pos += int(size)
        if count == 0:
            break
        count = int(count)  # a Python int: -(-2**63) must not wrap
        if count < 0:  # a block with its byte size: skipped, the records say where they end
            count = -count
            (_,), (size,) = varints(d, np.array([pos]))
            if not size:
                return None
            pos += int(size)
        # Every record takes at least 3 bytes (two union indices and one more); Java and
        # fastavro write one array block, so many blocks are left to fastavro, which reads
        # them without a per-block cost.
        if count > (len(d) - pos) // 3 or len(firsts) >= _MAX_ARRAY_BLOCKS:
            return None
        run = _chain(d, pos, count)
        if run is None:
            return None
        firsts.append(run[0])
        pos = run[1]
    if pos != len(d):
        return None
    at = np.concatenate(firsts) if firsts else np.zeros(0, np.int64)
    key, part, branch, vstart, value, vsize, _ = _record_ends(d, at)
    try:
        keys = strings(d, key[0], key[1], key[2])
        parts = strings(d, part[0], part[1], part[2])
    except pa.ArrowInvalid:
        return None
    unconditional = (branch == 0) | ((branch == _INT_WRAPPER) & (value == 0))
    kinds = {_BRANCH_NAMES[b] for b in np.unique(branch[~unconditional])}
    if not kinds:
        return keys, parts, unconditional, None
    if len(kinds) > 1 or not kinds <= _FAST_KINDS:
        return None
    (kind,) = kinds
    arrow = WRAPPER_ARROW_TYPES[kind]
    enc = _ENCODING[branch[~unconditional][0]]
    mask = unconditional
    if enc == _LEN:
        try:
            values = strings(d, mask, vstart + vsize, np.where(mask, 0, value))
        except pa.ArrowInvalid:
            return None
        return keys, parts, unconditional, values
    if enc == _BOOL:
        raw = d[np.clip(vstart, 0, len(d) - 1)] != 0
    elif enc in (_F4, _F8):
        raw = floats(d, vstart, 4 if enc == _F4 else 8)
    else:
        raw = value
        if kind == f"{NAMESPACE}.TimeMicrosWrapper" and np.any((raw[~mask] < 0) | (raw[~mask] >= 86_400_000_000)):
            return None  # not a time of day: fastavro's conversion says so
        if kind in _INT32:
            if np.any((raw[~mask] < -2**31) | (raw[~mask] >= 2**31)):
                return None
            raw = raw.astype(np.int32)
    storage = {pa.date32(): pa.int32(), pa.time64("us"): pa.int64()}.get(arrow)
    if storage is not None or pa.types.is_timestamp(arrow):
        values = pa.array(raw, storage or pa.int64(), mask=mask).view(arrow)
    else:
        values = pa.array(raw, arrow, mask=mask)
    return keys, parts, unconditional, values


def _chain(d: np.ndarray, first: int, count: int) -> tuple[np.ndarray, int] | None:
    """The starts of ``count`` records from ``first`` and the position after the last, or None.

    Parsed a window of bytes at a time, so a block of millions of deletes holds the parse state
    of one window (a record that runs past its window ends the window's run of records)."""
    starts, pos, left = [], first, count
    window = min(_WINDOW, 64 * count)  # a short block is not parsed as far as a window
    while left:
        hi = min(len(d), pos + window)
        cand = np.flatnonzero((d[pos:hi] == 0) | (d[pos:hi] == 2)) + pos
        if not len(cand) or cand[0] != pos:
            return None
        ends = _record_ends(d, cand)[-1]
        # Link each candidate to the candidate where the record parsed there ends (a sink otherwise).
        sink = len(cand)
        nxt = np.searchsorted(cand, ends)
        linked = (ends >= 0) & (nxt < sink)
        linked[linked] = cand[nxt[linked]] == ends[linked]
        step = np.append(np.where(linked, nxt, sink), sink)
        run = np.zeros(1, np.int64)
        while len(run) < left and run[-1] != sink:
            run = np.concatenate([run, step[run]])
            step = step[step]
        run = run[:left]
        run = run[:np.searchsorted(run == sink, True)] if run[-1] == sink else run
        end = int(ends[run[-1]])
        if end < 0:
            return None
        starts.append(cand[run])
        left -= len(run)
        if left and end < hi:
            return None  # the next record would start where no record can
        # A record longer than the window ends it at its first record: widen the next one.
        window = window * 2 if len(run) == 1 and end >= hi else min(_WINDOW, 64 * left)
        pos = end
    return np.concatenate(starts), pos


# ---------------------------------------------------------------------------------------------
# Vectorised encoding of the common shape: deletes without ordering values


def _string_buffers(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(int64 offsets, uint8 data) of a string array without nulls."""
    arr = arr.cast(pa.large_string())
    _, offsets, data = arr.buffers()
    off = np.frombuffer(offsets, np.int64, count=len(arr) + 1, offset=arr.offset * 8)
    return off, (np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8))


def encode_unconditional(keys: pa.Array, partition_paths: pa.Array) -> bytes | None:
    """The ``HoodieDeleteRecordList`` payload of deletes that win whatever the ordering value
    (each ``IntWrapper(0)``, as Hudi writes them), byte for byte as fastavro writes it; None when
    a key or partition path is null (the caller's fastavro path then)."""
    n = len(keys)
    if keys.null_count or partition_paths.null_count or len(partition_paths) != n:
        return None
    if n == 0:
        return b"\x00"
    hv, hc = varint_bytes(np.array([2 * n]))  # the array's one block: its item count
    head = hv[0, :int(hc[0])].tobytes()
    keys_, parts_ = _string_buffers(keys), _string_buffers(partition_paths)
    # [2][key length][key][2][partition length][partition][4][0]: union branch 1 (string) twice,
    # then orderingVal's branch 2 (IntWrapper) with value 0.
    (kv, kc), (pv, pc_) = varint_bytes(2 * np.diff(keys_[0])), varint_bytes(2 * np.diff(parts_[0]))
    size = 2 + kc + np.diff(keys_[0]) + pc_ + np.diff(parts_[0]) + 2
    start = len(head) + np.concatenate([[0], np.cumsum(size)[:-1]])
    out = np.empty(len(head) + int(size.sum()) + 1, np.uint8)
    out[:len(head)] = np.frombuffer(head, np.uint8)
    out[-1] = 0
    after_part = _put_string(out, _put_string(out, start, kv, kc, *keys_), pv, pc_, *parts_)
    out[after_part] = 4
    out[after_part + 1] = 0
    return out.tobytes()


def _put_string(out: np.ndarray, at: np.ndarray, varint: np.ndarray, varint_len: np.ndarray,
                off: np.ndarray, data: np.ndarray) -> np.ndarray:
    """Write a ``["null", "string"]`` union's string branch at each of ``at``: the branch index,
    the length's varint bytes, then the string's bytes. Returns where each one ends."""
    out[at] = 2
    for j in range(varint.shape[1]):
        sel = varint_len > j
        out[at[sel] + 1 + j] = varint[sel, j]
    length = np.diff(off)
    body = at + 1 + varint_len
    out[range_positions(body, length)] = data[off[0]:off[-1]]
    return body + length
