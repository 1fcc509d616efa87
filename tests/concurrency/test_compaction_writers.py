"""Compaction under several writers (issue 40, point 4): planned past writes in flight, as Hudi's
ScheduleCompactionActionExecutor plans under OCC, with the overlap settled at the writers'
conflict check (Hudi's SimpleConcurrentFileWritesConflictResolutionStrategy takes compactions
planned after a write started as candidates). Before, every scheduling call that found a write
in flight made no plan, and a dead writer held compaction back until its heartbeat expired."""

from __future__ import annotations

import threading

import pyarrow as pa
import pytest

from lakehouse.errors import CommitConflictError
from lakehouse.io.markers import Markers
from lakehouse.services.compaction.plan import read_plan
from lakehouse.table import create_table, open_table
from lakehouse.timeline.instant import Action
from tests.concurrency.test_writers import WRITERS, make
from tests.concurrency.writers import expected_state, run_writer
from tests.interop.hudi_oracle import canonical, hudi_read

N = 10  # commits per writer thread
OCC = {"hoodie.write.concurrency.mode": "OPTIMISTIC_CONCURRENCY_CONTROL",
       "hoodie.cleaner.policy.failed.writes": "LAZY"}


def rows(keys, v):
    return pa.table({"id": keys, "v": [v] * len(keys)})


def state(t):
    return {r["id"]: r["v"] for r in t.read(columns=["id", "v"]).to_pylist()}


def test_a_plan_is_made_past_a_write_in_flight_and_the_write_yields(tmp_path):
    t = create_table(str(tmp_path / "t"), name="t", record_key="id", table_type="MERGE_ON_READ",
                     options={**OCC, "hoodie.bucket.index.num.buckets": "4"})
    keys = [f"k{i}" for i in range(40)]
    t.upsert(rows(keys, "a"))
    t.upsert(rows(keys[:20], "b"))
    in_flight = open_table(t.path).upsert(rows(keys, "c"), commit=False)  # logs on every bucket
    theirs = {m.data_path for m in Markers(t.storage, in_flight).all()}
    assert theirs
    scheduled = t.schedule_compaction(force=True)
    assert scheduled.scheduled, scheduled.reason
    plan = read_plan(t.meta_client, scheduled.instant)
    planned = {f"{o.partition_path}/{n}" if o.partition_path else n
               for o in plan.operations for n in o.delta_file_paths}
    assert planned and not planned & theirs, "the plan holds the in-flight write's own log files"
    with pytest.raises(CommitConflictError, match=f"compaction {scheduled.instant}") as e:
        open_table(t.path).commit(in_flight)
    assert e.value.winner == scheduled.instant
    assert t.timeline.get(in_flight) is None  # rolled back: nothing of it visible
    model = {k: "b" if i < 20 else "a" for i, k in enumerate(keys)}
    assert state(t) == model
    t.run_compaction(scheduled.instant)
    assert t.commit_compaction(scheduled.instant).committed
    open_table(t.path).upsert(rows(keys, "c"))  # the write again, onto the new slices
    model = dict.fromkeys(keys, "c")
    assert state(t) == model
    assert canonical(hudi_read(t.path), ["id", "v"]) == canonical(t.read(), ["id", "v"])


def test_a_write_that_started_after_the_plan_commits(tmp_path):
    t = create_table(str(tmp_path / "t"), name="t", record_key="id", table_type="MERGE_ON_READ",
                     options={**OCC, "hoodie.bucket.index.num.buckets": "2"})
    t.upsert(rows(["a", "b", "c"], "0"))
    t.upsert(rows(["a", "b", "c"], "1"))
    scheduled = t.schedule_compaction(force=True)
    assert scheduled.scheduled, scheduled.reason
    open_table(t.path).upsert(rows(["a", "b"], "2"))  # saw the plan: logs on the new slices
    t.run_compaction(scheduled.instant)
    t.commit_compaction(scheduled.instant)
    assert state(t) == {"a": "2", "b": "2", "c": "1"}
    assert canonical(hudi_read(t.path), ["id", "v"]) == canonical(t.read(), ["id", "v"])


def test_one_writer_still_waits_for_its_write(tmp_path):
    """With one writer the commit checks nothing against a plan, so the plan waits (as before)."""
    t = create_table(str(tmp_path / "t"), name="t", record_key="id", table_type="MERGE_ON_READ")
    t.upsert(rows(["a"], "1"))
    pending = t.upsert(rows(["a"], "2"), commit=False)
    res = t.schedule_compaction(force=True)
    assert not res.scheduled and pending in res.reason


def test_compaction_keeps_up_with_writers_that_never_pause(tmp_path):
    """Four writer threads commit back to back while compaction is scheduled, executed and
    committed in a loop: plans are made and committed, and every acknowledged write is in the
    table exactly once (the writers' oracle)."""
    make(tmp_path, "MERGE_ON_READ", "BUCKET", retries=8)
    # A slow writer keeps a write in flight all along (its own partition): before, no plan was
    # made while it was there.
    slow = open_table(str(tmp_path))
    slow_rows = pa.table({"id": ["s1"], "p": ["slow"], "ts": [0], "v": ["slow"]})
    in_flight = slow.upsert(slow_rows, commit=False)
    reports: list[dict] = []
    threads = [threading.Thread(target=run_writer, args=(open_table(str(tmp_path)), w, N, False,
                                                         reports.append)) for w in range(WRITERS)]
    for th in threads:
        th.start()
    compactor = open_table(str(tmp_path))
    made, refused = 0, []
    while any(th.is_alive() for th in threads):
        res = compactor.compact(force=True)
        if getattr(res, "committed", False):
            made += 1
        else:
            refused.append(res.reason)
    for th in threads:
        th.join()
    assert made >= 2, f"{made} compaction(s) committed; refusals: {refused[:5]}"
    slow.commit(in_flight)  # no plan covered its file group: it commits
    assert len(reports) == WRITERS * N
    acked = [r for r in reports if "instant" in r]
    table = open_table(str(tmp_path))
    writes = {i.time for i in table.timeline.completed().filter(
        actions=[Action.DELTA_COMMIT])} - set(table.timeline.compaction_times)
    assert writes == {a["instant"] for a in acked} | {in_flight}
    got: dict[tuple[str, str], str] = {}
    for r in table.read().to_pylist():
        assert (r["p"], r["id"]) not in got, f"{r['id']} is in the table twice"
        got[(r["p"], r["id"])] = r["v"]
    assert got == {**expected_state(acked, False), ("slow", "s1"): "slow"}
    assert not table.timeline.pending_compactions()
    assert len(table.timeline.completed().filter(actions=[Action.COMMIT])) == made
    assert canonical(hudi_read(str(tmp_path)), ["id", "v"]) == canonical(table.read(), ["id", "v"])
