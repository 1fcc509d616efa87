"""Avro's binary encoding read and written with numpy, many values at once: the pieces the
vectorised decoders and encoders of log block content share (:mod:`lakehouse.log.delete_record`,
:mod:`lakehouse.log.avro_records`, :mod:`lakehouse.log.avro_encoder`). Positions are int64
arrays into one uint8 array of the block's bytes; a value that does not fit comes back with
size 0, never an exception."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

VARINT_BYTES = 10  # a long; an int takes at most 5


def varints(d: np.ndarray, at: np.ndarray, max_bytes: int = VARINT_BYTES) -> tuple[np.ndarray, np.ndarray]:
    """Zigzag varints (Avro int/long) starting at positions ``at``: (values, byte counts), the
    count 0 where no varint of at most ``max_bytes`` ends inside ``d``."""
    last = len(d) - 1
    inside = (at >= 0) & (at <= last)
    b = d[np.where(inside, at, 0)].astype(np.uint64)
    raw = b & np.uint64(0x7F)
    size = (inside & (b < 0x80)).astype(np.int64)
    # Most varints here are one byte: only the others go round again.
    more = np.flatnonzero(inside & (b >= 0x80))
    for k in range(1, max_bytes):
        if not len(more):
            break
        q = at[more] + k
        more, q = more[q <= last], q[q <= last]
        b = d[q].astype(np.uint64)
        raw[more] |= (b & np.uint64(0x7F)) << np.uint64(7 * k)
        # A tenth byte may only carry bit 63: more would not fit a long.
        ends = b < (0x80 if k < 9 else 2)
        size[more[ends]] = k + 1
        more = more[~ends]
    values = (raw >> np.uint64(1)).astype(np.int64) ^ -(raw & np.uint64(1)).astype(np.int64)
    return values, size


def range_positions(start: np.ndarray, length: np.ndarray) -> np.ndarray:
    """The position of every byte of the ranges ``[start, start + length)``, range after range
    (empty ranges allowed): one running sum, +1 within a range and a jump at the first byte of
    each (cheaper than numpy's repeat plus an arange)."""
    keep = length > 0
    starts, lengths = start[keep], length[keep]
    total = int(lengths.sum())
    if not total:
        return np.zeros(0, np.int64)
    step = np.ones(total, np.int64)
    step[np.cumsum(lengths)[:-1]] = starts[1:] - (starts[:-1] + lengths[:-1]) + 1
    step[0] = starts[0]
    return np.cumsum(step)


def binaries(d: np.ndarray, null: np.ndarray, start: np.ndarray, length: np.ndarray) -> pa.Array:
    """A binary array (large_binary past 2 GiB of content) of the byte ranges ``[start, start +
    length)`` (nulls where ``null``, whose lengths must be 0), which must follow one another in ``d``: one field's values in
    record order. Ranges that do not (damaged content only) raise ArrowInvalid.

    The content itself, the ranges and the gaps between them taken as alternate values, is then
    an Arrow binary array, and Arrow's take copies the ranges out, a memcpy each: no position
    per byte, whatever the values' lengths."""
    n = len(start)
    bounds = np.zeros(2 * n + 1, np.int64)
    bounds[0:2 * n:2] = start
    bounds[1:2 * n:2] = start + length
    if n:
        bounds[2 * n] = bounds[2 * n - 1]
        if bounds[0] < 0 or bounds[-1] > len(d) or not (np.diff(bounds) >= 0).all():
            raise pa.ArrowInvalid("byte ranges out of order or outside the content")
    kind, width = (pa.binary(), np.int32) if len(d) < 2**31 else (pa.large_binary(), np.int64)
    whole = pa.Array.from_buffers(kind, 2 * n, [None, pa.py_buffer(bounds.astype(width)), pa.py_buffer(d)])
    offsets, data = whole.take(pa.array(np.arange(0, 2 * n, 2))).buffers()[1:]
    validity = None if not null.any() else pa.array(~null).buffers()[1]
    return pa.Array.from_buffers(kind, n, [validity, offsets, data], null_count=int(null.sum()))


def floats(d: np.ndarray, at: np.ndarray, width: int) -> np.ndarray:
    """Little-endian floats (``width`` 4) or doubles (8) at ``at``; a position too near the end
    reads the last whole value (the caller masks it). A float's signalling NaN comes back quiet,
    as fastavro hands it over (a Python float)."""
    idx = np.clip(at, 0, max(len(d) - width, 0))[:, None] + np.arange(width)
    raw = d[idx].reshape(-1).view("<f4" if width == 4 else "<f8")
    if width == 4:
        bits = raw.view(np.uint32)
        bits[((bits & 0x7F800000) == 0x7F800000) & ((bits & 0x007FFFFF) != 0)] |= np.uint32(0x00400000)
    return raw


def strings(d: np.ndarray, null: np.ndarray, start: np.ndarray, length: np.ndarray) -> pa.Array:
    """A string array of the byte ranges (nulls where ``null``); raises ArrowInvalid on bad UTF-8."""
    return binaries(d, null, start, length).cast(pa.string())


def varint_bytes(z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Avro varints of the zigzagged (non-negative) ``z``: an (n, bytes) matrix, each row its
    varint's bytes then zeros, and each varint's byte count."""
    z = z.astype(np.uint64)
    count = np.ones(len(z), np.int64)
    columns = []
    for j in range(VARINT_BYTES):
        more = (z >> np.uint64(7 * (j + 1))) > 0
        columns.append(((z >> np.uint64(7 * j)) & np.uint64(0x7F) | (more.astype(np.uint64) << np.uint64(7)))
                       .astype(np.uint8))
        if not more.any():
            break
        count += more
    return np.stack(columns, axis=1), count


def repeated_map_keys(owner: np.ndarray, keys: pa.Array) -> bool:
    """Does some map (``owner``: each key's row) hold a key twice? fastavro's dict keeps one
    value of such a key, so neither decoder nor encoder can stand in for it."""
    if not len(keys):
        return False
    codes = pc.dictionary_encode(keys)
    pair = owner.astype(np.int64) * len(codes.dictionary) + codes.indices.to_numpy()
    return len(np.unique(pair)) != len(pair)
