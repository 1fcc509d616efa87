"""Writers, compaction steps, cleans, rollbacks and readers interleaved at random (hypothesis
state machines), checked against a model after every step.

Three writer handles share one small table under optimistic concurrency control. Each write runs
in two phases driven by hand (``write(commit=False)`` then ``commit``), so two writers' phases
interleave deterministically in one thread. The model holds every acknowledged write (its
instant and its batch); the committed state is those writes replayed in instant order (every
write carries an ordering value ``ts`` that grows with each write, and conflict detection
refuses two concurrent writes of one key, so instant order is the merge order). A successful
commit adds its write, a rollback of a completed write removes it; a conflict, a crash or a
failed write changes nothing.

Rules: begin + phase 1 of an upsert, insert or delete; commit (success, or CommitConflictError
naming a completed winner or a compaction planned since the write began); crash after phase 1 or inside it (the heartbeat is left expired:
the heartbeats run on an injected clock that never moves, so only crashed writers' beats are
old, and the next writer rolls them back); schedule, execute and commit a compaction as three
separate steps (MOR); clean with one commit retained; archive; rollback of the latest write;
read-optimized read.

Invariants after every step: the snapshot equals the model (each committed key exactly once,
its latest value, nothing uncommitted or rolled back); completed instants only disappear by
rollback or archival; every data file that a completed instant recorded for a latest file slice
exists. A read-optimized read holds no key twice in one file group and only values some kept
write committed (base files only: a key deleted in one file group's log and inserted into
another shows in both until compaction, as in Hudi's read-optimized view).

Settings: ``make test`` runs the "ci" profile (40 examples of up to 40 steps per machine,
derandomized so CI is reproducible; about 60-85 s for the three machines on 2 cores).
``LAKEHOUSE_HYPOTHESIS_PROFILE=nightly`` selects a longer, randomized run (600 examples of up to
50 steps each):

    LAKEHOUSE_HYPOTHESIS_PROFILE=nightly python -m pytest tests/reliability/test_stateful.py
"""

from __future__ import annotations

import os
import shutil
import tempfile

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

import lakehouse
from lakehouse import faults
from lakehouse.concurrency.heartbeat import Heartbeats, heartbeat_path
from lakehouse.errors import CommitConflictError, InstantNotFoundError, TimelineError
from lakehouse.file_group.naming import BaseFileName, LogFileName
from lakehouse.iceberg import background
from lakehouse.table import create_table, open_table
from lakehouse.timeline.instant import Action

OCC = {"hoodie.write.concurrency.mode": "OPTIMISTIC_CONCURRENCY_CONTROL",
       "hoodie.write.num.retries.on.conflict.failures": "0"}
KEYS = [f"k{i}" for i in range(8)]
WRITERS = 3
SCHEMA = pa.schema([("id", pa.string()), ("p", pa.string()), ("ts", pa.int64()), ("v", pa.string())])
NOW = 1_000_000.0  # the injected heartbeat clock: live beats never age, crashed ones are set to 0

settings.register_profile(
    "ci", max_examples=40, stateful_step_count=40, deadline=None, derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                           HealthCheck.data_too_large], print_blob=True)
settings.register_profile(
    "nightly", max_examples=600, stateful_step_count=50, deadline=None, derandomize=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                           HealthCheck.data_too_large], print_blob=True)
PROFILE = settings.get_profile(os.environ.get("LAKEHOUSE_HYPOTHESIS_PROFILE", "ci"))


def part_of(key: str) -> str:
    return "a" if int(key[1:]) % 2 else "b"


def batch(keys, ts: int, value: str) -> pa.Table:
    return pa.table({"id": list(keys), "p": [part_of(k) for k in keys], "ts": [ts] * len(keys),
                     "v": [value] * len(keys)})


def replay(writes: dict[str, tuple[str, dict[str, str | None]]]) -> dict[str, str]:
    """Committed state: writes (instant -> (operation, key -> value or None for a delete))
    applied in instant order."""
    state: dict[str, str] = {}
    for t in sorted(writes):
        for k, v in writes[t][1].items():
            if v is None:
                state.pop(k, None)
            else:
                state[k] = v
    return state


