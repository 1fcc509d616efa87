"""A data file's record keys, sorted once, for the positions of given keys.

Position deletes name rows by their position in a data file. A delta commit's keys are few
against a base file's rows, so instead of hashing the commit's keys and probing every row of the
file (each commit, each file), the file's keys are sorted once (base and row files never change)
and each commit's keys are found by binary search: the cost per commit follows the commit, not
the file. The sort is over a 64-bit hash of each key (fast to compare, whatever the keys'
width); a match is confirmed on the key itself.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakehouse.columns import RECORD_KEY
from lakehouse.iceberg import memo
from lakehouse.storage.base import Storage


def _fingerprints(keys: pa.Array) -> np.ndarray:
    """A 64-bit hash of each key's bytes (vectorised over 8-byte words; equal keys hash equal,
    and so do keys that differ only in trailing NUL bytes, which the caller confirms away)."""
    keys = keys.cast(pa.large_binary()) if not pa.types.is_large_binary(keys.type) else keys
    if keys.null_count:
        keys = keys.fill_null(b"")
    n = len(keys)
    if n == 0:
        return np.empty(0, dtype=np.uint64)
    offsets = np.frombuffer(keys.buffers()[1], dtype=np.int64, count=n + 1, offset=keys.offset * 8)
    lengths = np.diff(offsets)
    width = max(8, -(-int(lengths.max()) // 8) * 8)
    data = np.frombuffer(keys.buffers()[2], dtype=np.uint8)[offsets[0]:offsets[-1]] \
        if keys.buffers()[2] is not None else np.empty(0, dtype=np.uint8)
    if int(lengths.min()) == width:
        padded = data.reshape(n, width)
    else:
        padded = np.zeros((n, width), dtype=np.uint8)
        padded[np.arange(width) < lengths[:, None]] = data
    words = padded.view("<u8")
    h = np.full(n, 0xCBF29CE484222325, dtype=np.uint64)
    uniform = int(lengths.min()) > (words.shape[1] - 1) * 8
    with np.errstate(over="ignore"):
        for j in range(words.shape[1]):
            # Only a key's own words count: the hash must not depend on the widest key beside it.
            mixed = (h ^ words[:, j]) * np.uint64(0x100000001B3)
            mixed ^= mixed >> np.uint64(29)
            h = mixed if uniform else np.where(lengths > j * 8, mixed, h)
    return h


def _narrow(order: np.ndarray) -> np.ndarray:
    """Row positions in 32 bits where they fit (half the memory a kept index takes)."""
    return order.astype(np.int32) if len(order) < 2**31 else order


class Probe:
    """Keys to look up, hashed and sorted once for every file they are looked up in."""

    def __init__(self, keys: pa.Array) -> None:
        if isinstance(keys, pa.ChunkedArray):
            keys = keys.combine_chunks()
        self.keys = keys
        hashes = _fingerprints(keys)
        self.order = np.argsort(hashes)
        self.sorted = hashes[self.order]

    def __len__(self) -> int:
        return len(self.keys)


class KeyIndex:
    """The rows of one data file by record key."""

    def __init__(self, keys: pa.Array) -> None:
        if isinstance(keys, pa.ChunkedArray):
            keys = keys.combine_chunks()
        self.keys: pa.Array | pa.ChunkedArray = keys
        hashes = _fingerprints(keys)
        self.order = _narrow(np.argsort(hashes, kind="stable"))
        self.sorted = hashes[self.order]
        # Equal hashes side by side (a key written twice in the file, or a collision).
        self.repeats = bool(len(hashes) > 1 and (self.sorted[1:] == self.sorted[:-1]).any())
        self.nbytes = keys.nbytes + self.sorted.nbytes + self.order.nbytes

    def __len__(self) -> int:
        return len(self.keys)

    @property
    def live(self) -> int:
        """Rows still found (:meth:`appended` forgets the replaced ones)."""
        return len(self.sorted)

    def appended(self, forget: np.ndarray, added: pa.Array, keys: "pa.Array | pa.ChunkedArray") -> "KeyIndex":
        """The index of ``keys``: this index's keys followed by ``added``, where the rows at
        ``forget`` are no longer found (replaced by newer ones). The two sorted runs merge in
        linear time (a stable sort finds them)."""
        n = len(self.keys)
        live = np.ones(n, dtype=bool)
        live[forget] = False
        kept = live[self.order]
        hashes = _fingerprints(added.combine_chunks() if isinstance(added, pa.ChunkedArray) else added)
        new_order = np.argsort(hashes, kind="stable")
        merged = np.concatenate([self.sorted[kept], hashes[new_order]])
        orders = np.concatenate([self.order[kept], new_order + n])
        perm = np.argsort(merged, kind="stable")
        out = KeyIndex.__new__(KeyIndex)
        out.keys = keys
        out.sorted = merged[perm]
        out.order = _narrow(orders[perm])
        out.repeats = bool(len(out.sorted) > 1 and (out.sorted[1:] == out.sorted[:-1]).any())
        out.nbytes = keys.nbytes + out.sorted.nbytes + out.order.nbytes
        return out

    def find(self, query: pa.Array) -> np.ndarray:
        """For each key of ``query``, the position of its first row, or -1."""
        if isinstance(query, pa.ChunkedArray):
            query = query.combine_chunks()
        out = np.full(len(query), -1, dtype=np.int64)
        n = len(self.sorted)
        if not len(query) or not n:
            return out
        hashes = _fingerprints(query)
        lo = np.searchsorted(self.sorted, hashes, side="left")
        at = np.minimum(lo, n - 1)
        hit = self.sorted[at] == hashes
        while True:
            cand = np.flatnonzero(hit & (out < 0))
            if not len(cand):
                return out
            pos = self.order[at[cand]].astype(np.int64)
            keys = query.take(pa.array(cand))
            if keys.type != self.keys.type:
                keys = keys.cast(self.keys.type)
            same = pc.fill_null(pc.equal(self.keys.take(pa.array(pos)), keys), False).to_numpy(zero_copy_only=False)
            out[cand[same]] = pos[same]
            # A hash shared with another key (or a key written twice): try the next row of the run.
            at = at.copy()
            at[cand[~same]] += 1
            hit = np.zeros(len(query), dtype=bool)
            nxt = cand[~same]
            ok = at[nxt] < n
            nxt = nxt[ok]
            hit[nxt] = self.sorted[at[nxt]] == hashes[nxt]
            if not hit.any():
                return out

    def positions(self, query: "pa.Array | Probe") -> np.ndarray:
        """Positions (ascending) of the rows whose key is one of ``query``."""
        probe = query if isinstance(query, Probe) else Probe(query)
        n = len(self.sorted)
        if not len(probe) or not n:
            return np.empty(0, dtype=np.int64)
        lo = np.searchsorted(self.sorted, probe.sorted, side="left")
        if self.repeats:
            hi = np.searchsorted(self.sorted, probe.sorted, side="right")
        else:
            hi = lo + (self.sorted[np.minimum(lo, n - 1)] == probe.sorted)
        counts = hi - lo
        if not counts.any():
            return np.empty(0, dtype=np.int64)
        # Every row of each range [lo, hi), beside the query key it matched.
        starts = np.repeat(lo, counts)
        steps = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
        pos = self.order[starts + steps].astype(np.int64)
        asked = probe.order[np.repeat(np.arange(len(lo)), counts)]
        # Equal hashes are not equal keys: confirm each match on the real key.
        keys = probe.keys if probe.keys.type == self.keys.type else probe.keys.cast(self.keys.type)
        same = pc.equal(self.keys.take(pa.array(pos)), keys.take(pa.array(asked)))
        return np.unique(pos[pc.fill_null(same, False).to_numpy(zero_copy_only=False)])


def _gone_as_not_found(storage: Storage, rel: str, e: OSError) -> OSError:
    """An object store's file deleted between its open and its read (a clean racing a publish)
    fails the read with a plain OSError: as FileNotFoundError, the publish starts over."""
    if isinstance(e, FileNotFoundError) or storage.exists(rel):
        return e
    return FileNotFoundError(f"{storage.uri(rel)} was deleted while it was read")


def load(storage: Storage, rel: str, size: int | None) -> KeyIndex:
    """The record keys of the data file at ``rel``, sorted, kept in :data:`memo.ARROW` by URI
    and size (a compaction run again after a failure writes its base file under the same name)."""
    def read() -> KeyIndex:
        try:
            with storage.open_input(rel, size) as f:
                return KeyIndex(pq.read_table(f, columns=[RECORD_KEY]).column(0))
        except OSError as e:
            raise _gone_as_not_found(storage, rel, e) from e
    return memo.ARROW.get_or_load(("keys", storage.uri(rel), size), read)


def keep(uri: str, size: int, keys: pa.Array) -> None:
    """Remember the keys of a data file just written (no need to read them back)."""
    memo.ARROW.put(("keys", uri, size), KeyIndex(keys))


def file_columns(storage: Storage, rel: str, size: int | None, columns: list[str]) -> pa.Table:
    """A data file's ``columns`` (its record keys from :func:`load`), kept in :data:`memo.ARROW`
    (the keys once: the key index holds them)."""
    uri = storage.uri(rel)
    key = ("columns", uri, size, tuple(columns))
    table = memo.ARROW.get(key)
    index = memo.ARROW.get(("keys", uri, size))
    if table is None:
        try:
            with storage.open_input(rel, size) as f:
                pf = pq.ParquetFile(f)
                have = set(pf.schema_arrow.names)
                wanted = [c for c in columns if c != RECORD_KEY and c in have]
                # One open for both when the keys are not kept yet (on object storage, requests).
                table = pf.read(columns=wanted if index is not None else [*wanted, RECORD_KEY])
        except OSError as e:
            raise _gone_as_not_found(storage, rel, e) from e
        if index is None:
            index = KeyIndex(table.column(RECORD_KEY))
            memo.ARROW.put(("keys", uri, size), index)
            table = table.select(wanted)
        memo.ARROW.put(key, table)
    if index is None:
        index = load(storage, rel, size)
    return table.append_column(RECORD_KEY, index.keys)
