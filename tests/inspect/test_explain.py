"""lakehouse.inspect.explain: what each instant did, from its timeline files, checked against
what the test wrote (the model) and against the files on disk."""

from __future__ import annotations

import pyarrow as pa
import pytest

import lakehouse
from lakehouse.errors import InstantNotFoundError
from lakehouse.inspect.explain import explain


def _batch(keys, ts):
    return pa.table({"id": keys, "p": [f"p{k % 2}" for k in keys], "ts": [ts] * len(keys),
                     "v": [float(ts)] * len(keys)})


def test_a_copy_on_write_upsert_rewrites_files_and_counts_its_records(tmp_path):
    t = lakehouse.create_table(str(tmp_path / "t"), name="t", table_type="COPY_ON_WRITE", record_key="id",
                               partition_by="p", ordering_field="ts")
    t.upsert(_batch(list(range(10)), 1))
    first = t.timeline.completed().instants[-1].time
    t.upsert(_batch([0, 1, 2, 20, 21], 2))  # 3 updates, 2 inserts; p0 gets 0, 2, 20; p1 gets 1, 21
    second = t.timeline.completed().instants[-1].time
    w = explain(t, first)["write"]
    assert {f["change"] for f in w["files"]} == {"added"} and sum(p["inserted"] for p in w["partitions"]) == 10
    w = explain(t, second)["write"]
    parts = {p["partition"]: p for p in w["partitions"]}
    assert parts["p0"]["updated"] == 2 and parts["p1"]["updated"] == 1
    assert sum(p["inserted"] for p in parts.values()) == 2
    # Copy on write: each touched file group's base file rewritten, its previous version named.
    assert {f["change"] for f in w["files"]} == {"rewritten"} and all(f["previous"] == first for f in w["files"])
    assert all((tmp_path / "t" / f["path"]).exists() for f in w["files"])
    with pytest.raises(InstantNotFoundError):
        explain(t, "20200101000000000")


def test_a_log_append_reads_as_appended_not_as_updates(tmp_path):
    """A Merge-On-Read upsert into existing buckets appends to their logs without looking the keys
    up: Hudi's HoodieAppendHandle counts all its records as updates (the view said '1,771
    updated, 0 inserted' while the table grew). They read as appended; a new bucket's records
    are inserts."""
    t = lakehouse.create_table(str(tmp_path / "t"), name="t", table_type="MERGE_ON_READ", record_key="id",
                               partition_by="p", ordering_field="ts")
    first = t.upsert(_batch(list(range(10)), 1))
    second = t.upsert(_batch(list(range(5, 15)), 2))  # 5 updates, 5 new keys
    parts = explain(t, first)["write"]["partitions"]
    assert sum(p["inserted"] for p in parts) == 10 and not any(p["appended"] or p["updated"] for p in parts)
    parts = explain(t, second)["write"]["partitions"]
    assert sum(p["appended"] for p in parts) == 10 and not any(p["updated"] or p["inserted"] for p in parts)
    assert {f["change"] for f in explain(t, second)["write"]["files"]} == {"log"}


def test_a_rollback_names_the_failed_write_and_the_files_it_removed(tmp_path):
    t = lakehouse.create_table(str(tmp_path / "t"), name="t", table_type="MERGE_ON_READ", record_key="id",
                               partition_by="p", ordering_field="ts")
    t.upsert(_batch(list(range(10)), 1))
    t.upsert(_batch([1, 2, 3], 2), commit=False)  # its commit step never runs
    t = lakehouse.open_table(t.path)
    failed = t.timeline.pending().instants[0].time
    pending = explain(t, failed)
    assert pending["instant"]["state"] == "inflight" and "not committed" in pending["note"]
    written = [f["path"] for f in pending["write"]["files"]]
    assert written and all((tmp_path / "t" / p).exists() for p in written)
    t.rollback(failed)
    rb = next(i for i in t.timeline.completed().instants if str(i.action) == "rollback")
    e = explain(t, rb.time)["rollback"]
    assert e["rolled_back"] == [failed] and e["files_deleted"] == len(written)
    assert not any((tmp_path / "t" / p).exists() for p in written)
