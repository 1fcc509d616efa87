"""Hudi's BucketIdentifier: a record's bucket is a hash of its key modulo a fixed bucket count.

The writer routes records by it (:mod:`lakehouse.write.bucket_layout`); a read of given keys finds
by it the one file group per partition that may hold each. The hash is Java's
``List<String>.hashCode()`` over the hash-field values, exactly as Hudi's BucketIdentifier
computes it, so a table written here and later by Java Hudi agree on buckets. It is computed over
whole columns with numpy (one vector step per character position).
"""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse.keygen import EMPTY_KEY, NULL_KEY


def java_string_hash(values: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """``String.hashCode()`` of each value (int32 arithmetic over UTF-16 code units)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    values = values.cast(pa.string())
    n = len(values)
    if n == 0:
        return np.zeros(0, dtype=np.int32)
    # Null when every value is null (nulls are skipped): that is the fast path too.
    if pc.all(pc.string_is_ascii(values)).as_py() is False:
        return _hash_utf16(values)
    offsets = np.frombuffer(values.buffers()[1], dtype=np.int32, count=n + 1, offset=values.offset * 4)
    data = np.frombuffer(values.buffers()[2], dtype=np.uint8) if values.buffers()[2] is not None \
        else np.zeros(0, dtype=np.uint8)
    starts = offsets[:-1].astype(np.int64)
    lengths = (offsets[1:] - offsets[:-1]).astype(np.int64)
    # uint32 arithmetic wraps exactly as Java's int does.
    k31 = np.uint32(31)
    if values.null_count == 0 and lengths.min() == lengths.max():
        # Equal lengths (UUIDs, padded ids) lie back to back: one column per character position.
        size = int(lengths[0])
        mat = data[starts[0]:starts[0] + n * size].reshape(n, size)
        h = np.zeros(n, dtype=np.uint32)
        for i in range(size):
            h *= k31
            h += mat[:, i]
        return h.view(np.int32)
    h = np.zeros(n, dtype=np.uint32)
    max_len = int(lengths.max()) if n else 0
    for i in range(max_len):
        idx = np.flatnonzero(lengths > i)
        if not len(idx):
            break
        h[idx] = h[idx] * k31 + data[starts[idx] + i]
    return h.view(np.int32)


def _hash_utf16(values: pa.Array) -> np.ndarray:
    out = np.zeros(len(values), dtype=np.int64)
    for i, s in enumerate(values.to_pylist()):
        if s is None:
            continue  # a null element hashes to 0 in Java's List.hashCode()
        h = 0
        b = s.encode("utf-16-be")
        for j in range(0, len(b), 2):
            h = (h * 31 + ((b[j] << 8) | b[j + 1])) & 0xFFFFFFFF
        out[i] = h
    return out.astype(np.uint32).view(np.int32)


def bucket_ids(hash_values: list[pa.ChunkedArray], num_buckets: int) -> np.ndarray:
    """Hudi's ``(hashKeys.hashCode() & Integer.MAX_VALUE) % numBuckets``."""
    if num_buckets == 1:  # one bucket per partition: nothing to hash
        return np.zeros(len(hash_values[0]), dtype=np.int32)
    h = np.ones(len(hash_values[0]), dtype=np.int64)
    for col in hash_values:
        h = (h * 31 + java_string_hash(col).astype(np.int64)) & 0xFFFFFFFF
    return ((h & 0x7FFFFFFF) % num_buckets).astype(np.int32)


def hash_columns(table: pa.Table, record_keys: pa.ChunkedArray, hash_fields: tuple[str, ...],
                 key_fields: tuple[str, ...], complex_keys: bool) -> list[pa.ChunkedArray]:
    """The strings Hudi hashes: the plain key, or the hash fields' values parsed from the key.

    Like Hudi's ``KeyGenUtils.extractRecordKeysByFields``, values come in the order the fields
    have in the record key (not in ``hash_fields``), and the ``__null__``/``__empty__``
    placeholders hash as null and "" (both 0), not as the placeholder text.
    """
    if not complex_keys:
        return [record_keys]
    wanted = set(hash_fields)
    fields = [f for f in key_fields if f in wanted] if hash_fields else list(key_fields)
    out = []
    for f in fields:
        # Complex keys are 'f1:v1,f2:v2'; pull out this field's value.
        pattern = f"(?:^|,){re.escape(f)}:(?P<v>[^,]*)"
        v = pc.struct_field(pc.extract_regex(record_keys, pattern), "v")
        v = pc.if_else(pc.equal(v, NULL_KEY), pa.scalar(None, pa.string()), v)
        v = pc.if_else(pc.equal(v, EMPTY_KEY), "", v)
        out.append(v)
    return out


def record_buckets(table: pa.Table, record_keys: pa.ChunkedArray, config) -> np.ndarray:
    """Each record's bucket under ``config`` (a TableConfig): its hash fields (or its key) from
    :func:`hash_columns`, then :func:`bucket_ids` over the table's bucket count."""
    complex_keys = len(config.record_key_fields) > 1 or config.key_generator_type.value == "COMPLEX"
    cols = hash_columns(table, record_keys, config.bucket_hash_fields, config.record_key_fields, complex_keys)
    return bucket_ids(cols, config.bucket_num)
