"""Hudi's HashID.getXXHash32 (XXH32, seed 0), vectorised: the hash values hudi-common 0.14.1
printed, and a plain transcription of the XXH32 specification as the oracle for everything else."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa

from lakehouse.hash_id import xxhash32

M = 0xFFFFFFFF
P1, P2, P3, P4, P5 = 0x9E3779B1, 0x85EBCA77, 0xC2B2AE3D, 0x27D4EB2F, 0x165667B1


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & M


def reference_xxh32(data: bytes, seed: int = 0) -> int:
    """XXH32 as its specification states it, one byte string at a time."""
    n, i = len(data), 0
    if n >= 16:
        v = [(seed + P1 + P2) & M, (seed + P2) & M, seed & M, (seed - P1) & M]
        while i + 16 <= n:
            for j in range(4):
                w = int.from_bytes(data[i + 4 * j:i + 4 * j + 4], "little")
                v[j] = (_rotl((v[j] + w * P2) & M, 13) * P1) & M
            i += 16
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & M
    else:
        h = (seed + P5) & M
    h = (h + n) & M
    while i + 4 <= n:
        h = (_rotl((h + int.from_bytes(data[i:i + 4], "little") * P3) & M, 17) * P4) & M
        i += 4
    while i < n:
        h = (_rotl((h + data[i] * P5) & M, 11) * P1) & M
        i += 1
    h ^= h >> 15
    h = (h * P2) & M
    h ^= h >> 13
    h = (h * P3) & M
    h ^= h >> 16
    return h


def test_the_values_hudi_printed():
    got = xxhash32(pa.array(["key1", "uuid-000001", "", "a:1,b:2"])).view(np.int32).tolist()
    assert got == [133378825, -2050520250, 46947589, 2145133634]


def test_every_length_and_non_ascii_text_match_the_specification():
    rnd = random.Random(4)
    alphabet = "abcXYZ0189-_:,é€😀"
    values = ["".join(rnd.choice(alphabet) for _ in range(rnd.randrange(0, 70))) for _ in range(3000)]
    values += [None]
    got = xxhash32(pa.chunked_array([pa.array(values[:1000]), pa.array(values[1000:])]))
    want = [reference_xxh32((v if v is not None else "null").encode()) for v in values]
    assert got.tolist() == want
    sliced = pa.array(values).slice(7, 50)  # an offset into the buffers
    assert xxhash32(sliced).tolist() == want[7:57]
    assert xxhash32(pa.array([], pa.string())).tolist() == []
