"""Conflict detection between concurrent writes, run under the table lock at commit.

A write remembers what the timeline looked like when it started (the newest completed instant
and the instants pending then: :func:`start_marker`). At commit, every write that completed
since is a *concurrent* one, and the commit is refused (:class:`CommitConflictError`) when:

- both touched a file group (wrote to it or replaced it): the second writer's changes were
  computed from a file slice that is no longer the latest, so committing would lose the first
  writer's update (Hudi's file-level strategy);
- both wrote the same record key into different file groups: two writers inserting one new key
  (each into a new or small file group of its own) would leave it in the table twice. Hudi's
  file-level check misses this; lakehouse compares the keys the two writes inserted.
- with the bucket index, both wrote the same bucket of a partition, even through different file
  groups: two writers that each found a bucket empty create a file group for it each (the file
  id is the bucket number and a random rest), and a bucket with two file groups loses records,
  since lookups route a key to one of them only (Hudi's bucket-index conflict strategy).

A compaction is not a conflict for a delta commit that started after it was planned: that write
saw the plan and put its logs on the slice the compaction creates (Hudi's rule). With several
writers compaction is planned past writes in flight (as Hudi plans under OCC), and a write that
logged to a file group a compaction planned since it started covers is the one that yields.
With one writer compaction is only planned while no earlier write is pending.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakehouse.columns import COMMIT_TIME, RECORD_KEY
from lakehouse.config import IndexType
from lakehouse.errors import CommitConflictError
from lakehouse.file_group.naming import LogFileName, bucket_of_file_id
from lakehouse.log.block import decode_avro_data_block, decode_parquet_data_block, BlockType
from lakehouse.log.reader import read_log_file
from lakehouse.properties import read_table_config
from lakehouse.storage.base import Storage
from lakehouse.timeline.active import ActiveTimeline, Timeline
from lakehouse.timeline.avro_files import CompactionPlan, RollbackMetadata
from lakehouse.timeline.commit_metadata import CommitMetadata, WriteStat
from lakehouse.timeline.instant import WRITE_ACTIONS, Action, Instant, State

START_KEY = "lakehouse.occ.start"


def start_marker(timeline: Timeline) -> str:
    """What a write saw when it started, kept in its inflight metadata until its commit (which
    may run in another process: the Airflow commit step)."""
    completed = timeline.completed()
    return json.dumps({"last": completed.last.time if completed.last else "",
                       "pending": sorted(i.time for i in timeline.pending())},
                      separators=(",", ":"))


def _since(marker: str):
    """Whether an instant was not yet completed when the write with ``marker`` started, and
    the marker's (last completed, pending) for other questions."""
    start = json.loads(marker)
    last, pending = start["last"], set(start["pending"])
    return (lambda t: t > last or t in pending), last, pending


def _undone_since(active: ActiveTimeline, timeline: Timeline, marker: str) -> list[tuple[Instant, str]]:
    """(rollback or restore, what it undid) completed since the write with ``marker`` started
    that undid a commit the write could read: the write may have copied its records (a merge
    rewrites a base file with every record in it) and would bring them back."""
    after_start, last, pending = _since(marker)
    out = []
    for i in timeline.completed().filter(actions=[Action.ROLLBACK, Action.RESTORE]):
        if not after_start(i.time):
            continue
        if i.action is Action.RESTORE:
            out.append((i, "writes after a savepoint"))
            continue
        meta = RollbackMetadata.from_bytes(active.read(i), active.path(i))
        undone = [t for t in meta.commits_rollback if t <= last and t not in pending]
        if undone:
            out.append((i, ", ".join(undone)))
    return out


def concurrent_writes(timeline: Timeline, marker: str, own_time: str) -> list[Instant]:
    """Writes completed since the write with ``marker`` started, oldest first."""
    after_start, _, _ = _since(marker)
    return [i for i in timeline.completed().filter(actions=WRITE_ACTIONS)
            if i.time != own_time and after_start(i.time)]


@dataclass(frozen=True)
class _Touch:
    file_groups: frozenset[tuple[str, str]]
    inserts: tuple[WriteStat, ...]  # files holding records the write inserted


def _touched(meta: CommitMetadata) -> _Touch:
    fgs = {(s.partition_path, s.file_id) for s in meta.write_stats()}
    for p, fids in (meta.partition_to_replace_file_ids or {}).items():
        fgs.update((p, f) for f in fids)
    return _Touch(frozenset(fgs), tuple(s for s in meta.write_stats() if s.num_inserts > 0))


