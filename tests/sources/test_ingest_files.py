"""Ingesting landed files exactly once, through crashes at every point of the write."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pyarrow.parquet as pq
import pytest

import lakehouse
from lakehouse.faults import ENV
from lakehouse.sources import demo
from lakehouse.sources.files import CHECKPOINT_KEY, ingest, last_checkpoint
from tests.interop.hudi_oracle import hudi_read

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLS = ["trip_id", "event_ts", "fare"]
STREAM = demo.DemoStream(rows=120, seed=3)


def new_table(path):
    return lakehouse.create_table(str(path), name="trips", table_type="MERGE_ON_READ", index="BUCKET",
                                  schema=demo.SCHEMA, options={"hoodie.bucket.index.num.buckets": 2},
                                  **demo.TABLE_OPTIONS)


def rows(t):
    return sorted(tuple(r[c] for c in COLS) for r in t.read(columns=COLS).to_pylist())


def reference(tmp_path, src):
    """The same files applied one at a time, in order, by the Python API."""
    t = new_table(tmp_path / "ref")
    for name in sorted(os.listdir(src)):
        t.upsert(pq.read_table(str(src / name)))
    return rows(t)


def test_demo_stream_is_deterministic_and_realistic():
    a, b = STREAM.batch(3), STREAM.batch(3)
    assert a.equals(b)
    deleted = a.filter(a.column("_hoodie_is_deleted"))
    assert deleted.num_rows > 0
    earlier = {r["trip_id"]: r["city"] for n in range(3) for r in STREAM.batch(n).to_pylist()}
    repeats = [r for r in a.to_pylist() if r["trip_id"] in earlier]
    assert repeats and all(earlier[r["trip_id"]] == r["city"] for r in repeats)


def test_each_batch_is_applied_once(tmp_path):
    src = tmp_path / "in"
    demo.write_batches(str(src), 2, STREAM)
    t = new_table(tmp_path / "t")
    r1 = ingest(t, str(src))
    assert r1.files == 2 and r1.committed
    assert ingest(t, str(src)).instant is None  # nothing new
    demo.write_batches(str(src), 1, STREAM)
    r3 = ingest(t, str(src))
    assert r3.files == 1 and r3.checkpoint.endswith("batch-000002.parquet")
    assert rows(t) == reference(tmp_path, src)
    assert last_checkpoint(t).name == "batch-000002.parquet"
    meta = t.active.commit_metadata(t.timeline.completed_writes().last)
    assert meta.extra_metadata[CHECKPOINT_KEY] == r3.checkpoint
    h = hudi_read(tmp_path / "t")
    assert sorted(tuple(r[c] for c in COLS) for r in h.select(COLS).to_pylist()) == rows(t)


@pytest.mark.parametrize("point", ["write.after_requested", "write.mid_data_file", "write.after_results",
                                   "commit.before_complete", "commit.after_complete"])
def test_a_crashed_ingest_rerun_applies_each_batch_exactly_once(tmp_path, point):
    src = tmp_path / "in"
    demo.write_batches(str(src), 1, STREAM)
    t = new_table(tmp_path / "t")
    ingest(t, str(src))
    demo.write_batches(str(src), 2, STREAM)
    code = textwrap.dedent(f"""
        import lakehouse
        from lakehouse.sources.files import ingest
        ingest(lakehouse.open_table({str(tmp_path / "t")!r}), {str(src)!r})
    """)
    env = dict(os.environ, **{ENV: f"{point}:kill"}, PYTHONPATH=REPO)
    assert subprocess.run([sys.executable, "-c", code], env=env, timeout=120).returncode == -9
    t = lakehouse.open_table(str(tmp_path / "t"))
    again = ingest(t, str(src))
    assert (again.instant is None) == (point == "commit.after_complete")
    assert rows(t) == reference(tmp_path, src)
    assert ingest(t, str(src)).instant is None


def test_phase_one_left_uncommitted_is_redone_not_doubled(tmp_path):
    src = tmp_path / "in"
    demo.write_batches(str(src), 2, STREAM)
    t = new_table(tmp_path / "t")
    first = ingest(t, str(src), commit=False)      # the commit task never ran
    second = ingest(t, str(src), commit=False)     # the next run takes the same files again
    assert second.files == first.files == 2
    t.commit(second.instant)
    assert rows(t) == reference(tmp_path, src)


def test_a_file_landing_with_an_older_modification_time_is_still_taken_once(tmp_path):
    """Hudi's DFS source (DFSPathSelector.getNextFilePathsAndMaxModificationTime) takes files
    newer than the checkpoint's modification time, so a file copied in with its old time kept
    (``cp -p``, a restored backup) was never ingested. lakehouse decides by name: the manifest the
    last ingest commit names lists every file taken."""
    from lakehouse.sources.files import MANIFEST_KEY, ingested_names
    src = tmp_path / "in"
    demo.write_batches(str(src), 2, STREAM)
    t = new_table(tmp_path / "t")
    assert ingest(t, str(src)).files == 2
    demo.write_batches(str(src), 1, STREAM)
    old = os.path.getmtime(src / "batch-000000.parquet") - 3600
    os.utime(src / "batch-000002.parquet", (old, old))  # landed late, with an old time
    res = ingest(t, str(src))
    assert res.files == 1 and res.checkpoint.endswith("batch-000001.parquet")  # the watermark stays
    assert ingest(t, str(src)).instant is None
    want = reference(tmp_path, src)
    assert rows(t) == want
    meta = t.active.commit_metadata(t.timeline.completed_writes().last)
    assert ingested_names(t, lakehouse.storage.get_storage(str(src)).uri()) == \
        {f"batch-00000{i}.parquet" for i in range(3)}
    assert meta.extra_metadata[MANIFEST_KEY].startswith(".hoodie/.aux/lakehouse/ingest/")
    # A rolled-back ingest brings its files back: the manifest before it is the current one.
    t.rollback()
    again = ingest(t, str(src))
    assert again.files == 1 and rows(t) == want


def test_a_csv_value_that_does_not_fit_names_its_column(tmp_path):
    """Arrow numbers CSV columns from 0 ("In CSV column #1" is the second): the error names the
    column as the file's header does, and its place counted from 1."""
    import pyarrow as pa
    from lakehouse.errors import SchemaError
    from lakehouse.sources.files import read_file
    path = tmp_path / "in.csv"
    path.write_text("id,n,s\na,1,x\nb,zz,y\n")
    with pytest.raises(SchemaError) as e:
        read_file(str(path), schema=pa.schema([("id", pa.string()), ("n", pa.int64()), ("s", pa.string())]))
    assert "column 'n' (the 2nd): CSV conversion error to int64: invalid value 'zz'" in e.value.message
    assert "#1" not in e.value.message
