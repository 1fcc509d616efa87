"""One writer (the default mode) with the commit step and the table services in other
processes, as the Airflow DAGs run them: the steps that must not interleave take the table lock
(lakehouse.meta_client.TableMetaClient.exclusive), each test interleaving two of them at the
point where, without it, committed data was lost or undone data came back."""

from __future__ import annotations

import os
import threading
import time

import pyarrow as pa
import pytest

import lakehouse
from lakehouse.iceberg import background
import lakehouse.file_group.view as view_mod
import lakehouse.services.restore as restore_mod
import lakehouse.services.rollback as rollback_mod
import lakehouse.write.view as write_view_mod
from lakehouse.errors import LockLostError, TimelineError
from lakehouse.timeline.active import ActiveTimeline
from tests.concurrency.aside import Aside
from tests.interop.hudi_oracle import hudi_read


def _table(path, **options):
    return lakehouse.create_table(str(path), name="s", table_type="MERGE_ON_READ", record_key="id",
                                  ordering_field="ts", partition_by="p", options=options)


def _rows(ids, ts, v=None):
    return pa.table({"id": ids, "p": ["x"] * len(ids), "ts": [ts] * len(ids),
                     "v": [ts if v is None else v] * len(ids)})


def _read(path) -> dict[str, int]:
    out = {}
    for r in lakehouse.open_table(str(path)).read(columns=["id", "v"]).to_pylist():
        assert r["id"] not in out, f"{r['id']} is in the table twice"
        out[r["id"]] = r["v"]
    h = hudi_read(path)
    assert sorted((r["id"], r["v"]) for r in h.select(["id", "v"]).to_pylist()) == sorted(out.items())
    return out


def _compaction_task(path, plan: str, *, clean: bool):
    """The Airflow compaction DAG's steps for ``plan`` (then a clean): files the clean deleted."""
    def run() -> int:
        o = lakehouse.open_table(str(path))
        o.run_compaction(plan)
        assert o.commit_compaction(plan).committed
        return o.clean().files_deleted if clean else 0
    return run


def _write_with_services_at_listing(monkeypatch, path, batch: pa.Table, services, *, after_listing: bool):
    """Upsert ``batch`` with ``services()`` (another process's steps) run once, just before or
    just after the write's first listing of the data files; returns what they returned.

    Only the writer's own listing fires it: the Iceberg publisher of the earlier commits lists
    files too, in its thread, and services run there raced the write and the reads after it
    (the test then read a compaction still pending, which hudi-rs 0.5 reads without its logs)."""
    background.wait_all()
    real = view_mod.list_data_files
    armed, ran = [], []
    writer_thread = threading.get_ident()

    def hooked(*args, **kw):
        if not armed or ran or threading.get_ident() != writer_thread:
            return real(*args, **kw)
        ran.append(None)
        if not after_listing:
            ran[0] = services()
        files = real(*args, **kw)
        if after_listing:
            ran[0] = services()
        return files
    monkeypatch.setattr(view_mod, "list_data_files", hooked)
    monkeypatch.setattr(write_view_mod, "list_data_files", hooked)
    writer = lakehouse.open_table(str(path))
    armed.append(True)
    writer.upsert(batch)
    monkeypatch.undo()
    assert ran, "the write listed no files"
    return ran[0]


@pytest.mark.parametrize("hook", ["plan_rollback", "_execute"])
def test_a_commit_step_racing_the_next_writes_recovery_is_never_undone_after_success(tmp_path, monkeypatch, hook):
    """Phase 1 of W1 ends; the next write W2 starts and its recovery (EAGER: a pending write is
    a failed one) rolls W1 back, while W1's commit step runs in another process. The commit
    step either lands first (and W1 stays) or fails: it never reports success for a write the
    recovery then deletes (it did: 'committed', and W1's records gone)."""
    p = tmp_path / "t"
    _table(p).upsert(_rows(["a", "b"], 1))
    w1 = lakehouse.open_table(str(p)).upsert(_rows(["a", "c"], 2), commit=False)
    step = Aside(monkeypatch, "commit-step")
    real = getattr(rollback_mod, hook)

    def racing(*args):
        target = args[1] if hook == "plan_rollback" else args[1].instant_to_rollback.commit_time
        if getattr(target, "time", target) == w1 and not step.started:
            step.start(lambda: lakehouse.open_table(str(p)).commit(w1))
        return real(*args)
    monkeypatch.setattr(rollback_mod, hook, racing)
    lakehouse.open_table(str(p)).upsert(_rows(["d"], 3))
    try:
        step.join()
        acknowledged = True
    except TimelineError as e:
        acknowledged = False
        assert "rolled back" in str(e) or "not on the timeline" in str(e)
    monkeypatch.undo()
    expected = {"a": 1, "b": 1, "d": 3} if not acknowledged else {"a": 2, "b": 1, "c": 2, "d": 3}
    assert _read(p) == expected
    assert step.waited.is_set(), "the commit step did not wait for the recovery's lock"