def open_writer(path: str):
    t = open_table(path)
    c = t.concurrency
    t._heartbeats = Heartbeats(t.storage, interval_s=c.heartbeat_interval_ms / 1000.0,
                               misses=c.heartbeat_misses, clock=lambda: NOW)
    return t


def expire(table, instant: str) -> None:
    """The writer of ``instant`` is gone: no more beats, and its last one is long past."""
    table.heartbeats.stop(instant, delete=False)
    table.storage.write(heartbeat_path(instant), b'{"ts": 0}')


STATS: dict[str, dict[str, int]] = {}  # per machine, summed over its examples, for the ledger


DIRS: list[str] = []  # every machine's table folder, removed again when the module is done


@pytest.fixture(scope="module", autouse=True)
def _remove_machine_folders():
    """A writer's last heartbeat can land after a machine's teardown removed its folder (the
    nightly profile left thousands of folders holding only .hoodie/.heartbeat): remove them
    once more when every machine is done."""
    yield
    for d in DIRS:
        shutil.rmtree(d, ignore_errors=True)
    DIRS.clear()


def new_stats(name: str) -> dict[str, int]:
    STATS[name] = dict.fromkeys(("examples", "steps", "begun", "skipped", "commits", "overlaps",
                                 "conflicts", "crashes", "scheduled", "compactions", "cleans",
                                 "rollbacks", "archived", "records"), 0)
    return STATS[name]


