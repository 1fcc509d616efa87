"""Table.scan (lakehouse/read/scan.py): the whole result, the batch stream, DuckDB and Polars all
return the rows the model holds (and hudi-rs reads), on MOR and COW, partitioned or not, with
pending logs, deletes and a pending compaction; a key filter on a bucket-index table reads only
the key's bucket (lakehouse/read/pruning.py)."""

from __future__ import annotations

import os

import re

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pyarrow.compute as pc
import pytest

import lakehouse
from lakehouse.bucket_identifier import bucket_ids
from lakehouse.errors import SchemaError
from lakehouse.file_group.naming import bucket_of_file_id
from lakehouse.iceberg import background
from tests.interop.hudi_oracle import hudi_read
from tests.model.oracle import Oracle

COLS = ["id", "p", "ts", "fare"]


def rows(ids, ts, fare=None) -> pa.Table:
    ids = list(ids)
    return pa.table({"id": [f"k{i:04d}" for i in ids], "p": [f"p{i % 3}" for i in ids],
                     "ts": pa.array([ts] * len(ids), pa.int64()),
                     "fare": pa.array([float(i) if fare is None else fare for i in ids])})


def history(path, table_type, *, partitioned=True, pending_compaction=True, options=None, **kw):
    """A table and the model of it: inserts, updates and deletes in the logs (MOR), and a
    compaction left pending with logs written under it."""
    t = lakehouse.create_table(str(path), name="s", table_type=table_type, record_key="id",
                               partition_by="p" if partitioned else None, ordering_field="ts",
                               options={"hoodie.bucket.index.num.buckets": 4, **(options or {})}, **kw)
    model = Oracle("EVENT_TIME_ORDERING", "id", "ts")

    def upsert(batch):
        model.upsert(batch.to_pylist(), t.upsert(batch))

    upsert(rows(range(300), 1))
    upsert(rows(range(0, 300, 7), 2, fare=-1.0))
    keys = rows(range(0, 300, 11), 0).select(["id", "p"])
    model.delete(keys.column("id").to_pylist(), t.delete(keys))
    if table_type == "MERGE_ON_READ" and pending_compaction:
        assert t.schedule_compaction(force=True)
    upsert(rows(range(250, 400), 3, fare=5.0))
    return t, model


def want(model, filt=None) -> list[dict]:
    out = [{c: r[c] for c in COLS} for r in model.rows()]
    return sorted((r for r in out if filt is None or filt(r)), key=lambda r: r["id"])


def got(table: pa.Table) -> list[dict]:
    return sorted(table.select(COLS).to_pylist(), key=lambda r: r["id"])


CASES = [("MERGE_ON_READ", True), ("MERGE_ON_READ", False), ("COPY_ON_WRITE", True), ("COPY_ON_WRITE", False)]


@pytest.mark.interop
@pytest.mark.parametrize("table_type,partitioned", CASES)
def test_every_form_of_a_scan_returns_the_models_rows(tmp_path, table_type, partitioned):
    t, model = history(tmp_path / "t", table_type, partitioned=partitioned)
    scan = t.scan()
    expected = want(model)
    assert got(scan.to_arrow()) == expected == got(t.read())
    assert got(pa.Table.from_batches(list(scan.to_batches()), scan.schema)) == expected
    assert got(scan.to_arrow_batch_reader().read_all()) == expected
    assert got(pa.table(scan.to_pandas())) == expected
    assert got(scan.to_polars().to_arrow()) == expected
    if table_type == "MERGE_ON_READ":
        # hudi-rs 0.5 skips logs under a pending compaction (README): judged once it commits.
        t.run_compaction()
        t.commit_compaction()
        assert got(t.scan().to_arrow()) == expected
    assert got(hudi_read(t.storage.root)) == expected
    # SQL over the scan as an Arrow stream, and over a registered result.
    n, total = duckdb.sql("SELECT count(*), sum(fare) FROM scan WHERE fare >= 0").fetchone()
    kept = [r for r in expected if r["fare"] >= 0]
    assert (n, total) == (len(kept), pytest.approx(sum(r["fare"] for r in kept)))
    con = scan.to_duckdb("trips")
    assert con.sql("SELECT count(*) FROM trips").fetchone()[0] == len(expected)


