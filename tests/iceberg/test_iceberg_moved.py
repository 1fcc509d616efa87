"""A table copied or moved after publishing: its Iceberg metadata named the files at the old
place. The next commit (or sync) publishes it afresh for the new location instead of skipping
with a log line, so Iceberg readers never get the original's rows or missing files."""

from __future__ import annotations

import shutil

import pyarrow as pa

import lakehouse
from lakehouse.iceberg import background, sync_iceberg
from tests.iceberg.iceberg_oracle import assert_every_snapshot_is_its_instant, static_table, sync_and_compare


def _batch(ids, ts):
    return pa.table({"id": [f"k{i}" for i in ids], "city": ["sf" if i % 2 else "la" for i in ids],
                     "ts": [ts] * len(ids)})


def _table(path):
    t = lakehouse.create_table(str(path), name="t", record_key="id", partition_by="city",
                               ordering_field="ts", table_type="COPY_ON_WRITE")
    t.upsert(_batch(range(6), 1))
    t.upsert(_batch(range(3, 9), 2))
    return t


def test_a_copied_table_is_published_for_its_own_location_at_its_next_commit(tmp_path):
    original = _table(tmp_path / "a")
    before = sync_iceberg(original.meta_client).metadata_location
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    copy = lakehouse.open_table(str(tmp_path / "b"))
    copy.upsert(_batch([20, 21], 3))  # its post-commit hook publishes
    res = sync_iceberg(copy.meta_client)
    st = static_table(res)
    assert st.metadata.location.rstrip("/") == copy.path.rstrip("/")
    assert all(task.file.file_path.startswith(copy.path) for task in st.scan().plan_files())
    sync_and_compare(copy, "the copy")
    assert len(assert_every_snapshot_is_its_instant(copy, res)) == 3
    # The original is untouched.
    assert sync_iceberg(original.meta_client).metadata_location == before
    sync_and_compare(original, "the original")


def test_a_moved_table_is_published_afresh_by_a_sync(tmp_path):
    _table(tmp_path / "a")
    background.wait_all()  # the publisher of its last commit may still write into it
    shutil.move(str(tmp_path / "a"), str(tmp_path / "moved"))
    t = lakehouse.open_table(str(tmp_path / "moved"))
    res = sync_iceberg(t.meta_client)
    assert static_table(res).metadata.location.rstrip("/") == t.path.rstrip("/")
    sync_and_compare(t, "the moved table")
    assert len(assert_every_snapshot_is_its_instant(t, res)) == 2