class Interleavings(RuleBasedStateMachine):
    TABLE_TYPE = "MERGE_ON_READ"
    INDEX = "BUCKET"
    NAME = "mor-bucket"

    def __init__(self) -> None:
        super().__init__()
        self.stats = STATS[self.NAME]
        self.stats["examples"] += 1
        self.dir = tempfile.mkdtemp(prefix="lh-stateful-")
        DIRS.append(self.dir)
        extra = {"hoodie.bucket.index.num.buckets": "2"} if self.INDEX == "BUCKET" else {}
        create_table(self.dir, name="t", record_key="id", partition_by="p", ordering_field="ts",
                     table_type=self.TABLE_TYPE, index=self.INDEX, schema=SCHEMA,
                     options={**OCC, **extra})
        self.writers = [open_writer(self.dir) for _ in range(WRITERS)]
        self.service = open_writer(self.dir)
        self.pending: dict[int, tuple[str, str, dict[str, str | None]]] = {}  # writer -> write
        self.committed: dict[str, tuple[str, dict[str, str | None]]] = {}
        self.ever: dict[str, set[str]] = {}  # key -> values some kept write committed
        self.ts = 0
        self.compaction: str | None = None
        self.executed = False
        self.undone: set[str] = set()  # instants rolled back or archived: they may leave
        self.seen_completed: set[str] = set()

    def teardown(self) -> None:
        faults.reset()
        for t in [*self.writers, self.service]:
            if t._heartbeats is not None:
                t._heartbeats.stop_all()
        background.wait_all()  # the Iceberg publisher may still read (and write) the table
        shutil.rmtree(self.dir, ignore_errors=True)

    @property
    def model(self) -> dict[str, str]:
        return replay(self.committed)

    # --- writers ---------------------------------------------------------------------------

    @initialize()
    def seed(self):
        """Half the key space committed by a first write, so updates and conflicts come early."""
        self._begin(0, "upsert", KEYS[::2], False)
        self._commit(0)

    @rule(w=st.integers(0, WRITERS - 1),
          keys=st.lists(st.sampled_from(KEYS), min_size=1, max_size=3, unique=True))
    def begin_upsert(self, w, keys):
        self._begin(w, "upsert", keys, False)

    @precondition(lambda self: len(self.pending) <= WRITERS - 2)
    @rule(keys=st.lists(st.sampled_from(KEYS), min_size=2, max_size=4, unique=True),
          split=st.integers(1, 3), data=st.data())
    def begin_two(self, keys, split, data):
        """Two idle writers start upserts of neighbouring keys back to back."""
        idle = [w for w in range(WRITERS) if w not in self.pending]
        first = data.draw(st.sampled_from(idle))
        second = data.draw(st.sampled_from([w for w in idle if w != first]))
        self._begin(first, "upsert", keys[:split], False)
        self._begin(second, "upsert", keys[split:] or keys[-1:], False)

    @rule(w=st.integers(0, WRITERS - 1), op=st.sampled_from(["insert", "delete"]),
          keys=st.lists(st.sampled_from(KEYS), min_size=1, max_size=3, unique=True),
          crash_in_phase_one=st.sampled_from([False, False, False, True]))
    def begin(self, w, op, keys, crash_in_phase_one):
        self._begin(w, op, keys, crash_in_phase_one)

    def _begin(self, w, op, keys, crash_in_phase_one):
        if w in self.pending:
            return
        self.stats["steps"] += 1
        model = self.model
        if op == "insert":
            # An insert never looks keys up: a key already in the table would be there twice
            # (as in Hudi). Only keys absent now are inserted.
            keys = [k for k in keys if k not in model]
        elif op == "delete":
            # A delete removes what the writer sees: a key absent when it starts is not found
            # by the index (a concurrent insert of it commits, rightly). Only present keys.
            keys = [k for k in keys if k in model]
        if not keys:
            self.stats["skipped"] += 1
            return
        self.stats["begun"] += 1
        self.ts += 1
        value = f"w{self.ts}"
        table = self.writers[w]
        data = batch(keys, self.ts, value)
        effect = {k: (None if op == "delete" else value) for k in keys}
        if crash_in_phase_one:
            before = {i.time for i in table.timeline}
            faults.activate("write.after_data_files", "raise")
            try:
                with pytest.raises(faults.InjectedFault):
                    table.write(data, op, commit=False)
            finally:
                faults.reset()
            for inst in table.timeline.pending():
                if inst.time not in before and inst.action in (Action.COMMIT, Action.DELTA_COMMIT):
                    expire(table, inst.time)
            self.stats["crashes"] += 1
            return
        t = table.write(data, op, commit=False)
        assert table.write_ready(t) == "", table.write_ready(t)
        self.pending[w] = (t, op, effect)

    @precondition(lambda self: self.pending)
    @rule(data=st.data())
    def commit(self, data):
        self._commit(data.draw(st.sampled_from(sorted(self.pending))))

    @precondition(lambda self: self.pending)
    @rule()
    def commit_oldest(self):
        self._commit(min(self.pending, key=lambda w: self.pending[w][0]))

    def _commit(self, w):
        self.stats["steps"] += 1
        t, op, effect = self.pending.pop(w)
        self.stats["overlaps"] += bool(self.pending)
        table = self.writers[w]
        try:
            table.commit(t)
        except CommitConflictError as e:
            self.stats["conflicts"] += 1
            timeline = table.timeline
            # The winner: a completed write, or a compaction planned while this one was in flight
            # (planned past writes under OCC, issue 40; the write yields to it).
            planned = {i.time for i in timeline.pending_compactions()}
            assert e.winner and (timeline.is_completed(e.winner) or e.winner in planned), \
                f"winner {e.winner} neither completed nor a pending compaction"
            assert not timeline.is_completed(t) and timeline.get(t) is None, \
                "the losing instant stayed on the timeline"
            return
        self.stats["commits"] += 1
        assert table.timeline.is_completed(t)
        self.committed[t] = (op, effect)
        for k, v in effect.items():
            if v is not None:
                self.ever.setdefault(k, set()).add(v)

    @precondition(lambda self: self.pending)
    @rule(data=st.data())
    def crash(self, data):
        """A writer dies between phase 1 and its commit: its instant stays pending, unbeaten."""
        self.stats["steps"] += 1
        self.stats["crashes"] += 1
        w = data.draw(st.sampled_from(sorted(self.pending)))
        t, _, _ = self.pending.pop(w)
        expire(self.writers[w], t)

    # --- services --------------------------------------------------------------------------

    def _mor(self) -> bool:
        return self.TABLE_TYPE == "MERGE_ON_READ"

    @precondition(lambda self: self._mor())
    @rule()
    def compaction_step(self):
        """The next step of a compaction, each its own step between others: schedule (refused
        while a write is pending), execute, commit."""
        self.stats["steps"] += 1
        svc = self.service
        if self.compaction is None:
            result = svc.schedule_compaction(force=True)
            if result.scheduled:
                self.stats["scheduled"] += 1
                self.compaction, self.executed = result.instant, False
        elif not self.executed:
            result = svc.run_compaction(self.compaction)
            assert result.failed == 0, result
            self.executed = True
        else:
            result = svc.commit_compaction(self.compaction)
            assert result.committed, result
            self.stats["compactions"] += 1
            self.compaction = None

    @rule()
    def clean(self):
        self.stats["steps"] += 1
        self.service.clean(options={"hoodie.cleaner.commits.retained": "1"})
        self.stats["cleans"] += 1

    @rule()
    def archive(self):
        self.stats["steps"] += 1
        before = {i.time for i in self.service.timeline.completed()}
        result = self.service.archive({"hoodie.keep.min.commits": "2", "hoodie.keep.max.commits": "3"})
        assert set(result.archived) <= before | {i.time for i in self.service.timeline}, result
        self.undone.update(result.archived)
        self.stats["archived"] += len(result.archived)

    @rule()
    def rollback_latest(self):
        self.stats["steps"] += 1
        try:
            result = self.service.rollback()
        except (TimelineError, InstantNotFoundError):
            return  # a later write pending, a savepoint, nothing to roll back: refused, typed
        self.stats["rollbacks"] += 1
        self.undone.add(result.target)
        self.committed.pop(result.target, None)
        self.ever = {}
        for _, effect in self.committed.values():
            for k, v in effect.items():
                if v is not None:
                    self.ever.setdefault(k, set()).add(v)
        if result.target == self.compaction:
            self.compaction = None

    @precondition(lambda self: self._mor())
    @rule()
    def read_optimized(self):
        self.stats["steps"] += 1
        rows = self.service.read(columns=["id", "v", "_hoodie_file_name"], read_optimized=True).to_pylist()
        # Base files only: a key deleted by a log of one file group and inserted again into
        # another shows in both until compaction (Hudi's read-optimized view does the same;
        # the snapshot invariant holds the merged view to exactly once). Within one file group,
        # never twice.
        where = [(r["id"], r["_hoodie_file_name"].split("_")[0]) for r in rows]
        assert len(where) == len(set(where)), f"a key twice in one file group: {sorted(where)}"
        for r in rows:
            assert r["v"] in self.ever.get(r["id"], ()), \
                f"read-optimized read shows {r} that no kept write committed"

    # --- invariants ------------------------------------------------------------------------

    @invariant()
    def snapshot_equals_model(self):
        rows = self.service.read(columns=["id", "v"]).to_pylist()
        ids = [r["id"] for r in rows]
        assert len(ids) == len(set(ids)), f"duplicate keys in a snapshot: {sorted(ids)}"
        got = {r["id"]: r["v"] for r in rows}
        assert got == self.model
        self.stats["records"] += len(got)

    @invariant()
    def completed_instants_only_grow(self):
        now = {i.time for i in self.service.timeline.completed()}
        gone = self.seen_completed - now - self.undone
        assert not gone, f"completed instants {sorted(gone)} left the timeline"
        self.seen_completed = now

    @invariant()
    def latest_slices_hold_their_committed_files(self):
        table = self.service
        timeline = table.timeline
        latest = {(s.partition, s.file_id): s.base_instant
                  for s in table.file_system_view().latest_slices_for_write()}
        for inst in timeline.completed_writes():
            for s in table.active.commit_metadata(inst).write_stats():
                name = s.path.rsplit("/", 1)[-1]
                parsed = BaseFileName.parse(name) or LogFileName.parse(name)
                base = parsed.instant_time if isinstance(parsed, BaseFileName) else parsed.base_instant
                if latest.get((s.partition_path, s.file_id)) == base:
                    assert table.storage.exists(s.path), \
                        f"{s.path} of completed {inst.time} is missing from a latest file slice"