def _written_keys(storage: Storage, stats: tuple[WriteStat, ...], instant_time: str,
                  partitions: set[str] | None) -> dict[str, set[str]]:
    """Record keys ``instant_time`` wrote into the files of ``stats``, by partition."""
    out: dict[str, set[str]] = {}
    for s in stats:
        if partitions is not None and s.partition_path not in partitions:
            continue
        keys: list[pa.Array] = []
        if s.path.endswith(".parquet"):
            t = pq.read_table(storage.open_input(s.path), columns=[RECORD_KEY, COMMIT_TIME])
            keys.append(t.filter(pc.equal(t.column(COMMIT_TIME), instant_time))
                        .column(RECORD_KEY).combine_chunks())
        else:
            for block in read_log_file(storage, s.path):
                if block.instant_time != instant_time or not block.is_data:
                    continue
                decode = (decode_parquet_data_block if block.block_type == BlockType.PARQUET_DATA
                          else decode_avro_data_block)
                keys.append(decode(block).column(RECORD_KEY).combine_chunks())
        bucket = out.setdefault(s.partition_path, set())
        for k in keys:
            bucket.update(k.to_pylist())
    return out


def _shared_keys(mine: dict[str, set[str]], theirs: dict[str, set[str]], global_: bool) -> list[str]:
    if global_:
        a = set().union(*mine.values()) if mine else set()
        b = set().union(*theirs.values()) if theirs else set()
        return sorted(a & b)
    return sorted(k for p, ks in mine.items() for k in ks & theirs.get(p, set()))


def _buckets(fgs: frozenset[tuple[str, str]]) -> dict[tuple[str, int], tuple[str, str]]:
    out = {}
    for p, f in fgs:
        b = bucket_of_file_id(f)
        if b is not None:
            out[(p, b)] = (p, f)
    return out


def _shared_buckets(storage: Storage, mine: frozenset, theirs: frozenset) -> set[tuple[str, str]]:
    """File groups of ``mine`` in a bucket that ``theirs`` wrote through another file group (only
    on a bucket-index table: other file ids may start with eight digits by chance)."""
    a, b = _buckets(mine), _buckets(theirs)
    shared = {a[k] for k in a.keys() & b.keys() if a[k] != b[k]}
    if not shared:
        return set()
    return shared if read_table_config(storage).index_type is IndexType.BUCKET else set()


def _sample(items, n: int = 5) -> str:
    items = sorted(items)
    shown = ", ".join(str(i) for i in items[:n])
    return shown + (f" and {len(items) - n} more" if len(items) > n else "")


def _on_slice_of(stat: WriteStat, base_instant: str) -> bool:
    name = LogFileName.parse(stat.file_name)
    return name is not None and name.base_instant >= base_instant


def _check_plans_since(active: ActiveTimeline, timeline: Timeline, marker: str, own_time: str,
                       own: CommitMetadata, mine: _Touch) -> None:
    """A compaction planned after this write started, on a file group this write logged to: the
    write's logs sit on the slice the compaction replaces and would be lost with it. Under several
    writers compaction is planned past writes in flight, as Hudi's ScheduleCompactionActionExecutor
    plans under OCC; this is the check that settles the overlap (Hudi's
    SimpleConcurrentFileWritesConflictResolutionStrategy takes pending compactions scheduled after
    the write started as candidates). The write is redone on the new state, onto the plan's slice."""
    after_start, _, _ = _since(marker)
    for plan_inst in timeline.pending_compactions():
        if not after_start(plan_inst.time) or not mine.file_groups:
            continue
        requested = plan_inst.with_state(State.REQUESTED)
        plan = CompactionPlan.from_bytes(active.read(requested), active.path(requested))
        planned = {(o.partition_path, o.file_id) for o in plan.operations} & mine.file_groups
        # Logs the write put on the plan's new slice (it listed the table after the plan) are safe.
        shared = {(s.partition_path, s.file_id) for s in own.write_stats()
                  if (s.partition_path, s.file_id) in planned and not _on_slice_of(s, plan_inst.time)}
        if shared:
            raise CommitConflictError(
                f"instant {own_time} conflicts with compaction {plan_inst.time}, planned while this "
                f"write was in flight on the same file group(s): "
                f"{_sample(f'{p}/{f}' if p else f for p, f in shared)}",
                help="nothing of this write is visible; write the batch again (it is re-applied "
                     "onto the compaction's new slices), or let "
                     "hoodie.write.num.retries.on.conflict.failures do it",
                winner=plan_inst.time, file_groups=tuple(sorted(shared)))


