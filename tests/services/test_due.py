"""lakehouse.services.due: a service said to be due is one its planner plans, commit after
commit; held against schedule_compaction and schedule_clustering themselves (the oracle), with
the trigger given as options, as the Airflow DAGs give the registry's."""

from __future__ import annotations

import pyarrow as pa
import pytest

import lakehouse
from lakehouse.services.due import clustering_due, compaction_due


def _batch(keys, ts):
    return pa.table({"id": keys, "p": [f"p{k % 2}" for k in keys], "ts": [ts] * len(keys)})


def test_compaction_is_due_exactly_when_its_planner_plans(tmp_path):
    """Follows Hudi's CompactionTriggerStrategy NUM_COMMITS (hoodie.compact.inline.max.delta.commits)."""
    t = lakehouse.create_table(str(tmp_path / "t"), name="t", table_type="MERGE_ON_READ", record_key="id",
                               partition_by="p", ordering_field="ts", index="BUCKET",
                               options={"hoodie.bucket.index.num.buckets": 1})
    opts = {"hoodie.compact.inline.max.delta.commits": "3"}
    seen = []
    for n in range(8):
        t.upsert(_batch(list(range(n, n + 4)), n))
        due = compaction_due(t, opts)
        planned = t.schedule_compaction(options=opts)
        assert due.due == planned.scheduled, (n, due, planned.reason)
        if not due.due:
            assert planned.reason == f"not yet: {due.reason}"  # the same counts, in the same words
        seen.append(due.due)
        if planned.scheduled:
            t.run_compaction(planned.instant)
            t.commit_compaction(planned.instant)
    assert seen == [False, False, True, False, False, True, False, False]
    assert compaction_due(t, opts).reason == "2 of 3 delta commits"


def test_compaction_by_log_bytes_is_left_to_the_planner(tmp_path):
    t = lakehouse.create_table(str(tmp_path / "t"), name="t", table_type="MERGE_ON_READ", record_key="id",
                               index="BUCKET", options={"hoodie.bucket.index.num.buckets": 1})
    t.upsert(pa.table({"id": [1]}))
    due = compaction_due(t, {"hoodie.compact.inline.trigger.strategy": "LOG_BYTES"})
    assert due.due and "planner decides" in due.reason


def test_nothing_to_compact_on_copy_on_write_or_with_services_off(tmp_path):
    cow = lakehouse.create_table(str(tmp_path / "cow"), name="cow", record_key="id")
    assert not compaction_due(cow).due
    mor = lakehouse.create_table(str(tmp_path / "mor"), name="mor", table_type="MERGE_ON_READ",
                                 record_key="id", index="BUCKET", options={"hoodie.bucket.index.num.buckets": 1})
    for n in range(6):
        mor.upsert(pa.table({"id": [n]}))
    assert not compaction_due(mor, {"hoodie.table.services.enabled": "false"}).due
    # Six delta commits, the default trigger's five: due, and the planner agrees.
    assert compaction_due(mor).due and mor.schedule_compaction().scheduled


@pytest.mark.parametrize("max_commits", [2, 3])
def test_clustering_is_due_exactly_when_its_planners_trigger_is_met(tmp_path, max_commits):
    """Follows Hudi's hoodie.clustering.async.max.commits. Due means the trigger is met: the
    planner may still find nothing worth clustering, and plans nothing when not due."""
    t = lakehouse.create_table(str(tmp_path / "t"), name="t", table_type="COPY_ON_WRITE", record_key="id",
                               partition_by="p", ordering_field="ts", index="SIMPLE")
    opts = {"hoodie.clustering.async.max.commits": str(max_commits),
            "hoodie.clustering.plan.strategy.small.file.limit": str(100 * 1024 * 1024)}
    for n in range(6):
        t.insert(_batch(list(range(10 * n, 10 * n + 10)), n))
        due = clustering_due(t, opts)
        planned = t.schedule_clustering(options=opts)
        assert due.due == (not planned.reason.startswith("not yet")), (n, due, planned.reason)
        assert due.due or not planned.scheduled
        if not due.due:
            assert planned.reason == f"not yet: {due.reason}"
        if planned.scheduled:
            t.run_clustering(planned.instant)
            t.commit_clustering(planned.instant)


def test_a_simple_bucket_table_never_clusters(tmp_path):
    t = lakehouse.create_table(str(tmp_path / "t"), name="t", record_key="id", index="BUCKET",
                               options={"hoodie.bucket.index.num.buckets": 2})
    assert not clustering_due(t).due