def test_a_rollback_racing_a_compaction_does_not_bring_the_commit_back(tmp_path, monkeypatch):
    """An operator rolls back the latest delta commit C while the compaction DAG plans, runs
    and commits a compaction: the plan either comes after the rollback (without C) or the
    rollback is refused (a later compaction built on C). It was neither: the compaction,
    planned after the rollback's checks, copied C's records into its base file."""
    p = tmp_path / "t"
    t = _table(p)
    t.upsert(_rows(["a", "b"], 1))
    t.upsert(_rows(["b"], 5))
    c = t.upsert(_rows(["a"], 6))
    service = Aside(monkeypatch, "compaction")
    real = rollback_mod.plan_rollback

    def compact():
        o = lakehouse.open_table(str(p))
        s = o.schedule_compaction(force=True)
        if s.instant:
            o.run_compaction(s.instant)
            assert o.commit_compaction(s.instant).committed
        return s.instant

    def racing(active, target, *rest):
        if target.time == c and not service.started:
            service.start(compact)
        return real(active, target, *rest)
    monkeypatch.setattr(rollback_mod, "plan_rollback", racing)
    assert lakehouse.open_table(str(p)).rollback().target == c
    compacted = service.join()
    monkeypatch.undo()
    assert compacted is not None and compacted > c
    assert _read(p) == {"a": 1, "b": 5}
    assert service.waited.is_set()


@pytest.mark.parametrize("index", ["SIMPLE", "BLOOM"])
def test_a_compaction_committed_and_cleaned_while_a_write_starts_does_not_duplicate_keys(tmp_path, monkeypatch, index):
    """A write started with a compaction pending; before it listed the files, the compaction
    committed and a clean keeping one file version deleted its input slice. The write saw the
    compaction pending (so not its new base file) and the input gone: the file group looked
    empty and the write inserted its keys a second time. It now reads the listing with the
    timeline as it is after the listing."""
    p = tmp_path / "t"
    t = lakehouse.create_table(str(p), name="s", table_type="MERGE_ON_READ", record_key="id",
                               ordering_field="ts", partition_by="p", index=index,
                               options={"hoodie.cleaner.policy": "KEEP_LATEST_FILE_VERSIONS",
                                        "hoodie.cleaner.fileversions.retained": "1"})
    t.upsert(_rows(["a", "b"], 1))
    t.upsert(_rows(["a"], 2))
    compaction = _compaction_task(p, t.schedule_compaction(force=True).instant, clean=True)
    cleaned = _write_with_services_at_listing(monkeypatch, p, _rows(["a", "c"], 3), compaction,
                                              after_listing=False)
    assert cleaned > 0, "the clean deleted nothing: the race was not set up"
    assert _read(p) == {"a": 3, "b": 1, "c": 3}


@pytest.mark.parametrize("index", ["BUCKET", "SIMPLE"])
def test_a_compaction_committed_while_a_write_lists_its_files_keeps_the_write(tmp_path, monkeypatch, index):
    """The other side of the test above: the compaction commits right after the write listed
    the files (its new base files not in the listing). Reading that listing with the timeline
    on which the compaction is complete put the write's logs on the replaced slice: committed,
    then invisible. The listing is taken again instead."""
    p = tmp_path / "t"
    t = lakehouse.create_table(str(p), name="s", table_type="MERGE_ON_READ", record_key="id",
                               ordering_field="ts", partition_by="p", index=index)
    t.upsert(_rows(["a", "b"], 1))
    t.compact(force=True)
    t.upsert(_rows(["a"], 2))
    compaction = _compaction_task(p, t.schedule_compaction(force=True).instant, clean=False)
    _write_with_services_at_listing(monkeypatch, p, _rows(["a", "c"], 3), compaction, after_listing=True)
    assert _read(p) == {"a": 3, "b": 1, "c": 3}


