"""Writes larger than ``write.task.max.size`` on every path that cannot append chunk by chunk
(issue 40, point 6): Copy-On-Write merges, the SIMPLE and BLOOM indexes (global too), the bucket
index on Copy-On-Write, bulk inserts and the replace operations go through
lakehouse.write.spill. The judge of each: the same batch written whole on a twin table (the
records, merged as Hudi merges them), and hudi-rs reading the chunked table."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import lakehouse
from lakehouse.write import spill
from tests.interop.hudi_oracle import canonical, hudi_read

SMALL = {"write.task.max.size": 0.25}  # MB: the batches below are 4-8x that
COLS = ["id", "city", "ts", "pad"]


def rows(ids, ts, city=None):
    ids = np.asarray(ids)
    return pa.table({"id": [f"k{i:07d}" for i in ids],
                     "city": city if city is not None else [["sf", "la", "ny"][i % 3] for i in ids],
                     "ts": pa.array(np.asarray(ts, dtype=np.int64) if np.ndim(ts) else np.full(len(ids), ts), pa.int64()),
                     "pad": [f"{'x' * 60}{i}" for i in ids]})


@pytest.fixture
def spilled(monkeypatch):
    """How many writes took the spilled path."""
    calls = []
    real = spill.write_spilled

    def counting(*a, **kw):
        calls.append(1)
        return real(*a, **kw)
    monkeypatch.setattr(spill, "write_spilled", counting)
    return calls


def twins(tmp_path, table_type, index, **kw):
    def make(name):
        return lakehouse.create_table(str(tmp_path / name), name="t", table_type=table_type,
                                      record_key="id", partition_by="city", ordering_field="ts",
                                      index=index, **kw)
    return make("chunked"), make("whole")


def same(chunked, whole, unique=True):
    got = canonical(chunked.read(), COLS)
    assert got == canonical(whole.read(), COLS)
    assert canonical(hudi_read(chunked.path), COLS) == got
    if not unique:  # insert and bulk_insert keep a stored key's second copy, as Hudi's do
        return
    keys = chunked.read(columns=["id", "city"])
    assert keys.num_rows == len(set(zip(keys.column("id").to_pylist(), keys.column("city").to_pylist())))


PATHS = [("COPY_ON_WRITE", "SIMPLE"), ("COPY_ON_WRITE", "BLOOM"), ("COPY_ON_WRITE", "GLOBAL_SIMPLE"),
         ("COPY_ON_WRITE", "BUCKET"), ("MERGE_ON_READ", "SIMPLE"), ("MERGE_ON_READ", "GLOBAL_BLOOM")]


@pytest.mark.parametrize("table_type,index", PATHS)
def test_an_upsert_larger_than_the_budget_makes_the_table_a_whole_write_makes(tmp_path, spilled, table_type, index):
    chunked, whole = twins(tmp_path, table_type, index)
    first = rows(range(6000), 1)
    # Updates of stored keys, new keys, and versions of one key in far-apart chunks: an older
    # one last (event-time ordering keeps ts=9), and a new key inserted then deleted.
    rng = np.random.default_rng(7)
    upd = rng.permutation(6000)[:4000]
    second = pa.concat_tables([rows(upd, 5), rows(range(6000, 9000), 5), rows([3], 9), rows([6001], 2)])
    third = rows(range(100, 200), 7)
    for t, opts in ((chunked, SMALL), (whole, {})):
        t.upsert(first, options=opts)
        t.upsert(second, options=opts)
        t.upsert(third, options=opts)
    assert second.nbytes > 2 * (1 << 20) // 4 and len(spilled) >= 2
    same(chunked, whole)
    got = {r["id"]: r["ts"] for r in chunked.read(columns=["id", "ts"]).to_pylist()}
    assert got["k0000003"] == 9 and got["k0006001"] == 5 and got["k0000150"] == 7


@pytest.mark.parametrize("table_type,index", [("COPY_ON_WRITE", "SIMPLE"), ("MERGE_ON_READ", "BLOOM"),
                                              ("COPY_ON_WRITE", "BUCKET")])
def test_deletes_and_a_reinsert_across_chunks(tmp_path, spilled, table_type, index):
    chunked, whole = twins(tmp_path, table_type, index)
    first = rows(range(8000), 1)
    # A new key inserted in an early chunk and deleted in a late one is not in the table; a
    # stored key deleted early and re-inserted late is.
    batch = pa.concat_tables([rows([20000], 3), rows([10], 3), rows(range(1000, 9000), 4),
                              rows([10], 5), rows([20000], 5)])
    deleted = pc.is_in(batch.column("id"), value_set=pa.array(["k0020000", "k0000010"]))
    flags = pa.array([d and i in (0, 1) for i, d in enumerate(deleted.to_pylist())])
    batch = batch.append_column("_hoodie_is_deleted", flags)
    for t, opts in ((chunked, SMALL), (whole, {})):
        t.upsert(first, options=opts)
        t.upsert(batch, options=opts)
        t.delete(rows(range(7000, 7500), 9).select(["id", "city", "ts"]), options=opts)
    assert len(spilled) >= 2
    same(chunked, whole)
    ids = set(chunked.read(columns=["id"]).column("id").to_pylist())
    assert "k0000010" in ids and "k0020000" in ids and "k0007100" not in ids


@pytest.mark.parametrize("table_type,index", [("COPY_ON_WRITE", "SIMPLE"), ("COPY_ON_WRITE", "BUCKET"),
                                              ("MERGE_ON_READ", "BUCKET")])
@pytest.mark.parametrize("op", ["bulk_insert", "insert", "insert_overwrite", "insert_overwrite_table"])
def test_inserts_and_overwrites_larger_than_the_budget(tmp_path, spilled, table_type, index, op):
    chunked, whole = twins(tmp_path, table_type, index)
    first = rows(range(3000), 1)
    batch = rows(range(3000, 10000), 2, city=["sf", "la"] * 3500)  # ny is left alone
    for t, opts in ((chunked, SMALL), (whole, {})):
        t.upsert(first, options=opts)
        getattr(t, op)(batch, options=opts)
    appends = table_type == "MERGE_ON_READ" and index == "BUCKET" and not op.startswith("insert_overwrite")
    assert len(spilled) >= 1 or appends  # (those append chunk by chunk: lakehouse.write.buffer)
    same(chunked, whole)


def test_a_merge_reads_a_large_base_file_a_piece_at_a_time(tmp_path, monkeypatch):
    """The merge handle holds its incoming records and a piece of the old file, not the file."""
    from lakehouse.read import file_slice_reader
    t = lakehouse.create_table(str(tmp_path / "t"), name="t", table_type="COPY_ON_WRITE", record_key="id",
                               ordering_field="ts")
    t.upsert(rows(range(20000), 1))  # one base file, written whole
    sizes = []
    real = file_slice_reader.iter_base_file

    def counting(*a, **kw):
        for piece in real(*a, **kw):
            sizes.append(piece.nbytes)
            yield piece
    monkeypatch.setattr("lakehouse.io.handles.iter_base_file", counting)
    t.upsert(rows(range(0, 20000, 7), 2), options=SMALL)
    assert len(sizes) > 4 and max(sizes) <= 1.5 * (1 << 16)  # a row group's worth at this budget
    got = t.read(columns=["id", "ts"])
    assert got.num_rows == 20000
    assert sorted(r["id"] for r in got.to_pylist() if r["ts"] == 2) == [f"k{i:07d}" for i in range(0, 20000, 7)]
    assert canonical(hudi_read(t.path), COLS) == canonical(t.read(), COLS)
    # The rewritten file: Hudi's footer over every piece (key range, bloom filter), one file.
    files = [f for f in (tmp_path / "t").rglob("*.parquet") if ".hoodie" not in str(f)]
    newest = max(files, key=lambda f: f.name.rsplit("_", 1)[-1])
    md = pq.ParquetFile(newest).metadata.metadata
    assert md[b"hoodie_min_record_key"] == b"k0000000" and md[b"hoodie_max_record_key"] == b"k0019999"
    seq = pq.read_table(newest, columns=["_hoodie_commit_seqno"]).column(0).to_pylist()
    assert len(set(seq)) == len(seq)


def _last_stats(t) -> dict:
    meta = t.active.commit_metadata(t.timeline.completed_writes().last)
    return {k: meta.total(k) for k in ("num_writes", "num_update_writes", "num_inserts", "num_deletes")}


def test_a_merge_larger_than_the_budget_holds_one_piece_of_its_records_at_a_time(tmp_path, monkeypatch):
    """A file group's records larger than an eighth of the budget are spilled again by the
    piece of the old file their key is in (a pass over its key column), and merged one piece's
    records at a time (Hudi's HoodieMergeHandle holds them in a spillable map): the same file,
    records and write statistics as the merge of the whole group."""
    chunked, whole = twins(tmp_path, "COPY_ON_WRITE", "SIMPLE")
    pieces, rests = [], []
    real_piece, real_rest = spill._Pieces.piece, spill._Pieces.rest

    def piece(self, index):
        out = real_piece(self, index)
        pieces.append((index, 0 if out is None else out.num_rows))
        return out

    def rest(self):
        for out in real_rest(self):
            rests.append(out.num_rows)
            yield out
    monkeypatch.setattr(spill._Pieces, "piece", piece)
    monkeypatch.setattr(spill._Pieces, "rest", rest)
    first = rows(range(20000), 1, city=["sf"] * 20000)  # one file group of many pieces
    rng = np.random.default_rng(3)
    upd = rng.permutation(20000)[:6000]
    second = pa.concat_tables([rows(upd, 5, city=["sf"] * 6000), rows(upd[:50], 4, city=["sf"] * 50),
                               rows(range(20000, 20100), 5, city=["sf"] * 100)])
    dels = pc.is_in(second.column("id"), value_set=pa.array([f"k{i:07d}" for i in upd[100:150]]))
    second = second.append_column("_hoodie_is_deleted", pc.and_(dels, pc.equal(second.column("ts"), 5)))
    stats = {}
    for t, opts in ((chunked, SMALL), (whole, {})):
        t.upsert(first)
        t.upsert(second, options=opts)
        stats[t.path] = _last_stats(t)
    assert len(pieces) > 4 and max(n for _, n in pieces) < 6000 // 3 and rests
    assert sum(n for _, n in pieces) + sum(rests) == 6000 + 100  # one record per key, every key once
    same(chunked, whole)
    assert stats[chunked.path] == stats[whole.path]
    assert stats[chunked.path]["num_deletes"] == 50 and stats[chunked.path]["num_update_writes"] == 5950
    got = {r["id"]: r["ts"] for r in chunked.read(columns=["id", "ts"]).to_pylist()}
    assert got[f"k{upd[0]:07d}"] == 5 and f"k{upd[120]:07d}" not in got and got["k0020050"] == 5
    files = [f for f in (tmp_path / "chunked").rglob("*.parquet") if ".hoodie" not in str(f)]
    newest = max(files, key=lambda f: f.name.rsplit("_", 1)[-1])
    seq = pq.read_table(newest, columns=["_hoodie_commit_seqno"]).column(0).to_pylist()
    assert len(set(seq)) == len(seq)


def test_a_base_file_holding_a_key_twice_is_merged_whole(tmp_path, monkeypatch):
    """Every stored copy of a key merges with its update (Hudi's merge handle looks each old
    record up): records cannot go to one piece when their key is in two, so such a group is
    merged whole, as before."""
    from lakehouse.io import handles
    chunked, whole = twins(tmp_path, "COPY_ON_WRITE", "SIMPLE")
    routed = []
    real = handles.base_file_pieces

    def spy(*a, **kw):
        out = real(*a, **kw)
        routed.append(out is not None)
        return out
    monkeypatch.setattr(spill, "base_file_pieces", spy)
    # Inserts of stored keys kept beside them (HoodieConcatHandle): the copies go last.
    dup = {"hoodie.merge.allow.duplicate.on.inserts": "true"}
    for t, opts in ((chunked, SMALL), (whole, {})):
        t.insert(rows(range(20000), 1, city=["sf"] * 20000))
        t.insert(rows([6, 19998], 1, city=["sf"] * 2), options=dup)
        assert t.read().num_rows == 20002
        t.upsert(rows(range(0, 20000, 3), 2, city=["sf"] * 6667), options=opts)
    assert routed == [False]
    same(chunked, whole, unique=False)
    got = chunked.read(columns=["id", "ts"]).to_pylist()
    assert sorted(r["ts"] for r in got if r["id"] == "k0000006") == [2, 2]
    assert sorted(r["ts"] for r in got if r["id"] == "k0019998") == [2, 2]


def test_a_log_append_larger_than_the_budget_goes_in_parts(tmp_path):
    """Merge-On-Read updates through the SIMPLE index larger than an eighth of the budget go
    to a file group's log in parts by key (each part's versions of a key reduced together), each
    in log files of its own with versions and sequence numbers going on: read as the whole
    write's, by lakehouse and hudi-rs."""
    chunked, whole = twins(tmp_path, "MERGE_ON_READ", "SIMPLE")
    first = rows(range(12000), 1, city=["sf"] * 12000)
    rng = np.random.default_rng(5)
    upd = rng.permutation(12000)[:8000]
    second = pa.concat_tables([rows(upd, 6, city=["sf"] * 8000), rows(upd[:500], 3, city=["sf"] * 500)])
    for t, opts in ((chunked, SMALL), (whole, {})):
        t.upsert(first)
        t.upsert(second, options=opts)
    same(chunked, whole)
    logs = sorted(f.name for f in (tmp_path / "chunked").rglob("*.log.*"))
    assert len(logs) > 2 and len({n.split(".log.")[1].split("_")[0] for n in logs}) == len(logs)
    assert len(sorted(f.name for f in (tmp_path / "whole").rglob("*.log.*"))) == 1
    assert _last_stats(chunked) == _last_stats(whole)
    seq = chunked.read(columns=["_hoodie_commit_seqno", "ts"])
    fresh = [s for s, ts in zip(seq.column(0).to_pylist(), seq.column(1).to_pylist()) if ts == 6]
    assert len(fresh) == len(set(fresh)) == 8000