def check_conflicts(active: ActiveTimeline, timeline: Timeline, own_time: str,
                    own: CommitMetadata, *, global_index: bool) -> None:
    """Raise :class:`CommitConflictError` if a write completed since ``own`` started overlaps it."""
    marker = own.extra_metadata.get(START_KEY)
    if marker is None:
        return  # written by a single-writer client: nothing to compare against
    for undo, what in _undone_since(active, timeline, marker):
        raise CommitConflictError(
            f"instant {own_time} conflicts with {undo.action.value} {undo.time}, which undid "
            f"{what} after this write had read the table",
            help="nothing of this write is visible; write the batch again on the table as it is now",
            winner=undo.time)
    mine = _touched(own)
    _check_plans_since(active, timeline, marker, own_time, own, mine)
    my_keys: dict[str, set[str]] | None = None
    for inst in concurrent_writes(timeline, marker, own_time):
        theirs_meta = active.commit_metadata(inst)
        theirs = _touched(theirs_meta)
        if timeline.is_compaction(inst.time) and inst.time < own_time:
            continue  # we wrote onto the slice this compaction creates
        shared = (mine.file_groups & theirs.file_groups) or _shared_buckets(
            active.storage, mine.file_groups, theirs.file_groups)
        if shared:
            raise CommitConflictError(
                f"instant {own_time} conflicts with {inst.action.value} {inst.time}, which "
                f"committed first and changed the same file group(s) or bucket(s): "
                f"{_sample(f'{p}/{f}' if p else f for p, f in shared)}",
                help="nothing of this write is visible; write the batch again (it is re-applied to "
                     "the new state), or let hoodie.write.num.retries.on.conflict.failures do it",
                winner=inst.time, file_groups=tuple(sorted(shared)))
        if not mine.inserts or not theirs.inserts:
            continue
        parts = None if global_index else {s.partition_path for s in mine.inserts}
        their_keys = _written_keys(active.storage, theirs.inserts, inst.time, parts)
        if not any(their_keys.values()):
            continue
        if my_keys is None:
            my_keys = _written_keys(active.storage, mine.inserts, own_time, None)
        keys = _shared_keys(my_keys, their_keys, global_index)
        if keys:
            raise CommitConflictError(
                f"instant {own_time} conflicts with {inst.action.value} {inst.time}, which "
                f"committed first and inserted the same record key(s) into other file groups: "
                f"{_sample(keys)}",
                help="nothing of this write is visible; write the batch again: the keys are found "
                     "in the table now and become updates",
                winner=inst.time, keys=tuple(keys))


def check_clustering(active: ActiveTimeline, timeline: Timeline, own_time: str, own: CommitMetadata) -> None:
    """Raise :class:`CommitConflictError` if the write touched a file group that a clustering
    pending now rewrites, or that a completed replace commit replaced: the clustering's new file
    groups would not hold this write's changes, and a replaced group is never read again. Run
    under the table lock at every commit, one writer too (the clustering is a table service in
    another process). As Hudi's default conflict strategy, the writer is the one that fails
    (SimpleConcurrentFileWritesConflictResolutionStrategy: the clustering checks nothing)."""
    mine = _touched(own).file_groups
    if not mine:
        return
    planned = active.pending_clustering_file_groups(timeline)
    for t in sorted({t for fg, t in planned.items() if fg in mine and t != own_time}):
        shared = {fg for fg in mine if planned.get(fg) == t}
        raise CommitConflictError(
            f"instant {own_time} changed file group(s) that clustering {t} is "
            f"rewriting: {_sample(f'{p}/{f}' if p else f for p, f in shared)}",
            help="nothing of this write is visible; write the batch again once the clustering "
                 "is committed (its records then go to the new file groups), or roll the "
                 f"clustering back (`lakehouse rollback <table> {t}`)",
            winner=t, file_groups=tuple(sorted(shared)))
    for inst in timeline.completed().filter(actions=[Action.REPLACE_COMMIT]):
        if inst.time == own_time:
            continue
        shared = mine & active.commit_metadata(inst).replaced_file_ids()
        if shared:
            raise CommitConflictError(
                f"instant {own_time} changed file group(s) that replace commit {inst.time} "
                f"replaced while this write was in flight: "
                f"{_sample(f'{p}/{f}' if p else f for p, f in shared)}",
                help="nothing of this write is visible; write the batch again (it goes to the new "
                     "file groups)",
                winner=inst.time, file_groups=tuple(sorted(shared)))