class MorBucket(Interleavings):
    TABLE_TYPE, INDEX, NAME = "MERGE_ON_READ", "BUCKET", "mor-bucket"


class MorSimple(Interleavings):
    TABLE_TYPE, INDEX, NAME = "MERGE_ON_READ", "SIMPLE", "mor-simple"


class CowSimple(Interleavings):
    TABLE_TYPE, INDEX, NAME = "COPY_ON_WRITE", "SIMPLE", "cow-simple"


def _run(machine, reliability, scenario: str) -> None:
    stats = new_stats(machine.NAME)
    case = reliability.case("concurrency", scenario, outcome="survived")
    run_state_machine_as_test(machine, settings=PROFILE)
    case.records_checked = stats["records"]
    case.detail = (f"{stats['examples']} examples, {stats['steps']} steps, {stats['commits']} commits, "
                   f"{stats['conflicts']} conflicts, {stats['crashes']} crashes, "
                   f"{stats['compactions']} compactions, {stats['cleans']} cleans, "
                   f"{stats['rollbacks']} rollbacks, {stats['archived']} instants archived")
    assert stats["commits"] and stats["conflicts"], stats  # the machine did reach both outcomes


def test_mor_bucket_interleavings(reliability):
    _run(MorBucket, reliability, "writers, compaction, clean, rollback and readers interleaved "
         "(MOR, BUCKET index)")