def test_a_new_bucket_larger_than_the_budget_is_written_in_parts_to_one_file(tmp_path, monkeypatch):
    """A Copy-On-Write bucket with no file group yet (one file by Hudi's bucket index, however
    many records) takes its records in parts by key, each reduced on its own and added to the
    one new base file: the records, statistics and file count of the whole write."""
    from lakehouse.io import handles
    parts = []
    real = handles.create_base_file_in_parts

    def spy(ctx, **kw):
        def counted(it):
            for records, keys in it:
                parts.append(records.num_rows)
                yield records, keys
        return real(ctx, **{**kw, "parts": counted(kw["parts"])})
    monkeypatch.setattr(spill, "create_base_file_in_parts", spy)
    opts = {"hoodie.bucket.index.num.buckets": "2"}
    chunked, whole = twins(tmp_path, "COPY_ON_WRITE", "BUCKET", options=opts)
    batch = pa.concat_tables([rows(range(12000), 5, city=["sf"] * 12000),
                              rows(range(0, 12000, 3), 4, city=["sf"] * 4000)])  # older versions after
    for t, o in ((chunked, SMALL), (whole, {})):
        t.upsert(batch, options=o)
    assert len(parts) > 4 and max(parts) < 6000
    same(chunked, whole)
    assert _last_stats(chunked) == _last_stats(whole)
    files = [f for f in (tmp_path / "chunked").rglob("*.parquet") if ".hoodie" not in str(f)]
    assert len(files) == len([f for f in (tmp_path / "whole").rglob("*.parquet") if ".hoodie" not in str(f)]) == 2
    for f in files:
        seq = pq.read_table(f, columns=["_hoodie_commit_seqno"]).column(0).to_pylist()
        assert len(set(seq)) == len(seq)
    assert set(chunked.read(columns=["ts"]).column("ts").to_pylist()) == {5}


