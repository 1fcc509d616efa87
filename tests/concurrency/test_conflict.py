"""Conflict detection at commit, lazy rollback with heartbeats, the lock at publish, and the
commit whose answer was lost: each step of two writers interleaved by hand."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakehouse.concurrency.heartbeat import heartbeat_path
from lakehouse.errors import (CommitConflictError, CommitOutcomeUnknownError, ConfigError,
                              LockLostError, StorageOutcomeUnknownError)
from lakehouse.storage.local import LocalStorage
from lakehouse.table import create_table, open_table
from lakehouse.timeline.instant import Action

OCC = {"hoodie.write.concurrency.mode": "OPTIMISTIC_CONCURRENCY_CONTROL",
       "hoodie.write.num.retries.on.conflict.failures": "0"}


def rows(ids, part="a", v="x", ts=1):
    return pa.table({"id": ids, "p": [part] * len(ids), "ts": [ts] * len(ids), "v": [v] * len(ids)})


def make(path, *, table_type="MERGE_ON_READ", index="SIMPLE", **extra):
    create_table(str(path), name="t", record_key="id", partition_by="p", ordering_field="ts",
                 table_type=table_type, index=index, merge_mode="COMMIT_TIME_ORDERING",
                 options={**OCC, **extra})
    return open_table(str(path))


def snapshot(path) -> dict[str, str]:
    out = {}
    for r in open_table(str(path)).read().to_pylist():
        assert (r["p"], r["id"]) not in out, f"{r['id']} is in the table twice"
        out[(r["p"], r["id"])] = r["v"]
    return out


def pending_times(table) -> set[str]:
    return {i.time for i in table.timeline.pending().filter(actions=[Action.DELTA_COMMIT, Action.COMMIT])}


@pytest.mark.parametrize("table_type", ["MERGE_ON_READ", "COPY_ON_WRITE"])
def test_overlapping_file_groups_conflict_and_name_the_winner(tmp_path, table_type):
    t = make(tmp_path, table_type=table_type)
    t.upsert(rows(["k1", "k2"], v="base"))
    a = t.upsert(rows(["k1"], v="A"), commit=False)
    b = t.upsert(rows(["k2"], v="B"), commit=False)  # same file group as A's update
    assert pending_times(t) == {a, b}, "a live writer's instant was rolled back"
    t.commit(a)
    with pytest.raises(CommitConflictError) as e:
        t.commit(b)
    err = e.value
    assert err.winner == a and len(err.file_groups) == 1 and err.file_groups[0][0] == "a"
    assert a in str(err) and "Help:" in str(err)
    assert b not in {i.time for i in t.timeline}, "the losing instant stays on the timeline"
    assert snapshot(tmp_path) == {("a", "k1"): "A", ("a", "k2"): "base"}
    # Nothing of the loser is left: its files were rolled back.
    assert not [p for p in tmp_path.rglob(f"*{b}*") if ".hoodie" not in p.parts]


def test_disjoint_writes_both_commit(tmp_path):
    t = make(tmp_path)
    t.upsert(rows(["k1"], part="a", v="base"))
    t.upsert(rows(["k2"], part="b", v="base"))
    a = t.upsert(rows(["k1"], part="a", v="A"), commit=False)
    b = t.upsert(rows(["k2"], part="b", v="B"), commit=False)
    t.commit(b)
    t.commit(a)
    assert snapshot(tmp_path) == {("a", "k1"): "A", ("b", "k2"): "B"}


def test_the_same_new_key_inserted_into_two_new_file_groups_conflicts(tmp_path):
    """Hudi's file-level check lets both commit and leaves the key twice; lakehouse refuses."""
    t = make(tmp_path)
    a = t.upsert(rows(["new", "x1"], v="A"), commit=False)
    b = t.upsert(rows(["new", "x2"], v="B"), commit=False)
    t.commit(a)
    with pytest.raises(CommitConflictError) as e:
        t.commit(b)
    assert e.value.winner == a and e.value.keys == ("new",) and not e.value.file_groups
    assert snapshot(tmp_path) == {("a", "new"): "A", ("a", "x1"): "A"}