@pytest.mark.parametrize("table_type", ["MERGE_ON_READ", "COPY_ON_WRITE"])
def test_a_stream_holds_a_batch_of_base_records_at_a_time_and_returns_the_same_rows(tmp_path, table_type, monkeypatch):
    """to_batches streams each file slice's base file a batch at a time past its log records (the
    merge of the base records they touch comes last), so pieces stay small whatever the file's
    size; the rows equal to_arrow's and the model's for every batch size, with pending logs,
    deletes, a pending compaction and a filter."""
    from lakehouse.read import reader as reader_mod
    t, model = history(tmp_path / "t", table_type)
    assert any(s.base_file or (s.previous and s.previous.base_file) for s in t.scan().plan_files())
    for batch_rows in (1, 7, 64, 1 << 20):
        monkeypatch.setattr(reader_mod.TableReader.stream, "__defaults__", (batch_rows, 0))
        scan = t.scan(columns=COLS, filters=[("fare", ">=", 0.0)])
        parts = list(scan.to_batches())
        # Slices read ahead on threads: the same pieces, in the same order.
        monkeypatch.setattr(reader_mod.TableReader.stream, "__defaults__", (batch_rows, 3))
        assert [b.to_pylist() for b in t.scan(columns=COLS, filters=[("fare", ">=", 0.0)]).to_batches()] == \
            [b.to_pylist() for b in parts]
        assert got(pa.Table.from_batches(parts, scan.schema)) == want(model, lambda r: r["fare"] >= 0), batch_rows
        assert got(scan.to_arrow()) == got(pa.Table.from_batches(parts, scan.schema))
        whole = t.scan(columns=COLS)
        assert got(pa.Table.from_batches(list(whole.to_batches()), whole.schema)) == want(model)
    # Slice by slice: every piece but the last (the merge) is a batch of at most batch_rows base
    # records, and the pieces hold what the slice's whole read holds.
    from lakehouse.read.file_slice_reader import iter_file_slice, read_file_slice
    from lakehouse.read.reader import TableReader
    reader = TableReader(t.storage, t.config, t.active)
    plan = reader.plan_snapshot(columns=COLS)
    ctx = reader.slice_context(plan)
    pieces_seen = 0
    for fs in plan.slices:
        pieces = list(iter_file_slice(fs, ctx, 7))
        assert all(p.num_rows <= 7 for p in pieces[:-1])
        pieces_seen += len(pieces)
        whole_slice = read_file_slice(fs, ctx)
        assert got(pa.concat_tables(pieces)) == got(whole_slice) if pieces else whole_slice.num_rows == 0
    assert pieces_seen > 3 * len(plan.slices)


def test_a_scan_keeps_its_plan(tmp_path):
    t, model = history(tmp_path / "t", "MERGE_ON_READ")
    scan = t.scan(columns=COLS)
    before = got(scan.to_arrow())
    t.upsert(rows(range(500, 510), 9))
    assert got(scan.to_arrow()) == before  # the table as it was when the scan was planned
    assert len(got(t.scan(columns=COLS).to_arrow())) == len(before) + 10


@pytest.mark.parametrize("table_type", ["MERGE_ON_READ", "COPY_ON_WRITE"])
def test_a_key_filter_reads_only_the_keys_bucket(tmp_path, table_type):
    """The SIMPLE engine's buckets (consistent hashing's: tests/services/test_bucket_resize.py)."""
    t, model = history(tmp_path / "t", table_type, index="BUCKET", options={"hoodie.index.bucket.engine": "SIMPLE"})
    every = t.scan().plan_files()
    for keys in (["k0007"], ["k0008", "k0301", "nope"], []):
        f = [("id", "in", keys)] if len(keys) != 1 else [("id", "=", keys[0])]
        scan = t.scan(columns=COLS, filters=f)
        buckets = set(bucket_ids([pa.chunked_array([pa.array(keys, pa.string())])], 4).tolist()) if keys else set()
        files = scan.plan_files()
        assert {bucket_of_file_id(s.file_id) for s in files} <= buckets
        in_buckets = {(s.partition, s.file_id) for s in every if bucket_of_file_id(s.file_id) in buckets}
        # The bucket's file groups, less base-file-only slices whose key range rules the keys
        # out (lakehouse.read.data_skipping).
        read = {(s.partition, s.file_id) for s in files}
        assert read <= in_buckets
        for s in every:
            if (s.partition, s.file_id) in in_buckets - read:
                assert not s.log_files
                held = pq.read_table(os.path.join(t.path, s.base_file.path), columns=["id"]).column("id")
                assert not set(held.to_pylist()) & set(keys)
        assert got(scan.to_arrow()) == want(model, lambda r: r["id"] in keys)
    # A key filter ANDed with another still prunes; an expression or an OR-able filter does not.
    assert len(t.scan(filters=[("id", "=", "k0007"), ("fare", ">", 0.0)]).plan_files()) < len(every)
    assert len(t.scan(filters=pc.field("id") == "k0007").plan_files()) == len(every)


