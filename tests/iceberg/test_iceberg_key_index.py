"""lakehouse.iceberg.key_index against Arrow's own hash lookup (the oracle), on hostile keys:
several widths, trailing NUL bytes, non-ASCII text, repeated keys, unsorted and sorted files."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given, settings, strategies as st

from lakehouse.iceberg.key_index import KeyIndex

ALPHABET = st.sampled_from(["a", "b", "\x00", "é", "Z", "0", "🙂"])
KEYS = st.lists(st.text(ALPHABET, min_size=0, max_size=5), max_size=40)


def oracle(keys: list[str], query: list[str]) -> np.ndarray:
    hit = pc.is_in(pa.array(keys, pa.string()), value_set=pa.array(query, pa.string()))
    return np.flatnonzero(hit.to_numpy(zero_copy_only=False))


@settings(max_examples=300, deadline=None)
@given(KEYS, KEYS, st.booleans())
def test_positions_equal_a_hash_lookup(keys, query, presort):
    if presort:
        keys = sorted(keys, key=lambda k: k.encode())
    index = KeyIndex(pa.array(keys, pa.string()))
    got = index.positions(pa.array(query, pa.string()))
    assert got.tolist() == oracle(keys, query).tolist()


def test_fixed_width_keys_sorted_and_not():
    rng = np.random.default_rng(3)
    keys = [f"{i:08d}-{rng.integers(1 << 30):010d}" for i in range(5000)]
    query = [keys[i] for i in rng.choice(5000, 300, replace=False)] + ["absent-key-000000"]
    for ks in (keys, list(reversed(keys))):
        index = KeyIndex(pa.array(ks))
        assert index.positions(pa.array(query)).tolist() == oracle(ks, query).tolist()
    # A query key longer than any of the file's is simply absent.
    assert KeyIndex(pa.array(["ab", "cd"])).positions(pa.array(["abc", "cd"])).tolist() == [1]


def test_key_written_twice_in_a_file_is_found_twice():
    index = KeyIndex(pa.chunked_array([["k2", "k1"], ["k2", "k3"]]))
    assert index.positions(pa.array(["k2"])).tolist() == [0, 2]
    assert index.positions(pa.array([], pa.string())).tolist() == []
    assert KeyIndex(pa.array([], pa.string())).positions(pa.array(["k"])).tolist() == []


@settings(max_examples=300, deadline=None)
@given(KEYS, KEYS)
def test_find_gives_the_first_row_of_each_key(keys, query):
    index = KeyIndex(pa.array(keys, pa.string()))
    first = {}
    for i, k in enumerate(keys):
        first.setdefault(k, i)
    assert index.find(pa.array(query, pa.string())).tolist() == [first.get(k, -1) for k in query]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(ALPHABET, max_size=4), max_size=30, unique=True),
       st.lists(st.text(ALPHABET, max_size=4), max_size=30, unique=True),
       st.lists(st.text(ALPHABET, max_size=4), max_size=30, unique=True))
def test_appended_index_finds_what_a_fresh_one_finds(old, new, query):
    """Rows of ``old`` whose key ``new`` has again are forgotten: each key is found at its newest row."""
    index = KeyIndex(pa.array(old, pa.string()))
    forget = np.array([i for i, k in enumerate(old) if k in set(new)], dtype=np.int64)
    rows = pa.chunked_array([pa.array(old, pa.string()), pa.array(new, pa.string())])
    grown = index.appended(forget, pa.array(new, pa.string()), rows)
    newest = {k: i for i, k in enumerate(old)} | {k: len(old) + i for i, k in enumerate(new)}
    assert grown.find(pa.array(query, pa.string())).tolist() == [newest.get(k, -1) for k in query]
    assert grown.live == len(newest)
    # Once more: the rows of the first two batches a third one has again are forgotten.
    third = query[:5]
    forget = np.array(sorted(i for k, i in newest.items() if k in set(third)), dtype=np.int64)
    n = len(old) + len(new)
    again = grown.appended(forget, pa.array(third, pa.string()),
                           pa.chunked_array(list(rows.chunks) + [pa.array(third, pa.string())]))
    last = {k: i for k, i in newest.items()} | {k: n + i for i, k in enumerate(third)}
    assert again.find(pa.array(query + old, pa.string())).tolist() == [last.get(k, -1) for k in query + old]


def test_a_kept_index_holds_positions_in_32_bits_and_its_file_columns_keys_once(tmp_path):
    """What a process keeps per base file (memo.ARROW): positions in int32 (half of int64), and
    the deciding columns without a second copy of the keys their key index holds."""
    import pyarrow.parquet as pq

    from lakehouse.columns import RECORD_KEY
    from lakehouse.iceberg import key_index, memo
    from lakehouse.storage.local import LocalStorage

    keys = pa.array([f"k{i:05d}" for i in range(5000)])
    idx = KeyIndex(keys)
    assert idx.order.dtype == np.int32
    grown = idx.appended(np.array([3]), pa.array(["new"]), pa.concat_arrays([keys, pa.array(["new"])]))
    assert grown.order.dtype == np.int32 and grown.find(pa.array(["new", "k00003"])).tolist() == [5000, -1]

    pq.write_table(pa.table({RECORD_KEY: keys, "ts": pa.array(range(5000))}), tmp_path / "f.parquet")
    storage = LocalStorage(str(tmp_path))
    size = (tmp_path / "f.parquet").stat().st_size
    memo.ARROW.clear()
    got = key_index.file_columns(storage, "f.parquet", size, ["ts", RECORD_KEY])
    assert got.column(RECORD_KEY).to_pylist() == keys.to_pylist() and got.column("ts").to_pylist() == list(range(5000))
    kept = memo.ARROW.get(("columns", storage.uri("f.parquet"), size, ("ts", RECORD_KEY)))
    assert kept is not None and RECORD_KEY not in kept.column_names


def test_the_memo_budget_follows_the_memory_the_process_may_use():
    from lakehouse.iceberg import memo

    mib, gib = 1 << 20, 1 << 30
    assert memo.arrow_budget(None) == 256 * mib
    assert memo.arrow_budget(2 * gib) == 256 * mib  # a small container: the floor
    assert memo.arrow_budget(24 * gib) == 24 * gib // 16
    assert memo.arrow_budget(512 * gib) == 2 * gib  # a big machine: the ceiling
    limit = memo.memory_limit()
    assert limit is None or limit > 0
    assert memo.ARROW_BYTES == memo.arrow_budget(limit)


def test_a_file_deleted_between_its_open_and_its_read_reads_as_not_found(tmp_path):
    """On an object store a clean may delete a base file a publish has opened: the read fails
    with a plain OSError, which must read as FileNotFoundError (the publish then starts over on
    the newer timeline) rather than fail the publish."""
    import pyarrow.parquet as pq
    import pytest
    from lakehouse.columns import RECORD_KEY
    from lakehouse.iceberg import key_index
    from lakehouse.storage import LocalStorage

    class Vanishing(LocalStorage):
        def open_input(self, path, size=None):
            f = super().open_input(path, size)
            self.delete(path)

            class Broken:
                def __enter__(self):
                    return self

                def __exit__(self, *exc):
                    f.close()

                def __getattr__(self, name):
                    raise OSError("AWS Error RESOURCE_NOT_FOUND during GetObject operation")
            return Broken()
    pq.write_table(pa.table({RECORD_KEY: ["a", "b"], "ts": [1, 2]}), str(tmp_path / "f.parquet"))
    storage = Vanishing(str(tmp_path))
    with pytest.raises(FileNotFoundError, match="deleted while it was read"):
        key_index.file_columns(storage, "f.parquet", 1, [RECORD_KEY, "ts"])
    pq.write_table(pa.table({RECORD_KEY: ["a", "b"], "ts": [1, 2]}), str(tmp_path / "g.parquet"))
    with pytest.raises(FileNotFoundError, match="deleted while it was read"):
        key_index.load(storage, "g.parquet", 1)