def test_a_global_index_sees_the_same_key_inserted_into_two_partitions(tmp_path):
    t = make(tmp_path, index="GLOBAL_SIMPLE")
    a = t.upsert(rows(["k"], part="a", v="A"), commit=False)
    b = t.upsert(rows(["k"], part="b", v="B"), commit=False)
    t.commit(a)
    with pytest.raises(CommitConflictError, match="same record key"):
        t.commit(b)
    assert snapshot(tmp_path) == {("a", "k"): "A"}


def test_retries_redo_a_conflicting_write_on_the_new_state(tmp_path):
    t = make(tmp_path, **{"hoodie.write.num.retries.on.conflict.failures": "2",
                          "hoodie.write.commit.retry.min_wait_ms": "1"})
    t.upsert(rows(["k1", "k2"], v="base"))
    a = t.upsert(rows(["k1"], v="A"), commit=False)
    sleeps = []
    client = t._client(None)
    import lakehouse.write.client as wc
    real = wc.WriteClient.write_prepared

    def commit_a_first(self, prepared, **kw):
        # The other writer commits while ours is between phase 1 and its commit.
        inst = real(self, prepared, **kw)
        if not sleeps:
            sleeps.append(inst)
            t.commit(a)
        return inst
    wc.WriteClient.write_prepared = commit_a_first
    try:
        b = client.write(rows(["k2"], v="B"), "upsert")
    finally:
        wc.WriteClient.write_prepared = real
    assert sleeps and b != sleeps[0] and b > a, "the write was not redone under a new instant"
    assert snapshot(tmp_path) == {("a", "k1"): "A", ("a", "k2"): "B"}


def test_a_delta_commit_after_a_compaction_plan_does_not_conflict_with_it(tmp_path):
    t = make(tmp_path)
    t.upsert(rows(["k1", "k2"], v="base"))
    t.upsert(rows(["k1"], v="log"))
    plan = t.schedule_compaction(force=True).instant
    w = t.upsert(rows(["k2"], v="W"), commit=False)  # onto the slice the compaction makes
    assert w > plan
    t.run_compaction(plan)
    t.commit_compaction(plan)
    t.commit(w)
    assert snapshot(tmp_path) == {("a", "k1"): "log", ("a", "k2"): "W"}


def test_compaction_is_planned_past_a_live_write_which_yields(tmp_path):
    """Hudi's rule under OCC (issue 40): the plan does not wait for the write in flight; the write,
    whose logs sit on the slice the plan replaces, yields at its commit and is written again
    (tests/concurrency/test_compaction_writers.py covers the rest)."""
    t = make(tmp_path)
    t.upsert(rows(["k1"], v="base"))
    t.upsert(rows(["k1"], v="log"))
    w = t.upsert(rows(["k1"], v="W"), commit=False)
    result = t.schedule_compaction(force=True)
    assert result.instant is not None
    with pytest.raises(CommitConflictError, match=f"compaction {result.instant}"):
        t.commit(w)
    t.run_compaction(result.instant)
    t.commit_compaction(result.instant)
    t.upsert(rows(["k1"], v="W"))
    assert snapshot(tmp_path) == {("a", "k1"): "W"}


def test_only_writes_whose_heartbeat_expired_are_rolled_back(tmp_path):
    t = make(tmp_path)
    live = t.upsert(rows(["k1"], part="a", v="live"), commit=False)
    dead = t.upsert(rows(["k2"], part="b", v="dead"), commit=False)
    # The dead writer's process is gone: no more beats, and the last one is old.
    t.heartbeats.stop(dead, delete=False)
    t.storage.write(heartbeat_path(dead), b'{"ts": 0}')
    other = open_table(str(tmp_path))
    other.upsert(rows(["k3"], part="c", v="other"))
    assert live in pending_times(t) and dead not in {i.time for i in t.timeline}
    t.commit(live)
    assert snapshot(tmp_path) == {("a", "k1"): "live", ("c", "k3"): "other"}
    assert not t.storage.exists(heartbeat_path(live)), "a committed write keeps its heartbeat"


def test_a_writer_that_lost_the_lock_publishes_nothing(tmp_path, monkeypatch):
    t = make(tmp_path)
    a = t.upsert(rows(["k1"], v="A"), commit=False)

    def lost(lease, **kw):
        raise LockLostError("lease taken over", help="retry")
    monkeypatch.setattr(t.transactions.provider, "check", lost)
    with pytest.raises(LockLostError):
        t.commit(a)
    assert a in pending_times(t)
    monkeypatch.undo()
    t.commit(a)
    assert snapshot(tmp_path) == {("a", "k1"): "A"}


