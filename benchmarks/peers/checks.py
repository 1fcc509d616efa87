"""A whole-table fingerprint that engines and the in-memory model can both compute.

Row counts and a sample of keys miss a wrong value on an unsampled key; a sum of per-row hashes
of (key, ts) does not, and it is order-free, so no engine's output has to be sorted. The hash is
vectorised over the fixed 36-byte keys, so a 1M-row check costs a fraction of a read.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from benchmarks.bench_core import KEY, ORDERING, Model, _splitmix64

KEY_WIDTH = 36  # make_keys builds every key as 8-4-4-4-12 hex


class MalformedKeys(ValueError):
    pass


def _key_words(keys: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Each key's bytes as five uint64 words (36 bytes, zero-padded to 40)."""
    # Engines hand strings back as string, large_string or string_view; one layout for all.
    arr = pc.cast(keys, pa.large_binary())
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    n = len(arr)
    if arr.null_count:
        raise MalformedKeys(f"{arr.null_count} null keys")
    if n == 0:
        return np.zeros((0, 5), dtype=np.uint64)
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64)[arr.offset:arr.offset + n + 1]
    widths = np.diff(offsets)
    if not (widths == KEY_WIDTH).all():
        bad = int((widths != KEY_WIDTH).sum())
        raise MalformedKeys(f"{bad} keys are not {KEY_WIDTH} bytes long")
    data = np.frombuffer(arr.buffers()[2], dtype=np.uint8)[offsets[0]:offsets[-1]]
    padded = np.zeros((n, 40), dtype=np.uint8)
    padded[:, :KEY_WIDTH] = data.reshape(n, KEY_WIDTH)
    return padded.view(np.uint64)


def row_hashes(keys: pa.Array | pa.ChunkedArray, ts: pa.Array | pa.ChunkedArray | np.ndarray) -> np.ndarray:
    words = _key_words(keys)
    t = ts if isinstance(ts, np.ndarray) else pc.cast(ts, pa.int64()).to_numpy()
    h = _splitmix64(np.asarray(t).astype(np.int64).view(np.uint64))
    for col in words.T:
        h = _splitmix64(h ^ col)
    return h


def checksum(table: pa.Table) -> int:
    """Sum (mod 2**64) of the row hashes of ``table``'s key and ts columns."""
    h = row_hashes(table.column(KEY), table.column(ORDERING))
    return int(h.sum(dtype=np.uint64))


def model_hashes(model: Model) -> np.ndarray:
    ids = np.flatnonzero(model.alive)
    return row_hashes(model.keys(ids), model.ts[ids])


def model_checksum(model: Model) -> int:
    return int(model_hashes(model).sum(dtype=np.uint64))


def live_rows(rows: pa.Table, model: Model) -> pa.Table:
    """The rows of ``rows`` the model says are current: what a merged table holds, and what a
    compaction rewrites. Each (key, ts) is unique, so membership picks exactly one row per key."""
    h = row_hashes(rows.column(KEY), rows.column(ORDERING))
    keep = pc.is_in(pa.array(h, pa.uint64()), value_set=pa.array(model_hashes(model), pa.uint64()))
    return rows.filter(keep)
