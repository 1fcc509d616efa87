"""lakehouse.inspect.alerts: each alert fires on the condition it names and is silent once the
service it asks for has run; thresholds follow Hudi's keys (hoodie.compact.inline.max.delta.commits,
hoodie.client.heartbeat.*, hoodie.cleaner.*), with injected clocks instead of waiting."""

from __future__ import annotations

import pyarrow as pa
import pytest

import lakehouse
from lakehouse import faults
from lakehouse.inspect.alerts import alerts
from lakehouse.inspect.health import history
from lakehouse.inspect.timeline import instant_facts
from lakehouse.timeline.instant_time import parse_instant_time


def _batch(keys, ts):
    return pa.table({"id": keys, "p": [f"p{k % 2}" for k in keys], "ts": [ts] * len(keys),
                     "v": [float(ts)] * len(keys)})


def _table(path, table_type="MERGE_ON_READ", **options):
    return lakehouse.create_table(str(path), name="t", table_type=table_type, record_key="id",
                                  partition_by="p", ordering_field="ts", options=options or None)


def _alerts(t, **kw):
    facts = instant_facts(t, archived=True)
    points = history(t, facts)["points"]
    return {a.kind: a for a in alerts(t, facts, points[-1] if points else None, **kw)}


def test_compaction_backlog_past_twice_the_trigger_until_compacted(tmp_path):
    t = _table(tmp_path / "t", **{"hoodie.compact.inline.max.delta.commits": 3})
    t.upsert(_batch(list(range(20)), 0))
    for n in range(5):
        t.upsert(_batch([1, 2, 3], n + 1))
    assert "compaction_backlog" not in _alerts(t)  # 5 waiting, twice the trigger is 6
    t.upsert(_batch([4], 9))
    a = _alerts(t)["compaction_backlog"]
    assert a.value == 6 and a.threshold == 6 and a.severity == "warning" and "compaction" in a.help
    # The registry's trigger (after_commits) wins over the table's option.
    assert _alerts(t, compaction_after=1)["compaction_backlog"].severity == "critical"  # 6 >= 4 x 1
    t.compact(force=True)
    assert "compaction_backlog" not in _alerts(t)


def test_a_dead_writers_instant_is_stuck_after_its_heartbeat_expires(tmp_path):
    # HoodieHeartbeatClient: expired after interval * (tolerable misses + 1).
    t = _table(tmp_path / "t", **{"hoodie.client.heartbeat.interval_in_ms": 10_000,
                                  "hoodie.client.heartbeat.tolerable.misses": 1})
    t.upsert(_batch(list(range(10)), 0))
    faults.activate("write.after_results", "raise")
    try:
        with pytest.raises(faults.InjectedFault):
            t.upsert(_batch([1], 1))
    finally:
        faults.reset()
    t = lakehouse.open_table(t.path)
    pending = t.timeline.pending().instants[0]
    started = parse_instant_time(pending.time).timestamp()
    assert "stuck_instant" not in _alerts(t, now=started + 5)
    a = _alerts(t, now=started + 3600)["stuck_instant"]
    assert a.instant == pending.time and a.threshold == 20 and "rollback" in a.help
    t.rollback(pending.time)
    assert "stuck_instant" not in _alerts(t, now=started + 3600)


@pytest.mark.parametrize("policy,key,retained,limit", [
    # CleanPlanner.getFilesToCleanKeepingLatestCommits also keeps the version before the earliest
    # retained commit: the first version becomes cleanable after retained + 2 commits.
    ("KEEP_LATEST_COMMITS", "hoodie.cleaner.commits.retained", 3, 4),
    ("KEEP_LATEST_FILE_VERSIONS", "hoodie.cleaner.fileversions.retained", 2, 2),
])
def test_clean_overdue_once_a_clean_would_delete_something(tmp_path, policy, key, retained, limit):
    t = _table(tmp_path / "t", "COPY_ON_WRITE", **{"hoodie.cleaner.policy": policy, key: retained})
    for n in range(limit + 1):
        t.upsert(_batch([1, 2], n))
        if n < limit:
            assert "clean_overdue" not in _alerts(t)
            assert not t.clean(dry_run=True).planned  # and indeed nothing is cleanable yet
    a = _alerts(t)["clean_overdue"]
    assert a.value == limit + 1 and a.threshold == limit and f"{key}={retained}" in a.message
    assert t.clean().files_deleted > 0  # the alert was right: there was something to clean
    assert "clean_overdue" not in _alerts(t)


def test_clean_overdue_by_hours(tmp_path):
    t = _table(tmp_path / "t", "COPY_ON_WRITE", **{"hoodie.cleaner.policy": "KEEP_LATEST_BY_HOURS",
                                                   "hoodie.cleaner.hours.retained": 1})
    for n in range(3):
        t.upsert(_batch([1], n))
    first, second, third = (parse_instant_time(i.time).timestamp() for i in t.timeline.completed().instants)
    assert "clean_overdue" not in _alerts(t, now=first + 1800)
    # CleanPlanner retains from the first commit after now - hours.retained, and the version
    # before it: with none after it (every commit older), a clean deletes nothing.
    assert "clean_overdue" not in _alerts(t, now=third + 7200)
    a = _alerts(t, now=(second + third) / 2 + 3600)["clean_overdue"]  # the third retained, and the second's version
    assert a.threshold == 3600 and "would delete 1 file(s)" in a.message


def test_commits_a_clean_cannot_act_on_are_not_overdue_and_the_help_cleans_as_the_dag_does(tmp_path):
    """A Merge-On-Read table's slices become cleanable only once a compaction is older than the
    retained commits; a clean before that finds nothing and writes no instant. The alert counted
    commits since the table began and could not be cleared ('clean overdue: 6 commits since the
    table began, with no clean', right after `make run`). It now also asks a dry-run plan, with
    the registry's options over the table's, as the service would; its help names the CLI with
    those options (the CLI otherwise plans with the table's own retention)."""
    registry = {"hoodie.cleaner.commits.retained": "2"}
    t = _table(tmp_path / "t")
    for n in range(6):
        t.upsert(_batch([1, 2], n))
    assert t.clean(options=registry).instant is None  # nothing to clean: no compaction yet
    assert "clean_overdue" not in _alerts(t, options=registry)
    t.compact(force=True)
    for n in range(6, 10):
        t.upsert(_batch([1, 2], n))
    a = _alerts(t, options=registry)["clean_overdue"]
    assert "a clean now would delete" in a.message
    assert f"lakehouse clean run {t.path} --option hoodie.cleaner.commits.retained=2" in a.help
    assert t.clean(options=registry).files_deleted > 0  # what the alert says to do
    assert "clean_overdue" not in _alerts(t, options=registry)
