"""Compaction in three steps, interleaved with writes, crashes and other processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from datetime import timedelta

import fastavro
import pyarrow as pa
import pytest

import lakehouse
from lakehouse.config import CompactionConfig
from lakehouse.errors import ConfigError, LockTimeoutError
from lakehouse.faults import ENV
from lakehouse.services.compaction import (commit_compaction, execute_compaction, read_plan,
                                           schedule_compaction)
from lakehouse.timeline.commit_metadata import CommitMetadata
from lakehouse.timeline.instant import Action, Instant, State
from lakehouse.timeline.instant_time import parse_instant_time
from tests.conftest import HUDI_AVRO_SCHEMAS, require_shared
from tests.interop.hudi_oracle import hudi_read
from tests.model.oracle import Oracle

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLS = ["id", "ts", "v"]


class Fixture:
    def __init__(self, path, index="BUCKET", **options):
        self.path = path
        opts = {"hoodie.bucket.index.num.buckets": 2, **options}
        self.table = lakehouse.create_table(str(path), name="c", table_type="MERGE_ON_READ",
                                            record_key="id", partition_by="city", ordering_field="ts",
                                            index=index, options=opts)
        self.oracle = Oracle("EVENT_TIME_ORDERING", "id", "ts")
        self.ts = 0

    def upsert(self, keys):
        self.ts += 1
        rows = [{"id": k, "city": "sf" if k < "m" else "la", "ts": self.ts, "v": self.ts * 100 + i}
                for i, k in enumerate(keys)]
        t = self.table.upsert(pa.Table.from_pylist(rows))
        self.oracle.upsert(rows, t)
        return t

    def delete(self, keys):
        t = self.table.delete(pa.table({"id": keys, "city": ["sf" if k < "m" else "la" for k in keys]}))
        self.oracle.delete(keys, t)
        return t

    def check(self, *, hudi=True, as_of=None):
        table = lakehouse.open_table(str(self.path))
        ours = sorted(table.read(as_of=as_of, columns=COLS).to_pylist(), key=lambda r: r["id"])
        assert ours == self.oracle.rows(as_of, COLS)
        if hudi:
            h = hudi_read(self.path, as_of=as_of)
            assert (sorted(h.select(COLS).to_pylist(), key=lambda r: r["id"]) if h else []) == ours


@pytest.fixture
def fx(tmp_path):
    return Fixture(tmp_path / "t")


def test_trigger_says_why_nothing_was_scheduled(fx):
    fx.upsert(["a", "b", "x"])
    for _ in range(3):
        fx.upsert(["a", "x"])
    res = fx.table.schedule_compaction()
    assert not res.scheduled and res.reason == "not yet: 4 of 5 delta commits"
    fx.upsert(["b"])
    res = fx.table.schedule_compaction()
    assert res.scheduled and res.operations >= 2 and res.log_files >= 4


def test_time_and_log_bytes_triggers(fx):
    fx.upsert(["a", "x"])
    fx.upsert(["a"])
    first = fx.table.timeline.completed_writes().first.time
    later = parse_instant_time(first) + timedelta(hours=2)
    time_cfg = CompactionConfig.from_options({"hoodie.compact.inline.trigger.strategy": "TIME_ELAPSED"})
    res = schedule_compaction(fx.table, time_cfg, now=parse_instant_time(first) + timedelta(minutes=5))
    assert not res.scheduled and "300 of 3600 seconds" in res.reason
    both = CompactionConfig.from_options({"hoodie.compact.inline.trigger.strategy": "NUM_AND_TIME"})
    assert not schedule_compaction(fx.table, both, now=later).scheduled
    bytes_cfg = CompactionConfig.from_options({"hoodie.compact.inline.trigger.strategy": "LOG_BYTES",
                                               "hoodie.compact.trigger.log.bytes": 10})
    assert schedule_compaction(fx.table, bytes_cfg).scheduled


def test_plan_orders_by_log_size_and_respects_the_io_budget(fx):
    fx.upsert(["a", "b", "c", "d", "x", "y"])
    for i in range(4):
        fx.upsert(["a", "b", "c"] + (["x"] if i == 0 else []))
    res = fx.table.schedule_compaction(force=True)
    plan = read_plan(fx.table, res.instant)
    sizes = [op.metrics["TOTAL_LOG_FILES_SIZE"] for op in plan.operations]
    assert sizes == sorted(sizes, reverse=True) and len(plan.operations) >= 2
    assert plan.version == 2 and all(op.delta_file_paths for op in plan.operations)
    # A budget below one operation's I/O still plans the biggest one, and only it.
    # Each base file then carries Hudi's ~430 KB bloom filter, so one operation's I/O (read and
    # write its base file) nearly fills 1 MB and two pass it.
    fx2 = Fixture(fx.path.parent / "t2", **{"hoodie.parquet.bloom.filter.enabled": "true"})
    fx2.upsert(["a", "b", "c", "d", "x", "y"])
    for _ in range(4):
        fx2.upsert(["a", "b", "c", "x"])
    small = CompactionConfig.from_options({"hoodie.compaction.target.io": 1})
    res = schedule_compaction(fx2.table, small, force=True)
    assert res.operations == 1


def test_writes_during_a_pending_compaction_and_reads_at_every_step(fx):
    fx.upsert(["a", "b", "x", "y"])
    fx.upsert(["a", "x"])
    fx.delete(["y"])
    t = fx.table.schedule_compaction(force=True).instant
    fx.check(hudi=True)
    fx.upsert(["a", "b", "z"])          # a, b: file groups under compaction; z: new
    fx.check(hudi=False)                # hudi-rs 0.5.0 ignores logs of a pending compaction's slice
    execute_compaction(fx.table, t)
    fx.check(hudi=False)
    fx.upsert(["x"])
    assert commit_compaction(fx.table, t).committed
    fx.check()
    fx.upsert(["a", "y"])
    fx.check()
    for inst, _ in fx.oracle.history:
        fx.check(as_of=inst, hudi=inst < t or inst > max(i for i, _ in fx.oracle.history[:-2]))


def test_hudi_rs_does_not_read_logs_written_under_a_pending_compaction(tmp_path):
    """Pins the hudi-rs 0.5.0 gap the test above works around; Java Hudi merges these logs."""
    fx = Fixture(tmp_path / "t", **{"hoodie.bucket.index.num.buckets": 1})
    fx.upsert(["a"])
    fx.upsert(["a"])
    fx.table.schedule_compaction(force=True)
    fx.upsert(["b"])
    h = hudi_read(fx.path)
    assert sorted(r["id"] for r in h.select(["id"]).to_pylist()) == ["a"]
    assert sorted(r["id"] for r in fx.table.read(columns=["id"]).to_pylist()) == ["a", "b"]


def test_read_optimized_equals_snapshot_after_compaction(fx):
    fx.upsert(["a", "b", "x", "y"])
    fx.upsert(["a", "x"])
    fx.delete(["b"])
    fx.table.compact(force=True)
    assert sorted(fx.table.read(read_optimized=True, columns=COLS).to_pylist(), key=lambda r: r["id"]) == \
        fx.oracle.rows(None, COLS)
    h = hudi_read(fx.path, read_optimized=True)
    assert sorted(h.select(COLS).to_pylist(), key=lambda r: r["id"]) == fx.oracle.rows(None, COLS)
    # Compaction keeps each record's commit time: incremental reads see the same history.
    changed = fx.table.read_changes(fx.oracle.history[0][0], columns=["id"]).column("id").to_pylist()
    assert sorted(changed) == ["a", "x"]


def _run(path, code, fault=None):
    env = dict(os.environ, PYTHONPATH=REPO)
    if fault:
        env[ENV] = f"{fault}:kill"
    src = textwrap.dedent(f"""
        import json, lakehouse
        from lakehouse.services.compaction import *
        table = lakehouse.open_table({str(path)!r})
    """) + textwrap.dedent(code)
    return subprocess.run([sys.executable, "-c", src], env=env, capture_output=True, text=True, timeout=120)


def test_each_step_in_its_own_process(fx):
    fx.upsert(["a", "b", "x"])
    fx.upsert(["a", "x"])
    p = _run(fx.path, "print(json.dumps(schedule_compaction(table, force=True).to_json()))")
    t = json.loads(p.stdout)["instant"]
    p = _run(fx.path, f"print(json.dumps(execute_compaction(table, {t!r}).to_json()))")
    assert json.loads(p.stdout)["failed"] == 0, p.stderr
    assert lakehouse.open_table(str(fx.path)).timeline.get(t).is_inflight
    assert commit_compaction(lakehouse.open_table(str(fx.path)), t).committed
    fx.check()


def _one_base_file_per_operation(fx, table, t):
    names = [f for root, _, files in os.walk(fx.path) for f in files if f.endswith(".parquet") and t in f]
    assert len(names) == len(read_plan(table, t).operations), "one base file per operation, no leftovers"


@pytest.mark.parametrize("fault", ["compaction.mid_execute", "compaction.after_execute",
                                   "compaction.before_commit"])
def test_a_crashed_compaction_is_redone_cleanly(fx, fault):
    fx.upsert(["a", "b", "x", "y"])
    fx.upsert(["a", "x", "y"])
    t = fx.table.schedule_compaction(force=True).instant
    code = f"execute_compaction(table, {t!r}); commit_compaction(table, {t!r})"
    assert _run(fx.path, code, fault).returncode == -9
    fx.check()                       # nothing of the half-done compaction is visible
    fx.upsert(["b"])                 # writers go on
    table = lakehouse.open_table(str(fx.path))
    if fault == "compaction.before_commit":
        res = commit_compaction(table, t)  # the execution's results are all there
    else:
        assert commit_compaction(table, t).committed is False  # results missing: undone
        assert table.timeline.get(t).state is State.REQUESTED
        res = execute_compaction(table, t)
        res = commit_compaction(table, t)
    assert res.committed
    fx.check()
    _one_base_file_per_operation(fx, table, t)


def _half_executed(fx) -> str:
    """A compaction whose executor was killed after one operation's base file."""
    fx.upsert(["a", "x"])
    fx.upsert(["a", "x"])
    t = fx.table.schedule_compaction(force=True).instant
    assert _run(fx.path, f"execute_compaction(table, {t!r})", "compaction.mid_execute").returncode == -9
    return t


