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


def test_compaction_is_not_planned_below_a_live_write(tmp_path):
    t = make(tmp_path)
    t.upsert(rows(["k1"], v="base"))
    t.upsert(rows(["k1"], v="log"))
    w = t.upsert(rows(["k1"], v="W"), commit=False)
    result = t.schedule_compaction(force=True)
    assert result.instant is None and w in result.reason
    t.commit(w)  # the ingest is not failed by the service
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

    def lost(lease):
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
    # A single writer needs no atomic create; the same table opens for one writer.
    single = open_table(NoAtomicCreate(str(tmp_path / "t")),
                        {"hoodie.write.concurrency.mode": "SINGLE_WRITER"})
    single.upsert(rows(["k"]))
    assert not [p for p in (tmp_path / "eager").rglob("*") if p.is_file()]