@pytest.mark.parametrize("provider", ["org.apache.hudi.client.transaction.lock.InProcessLockProvider",
                                      "org.apache.hudi.client.transaction.lock.ZookeeperBasedLockProvider"])
def test_one_writer_with_a_lock_provider_set_for_hudis_java_jobs_uses_the_storage_lock(tmp_path, provider):
    """Hudi job configs often carry a Java lock provider; one writer is not refused for it
    (nothing here can load it) and takes the storage lock instead."""
    p = tmp_path / "t"
    t = _table(p, **{"hoodie.write.lock.provider": provider})
    t.upsert(_rows(["a", "b"], 1))
    t = lakehouse.open_table(str(p))
    t.upsert(_rows(["a"], 2))
    assert t.compact(force=True).committed
    assert _read(p) == {"a": 2, "b": 1}
    assert os.path.isdir(p / ".hoodie" / ".locks")


class _Stall:
    """The next hold of ``table``'s lock stalls past its lease (a long pause, a suspended
    machine) right after the step read the timeline under it: the process's clock jumps by
    more than a lease between the step's look and what it does about it."""

    def __init__(self, monkeypatch, table, *, skip: int = 0) -> None:
        """``skip``: holds of the lock to let pass first (a clean's instant is allocated under
        the lock before its step of interest)."""
        provider = table.transactions.provider
        self.jump = 0.0
        real_clock, real_acquire = provider.clock, provider.acquire
        real_load = ActiveTimeline.load_listing
        self.armed = self.holding = self.stalled = False
        self.skip = skip

        def acquire(*a, **kw):
            lease = real_acquire(*a, **kw)
            if self.armed:
                if self.skip:
                    self.skip -= 1
                else:
                    self.armed, self.holding = False, True
            return lease

        def load_listing(active):
            listing = real_load(active)
            if self.holding:
                self.holding, self.stalled = False, True
                self.jump += provider.lease_s + 1
            return listing
        monkeypatch.setattr(provider, "clock", lambda: real_clock() + self.jump)
        monkeypatch.setattr(provider, "acquire", acquire)
        monkeypatch.setattr(ActiveTimeline, "load_listing", load_listing)

    def __call__(self, step):
        self.armed, self.stalled = True, False
        with pytest.raises(LockLostError):
            step()
        assert self.stalled, "the step read no timeline under the lock"
        self.jump = 0.0


def _state(table, path):
    """Everything a stalled step could have changed: the timeline's instants and the files (once
    the Iceberg publishing of earlier commits, in the background, is done)."""
    background.wait_all()
    return ([(i.time, i.action, i.state) for i in table.timeline],
            sorted(str(f.relative_to(path)) for f in path.rglob("*")
                   if f.is_file() and ".locks" not in f.parts and ".temp" not in f.parts))


def _compaction_inflight(t):
    t.upsert(_rows(["a"], 2))
    plan = t.schedule_compaction(force=True).instant
    t.run_compaction(plan)
    return plan


# Each: (set-up returning the step's argument, the step).
_STEPS = {
    "commit step": (lambda t: t.upsert(_rows(["a"], 2), commit=False), lambda t, w: t.commit(w)),
    "write": (lambda t: None, lambda t, _: t.upsert(_rows(["c"], 3))),
    "compaction plan": (lambda t: t.upsert(_rows(["a"], 2)),
                        lambda t, _: t.schedule_compaction(force=True)),
    "compaction commit": (_compaction_inflight, lambda t, plan: t.commit_compaction(plan)),
    "compaction undone to run again": (_compaction_inflight, lambda t, plan: t.run_compaction(plan)),
    "rollback": (lambda t: t.upsert(_rows(["a"], 2)), lambda t, _: t.rollback()),
    "recovery": (lambda t: t.upsert(_rows(["a"], 2), commit=False), lambda t, _: t.upsert(_rows(["c"], 3))),
}


