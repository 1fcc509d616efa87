"""Iceberg metadata published by every commit, compaction, clean and rollback on its own (no
sync call), checked with pyiceberg; a publish that fails never fails the commit, and the next
one catches up."""

from __future__ import annotations

import pyarrow as pa
import pytest

import lakehouse
from lakehouse import faults
from lakehouse.iceberg import ICEBERG_ROOT
from tests.iceberg.iceberg_oracle import (assert_every_snapshot_is_its_instant, assert_same_table,
                                          iceberg_read, static_table, view_read)


def batch(ids, ts, city="paris"):
    return pa.table({"id": ids, "city": [city] * len(ids), "ts": [ts] * len(ids),
                     "v": [f"v{ts}"] * len(ids)})


def check(table, what):
    """pyiceberg, from the table's Iceberg folder alone, reads what lakehouse reads."""
    location = table.storage.uri(ICEBERG_ROOT)
    ice = iceberg_read(location)
    ours = view_read(table)
    assert_same_table(ice, ours, what)
    return static_table(location)


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_every_completed_instant_publishes_its_snapshot(tmp_path, table_type):
    table = lakehouse.create_table(str(tmp_path), name="hook", table_type=table_type,
                                   record_key="id", partition_by="city", ordering_field="ts",
                                   options={"hoodie.cleaner.commits.retained": "1"})
    table.upsert(batch(["a", "b"], 1))
    check(table, "after the first commit")
    table.upsert(batch(["b", "c"], 2, city="rome"))
    table.delete(pa.table({"id": ["a"], "city": ["paris"]}))
    check(table, "after upserts and a delete")
    if table_type == "MERGE_ON_READ":
        table.compact(force=True)
        st = check(table, "after compaction")
        assert st.properties["lakehouse.iceberg.view"] == "read_optimized"  # the default
    table.upsert(batch(["c"], 3, city="rome"))
    table.clean()
    st = check(table, "after a clean")
    assert_every_snapshot_is_its_instant(table, table.storage.uri(ICEBERG_ROOT))
    last = table.timeline.completed_writes().last.time
    assert st.current_snapshot().summary["hudi.instant"] == last
    table.rollback()  # the latest completed write
    st = check(table, "after rolling the latest write back")
    assert st.current_snapshot().summary["hudi.instant"] != last


def test_it_can_be_turned_off(tmp_path):
    table = lakehouse.create_table(str(tmp_path), name="off", record_key="id", partition_by="city",
                                   ordering_field="ts",
                                   options={"hoodie.meta.sync.iceberg.enabled": "false"})
    table.upsert(batch(["a"], 1))
    assert not table.storage.exists(ICEBERG_ROOT)


@pytest.mark.iceberg_failure_ok
def test_a_failed_publish_never_fails_the_commit_and_the_next_catches_up(tmp_path, monkeypatch, caplog):
    table = lakehouse.create_table(str(tmp_path), name="late", record_key="id",
                                   partition_by="city", ordering_field="ts")
    import lakehouse.iceberg.publish as publish
    real = publish.sync_iceberg
    monkeypatch.setattr(publish, "sync_iceberg", lambda t: (_ for _ in ()).throw(OSError("store down")))
    first = table.upsert(batch(["a"], 1))
    assert table.timeline.is_completed(first) and "store down" in caplog.text
    assert not table.storage.exists(ICEBERG_ROOT)
    monkeypatch.setattr(publish, "sync_iceberg", real)
    # A crash half way through publishing (manifests written, no metadata version) is the same.
    faults.activate("iceberg.mid_publish", "raise")
    try:
        with pytest.raises(faults.InjectedFault):
            table.upsert(batch(["b"], 2))
    finally:
        faults.reset()
    table.upsert(batch(["c"], 3))
    check(table, "after catching up")
    ids = assert_every_snapshot_is_its_instant(table, table.storage.uri(ICEBERG_ROOT))
    assert first in ids and len(ids) == 3
