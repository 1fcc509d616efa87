"""Whole tables on S3: the same operations on an s3:// table and on a local one give the same
table (rows read back by lakehouse's reader, the same timeline, the same cleaning), and nothing of
a failed write is left on S3."""

from __future__ import annotations

import pyarrow as pa
import pytest

import lakehouse
from lakehouse import faults
from lakehouse.faults import InjectedFault
from lakehouse.storage import get_storage
from lakehouse.storage.s3 import S3Storage
from tests.services.test_clean import batch, history

COLS = ["id", "city", "ts", "v"]


def _rows(table) -> list[dict]:
    return sorted(table.read(columns=COLS).to_pylist(), key=lambda r: (r["city"], r["id"]))


def _data_files(storage) -> set[str]:
    return {i.path for i in storage.list("", recursive=True)
            if not i.is_dir and not i.path.startswith(".hoodie/")}


def scenario(storage, table_type: str) -> dict:
    """Create, write, delete, compact, fail a write and roll it back, clean; what came out."""
    out: dict = {}
    t = lakehouse.create_table(storage, name="s3t", table_type=table_type, record_key="id",
                               partition_by="city", ordering_field="ts")
    history(t)  # inserts and upserts in two partitions; MOR: two compactions in between
    t.delete(pa.table({"id": ["b", "y"], "city": ["sf", "la"]}))
    t.upsert(pa.concat_tables([batch(["c", "f"], 10), batch(["z"], 10, "la")]))
    out["after_writes"] = _rows(t)
    if t.config.is_mor:
        scheduled = t.schedule_compaction(force=True)
        assert scheduled.scheduled, scheduled
        executed = t.run_compaction(scheduled.instant)
        assert executed.failed == 0, executed
        t.commit_compaction(scheduled.instant)
        out["after_compaction"] = _rows(t)
    before = _data_files(storage)
    faults.activate("write.mid_data_file", "raise")  # dies halfway through a data file
    try:
        with pytest.raises(InjectedFault):
            t.upsert(batch(["a", "new"], 11))
    finally:
        faults.reset()
    # Not compared: local storage keeps the torn file for the rollback; S3 never uploads it.
    out["torn_files"] = sorted(_data_files(storage) - before)
    failed = t.timeline.pending().last.time
    out["visible_during_failed_write"] = _rows(t)
    t.rollback(failed)
    out["failed_write_files_left"] = sorted(_data_files(storage) - before)
    cleaned = t.clean(options={"hoodie.cleaner.commits.retained": 1})
    out["cleaned_files"] = cleaned.files_deleted
    out["rows"] = _rows(lakehouse.open_table(storage))
    out["timeline"] = [(str(i.action), str(i.state)) for i in t.timeline.instants]
    return out


@pytest.mark.parametrize("table_type", ["MERGE_ON_READ", "COPY_ON_WRITE"])
def test_table_on_s3_matches_the_same_table_on_local_storage(tmp_path, s3_uri, s3_options,
                                                             table_type):
    s3 = get_storage(s3_uri, s3_options)
    assert isinstance(s3, S3Storage)
    on_s3 = scenario(s3, table_type)
    local = scenario(get_storage(str(tmp_path / "t")), table_type)
    assert on_s3.pop("torn_files") == [] and local.pop("torn_files")
    assert on_s3 == local
    ids = [(r["city"], r["id"]) for r in on_s3["rows"]]
    assert ("sf", "b") not in ids and ("la", "y") not in ids and ("la", "z") in ids
    assert not any(r["id"] == "new" for r in on_s3["rows"])
    assert on_s3["failed_write_files_left"] == [] and on_s3["cleaned_files"] > 0
    # The table is found again from its URI alone (the environment names the server).
    assert _rows(lakehouse.open_table(s3_uri)) == on_s3["rows"]


@pytest.mark.parametrize("table_type", ["MERGE_ON_READ", "COPY_ON_WRITE"])
def test_iceberg_metadata_on_s3_reads_like_the_table(s3_uri, s3_options, table_type):
    """Every commit on S3 published Iceberg metadata there; pyiceberg, reading it through its own
    S3 client, gets lakehouse's read-optimized rows."""
    from pyiceberg.table import StaticTable

    from lakehouse.iceberg import ICEBERG_ROOT
    from tests.iceberg.iceberg_oracle import assert_same_table, view_read
    storage = get_storage(s3_uri, s3_options)
    scenario(storage, table_type)
    table = lakehouse.open_table(storage)
    ice = StaticTable.from_metadata(storage.uri(ICEBERG_ROOT), properties=dict(s3_options))
    assert_same_table(ice.scan().to_arrow(), view_read(table), f"{table_type} on S3")
    assert ice.current_snapshot().summary["hudi.instant"] == table.timeline.completed_writes().last.time