class LosingAnswers(LocalStorage):
    """Creates the completed instant file (or not) and then loses the answer."""

    def __init__(self, root, *, lands: bool) -> None:
        super().__init__(root)
        self.lands = lands
        self.armed = False

    def create(self, path, data):
        if self.armed and path.endswith((".deltacommit", ".commit")):
            self.armed = False
            if self.lands:
                super().create(path, data)
            raise StorageOutcomeUnknownError(f"{path}: connection reset", help="check the file")
        return super().create(path, data)


@pytest.mark.parametrize("lands", [True, False])
def test_a_lost_commit_answer_is_settled_by_looking_never_by_guessing(tmp_path, lands):
    make(tmp_path)
    storage = LosingAnswers(str(tmp_path), lands=lands)
    t = open_table(storage)
    t.upsert(rows(["k1"], v="base"))
    a = t.upsert(rows(["k1"], v="A"), commit=False)
    storage.armed = True
    if lands:
        t.commit(a)  # it landed: the commit reports success, once
    else:
        with pytest.raises(CommitOutcomeUnknownError, match=f"commit\\('{a}'\\)"):
            t.commit(a)
        assert a in pending_times(t), "an instant whose outcome is unknown was rolled back"
        assert snapshot(tmp_path) == {("a", "k1"): "base"}
        t.commit(a)  # asking again settles it
    assert snapshot(tmp_path) == {("a", "k1"): "A"}
    assert [i.time for i in t.timeline.completed()].count(a) == 1


def test_concurrency_settings_are_checked_before_anything_is_written(tmp_path):
    with pytest.raises(ConfigError, match="EAGER"):
        make(tmp_path / "eager", **{"hoodie.cleaner.policy.failed.writes": "EAGER"})
    with pytest.raises(ConfigError, match="min_wait_ms"):
        make(tmp_path / "waits", **{"hoodie.write.commit.retry.min_wait_ms": "5000",
                                    "hoodie.write.commit.retry.max_wait_ms": "10"})
    t = make(tmp_path / "t")
    with pytest.raises(ConfigError, match="every writer"):
        t.upsert(rows(["k"]), options={"hoodie.write.concurrency.mode": "SINGLE_WRITER"})

    class NoAtomicCreate(LocalStorage):
        atomic_create = False
    with pytest.raises(ConfigError, match="no atomic create"):
        open_table(NoAtomicCreate(str(tmp_path / "t")))
    # One process may not opt out of the lock on a table several writers share.
    with pytest.raises(ConfigError, match="several writers"):
        open_table(str(tmp_path / "t"), {"hoodie.write.concurrency.mode": "SINGLE_WRITER"})
    # A single writer needs no atomic create.
    create_table(str(tmp_path / "single"), name="t", record_key="id", partition_by="p",
                 ordering_field="ts")
    single = open_table(NoAtomicCreate(str(tmp_path / "single")))
    single.upsert(rows(["k"]))
    assert not [p for p in (tmp_path / "eager").rglob("*") if p.is_file()]


def expire(table, instant):
    """The writer of ``instant`` died: no more beats, and the last one is long past."""
    table.heartbeats.stop(instant, delete=False)
    table.storage.write(heartbeat_path(instant), b'{"ts": 0}')


@pytest.mark.parametrize("when", ["before the commit step", "while it waits for the lock"])
def test_a_write_rolled_back_while_it_waited_is_never_committed(tmp_path, monkeypatch, when):
    from contextlib import contextmanager

    from lakehouse.errors import TimelineError
    t = make(tmp_path)
    t.upsert(rows(["k1"], v="base"))
    a = t.upsert(rows(["k1"], v="A"), commit=False)
    expire(t, a)  # phase 1's process is gone; the commit step has not started yet

    def other_writer():  # it takes A for dead and rolls it back
        open_table(str(tmp_path)).upsert(rows(["k9"], part="z", v="other"))
    if when == "before the commit step":
        other_writer()
    else:
        real = t.transactions.lock

        @contextmanager
        def late(_real=real):
            other_writer()  # after the commit's own checks, before it holds the lock
            monkeypatch.setattr(t.transactions, "lock", _real)
            with _real() as lease:
                yield lease
        monkeypatch.setattr(t.transactions, "lock", late)
        monkeypatch.setattr(t.heartbeats, "start", lambda instant: None)  # still looks dead
    with pytest.raises(TimelineError, match="rolled back"):
        t.commit(a)
    assert not t.timeline.is_completed(a)
    assert snapshot(tmp_path) == {("a", "k1"): "base", ("z", "k9"): "other"}


