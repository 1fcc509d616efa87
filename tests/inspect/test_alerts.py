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
    t.upsert(_batch([1], 0))
    t.upsert(_batch([1], 1))
    first = parse_instant_time(t.timeline.completed().instants[0].time).timestamp()
    assert "clean_overdue" not in _alerts(t, now=first + 1800)
    assert _alerts(t, now=first + 7200)["clean_overdue"].threshold == 3600
