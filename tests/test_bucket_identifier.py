"""Bucket index hashing: Java's String.hashCode and List.hashCode as Hudi's BucketIdentifier
uses them, checked against well-known Java values and a plain re-statement of the formulas."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from lakehouse.bucket_identifier import bucket_ids, hash_columns, java_string_hash


def to_int32(x: int) -> int:
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x >= 1 << 31 else x


def ref_string_hash(s: str | None) -> int:
    """String.hashCode(): s[0]*31^(n-1) + ... + s[n-1] over UTF-16 code units, in int32."""
    if s is None:
        return 0  # what List.hashCode() adds for a null element
    units = s.encode("utf-16-be")
    h = 0
    for i in range(0, len(units), 2):
        h = 31 * h + int.from_bytes(units[i:i + 2], "big")
    return to_int32(h)


def ref_bucket(values: list[str | None], num_buckets: int) -> int:
    """(List.hashCode() & Integer.MAX_VALUE) % numBuckets."""
    h = 1
    for v in values:
        h = to_int32(31 * h + ref_string_hash(v))
    return (h & 0x7FFFFFFF) % num_buckets


# Values any JVM prints for "...".hashCode().
KNOWN = {
    "": 0, "a": 97, "hello": 99162322, "Aa": 2112, "BB": 2112, "hello world": 1794106052,
    "polygenelubricants": -2147483648, "id": 3355, "é": 233, "😀": 1772899,
}


def test_reference_implementation_agrees_with_java():
    for s, h in KNOWN.items():
        assert ref_string_hash(s) == h, s


def test_known_java_hashes():
    got = java_string_hash(pa.array(list(KNOWN)))
    assert got.dtype == np.int32
    assert got.tolist() == list(KNOWN.values())


def test_ascii_and_non_ascii_paths_agree():
    # One non-ASCII value sends the whole array down the UTF-16 path; both give the same.
    ascii_only = ["hello", "world", "x" * 100, ""]
    assert java_string_hash(pa.array(ascii_only)).tolist() == \
        java_string_hash(pa.array(ascii_only + ["é"])).tolist()[:-1]


def test_surrogate_pairs_count_as_two_units():
    s = "a😀b𝄞"
    assert java_string_hash(pa.array([s])).tolist() == [ref_string_hash(s)]
    # Not the code point: hashing 0x1F600 as one unit would give something else.
    assert ref_string_hash("😀") != 0x1F600


def test_nulls_hash_to_zero():
    assert java_string_hash(pa.array(["hello", None, ""])).tolist() == [99162322, 0, 0]
    assert java_string_hash(pa.array([None, None], pa.string())).tolist() == [0, 0]
    assert java_string_hash(pa.array(["é", None])).tolist() == [233, 0]


def test_empty_input():
    assert java_string_hash(pa.array([], pa.string())).tolist() == []
    assert java_string_hash(pa.chunked_array([], pa.string())).tolist() == []


def test_sliced_and_chunked_arrays():
    base = pa.array(["skip", "hello", "Aa", "é", "polygenelubricants", "tail"])
    for offset in range(5):
        for length in range(0, 6 - offset):
            sl = base.slice(offset, length)
            assert sl.offset == offset or length == 0
            assert java_string_hash(sl).tolist() == [ref_string_hash(v) for v in sl.to_pylist()]
    ascii_slice = pa.array(["xx", "hello", "world"]).slice(1)
    assert java_string_hash(ascii_slice).tolist() == [99162322, 113318802]
    chunked = pa.chunked_array([["hello"], ["Aa", "é"], []])
    assert java_string_hash(chunked).tolist() == [99162322, 2112, 233]


def test_other_string_types():
    assert java_string_hash(pa.array(["hello"], pa.large_string())).tolist() == [99162322]
    assert java_string_hash(pa.array(["hello", "hello"]).dictionary_encode()).tolist() == [99162322] * 2


@settings(max_examples=300)
@given(st.lists(st.none() | st.text(), max_size=20))
def test_any_strings_match_the_formula(values):
    arr = pa.array(values, pa.string())
    assert java_string_hash(arr).tolist() == [ref_string_hash(v) for v in values]


@settings(max_examples=200)
@given(st.lists(st.lists(st.none() | st.text(max_size=12), min_size=1, max_size=3), min_size=1,
                max_size=10).filter(lambda rows: len({len(r) for r in rows}) == 1),
       st.integers(min_value=1, max_value=1024))
def test_bucket_ids_match_list_hash_code(rows, num_buckets):
    cols = [pa.chunked_array([pa.array([r[i] for r in rows], pa.string())]) for i in range(len(rows[0]))]
    got = bucket_ids(cols, num_buckets)
    assert got.tolist() == [ref_bucket(r, num_buckets) for r in rows]
    assert all(0 <= b < num_buckets for b in got.tolist())


def test_bucket_ids_known_values():
    # [ "hello" ].hashCode() = 31 + 99162322.
    assert bucket_ids([pa.chunked_array([["hello"]])], 1000).tolist() == [(31 + 99162322) % 1000]
    # A hash whose int32 is negative: only the sign bit is dropped, no abs().
    h = to_int32(31 + KNOWN["polygenelubricants"])
    assert h < 0
    assert bucket_ids([pa.chunked_array([["polygenelubricants"]])], 7).tolist() == [(h & 0x7FFFFFFF) % 7]


# --- which strings are hashed --------------------------------------------------------------


def test_simple_keys_are_hashed_whole():
    keys = pa.chunked_array([["a:b", "x"]])
    (col,) = hash_columns(pa.table({"k": ["1", "2"]}), keys, ("id",), ("id",), False)
    assert col.to_pylist() == ["a:b", "x"]


def test_complex_keys_hash_the_values_of_the_hash_fields():
    keys = pa.chunked_array([["id:1,name:x,ts:5", "id:2,name:y,ts:6"]])
    cols = hash_columns(None, keys, (), ("id", "name", "ts"), True)
    assert [c.to_pylist() for c in cols] == [["1", "2"], ["x", "y"], ["5", "6"]]
    cols = hash_columns(None, keys, ("ts", "id"), ("id", "name", "ts"), True)
    # Hudi walks the record key and keeps the hash fields, so the key's order wins.
    assert [c.to_pylist() for c in cols] == [["1", "2"], ["5", "6"]]
    assert bucket_ids(cols, 97).tolist() == [ref_bucket(["1", "5"], 97), ref_bucket(["2", "6"], 97)]


def test_complex_placeholders_hash_as_null_and_empty():
    # extractRecordKeysByFields turns __null__ into null and __empty__ into "" (both hash 0).
    keys = pa.chunked_array([["id:__null__,name:x", "id:__empty__,name:y"]])
    cols = hash_columns(None, keys, (), ("id", "name"), True)
    assert [c.to_pylist() for c in cols] == [[None, ""], ["x", "y"]]
    assert bucket_ids(cols, 64).tolist() == [ref_bucket([None, "x"], 64), ref_bucket(["", "y"], 64)]


def test_field_names_are_matched_exactly():
    # "id" must not match inside "uid", nor a regex meta-character wildcard.
    (col,) = hash_columns(None, pa.chunked_array([["uid:9,id:1"]]), ("id",), ("uid", "id"), True)
    assert col.to_pylist() == ["1"]
    (col,) = hash_columns(None, pa.chunked_array([["axb:3,a.b:2"]]), ("a.b",), ("axb", "a.b"), True)
    assert col.to_pylist() == ["2"]