def test_mor_simple_interleavings(reliability):
    _run(MorSimple, reliability, "writers, compaction, clean, rollback and readers interleaved "
         "(MOR, SIMPLE index)")


def test_cow_interleavings(reliability):
    _run(CowSimple, reliability, "writers, clean, rollback and readers interleaved "
         "(COW, SIMPLE index)")


# --- regressions the machines found ----------------------------------------------------------

def test_two_writers_creating_one_bucket_conflict(tmp_path, reliability):
    """Found by the MOR/BUCKET machine: two writers that each found bucket 0 of a partition empty
    both created a file group for it (different random file ids) and both committed. A later
    delete of a key was routed to one of the two file groups while the key lived in the other:
    the delete was acknowledged and the record stayed (or a key ended up in both: duplicates)."""
    case = reliability.case("concurrency", "two writers create the same bucket at once "
                            "(MOR, BUCKET index): the second commit conflicts", outcome="survived")
    path = str(tmp_path)
    create_table(path, name="t", record_key="id", partition_by="p", ordering_field="ts",
                 table_type="MERGE_ON_READ", index="BUCKET", schema=SCHEMA,
                 options={**OCC, "hoodie.bucket.index.num.buckets": "1"})
    a, b = open_writer(path), open_writer(path)
    try:
        ta = a.write(batch(["k1"], 1, "A"), "upsert", commit=False)
        tb = b.write(batch(["k3"], 2, "B"), "upsert", commit=False)  # same partition, bucket 0
        a.commit(ta)
        with pytest.raises(CommitConflictError, match="bucket") as e:
            b.commit(tb)
        assert e.value.winner == ta
        groups = {s.file_id for s in a.file_system_view().latest_slices() if s.partition == "a"}
        assert len(groups) == 1, f"bucket 0 of partition a has {len(groups)} file groups"
        b.upsert(batch(["k3"], 3, "B2"))  # the retry lands in the bucket's one file group
        a.delete(batch(["k1"], 4, "-"))
        rows = a.read(columns=["id", "v"]).to_pylist()
        assert rows == [{"id": "k3", "v": "B2"}]
        groups = {s.file_id for s in a.file_system_view().latest_slices() if s.partition == "a"}
        assert len(groups) == 1
        case.records_checked = len(rows)
    finally:
        for t in (a, b):
            t.heartbeats.stop_all()


def test_compaction_after_archival_keeps_the_archived_commits_log_records(tmp_path, reliability):
    """Found by the MOR machines (nightly profile): archive, then compact. execute_compaction
    passes ``table.timeline.completed_write_times`` (the active timeline only) to its tasks, and
    compact_operation reads a slice with ``is_visible=lambda x: x in task.committed and x < t``:
    the log blocks of commits already archived are skipped, and the new base file holds the value
    from before them. The reader counts instants older than the active timeline as committed."""
    reliability.case("concurrency", "compaction after archival keeps log records of archived "
                     "commits (MOR)", outcome="survived", records_checked=3)
    path = str(tmp_path)
    create_table(path, name="t", record_key="id", partition_by="p", ordering_field="ts",
                 table_type="MERGE_ON_READ", index="SIMPLE", schema=SCHEMA)
    t = open_table(path)
    t.upsert(batch(["k1"], 1, "v1"))
    t.upsert(batch(["k1"], 2, "v2"))  # a log block on k1's file slice
    t.upsert(batch(["k2"], 3, "x"))
    t.upsert(batch(["k4"], 4, "y"))
    archived = t.archive({"hoodie.keep.min.commits": "2", "hoodie.keep.max.commits": "3"}).archived
    assert len(archived) == 2  # both commits of k1
    expected = {"k1": "v2", "k2": "x", "k4": "y"}
    assert {r["id"]: r["v"] for r in t.read(columns=["id", "v"]).to_pylist()} == expected
    plan = t.schedule_compaction(force=True).instant
    t.run_compaction(plan)
    assert t.commit_compaction(plan).committed
    assert {r["id"]: r["v"] for r in t.read(columns=["id", "v"]).to_pylist()} == expected