def test_execute_redoes_an_inflight_compaction(fx):
    t = _half_executed(fx)
    res = execute_compaction(lakehouse.open_table(str(fx.path)), t)
    assert res.redone and res.failed == 0
    assert commit_compaction(fx.table, t).committed
    fx.check()



def test_an_executor_started_again_leaves_a_committed_compaction_alone(fx, monkeypatch):
    """An Airflow retry of the execute task while the first try still ran (a zombie): the retry
    sees the compaction inflight and undoes it, and the first try's commit step landed between
    that look and the undo, which then deleted the files of a committed compaction (gone for
    good if the retry died before writing them again). The undo and the commit step's check and
    publish are now each under the table lock, and the undo re-reads the timeline there."""
    fx.upsert(["a", "x"])
    fx.upsert(["a", "x"])
    t = fx.table.schedule_compaction(force=True).instant
    execute_compaction(fx.table, t)  # the first try; its commit step comes next
    retry = _commit_lands_after_first_look(fx, monkeypatch, t)
    missing_after_undo: list[str] = []
    real_transition = type(retry.active).transition

    def transition(self, inst, to, content=b""):
        if inst.time == t and to is State.INFLIGHT:  # the retry starting over: what did its undo leave?
            done = Instant(t, Action.COMMIT, State.COMPLETED)
            meta = CommitMetadata.from_bytes(self.read(done), self.path(done))
            missing_after_undo.extend(s.path for s in meta.write_stats() if not self.storage.exists(s.path))
        return real_transition(self, inst, to, content)
    monkeypatch.setattr(type(retry.active), "transition", transition)
    res = execute_compaction(retry, t)
    monkeypatch.undo()
    assert missing_after_undo == []
    assert res.reason == "already committed" and not res.redone
    fx.check()