@pytest.mark.parametrize("name", list(_STEPS))
def test_a_step_that_stalled_past_its_lease_changes_nothing(tmp_path, monkeypatch, name):
    """One writer: a step that holds the table lock and stalls past its lease may have been
    overtaken by another process that took the lock (a recovery rolling its write back, a
    compaction plan, an executor undoing its compaction). Right before its irreversible step
    it finds out (TableMetaClient.check_lock) and leaves the table as it found it; run again, it
    succeeds."""
    p = tmp_path / "t"
    t = _table(p)
    t.upsert(pa.concat_tables([_rows(["a", "b"], 1),
                               pa.table({"id": ["y"], "p": ["y"], "ts": [1], "v": [1]})]))
    setup, step = _STEPS[name]
    arg = setup(t)
    before = _state(t, p)
    _Stall(monkeypatch, t)(lambda: step(t, arg))
    assert _state(t, p) == before
    step(t, arg)  # a step not stalled goes through
    if name != "compaction undone to run again":  # that one ends where it began: inflight
        assert _state(t, p) != before


def test_a_clean_that_stalled_past_its_lease_keeps_the_empty_partition(tmp_path, monkeypatch):
    """The clean removes an empty partition only while no write is pending, under the lock;
    stalled past its lease, a write may have begun there since: the folder stays, the clean
    stays inflight, and the next clean finishes it."""
    p = tmp_path / "t"
    t = _table(p)
    t.upsert(_rows(["a"], 1))
    t.upsert(_rows(["a"], 2))
    (p / "y").mkdir()  # what a write rolled back from a new partition leaves
    (p / "y" / ".hoodie_partition_metadata").write_text("commitTime=1\npartitionDepth=1\n")
    opts = {"hoodie.cleaner.incremental.mode": "false", "hoodie.cleaner.commits.retained": "1"}
    _Stall(monkeypatch, t, skip=1)(lambda: t.clean(options=opts))
    assert (p / "y").exists()
    assert [i.state.name for i in t.timeline.pending()] == ["INFLIGHT"]
    assert t.clean(options=opts).partitions_deleted == ("y",) and not (p / "y").exists()


def test_a_first_write_that_stalled_past_its_lease_does_not_fix_the_bucket_count(tmp_path, monkeypatch):
    """The first write fixes a default BUCKET table's bucket count under the lock
    (lakehouse.write.bucket_sizing); stalled past its lease, another first write may have
    fixed another count meanwhile: hoodie.properties stays as it was."""
    p = tmp_path / "t"
    t = _table(p)
    props = (p / ".hoodie" / "hoodie.properties").read_bytes()
    _Stall(monkeypatch, t)(lambda: t.upsert(_rows(["a"], 1)))
    assert (p / ".hoodie" / "hoodie.properties").read_bytes() == props
    assert not t.timeline.instants
    t.upsert(_rows(["a"], 1))
    assert (p / ".hoodie" / "hoodie.properties").read_bytes() != props


def test_a_restore_overtaken_by_a_compaction_commit_keeps_the_compaction(tmp_path, monkeypatch):
    """A restore drops the pending compactions after its savepoint, under the lock. If it
    stalled past its lease and the compaction's commit step (another process) took the lock
    and committed one meanwhile, the restore finds it committed and fails (LockLostError):
    it deleted the committed compaction's plan, and the commit no longer read as one."""
    p = tmp_path / "t"
    t = _table(p)
    t.upsert(_rows(["a", "b"], 1))
    sp = t.create_savepoint()
    t.upsert(_rows(["a"], 2))
    plan = t.schedule_compaction(force=True).instant
    t.run_compaction(plan)
    real = restore_mod.undo_execution

    def committed_meanwhile(meta, instant_time):
        other = lakehouse.open_table(str(p))
        lease_s = other.transactions.provider.lease_s
        # The restore stalls for a lease (its clock and the other process's move on past its
        # lease): the other process takes the lock over.
        monkeypatch.setattr(t.transactions.provider, "clock", lambda: time.time() + lease_s + 1)
        monkeypatch.setattr(other.transactions.provider, "clock", lambda: time.time() + lease_s + 1)
        assert other.commit_compaction(instant_time).committed
        return real(meta, instant_time)
    monkeypatch.setattr(restore_mod, "undo_execution", committed_meanwhile)
    with pytest.raises(LockLostError, match="taken over"):
        t.restore(sp)
    monkeypatch.undo()
    assert (p / ".hoodie" / f"{plan}.compaction.requested").exists()
    timeline = lakehouse.open_table(str(p)).timeline
    assert timeline.is_completed(plan) and timeline.is_compaction(plan)
    assert _read(p) == {"a": 2, "b": 1}