def test_rolling_back_a_commit_whose_replaced_versions_were_cleaned_is_refused(tmp_path, reliability):
    """Found by the COW machine: clean (one commit retained), then roll back the latest commit
    twice. The second rollback deleted the only base file version left of its file groups: the
    table read back empty. Such a rollback is now refused, and the table keeps its records."""
    from lakehouse.errors import TimelineError
    case = reliability.case("concurrency", "rollback of a commit whose replaced file versions a clean "
                            "deleted (COW) is refused", outcome="rejected",
                            detail="TimelineError naming the versions; records kept")
    t = lakehouse.create_table(str(tmp_path / "t"), name="r", table_type="COPY_ON_WRITE", record_key="id",
                               ordering_field="ts", partition_by="p")
    for ts in (1, 2, 3):
        t.upsert(pa.table({"id": ["a", "b"], "p": ["x", "x"], "ts": [ts, ts], "v": [ts, ts]}))
    t.clean(options={"hoodie.cleaner.commits.retained": 1})
    t.rollback()  # its replaced version (ts=2) is still there: fine
    assert sorted(t.read(columns=["v"]).column("v").to_pylist()) == [2, 2]
    with pytest.raises(TimelineError, match="cleaned|deleted by a clean"):
        t.rollback()  # the version it replaced (ts=1) was cleaned
    assert sorted(t.read(columns=["v"]).column("v").to_pylist()) == [2, 2]
    # Its commit file damaged, the rollback cannot read what it replaced: the files tell (the
    # group's only version is the commit's own, and a clean deleted files of that group).
    commit = tmp_path / "t" / t.active.path(t.timeline.completed_writes().last)
    background.wait_all()  # the Iceberg publisher reads commit files
    commit.write_bytes(b"{nope")
    with pytest.raises(TimelineError, match="deleted by a clean"):
        lakehouse.open_table(str(tmp_path / "t")).rollback()
    assert len(list((tmp_path / "t" / "x").glob("*.parquet"))) == 1
    case.records_checked = 2


def test_a_corrupt_commit_is_not_rolled_back_over_a_clean_that_crashed(tmp_path, reliability):
    """Found by review: the check without commit metadata trusted completed cleans only, so a
    clean that deleted the older versions and then crashed let the rollback delete the group's
    last base file. The files themselves tell now: a base file holding records older than its
    instant rewrote a version that must still be there."""
    from lakehouse import faults
    from lakehouse.errors import TimelineError
    case = reliability.case("concurrency", "rollback of a corrupt commit after a clean crashed before "
                            "completing (COW) is refused", outcome="rejected",
                            detail="TimelineError; the last base file kept")
    path = tmp_path / "t"
    t = lakehouse.create_table(str(path), name="r", table_type="COPY_ON_WRITE", record_key="id",
                               ordering_field="ts")
    for keys, ts in ((["a", "b"], 1), (["a"], 2), (["a"], 3)):
        t.upsert(pa.table({"id": keys, "ts": [ts] * len(keys), "v": [ts] * len(keys)}))
    faults.activate("clean.before_complete", "raise")
    try:
        with pytest.raises(faults.InjectedFault):
            t.clean(options={"hoodie.cleaner.policy": "KEEP_LATEST_FILE_VERSIONS",
                             "hoodie.cleaner.fileversions.retained": 1})
    finally:
        faults.reset()
    [base] = list(path.glob("*.parquet"))
    background.wait_all()  # the Iceberg publisher reads commit files
    (path / t.active.path(t.timeline.completed_writes().last)).write_bytes(b"{nope")
    with pytest.raises(TimelineError, match="deleted by a clean"):
        lakehouse.open_table(str(path)).rollback()
    assert list(path.glob("*.parquet")) == [base]
    case.records_checked = 2