def _commit_lands_after_first_look(fx, monkeypatch, t: str):
    """A table whose first look at the timeline is followed by compaction ``t``'s commit step
    landing (another process's), before anything else it does."""
    table = lakehouse.open_table(str(fx.path))
    real = type(table).timeline

    def timeline_then_the_commit_lands(self):
        tl = real.fget(self)
        if self is table and not hasattr(table, "_landed"):
            table._landed = True
            assert commit_compaction(lakehouse.open_table(str(fx.path)), t).committed
        return tl
    monkeypatch.setattr(type(table), "timeline", property(timeline_then_the_commit_lands))
    return table


def test_executing_the_oldest_pending_moves_on_when_it_was_committed_meanwhile(fx, monkeypatch):
    """``execute_compaction()`` without an instant runs the oldest pending compaction. When
    that one is inflight and its commit step lands between the executor's look and its undo,
    the executor runs the next pending one (it reported "already committed" and ran nothing,
    leaving the next plan for another cycle)."""
    fx.upsert(["a", "x"])
    fx.upsert(["a", "x"])
    first = fx.table.schedule_compaction(force=True).instant
    execute_compaction(fx.table, first)
    others = ["b", "c", "d", "e", "y", "z"]
    fx.upsert(others)
    fx.upsert(others)
    second = fx.table.schedule_compaction(force=True).instant
    assert second is not None and second > first
    retry = _commit_lands_after_first_look(fx, monkeypatch, first)
    res = execute_compaction(retry)
    monkeypatch.undo()
    assert res.instant == second and res.operations >= 1 and not res.redone
    assert commit_compaction(retry, second).committed
    fx.check()