def test_a_composite_key_prunes_once_every_key_field_is_pinned(tmp_path):
    t = lakehouse.create_table(str(tmp_path / "t"), name="c", table_type="MERGE_ON_READ",
                               record_key="id,n", ordering_field="ts", index="BUCKET",
                               options={"hoodie.bucket.index.num.buckets": 8})
    t.upsert(pa.table({"id": [f"k{i % 20}" for i in range(200)], "n": list(range(200)),
                       "ts": [1] * 200}))
    every = t.scan().plan_files()
    pinned = t.scan(filters=[("id", "=", "k3"), ("n", "in", [3, 23, 43])])
    assert 0 < len(pinned.plan_files()) < len(every)
    assert sorted(pinned.to_arrow().column("n").to_pylist()) == [3, 23, 43]
    assert len(t.scan(filters=[("id", "=", "k3")]).plan_files()) == len(every)


@pytest.mark.parametrize("table_type", ["MERGE_ON_READ", "COPY_ON_WRITE"])
def test_pinned_keys_skip_base_files_their_footers_rule_out(tmp_path, monkeypatch, table_type):
    """On any index, the keys a filter pins are looked up in each base file's footer (key range,
    bloom filter) first; only files that may hold one are decoded, and only their key column
    unless they do. Keys updated, deleted, inserted in logs and absent read as the model says."""
    from lakehouse.read import file_slice_reader as fsr

    t, model = history(tmp_path / "t", table_type, index="BLOOM", pending_compaction=False)
    reads: list[tuple[str, tuple]] = []
    real = fsr.read_base_file
    monkeypatch.setattr(fsr, "read_base_file", lambda storage, path, schema, columns, *a, **kw: (
        reads.append((path, tuple(columns or ()))), real(storage, path, schema, columns, *a, **kw))[1])
    bases = {s.base_file.path for s in t.scan().plan_files() if s.base_file is not None}
    assert len(bases) > 2
    for keys in (["k0007"], ["k0011"], ["k0301"], ["k0008", "nope"], ["nope"]):
        reads.clear()
        rows_read = got(t.scan(columns=COLS, filters=[("id", "in", keys)]).to_arrow())
        assert rows_read == want(model, lambda r: r["id"] in keys), keys
        full = {p for p, cols in reads if cols != ("_hoodie_record_key",)}
        assert len({p for p, _ in reads}) < len(bases), f"{keys}: every base file was opened"
        assert len(full) <= 1, f"{keys}: decoded {full}"


def test_a_damaged_base_file_is_named_when_a_key_lookup_reads_its_footer(tmp_path):
    """The footer check of a key lookup meets a base file that is not parquet: a CorruptFileError
    naming it, as a full read of that file gives, not pyarrow's error."""
    from lakehouse.errors import CorruptFileError
    t, _ = history(tmp_path / "t", "COPY_ON_WRITE", index="BLOOM", pending_compaction=False)
    base = next(s.base_file for s in t.scan().plan_files() if s.base_file is not None)
    background.wait_all()  # the Iceberg publisher reads the footers of the files it adds
    (tmp_path / "t" / base.path).write_bytes(b"not parquet")
    for scan in (t.scan(filters=[("id", "in", ["k0007", "k0008", "nope"])]), t.scan()):
        with pytest.raises(CorruptFileError, match=re.escape(str(base.name))):
            scan.to_arrow()


def test_other_indexes_are_not_pruned_by_key(tmp_path):
    t, model = history(tmp_path / "t", "COPY_ON_WRITE", index="SIMPLE")
    scan = t.scan(filters=[("id", "=", "k0007")])
    assert len(scan.plan_files()) == len(t.scan().plan_files())
    assert got(scan.to_arrow()) == want(model, lambda r: r["id"] == "k0007")


def test_bad_filters_are_typed_errors_naming_the_column(tmp_path):
    t, _ = history(tmp_path / "t", "MERGE_ON_READ")
    with pytest.raises(SchemaError, match="'nope'"):
        t.scan(filters=[("nope", "=", 1)]).to_arrow()
    with pytest.raises(SchemaError, match="ts is int64"):
        t.scan(filters=[("ts", "=", "x")]).to_arrow_batch_reader()
    with pytest.raises(SchemaError, match="nope"):
        t.scan(columns=["id", "nope"]).plan_files()