def test_a_bulk_insert_into_stored_buckets_writes_no_deletes(tmp_path, spilled):
    """A bulk insert writes its records and no deletes (Hudi's bulk insert takes no delete
    markers; WriteClient drops them): taken in chunks on the bucket index, whose groups merge
    into the stored buckets, a delete marker must not delete the stored record either (it did
    before lakehouse.write.spill dropped them: 600 rows fewer)."""
    chunked, whole = twins(tmp_path, "COPY_ON_WRITE", "BUCKET", options={"hoodie.bucket.index.num.buckets": "2"})
    batch = rows(range(3000, 9000), 2)
    batch = batch.append_column("_hoodie_is_deleted", pa.array([False] * 6000))
    marked = rows(range(0, 600), 3).append_column("_hoodie_is_deleted", pa.array([True] * 600))
    for t, opts in ((chunked, SMALL), (whole, {})):
        t.upsert(rows(range(3000), 1).append_column("_hoodie_is_deleted", pa.array([False] * 3000)))
        t.bulk_insert(pa.concat_tables([batch, marked]), options=opts)
    assert spilled
    same(chunked, whole)
    assert chunked.read().num_rows == 9000


def test_new_file_groups_roll_over_at_the_max_file_size(tmp_path, spilled):
    """Hudi's CopyOnWriteInsertHandler: a new file group is closed when full and the next one
    opened; sequence numbers go on across the pieces of one file."""
    t = lakehouse.create_table(str(tmp_path / "t"), name="t", table_type="COPY_ON_WRITE", record_key="id",
                               ordering_field="ts")
    opts = {**SMALL, "hoodie.copyonwrite.insert.auto.split": "false", "hoodie.copyonwrite.insert.split.size": "2500"}
    t.insert(rows(range(9000), 1), options=opts)
    assert spilled
    files = [f for f in (tmp_path / "t").rglob("*.parquet") if ".hoodie" not in str(f)]
    counts = sorted(pq.ParquetFile(f).metadata.num_rows for f in files)
    assert sum(counts) == 9000 and max(counts) == 2500 and len(files) >= 4
    for f in files:
        seq = pq.read_table(f, columns=["_hoodie_commit_seqno", "_hoodie_file_name"])
        assert len(set(seq.column(0).to_pylist())) == seq.num_rows
        assert set(seq.column(1).to_pylist()) == {f.name}
    assert canonical(hudi_read(t.path), COLS) == canonical(t.read(), COLS)