def test_an_undo_killed_after_giving_the_plan_back_is_swept_by_the_next_execution(fx):
    t = _half_executed(fx)
    table = lakehouse.open_table(str(fx.path))
    # What an undo killed right after its first step leaves: the plan back to requested, the
    # execution's file, marker and no results.
    table.storage.delete(table.active.path(Instant(t, Action.COMPACTION, State.INFLIGHT)))
    assert table.timeline.get(t).state is State.REQUESTED
    fx.check()  # the half-done execution's file is not visible
    res = execute_compaction(table, t)
    assert not res.redone and res.failed == 0
    assert commit_compaction(table, t).committed
    fx.check()
    _one_base_file_per_operation(fx, table, t)


def test_the_undo_and_the_commit_step_wait_for_the_table_lock(fx):
    fx.upsert(["a", "x"])
    fx.upsert(["a", "x"])
    t = fx.table.schedule_compaction(force=True).instant
    execute_compaction(fx.table, t)
    other = lakehouse.open_table(str(fx.path), {"hoodie.write.lock.wait_time_ms": 300})
    with fx.table.exclusive():  # another process's hold (a meta client of its own)
        with pytest.raises(LockTimeoutError):
            commit_compaction(other, t)
        with pytest.raises(LockTimeoutError):
            execute_compaction(other, t)  # inflight: it would undo the execution first
        assert other.timeline.get(t).is_inflight
    assert commit_compaction(other, t).committed
    fx.check()

def test_not_scheduled_while_an_earlier_write_is_pending(fx):
    fx.upsert(["a"])
    fx.upsert(["a"])
    fx.table.upsert(pa.table({"id": ["b"], "city": ["sf"], "ts": [9], "v": [1]}), commit=False)
    res = fx.table.schedule_compaction(force=True)
    assert not res.scheduled and "still inflight" in res.reason