def test_a_write_whose_rollback_is_under_way_is_never_committed(tmp_path):
    from lakehouse import faults
    from lakehouse.errors import TimelineError
    t = make(tmp_path)
    t.upsert(rows(["k1"], v="base"))
    a = t.upsert(rows(["k1"], v="A"), commit=False)
    expire(t, a)
    faults.activate("rollback.mid_delete", "raise")  # the recovering writer dies mid-rollback
    try:
        with pytest.raises(faults.InjectedFault):
            open_table(str(tmp_path)).upsert(rows(["k9"], part="z", v="other"))
    finally:
        faults.reset()
    from lakehouse.errors import WriteError
    with pytest.raises((TimelineError, WriteError)):  # files gone, or the rollback found
        t.commit(a)
    assert not t.timeline.is_completed(a)
    assert snapshot(tmp_path) == {("a", "k1"): "base"}


def test_a_commit_step_in_a_new_process_keeps_the_write_alive(tmp_path):
    t = make(tmp_path)
    a = t.upsert(rows(["k1"], v="A"), commit=False)
    expire(t, a)
    # The commit step beats again before anything else, so a writer starting meanwhile leaves
    # the write alone; here: the commit itself goes through.
    t.commit(a)
    assert snapshot(tmp_path) == {("a", "k1"): "A"}
    assert not t.storage.exists(heartbeat_path(a))


def test_recovery_never_deletes_the_heartbeat_of_a_write_found_alive(tmp_path, monkeypatch):
    t = make(tmp_path)
    live = t.upsert(rows(["k1"], v="live"), commit=False)
    other = open_table(str(tmp_path))
    real = type(other.heartbeats).is_expired
    looks = iter([True])  # looks dead at first glance (outside the lock), alive under it

    def is_expired(self, instant):
        return next(looks, False) if instant == live else real(self, instant)
    monkeypatch.setattr(type(other.heartbeats), "is_expired", is_expired)
    other.upsert(rows(["k9"], part="z", v="other"))
    assert t.storage.exists(heartbeat_path(live)), "a live writer's heartbeat was deleted"
    monkeypatch.undo()
    t.commit(live)
    assert snapshot(tmp_path) == {("a", "k1"): "live", ("z", "k9"): "other"}


def test_rollback_never_deletes_a_log_file_another_writer_holds(tmp_path):
    from lakehouse.io.markers import Markers, MarkerType
    t = make(tmp_path)
    t.upsert(rows(["k1"], v="base"))
    t.upsert(rows(["k1"], v="A"))  # a log file of A's, version 1 of the slice
    (log,) = [p for p in tmp_path.joinpath("a").iterdir() if ".log." in p.name]
    b = t.upsert(rows(["k2"], part="b", v="B"), commit=False)
    # B had meant to create the same name (a stale view) and died after its marker.
    Markers(t.storage, b).create("a", log.name, MarkerType.CREATE)
    expire(t, b)
    t.rollback(b)
    assert log.exists(), "rolling B back deleted A's committed log file"
    assert snapshot(tmp_path) == {("a", "k1"): "A"}


def test_a_rollback_of_what_a_write_read_is_a_conflict(tmp_path):
    from lakehouse.errors import TimelineError
    from lakehouse.services.rollback import rollback_instant
    t = make(tmp_path, table_type="COPY_ON_WRITE")
    t.upsert(rows(["k0"], v="base"))
    undone = t.upsert(rows(["k1"], v="T"))
    seen_before = t.timeline  # what a rollback that raced the write had looked at
    w = t.upsert(rows(["k0"], v="W"), commit=False)  # its merge copied k1 from T's base file
    with pytest.raises(TimelineError, match="pending"):
        t.rollback(undone)  # under the lock it sees the write and refuses
    with t.exclusive():  # the race, forced: the rollback acts on what it saw before the write
        rollback_instant(t.meta_client, seen_before.get(undone), seen_before)
    with pytest.raises(CommitConflictError, match="undid") as e:
        t.commit(w)
    assert e.value.winner != undone  # the rollback instant
    assert snapshot(tmp_path) == {("a", "k0"): "base"}, "the rolled-back k1 came back"


