"""Reading parquet with the string columns of small dictionaries as dictionaries: which columns
qualify (decided from the footer alone), and rows identical to pyarrow's plain read whatever
the file holds."""

from __future__ import annotations

import io
import uuid

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from lakehouse.storage.parquet import decode_dictionaries, read_parquet, small_dictionary_columns

N = 50_000


def parquet(table: pa.Table, **kw) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="zstd", **kw)
    return sink.getvalue()


def sample(n: int = N, seed: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table({
        "file": pa.array(["00000000-aaaa-0_0-0-0_20260101000000000.parquet"] * n),  # one value
        "city": pa.array(rng.choice(["sf", "nyc", "la", None], n).tolist()),  # few, with nulls
        "rider": pa.array([f"rider-{i:05d}" for i in rng.integers(0, 2000, n)]),
        "key": pa.array([str(uuid.UUID(int=int(i))) for i in rng.integers(0, 2 ** 62, n)]),  # distinct
        "fare": pa.array(rng.random(n)),  # not a string
        "tags": pa.array([["a", "b"]] * n),  # nested
    })


def test_small_dictionaries_are_the_few_valued_string_columns():
    data = parquet(sample())
    pf = pq.ParquetFile(pa.BufferReader(data))
    assert small_dictionary_columns(pf, pf.schema_arrow.names) == ["file", "city", "rider"]
    # Only the columns asked for.
    assert small_dictionary_columns(pf, ["key", "rider"]) == ["rider"]


def test_a_chunk_whose_dictionary_overflowed_is_read_plain():
    """The writer falls back to plain pages once a dictionary passes its page limit; reading
    such a chunk as a dictionary hashes every value (several times slower)."""
    t = sample()
    data = parquet(t.select(["key"]), dictionary_pagesize_limit=64 << 10)
    pf = pq.ParquetFile(pa.BufferReader(data))
    assert pf.metadata.row_group(0).column(0).has_dictionary_page  # tried, then fell back
    assert small_dictionary_columns(pf, ["key"]) == []


def test_every_row_group_must_qualify():
    t = sample()
    # The first row groups hold one rider, the last many: one large dictionary page.
    riders = pa.array(["r"] * (N - 10_000) + [f"rider-{i}" for i in range(10_000)])
    data = parquet(t.set_column(2, "rider", riders), row_group_size=10_000)
    pf = pq.ParquetFile(pa.BufferReader(data))
    assert pf.metadata.num_row_groups == 5
    assert "rider" not in small_dictionary_columns(pf, ["rider"])
    assert small_dictionary_columns(pf, ["file", "city"]) == ["file", "city"]


def test_a_dictionary_worth_more_than_its_rows_is_read_plain():
    """A dictionary page small in bytes but large against the rows (2,000 values in 10,000 rows),
    where taking values from it saves nothing."""
    t = sample(10_000)
    pf = pq.ParquetFile(pa.BufferReader(parquet(t)))
    page = pf.metadata.row_group(0).column(2)
    assert page.data_page_offset - page.dictionary_page_offset < 32 << 10  # small in bytes
    assert small_dictionary_columns(pf, ["file", "rider"]) == ["file"]


def test_a_small_file_is_read_plain():
    pf = pq.ParquetFile(pa.BufferReader(parquet(sample(1_000))))
    assert pf.metadata.row_group(0).column(0).has_dictionary_page
    assert small_dictionary_columns(pf, pf.schema_arrow.names) == []


@pytest.mark.parametrize("row_group_size", [None, 7_000])
def test_rows_equal_pyarrows_plain_read(row_group_size):
    t = sample()
    data = parquet(t, row_group_size=row_group_size)
    want = pq.read_table(pa.BufferReader(data))
    got = read_parquet(pa.BufferReader(data))
    assert got.schema == want.schema and got.equals(want)
    cols = ["rider", "fare", "absent"]
    got = read_parquet(pa.BufferReader(data), cols)
    assert got.column_names == ["rider", "fare"] and got.equals(want.select(["rider", "fare"]))


def test_kept_dictionaries_filter_then_decode_to_the_plain_rows():
    t = sample()
    data = parquet(t)
    kept = read_parquet(pa.BufferReader(data), keep_dictionaries=True)
    assert [pa.types.is_dictionary(kept.schema.field(c).type) for c in ("file", "city", "rider", "key")] \
        == [True, True, True, False]
    mask = pc.greater(pq.read_table(pa.BufferReader(data)).column("fare"), 0.3)
    want = pq.read_table(pa.BufferReader(data)).filter(mask)
    got = decode_dictionaries(kept.filter(mask))
    assert got.schema == want.schema and got.equals(want)


# --- copies: a column filled from another of equal values instead of decoded -----------------

def _shares_values(a: pa.ChunkedArray, b: pa.ChunkedArray) -> bool:
    """Whether two string columns are the same buffers (one filled from the other)."""
    return [c.buffers()[2].address for c in a.chunks] == [c.buffers()[2].address for c in b.chunks]


def test_a_copy_is_filled_from_its_source_when_the_statistics_agree():
    t = sample()
    t = t.append_column("rk", t.column("key"))
    data = parquet(t, row_group_size=20_000)
    got = read_parquet(pa.BufferReader(data), ["rk", "fare"], copies={"rk": "key"})
    assert got.column("rk").equals(t.column("key"))
    assert set(got.column_names) == {"rk", "fare", "key"}  # the source comes with it
    assert _shares_values(got.column("rk"), got.column("key"))
    # Not asked for: not read.
    assert read_parquet(pa.BufferReader(data), ["fare"], copies={"rk": "key"}).column_names == ["fare"]


@pytest.mark.parametrize("where", ["one row", "last row group only"])
def test_a_copy_whose_statistics_differ_from_its_source_is_decoded(where):
    """The guard: a file whose key column and record key differ (a writer that keyed rows some
    other way) is read as it is, not as the key generator says it should be."""
    t = sample()
    rk = t.column("key").to_pylist()
    if where == "one row":
        rk[0] = "zzzz-not-the-key"  # a new maximum: the first row group's statistics differ
    else:
        rk[-1] = "0000-not-the-key"
    t = t.append_column("rk", pa.array(rk))
    data = parquet(t, row_group_size=20_000)
    got = read_parquet(pa.BufferReader(data), ["rk", "key"], copies={"rk": "key"})
    assert got.column("rk").to_pylist() == rk
    assert not _shares_values(got.column("rk"), got.column("key"))


def test_a_copy_is_decoded_when_the_file_has_no_statistics():
    t = sample().select(["key", "fare"])
    t = t.append_column("rk", t.column("key"))
    data = parquet(t, write_statistics=False)
    got = read_parquet(pa.BufferReader(data), ["rk"], copies={"rk": "key"})
    assert got.column_names == ["rk"] and got.column("rk").equals(t.column("key"))


def test_iter_parquet_fills_copies_batch_by_batch():
    from lakehouse.storage.parquet import iter_parquet

    t = sample().select(["key", "fare"])
    t = t.append_column("rk", t.column("key"))
    data = parquet(t, row_group_size=20_000)
    parts = list(iter_parquet(pa.BufferReader(data), ["rk", "fare"], 7_000, copies={"rk": "key"}))
    assert len(parts) > 1 and all(_shares_values(p.column("rk"), p.column("key")) for p in parts)
    assert pa.concat_tables(parts).column("rk").equals(t.column("key"))