def test_a_failed_spilled_write_leaves_nothing_visible_and_no_spill(tmp_path, monkeypatch):
    import glob
    import os
    import tempfile
    from lakehouse.errors import WriteError
    t = lakehouse.create_table(str(tmp_path / "t"), name="t", table_type="COPY_ON_WRITE", record_key="id",
                               partition_by="city", ordering_field="ts")
    t.upsert(rows(range(3000), 1))
    before = canonical(t.read(), COLS)
    spills = set(glob.glob(os.path.join(tempfile.gettempdir(), "lakehouse-spill-*")))
    calls = []

    def failing(real):
        def boom(*a, **kw):
            out = real(*a, **kw)
            calls.append(1)
            if len(calls) == 2:
                raise OSError("disk full")  # after one file group was rewritten
            return out
        return boom
    # Groups are written whole (run_target) or, larger than an eighth of the budget, in parts.
    for name in ("run_target", "merge_base_file"):
        monkeypatch.setattr(spill, name, failing(getattr(spill, name)))
    with pytest.raises(WriteError, match="disk full"):
        t.upsert(rows(range(2000, 9000), 2), options=SMALL)
    monkeypatch.undo()
    assert canonical(t.read(), COLS) == before
    assert set(glob.glob(os.path.join(tempfile.gettempdir(), "lakehouse-spill-*"))) <= spills
    t.upsert(rows(range(2000, 9000), 2), options=SMALL)
    assert t.read().num_rows == 9000


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_an_ingest_larger_than_the_budget_reads_its_files_a_row_group_at_a_time(tmp_path, monkeypatch, table_type):
    """``ingest`` hands the landed parquet files to the write as one source (read a row group at
    a time, twice: to check, to write), not as one concatenated table; files may differ in
    columns, as concat_tables(promote_options="permissive") allows."""
    from lakehouse.sources.files import ingest
    from lakehouse.write import source as source_mod
    landing = tmp_path / "landing"
    landing.mkdir()
    a = rows(range(0, 5000), 3)
    b = rows(range(4000, 9000), 4).append_column("extra", pa.array(["e"] * 5000))
    pq.write_table(a, landing / "f1.parquet", row_group_size=1000)
    pq.write_table(b, landing / "f2.parquet", row_group_size=1000)
    chunked, whole = twins(tmp_path, table_type, None)
    seen = []
    real = source_mod.ParquetSource.chunks

    def spy(self, chunk_bytes):
        for c in real(self, chunk_bytes):
            seen.append(c.num_rows)
            yield c
    monkeypatch.setattr(source_mod.ParquetSource, "chunks", spy)
    ingest(chunked, str(landing), options=SMALL)
    assert seen and max(seen) <= 1000 and sum(seen) >= 2 * 10000  # checked, then written
    whole.upsert(pa.concat_tables([a, b], promote_options="permissive"))
    cols = COLS + ["extra"]
    assert canonical(chunked.read(), cols) == canonical(whole.read(), cols)
    assert canonical(hudi_read(chunked.path), cols) == canonical(chunked.read(), cols)