class ProcessLock:
    """A lock provider outside the store (one process here): what a store without an atomic
    create needs for several writers."""

    _lock = __import__("threading").Lock()

    def __init__(self, storage, config) -> None:
        self.n = 0

    def acquire(self, timeout_s=None):
        from lakehouse.concurrency.lock import Lease
        if not self._lock.acquire(timeout=timeout_s if timeout_s is not None else -1):
            from lakehouse.errors import LockTimeoutError
            raise LockTimeoutError("busy", help="retry")
        self.n += 1
        return Lease(self.n, "me", "t", float("inf"))

    def renew(self, lease):
        return lease

    def check(self, lease):
        pass

    def release(self, lease):
        self._lock.release()


def test_a_store_without_atomic_create_takes_a_lock_provider_from_outside(tmp_path):
    class NoAtomicCreate(LocalStorage):
        atomic_create = False
    create_table(str(tmp_path), name="t", record_key="id", partition_by="p", ordering_field="ts",
                 options={**OCC, "hoodie.write.lock.provider":
                          "tests.concurrency.test_conflict.ProcessLock"})
    t = open_table(NoAtomicCreate(str(tmp_path)))
    assert isinstance(t.transactions.provider, ProcessLock)
    t.upsert(rows(["k1"], v="A"))
    assert snapshot(tmp_path) == {("a", "k1"): "A"}
    with pytest.raises(ConfigError, match="cannot be imported"):
        open_table(str(tmp_path), {"hoodie.write.lock.provider": "no_such_module.Lock"}).upsert(rows(["k"]))


def test_clean_and_compaction_planning_roll_back_a_dead_writers_write(tmp_path):
    """Hudi's LAZY failed-writes policy rolls back writes whose heartbeat expired when the table
    is cleaned (BaseHoodieTableServiceClient.clean -> CleanerUtils.rollbackFailedWrites); a
    compaction planned with the dead write pending would otherwise wait for the next write. A
    live writer's pending write is left alone by both."""
    t = make(tmp_path)
    t.upsert(rows(["k1", "k2"], v="base"))
    t.upsert(rows(["k1"], v="more"))
    dead = t.upsert(rows(["k2"], v="dead"), commit=False)
    live = open_table(str(tmp_path)).upsert(rows(["k3"], part="b", v="live"), commit=False)
    expire(t, dead)
    # Planned past the writes in flight (issue 40): the dead one rolled back first...
    planned = t.schedule_compaction(force=True)
    assert planned.scheduled and dead not in pending_times(t)
    assert live in pending_times(t)  # ...the live one left alone
    t.commit(live)  # its file group is not in the plan
    t.run_compaction(planned.instant)
    t.commit_compaction(planned.instant)
    dead2 = t.upsert(rows(["k1"], v="dead2"), commit=False)
    expire(t, dead2)
    t.clean()
    assert dead2 not in pending_times(t) and t.timeline.get(dead2) is None
    assert snapshot(tmp_path) == {("a", "k1"): "more", ("a", "k2"): "base", ("b", "k3"): "live"}


def test_a_lost_commit_answer_of_a_write_committed_in_the_same_call_is_settled_by_asking_again(tmp_path):
    """A write committed in the same call keeps its results in memory only (as Hudi's write
    client does): when the answer to its completion is lost, asking its client to commit the
    instant again still finds them, and settles it."""
    import re
    make(tmp_path)
    storage = LosingAnswers(str(tmp_path), lands=False)
    t = open_table(storage)
    t.upsert(rows(["k1"], v="base"))
    storage.armed = True
    with pytest.raises(CommitOutcomeUnknownError) as e:
        t.upsert(rows(["k1"], v="A"))
    a = re.search(r"commit\('(\d+)'\)", e.value.help).group(1)
    assert a in pending_times(t) and snapshot(tmp_path) == {("a", "k1"): "base"}
    t.commit(a)
    assert snapshot(tmp_path) == {("a", "k1"): "A"}
