"""Hudi bloom filters: byte-identity with Apache Hudi's parquet footers and scalar reference models."""

from __future__ import annotations

import base64
import math
import struct

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakehouse import bloom_filter
from lakehouse.bloom_filter import (
    BLOOM_FILTER_KEY,
    BLOOM_FILTER_TYPE_CODE_KEY,
    DYNAMIC_V0,
    MAX_RECORD_KEY,
    MIN_RECORD_KEY,
    SIMPLE,
    BloomFilter,
    DynamicBoundedBloomFilter,
    SimpleBloomFilter,
    bit_size,
    footer_metadata,
    min_max_keys,
    murmur_hash,
    num_hashes,
)

FOOTER_KEYS = (BLOOM_FILTER_KEY, BLOOM_FILTER_TYPE_CODE_KEY, MIN_RECORD_KEY, MAX_RECORD_KEY)


# ---------------------------------------------------------------------------------------------
# Scalar reference models, written independently from the module as plain transcriptions of the
# Java semantics (Python ints, explicit 32-bit wrapping and Java's signed bytes).
# ---------------------------------------------------------------------------------------------

def _i32(x: int) -> int:
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x & 0x80000000 else x


def _jbyte(b: int) -> int:
    return b - 256 if b >= 128 else b


def ref_murmur(data: bytes, seed: int) -> int:
    """Hadoop MurmurHash.hash(byte[], length, seed) one byte at a time."""
    m, n = 0x5BD1E995, len(data)
    h = (seed ^ n) & 0xFFFFFFFF
    full = n // 4
    for i in range(full):
        k = int.from_bytes(data[4 * i:4 * i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> 24
        k = (k * m) & 0xFFFFFFFF
        h = ((h * m) & 0xFFFFFFFF) ^ k
    rest = n - 4 * full
    if rest:
        if rest >= 3:
            h ^= (_jbyte(data[n - 3]) << 16) & 0xFFFFFFFF
        if rest >= 2:
            h ^= (_jbyte(data[n - 2]) << 8) & 0xFFFFFFFF
        h ^= _jbyte(data[n - 1]) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return _i32(h)


def ref_positions(key: bytes, nb_hash: int, vector_size: int) -> list[int]:
    out, seed = [], 0
    for _ in range(nb_hash):
        seed = ref_murmur(key, seed)
        out.append(abs(int(math.fmod(seed, vector_size))))
    return out


class RefDynamic:
    """Key-at-a-time model of Hudi's InternalDynamicBloomFilter and its write(DataOutput)."""

    def __init__(self, vector_size: int, nb_hash: int, nr: int, max_nr: int):
        self.vs, self.k, self.nr, self.max_nr = vector_size, nb_hash, nr, max_nr
        self.rows: list[set[int]] = [set()]
        self.current, self.reached, self.cursor = 0, False, 0

    def _active(self):
        if self.reached:
            row = self.rows[self.cursor % len(self.rows)]
            self.cursor += 1
            return row
        if self.current >= self.nr and len(self.rows) * self.nr < self.max_nr:
            return None
        if self.current >= self.nr:
            self.reached = True
            return self.rows[0]
        return self.rows[-1]

    def add(self, key: str) -> None:
        row = self._active()
        if row is None:
            self.rows.append(set())
            row = self.rows[-1]
            self.current = 0
        row.update(ref_positions(key.encode(), self.k, self.vs))
        self.current += 1

    def serialize(self) -> str:
        def header() -> bytes:
            return struct.pack(">iibi", -1, self.k, 1, self.vs)

        out = bytearray(header() + struct.pack(">iii", self.nr, self.current, len(self.rows)))
        for row in self.rows:
            bits = bytearray((self.vs + 7) // 8)
            for p in row:
                bits[p // 8] |= 1 << (p % 8)
            out += header() + bits
        return base64.b64encode(bytes(out)).decode()


# ---------------------------------------------------------------------------------------------
# Oracles from real Apache Hudi files
# ---------------------------------------------------------------------------------------------

def _fixture_base_files(fixture_tables) -> list[tuple[str, dict[bytes, bytes], pa.ChunkedArray]]:
    """Every fixture parquet base file that carries a bloom filter: (name, footer, record keys)."""
    found = []
    for name, root in sorted(fixture_tables.items()):
        for path in sorted(root.rglob("*.parquet")):
            if ".hoodie" in path.parts:
                continue
            meta = pq.read_metadata(path).metadata or {}
            if BLOOM_FILTER_KEY in meta:
                keys = pq.read_table(path, columns=["_hoodie_record_key"]).column(0)
                found.append((f"{name}/{path.relative_to(root)}", meta, keys))
    return found


@pytest.fixture(scope="module")
def fixture_base_files(fixture_tables):
    files = _fixture_base_files(fixture_tables)
    # 39 v6 base files at the time of writing (the v8 ones are checked as well).
    assert sum("/v6_" in name for name, _, _ in files) >= 30
    return files


@pytest.mark.interop
def test_fixture_keys_test_positive(fixture_base_files):
    for name, meta, keys in fixture_base_files:
        bf = BloomFilter.deserialize(meta[BLOOM_FILTER_KEY], meta.get(BLOOM_FILTER_TYPE_CODE_KEY))
        assert bf.type_code == DYNAMIC_V0, name
        assert (bf.vector_size, bf.nb_hash, bf.nr) == (2587966, 30, 60000), name
        assert bf.current == len(keys), name
        assert bf.might_contain(keys).all(), name


@pytest.mark.interop
def test_fixture_footer_byte_identical(fixture_base_files):
    """Same keys in file order + Hudi defaults => the exact footer strings Hudi wrote."""
    for name, meta, keys in fixture_base_files:
        ours = footer_metadata(keys)
        assert set(ours) == set(FOOTER_KEYS), name
        for k in FOOTER_KEYS:
            assert ours[k] == meta[k], (name, k)


@pytest.mark.interop
def test_fixture_reserialize_round_trip(fixture_base_files):
    for name, meta, _ in fixture_base_files:
        bf = BloomFilter.deserialize(meta[BLOOM_FILTER_KEY].decode(), DYNAMIC_V0)
        assert bf.serialize().encode() == meta[BLOOM_FILTER_KEY], name


# ---------------------------------------------------------------------------------------------
# Hashing
# ---------------------------------------------------------------------------------------------

@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.binary(min_size=0, max_size=40),
                          st.integers(min_value=-(2**31), max_value=2**31 - 1)),
                min_size=1, max_size=60))
def test_vectorised_murmur_matches_scalar(pairs):
    data = [d for d, _ in pairs]
    seeds = np.array([s for _, s in pairs], dtype=np.int64)
    got = murmur_hash(pa.array(data, pa.binary()), seeds)
    assert got.dtype == np.int32
    assert got.tolist() == [ref_murmur(d, int(s)) for d, s in pairs]


def test_murmur_every_length_and_high_bytes():
    """Lengths 0..40 in one batch (mixed word counts), with bytes >= 0x80 in every tail."""
    rng = np.random.default_rng(7)
    data = [bytes(rng.integers(0, 256, n, dtype=np.uint8)) for n in range(41)]
    data += [bytes([0xFF] * n) for n in range(41)] + [bytes([0x80] * n) for n in range(41)]
    for seed in (0, 1, -1, 123456789, -(2**31)):
        assert murmur_hash(data, seed).tolist() == [ref_murmur(d, seed) for d in data]


@pytest.mark.parametrize("count", [1, 2, 5])
def test_murmur_equal_length_batches(count):
    """Equal-length batches take the packed-matrix path; the caller's buffer must stay intact."""
    rng = np.random.default_rng(count)
    for n in range(1, 41):
        data = [bytes(rng.integers(0, 256, n, dtype=np.uint8)) for _ in range(count)]
        arr = pa.array(data, pa.binary())
        for seed in (0, -7):
            assert murmur_hash(arr, seed).tolist() == [ref_murmur(d, seed) for d in data]
        assert arr.to_pylist() == data


def test_keys_are_not_modified():
    keys = pa.array(["3eeb61f7-c2b0-4636-99bd-5d7a5a1d2c04"])
    footer_metadata(keys)
    BloomFilter.create(filter_type=SIMPLE).might_contain(keys)
    assert keys.to_pylist() == ["3eeb61f7-c2b0-4636-99bd-5d7a5a1d2c04"]


def test_str_keys_hash_their_utf8_bytes():
    keys = ["a", "é", "日本語", "🙂x", "id:1,name:Alice"]
    assert murmur_hash(keys).tolist() == [ref_murmur(k.encode(), 0) for k in keys]


def test_sizing_matches_bloom_filter_utils():
    assert bit_size(60000, 1e-9) == 2587966
    assert num_hashes(2587966, 60000) == 30


# ---------------------------------------------------------------------------------------------
# Filter behaviour against the scalar models
# ---------------------------------------------------------------------------------------------

def _random_keys(rng: np.random.Generator, n: int) -> list[str]:
    """UUID-shaped random keys (36 chars), like Hudi's quickstart record keys."""
    h = rng.bytes(16 * n).hex()
    return [f"{h[i:i + 8]}-{h[i + 8:i + 12]}-{h[i + 12:i + 16]}-{h[i + 16:i + 20]}-{h[i + 20:i + 32]}"
            for i in range(0, 32 * n, 32)]


@pytest.mark.parametrize("packed", [False, True])
@pytest.mark.parametrize("uniform", [False, True])
@pytest.mark.parametrize("chunk", [1 << 16, 7])
@pytest.mark.parametrize("batches", [[250], [1] * 40 + [210], [19, 20, 21, 3, 187], [60, 190]])
def test_dynamic_rows_match_scalar_model(batches, chunk, uniform, packed, monkeypatch):
    """Row growth, the bound, and the round-robin phase (incl. its row-0-twice quirk), with
    mixed-length and equal-length keys, in one or many vectorised chunks; the bits held as
    bools or packed (a write in bounded memory)."""
    monkeypatch.setattr(bloom_filter, "_CHUNK", chunk)
    rng = np.random.default_rng(11)
    keys = _random_keys(rng, sum(batches))
    if not uniform:
        keys = [k[: 1 + i % 36] + "ü" * (i % 3) for i, k in enumerate(keys)]
    ours = BloomFilter.create(num_entries=20, fpp=0.05, max_entries=50, packed=packed)
    ref = RefDynamic(ours.vector_size, ours.nb_hash, 20, 50)
    start = 0
    for size in batches:
        batch = keys[start:start + size]
        ours.add_keys(batch)
        for k in batch:
            ref.add(k)
        start += size
        assert ours.serialize() == ref.serialize()
    assert ours.num_rows == 3 and ours.reached_max
    assert (ours._bits is None) == packed


@pytest.mark.parametrize("packed", [False, True])
@pytest.mark.parametrize("extra", [[], ["x", "yz", "ab€", "🙂"]])
def test_simple_matches_scalar_model(extra, packed):
    rng = np.random.default_rng(3)
    keys = _random_keys(rng, 500) + extra
    bf = BloomFilter.create(num_entries=1000, fpp=0.01, filter_type=SIMPLE, packed=packed)
    assert isinstance(bf, SimpleBloomFilter)
    bf.add_keys(pa.array(keys, pa.large_string()))
    bits = bytearray((bf.vector_size + 7) // 8)
    for k in keys:
        for p in ref_positions(k.encode(), bf.nb_hash, bf.vector_size):
            bits[p // 8] |= 1 << (p % 8)
    expect = struct.pack(">iibi", -1, bf.nb_hash, 1, bf.vector_size) + bytes(bits)
    assert base64.b64decode(bf.serialize()) == expect
    again = BloomFilter.deserialize(bf.serialize(), None)
    assert isinstance(again, SimpleBloomFilter) and again.might_contain(keys).all()


def test_input_forms_agree():
    rng = np.random.default_rng(5)
    keys = _random_keys(rng, 300) + ["k", "kk", "kkk"]
    sliced = pa.array(["pad"] + keys + ["pad"]).slice(1, len(keys))
    chunked = pa.chunked_array([keys[:100], keys[100:]])
    forms = [keys, pa.array(keys), pa.array(keys, pa.large_string()), sliced, chunked,
             [k.encode() for k in keys], pa.array(keys, pa.string_view())]
    outs = set()
    for form in forms:
        bf = BloomFilter.create()
        bf.add_keys(form)
        outs.add(bf.serialize())
    assert len(outs) == 1


def test_false_positive_rate_near_fpp():
    rng = np.random.default_rng(2024)
    added, others = _random_keys(rng, 10_000), _random_keys(rng, 200_000)
    for filter_type in (SIMPLE, DYNAMIC_V0):
        bf = BloomFilter.create(num_entries=10_000, fpp=0.01, filter_type=filter_type)
        bf.add_keys(added)
        assert bf.might_contain(added).all()
        rate = bf.might_contain(others).mean()
        assert 0.006 < rate < 0.015, (filter_type, rate)
    # With Hudi's defaults (1e-9) a full filter should give no false positive at all here.
    bf = BloomFilter.create()
    bf.add_keys(_random_keys(rng, 60_000))
    assert not bf.might_contain(others).any()


def test_dynamic_membership_across_rows():
    rng = np.random.default_rng(9)
    keys = _random_keys(rng, 5_000)
    bf = BloomFilter.create(num_entries=1_000, fpp=0.001, max_entries=3_000)
    bf.add_keys(keys)
    assert bf.num_rows == 3
    again = BloomFilter.deserialize(bf.serialize(), DYNAMIC_V0)
    assert isinstance(again, DynamicBoundedBloomFilter)
    assert again.might_contain(keys).all()
    assert again.serialize() == bf.serialize()


@pytest.mark.parametrize("filter_type", [SIMPLE, DYNAMIC_V0])
def test_a_filter_read_from_a_footer_stays_packed(filter_type):
    """A lookup holds the footers of many files: their filters keep the stored bits (one per
    bit, not a byte), answer as the filter they were written from, and take more keys packed."""
    rng = np.random.default_rng(4)
    keys, others = _random_keys(rng, 3_000), _random_keys(rng, 3_000)
    bf = BloomFilter.create(num_entries=1_000, fpp=0.01, filter_type=filter_type, max_entries=3_000)
    bf.add_keys(keys)
    again = BloomFilter.deserialize(bf.serialize(), filter_type)
    assert again._bits is None and again._packed.nbytes <= bf._row_count() * (bf.vector_size + 7) // 8
    assert np.array_equal(again.might_contain(others), bf.might_contain(others))
    assert again.might_contain(keys).all() and again._bits is None
    assert again.serialize() == bf.serialize()
    more = _random_keys(rng, 10)
    again.add_keys(more)
    bf.add_keys(more)
    assert again.serialize() == bf.serialize() and again.might_contain(more).all()
    assert again._bits is None


# ---------------------------------------------------------------------------------------------
# Footer metadata and errors
# ---------------------------------------------------------------------------------------------

def test_footer_metadata_shape():
    meta = footer_metadata(["b", "a", "c"])
    assert meta[BLOOM_FILTER_TYPE_CODE_KEY] == b"DYNAMIC_V0"
    assert (meta[MIN_RECORD_KEY], meta[MAX_RECORD_KEY]) == (b"a", b"c")
    # Java writes the type code only for DYNAMIC filters; readers read its absence as SIMPLE.
    simple = footer_metadata(["b"], filter_type=SIMPLE)
    assert BLOOM_FILTER_TYPE_CODE_KEY not in simple
    assert BloomFilter.deserialize(simple[BLOOM_FILTER_KEY]).might_contain(["b"]).all()
    # No keys: filter only, no min/max (as finalizeMetadata with null min/max).
    assert set(footer_metadata([])) == {BLOOM_FILTER_KEY, BLOOM_FILTER_TYPE_CODE_KEY}


def test_min_max_orders():
    keys = ["\uff21", "\U0001F600", "a"]  # U+FF21 vs a supplementary char: the orders differ
    assert min_max_keys(keys, "utf8") == (b"a", "\U0001F600".encode())
    assert min_max_keys(keys, "utf16") == (b"a", "\uff21".encode())
    assert min_max_keys(["b", "é", "a"], "utf16") == (b"a", "é".encode())


def test_rejects_null_and_empty_keys():
    bf = BloomFilter.create(num_entries=10, fpp=0.1, max_entries=20)
    with pytest.raises(ValueError):
        bf.add_keys(pa.array(["a", None]))
    with pytest.raises(ValueError):
        bf.add_keys(["a", ""])
    assert bf.current == 0  # a rejected batch leaves the row bookkeeping alone
    with pytest.raises(ValueError):
        BloomFilter.create(filter_type="BOGUS")
    with pytest.raises(ValueError):
        BloomFilter.deserialize(base64.b64encode(b"\xff\xff\xff\xfe" + bytes(20)).decode(), SIMPLE)
    with pytest.raises(ValueError):
        BloomFilter.deserialize(bf.serialize()[:-8], DYNAMIC_V0)
