"""Hudi's ``HashID.getXXHash32``: XXH32 (seed 0) of a string's UTF-8 bytes, over whole columns.

The consistent-hashing bucket index places a record by the XXH32 of its hash keys (lz4-java's
``XXHashFactory.fastestInstance().hash32()``, the standard XXH32). Keys are hashed a length at a
time: the keys of one length are a matrix of bytes, and each step of the algorithm is one numpy
operation over all of them (uint32 arithmetic wraps as Java's int does).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

P1 = np.uint32(0x9E3779B1)
P2 = np.uint32(0x85EBCA77)
P3 = np.uint32(0xC2B2AE3D)
P4 = np.uint32(0x27D4EB2F)
P5 = np.uint32(0x165667B1)


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def _words(mat: np.ndarray, start: int) -> np.ndarray:
    """The little-endian 32-bit word at byte ``start`` of each row."""
    b = mat[:, start:start + 4].astype(np.uint32)
    return b[:, 0] | (b[:, 1] << np.uint32(8)) | (b[:, 2] << np.uint32(16)) | (b[:, 3] << np.uint32(24))


def xxh32_rows(mat: np.ndarray, seed: int = 0) -> np.ndarray:
    """XXH32 of each row of a uint8 matrix (every row one input of ``mat.shape[1]`` bytes)."""
    n, length = mat.shape
    s = np.uint32(seed)
    with np.errstate(over="ignore"):
        if length >= 16:
            v = [np.full(n, s + P1 + P2, np.uint32), np.full(n, s + P2, np.uint32),
                 np.full(n, s, np.uint32), np.full(n, s - P1, np.uint32)]
            stripes = length // 16
            for k in range(stripes):
                for j in range(4):
                    v[j] = _rotl(v[j] + _words(mat, 16 * k + 4 * j) * P2, 13) * P1
            h = _rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)
            pos = stripes * 16
        else:
            h = np.full(n, s + P5, np.uint32)
            pos = 0
        h = h + np.uint32(length & 0xFFFFFFFF)
        while pos + 4 <= length:
            h = _rotl(h + _words(mat, pos) * P3, 17) * P4
            pos += 4
        while pos < length:
            h = _rotl(h + mat[:, pos].astype(np.uint32) * P5, 11) * P1
            pos += 1
        h ^= h >> np.uint32(15)
        h *= P2
        h ^= h >> np.uint32(13)
        h *= P3
        h ^= h >> np.uint32(16)
    return h


def xxhash32(values: pa.Array | pa.ChunkedArray, seed: int = 0) -> np.ndarray:
    """XXH32 of each string's UTF-8 bytes (uint32); a null hashes as the text "null" (Java's
    ``String.join`` of a null key part)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    values = pc.fill_null(values.cast(pa.string()), "null") if values.null_count else values.cast(pa.string())
    n = len(values)
    out = np.zeros(n, dtype=np.uint32)
    if n == 0:
        return out
    offsets = np.frombuffer(values.buffers()[1], dtype=np.int32, count=n + 1, offset=values.offset * 4)
    buf = values.buffers()[2]
    data = np.frombuffer(buf, dtype=np.uint8) if buf is not None else np.zeros(0, np.uint8)
    starts = offsets[:-1].astype(np.int64)
    lengths = (offsets[1:] - offsets[:-1]).astype(np.int64)
    for length in np.unique(lengths):
        rows = np.flatnonzero(lengths == length)
        idx = starts[rows][:, None] + np.arange(int(length), dtype=np.int64)[None, :]
        mat = data[idx] if length else np.zeros((len(rows), 0), np.uint8)
        out[rows] = xxh32_rows(mat, seed)
    return out