def test_a_plan_asked_for_while_a_write_takes_its_instant_waits_for_it(fx, monkeypatch):
    """One writer, the default: the Airflow compaction-plan task is another process. A plan
    made after the writer looked at the timeline but before it took its instant was missed by
    the write, whose logs the compaction's new base file then hid. The planner now waits for
    the table lock the writer holds there, then plans after the write (or nothing while it is
    pending)."""
    import lakehouse.write.client as client_mod
    from tests.concurrency.aside import Aside
    fx.upsert(["a", "b", "x"])
    fx.upsert(["a", "x"])
    planner = Aside(monkeypatch, "planner")
    real = client_mod.delete_stale_markers

    def plan_meanwhile(storage, times):
        if not planner.started:
            planner.start(lambda: lakehouse.open_table(str(fx.path)).schedule_compaction(force=True))
        return real(storage, times)
    monkeypatch.setattr(client_mod, "delete_stale_markers", plan_meanwhile)
    w = fx.upsert(["a", "b", "x"])
    first = planner.join()
    monkeypatch.undo()
    t = first.instant or fx.table.schedule_compaction(force=True).instant
    fx.check(hudi=False)
    execute_compaction(fx.table, t)
    assert commit_compaction(fx.table, t).committed
    fx.check()
    # Either the write was still pending when the planner got the lock, or it had committed.
    assert planner.waited.is_set()
    assert (first.instant is None and w in first.reason) or first.instant > w


def test_a_write_starting_while_a_plan_is_made_waits_for_it(fx, monkeypatch):
    """The other order: a write (another process) starts between the planner's check that no
    write is pending and the plan's instant. Without the table lock around both, the write
    missed the plan and the compaction the write: its records vanished once it committed."""
    import lakehouse.services.compaction.plan as plan_mod
    from tests.concurrency.aside import Aside
    fx.upsert(["a", "b", "x"])
    fx.upsert(["a", "x"])
    writer = Aside(monkeypatch, "writer")
    handle = lakehouse.open_table(str(fx.path))
    real_plan = plan_mod.plan_operations

    def plan_operations(slices, cfg):
        if not writer.started:
            def write():
                fx.table = handle
                return fx.upsert(["a", "b", "x"])
            writer.start(write)
        return real_plan(slices, cfg)
    monkeypatch.setattr(plan_mod, "plan_operations", plan_operations)
    t = lakehouse.open_table(str(fx.path)).schedule_compaction(force=True).instant
    w = writer.join()
    monkeypatch.undo()
    assert t is not None
    fx.check(hudi=False)
    execute_compaction(fx.table, t)
    assert commit_compaction(fx.table, t).committed
    fx.check()
    assert writer.waited.is_set() and t < w, "the write took its instant while the plan was being made"


def test_copy_on_write_tables_do_not_compact(tmp_path):
    t = lakehouse.create_table(str(tmp_path / "t"), name="c", table_type="COPY_ON_WRITE",
                               record_key="id", ordering_field="ts")
    with pytest.raises(ConfigError, match="COPY_ON_WRITE"):
        t.schedule_compaction()


def test_plan_reads_with_hudis_schema(fx):
    fx.upsert(["a", "x"])
    fx.upsert(["a"])
    t = fx.table.schedule_compaction(force=True).instant
    schema_path = require_shared(HUDI_AVRO_SCHEMAS) / "HoodieCompactionPlan.avsc"
    reader_schema = fastavro.parse_schema(json.loads(schema_path.read_text()))
    raw = fx.path / ".hoodie" / f"{t}.compaction.requested"
    with open(raw, "rb") as f:
        (rec,) = list(fastavro.reader(f, reader_schema=reader_schema))
    assert rec["version"] == 2 and rec["operations"][0]["fileId"]
    # As Hudi's CompactionStrategy.generateCompactionPlan: no strategy record. Hudi's
    # HoodieCompactor loads strategy.compactorClassName as its CompactionExecutionHelper, so a
    # compaction strategy's class there (once LogFileSizeBasedCompactionStrategy) failed Java's
    # CALL run_compaction on lakehouse's plans with a ClassCastException (the Java Hudi judge).
    assert rec["strategy"] is None and rec["preserveHoodieMetadata"] is True
    execute_compaction(fx.table, t)
    commit = commit_compaction(fx.table, t)
    meta = fx.table.active.commit_metadata(fx.table.timeline.get(commit.instant))
    assert meta.operation_type == "COMPACT" and meta.compacted
    assert (fx.path / ".hoodie" / f"{commit.instant}.commit").exists()
    assert fx.table.timeline.get(t).action is Action.COMMIT
