"""Rollback of failed (or the latest completed) writes, as a ``rollback`` instant.

The plan (``<r>.rollback.requested``) lists every file the target instant may have written: its
markers, plus the write stats it recorded on the timeline. Executing the plan is idempotent (a
missing file counts as deleted), so an interrupted rollback is simply executed again. Order:

1. plan requested, 2. inflight, 3. data files removed, 4. the target's timeline files removed
(for a completed target, its completed file goes *first*, so its data turns invisible before any
file disappears), 5. ``<r>.rollback`` completed, 6. markers removed.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakehouse.columns import COMMIT_TIME
from lakehouse.commit import complete, exclusive, request, start
from lakehouse.errors import CorruptFileError, TimelineError
from lakehouse.faults import fault_point
from lakehouse.file_group.naming import BaseFileName, LogFileName
from lakehouse.log.block import encode_rollback_command_block
from lakehouse.log.reader import iter_log_blocks
from lakehouse.services.archive import archive_files
from lakehouse.storage.base import Storage
from lakehouse.timeline.active import ActiveTimeline, Timeline
from lakehouse.timeline.avro_files import (InstantInfo, RollbackMetadata, RollbackPartitionMetadata,
                                           RollbackPlan, RollbackRequest)
from lakehouse.timeline.commit_metadata import CommitMetadata
from lakehouse.timeline.instant import Action, Instant, State
from lakehouse.io.markers import Markers, MarkerType
from lakehouse import layout
from lakehouse.consistent_hashing import delete_rings_of

if TYPE_CHECKING:
    from lakehouse.meta_client import TableMetaClient

ROLLBACKABLE = (Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT)
# A completed compaction rolls back too (its plan goes with it); a pending one is undone by
# services.compaction.undo_execution instead.


@dataclass(frozen=True)
class RollbackResult:
    rollback_instant: str
    target: str
    files_deleted: int
    already_done: bool = False


def _fid(name: str) -> str:
    bn = BaseFileName.parse(name)
    if bn:
        return bn.file_id
    ln = LogFileName.parse(name)
    return ln.file_id if ln else ""


Written = tuple[dict[str, set[str]], dict[str, set[str]]]  # (files to delete, logs to mark) by partition


def _commit_unreadable(active: ActiveTimeline, target: Instant) -> bool:
    """A completed target whose commit file cannot be parsed: its write stats are lost."""
    if not target.is_completed:
        return False
    try:
        active.commit_metadata(target)
    except CorruptFileError:
        return True
    return False


def _scanned_files(storage: Storage, target: str) -> Written:
    """What ``target`` wrote, found without its commit metadata: base files by the instant in
    their name, log files by their blocks' instant headers (created by it when its block comes
    first, appended to otherwise). Reads every log file: only for a corrupt commit file."""
    delete: dict[str, set[str]] = defaultdict(set)
    append: dict[str, set[str]] = defaultdict(set)
    for info in storage.list("", recursive=True):
        if info.is_dir or layout.in_metafolder(info.path):
            continue
        partition, _, name = info.path.rpartition("/")
        bn = BaseFileName.parse(name)
        if bn is not None:
            if bn.instant_time == target:
                delete[partition].add(name)
            continue
        if LogFileName.parse(name) is None:
            continue
        times = [b.instant_time for b in iter_log_blocks(storage.read(info.path), info.path)]
        if target in times:
            (delete if times[0] == target else append)[partition].add(name)
    return delete, append


def _written_files(active: ActiveTimeline, target: Instant, scanned: Written | None = None) -> Written:
    """(files to delete, log files to mark rolled back) by partition; ``scanned``: found by
    :func:`_scanned_files` instead, the target's commit file being unreadable."""
    if scanned is not None:
        return scanned
    delete: dict[str, set[str]] = defaultdict(set)
    append: dict[str, set[str]] = defaultdict(set)
    for m in Markers(active.storage, target.time).all():
        if m.type is MarkerType.APPEND:
            append[m.partition].add(m.file_name)
        else:
            delete[m.partition].add(m.file_name)
    # Write stats recorded on the timeline cover the case where markers are already gone.
    for state in (State.COMPLETED, State.INFLIGHT):
        inst = target.with_state(state)
        if not active.storage.exists(active.path(inst)):
            continue
        try:
            meta = CommitMetadata.from_bytes(active.read(inst), active.path(inst))
        except CorruptFileError:
            continue  # a torn inflight file of a crashed writer: markers cover it
        for s in meta.write_stats():
            name = s.file_name
            created = name.endswith(".parquet") or (LogFileName.parse(name) is not None
                                                    and s.log_offset in (0, None))
            (delete if created else append)[s.partition_path].add(name)
    for p in delete:
        append[p] -= delete[p]
    return delete, append


def plan_rollback(active: ActiveTimeline, target: Instant, scanned: Written | None = None) -> RollbackPlan:
    delete, append = _written_files(active, target, scanned)
    requests = []
    for p in sorted(set(delete) | set(append)):
        paths = sorted(f"{p}/{n}" if p else n for n in delete.get(p, ()))
        logs = {(f"{p}/{n}" if p else n): 0 for n in sorted(append.get(p, ()))}
        if paths:
            requests.append(RollbackRequest(partition_path=p, file_id="", latest_base_instant="",
                                            files_to_be_deleted=tuple(paths)))
        for path, size in logs.items():
            requests.append(RollbackRequest(partition_path=p, file_id=_fid(path.rsplit("/", 1)[-1]),
                                            latest_base_instant="", log_blocks_to_be_deleted={path: size}))
    return RollbackPlan(instant_to_rollback=InstantInfo(commit_time=target.time, action=str(target.action)),
                        rollback_requests=tuple(requests))


def _execute(storage: Storage, plan: RollbackPlan, rollback_time: str) -> dict[str, RollbackPartitionMetadata]:
    target = plan.instant_to_rollback.commit_time
    by_partition: dict[str, dict] = defaultdict(lambda: {"ok": [], "logs": {}})
    for req in plan.rollback_requests:
        for path in req.files_to_be_deleted:
            if not _written_by(storage, path, target):
                continue
            storage.delete(path)
            fault_point("rollback.mid_delete")
            by_partition[req.partition_path]["ok"].append(path)
        for path in req.log_blocks_to_be_deleted:
            if storage.exists(path) and storage.supports_append:
                storage.append(path, encode_rollback_command_block(rollback_time, target))
            if storage.exists(path):
                by_partition[req.partition_path]["logs"][path] = storage.size(path)
    return {p: RollbackPartitionMetadata(partition_path=p, success_delete_files=tuple(v["ok"]),
                                         rollback_log_files=v["logs"])
            for p, v in by_partition.items()}


def _written_by(storage: Storage, path: str, target: str) -> bool:
    """Whether ``path`` may be deleted as ``target``'s. Base file names carry their instant; a
    log file's name does not, and a concurrent writer can hold the very name a failed one meant
    to create (its marker left behind): the first block tells whose file it is."""
    if LogFileName.parse(path.rsplit("/", 1)[-1]) is None:
        return True
    try:
        data = storage.read(path)
    except FileNotFoundError:
        return True
    for block in iter_log_blocks(data, path):
        t = block.instant_time
        return t is None or t == target  # an unreadable (torn) first block is the failed write's
    return True


def _finish(meta: "TableMetaClient", inflight: Instant, plan: RollbackPlan, started: float) -> RollbackResult:
    active = meta.active
    storage = active.storage
    target_time = plan.instant_to_rollback.commit_time
    target_action = Action(plan.instant_to_rollback.action)
    # A completed target turns uncommitted first: its data leaves every read in one step, and a
    # crash from here on leaves a pending instant that this rollback (resumed) finishes.
    storage.delete(active.path(Instant(target_time, target_action, State.COMPLETED)))
    partitions = _execute(storage, plan, inflight.time)
    if target_action is Action.REPLACE_COMMIT and meta.config.consistent_hashing:
        # A clustering's next hash ring goes with it (the ring it planned on is in force again).
        delete_rings_of(storage, target_time)
    active.delete_instant(target_time, target_action)
    fault_point("rollback.before_complete")
    done = RollbackMetadata(
        start_rollback_time=inflight.time, time_taken_in_millis=int((time.time() - started) * 1000),
        total_files_deleted=sum(len(p.success_delete_files) for p in partitions.values()),
        commits_rollback=(target_time,), partition_metadata=partitions,
        instants_rollback=(InstantInfo(commit_time=target_time, action=str(target_action)),))
    complete(meta, inflight, done.to_bytes())  # a completed target's Iceberg snapshot goes too
    Markers(storage, target_time).delete_all()
    return RollbackResult(inflight.time, target_time, done.total_files_deleted)


def _only_new_records(storage: Storage, path: str, target: str) -> bool:
    """Whether every record of a base file written at ``target`` was committed by ``target``
    (a file that rewrote an earlier version holds older ones, unless all were updated)."""
    with storage.open_input(path) as f:
        times = pq.ParquetFile(f).read(columns=[COMMIT_TIME]).column(0)
    return len(times) > 0 and pc.min(times).as_py() == target


def _groups_known_before(active: ActiveTimeline, timeline: Timeline, target: str) -> set[str] | None:
    """File ids earlier commits wrote, or None when that cannot be known (some were archived)."""
    if archive_files(active):
        return None
    ids = set()
    for inst in timeline.completed_writes():
        if inst.time < target:
            ids |= {st.file_id for st in active.commit_metadata(inst).write_stats()}
    return ids


def _base_groups_without_history(active: ActiveTimeline, target: Instant, timeline: Timeline,
                                 delete: dict[str, set[str]]) -> list[str]:
    """Without commit metadata: file groups whose only version left is ``target``'s base file,
    unless the target provably created them (every record its own, no earlier commit naming the
    group, nothing archived). A rewrite whose replaced version a clean deleted, even a clean
    that crashed before completing, would otherwise lose the whole group."""
    known: set[str] | None | bool = False  # computed once, when first needed
    gone = []
    for p, names in delete.items():
        versions = [BaseFileName.parse(i.name) for i in active.storage.list(p)]
        for name in sorted(names):
            bn = BaseFileName.parse(name)
            if bn is None or any(v and v.file_id == bn.file_id and v.instant_time < target.time
                                 for v in versions):
                continue
            if known is False:
                known = _groups_known_before(active, timeline, target.time)
            new = known is not None and bn.file_id not in known and \
                _only_new_records(active.storage, f"{p}/{name}" if p else name, target.time)
            if not new:
                gone.append(f"{p}/{bn.file_id} before {target.time}".lstrip("/"))
    return gone


def _replaced_versions_gone(active: ActiveTimeline, target: Instant, timeline: Timeline,
                            scanned: Written | None) -> list[str]:
    """Base file versions that ``target`` (completed) replaced and that no longer exist."""
    if scanned is not None:
        return _base_groups_without_history(active, target, timeline, scanned[0])
    stats = [st for st in active.commit_metadata(target).write_stats()
             if st.path.endswith(".parquet") and st.prev_commit not in ("", "null")]
    listed: dict[str, set[tuple[str, str]]] = {}
    gone = []
    for st in stats:
        if st.partition_path not in listed:
            names = (BaseFileName.parse(i.name) for i in active.storage.list(st.partition_path))
            listed[st.partition_path] = {(b.file_id, b.instant_time) for b in names if b}
        if (st.file_id, st.prev_commit) not in listed[st.partition_path]:
            gone.append(f"{st.partition_path}/{st.file_id} at {st.prev_commit}".lstrip("/"))
    return gone


def rollback_instant(meta: "TableMetaClient", target: Instant, timeline: Timeline | None = None, *,
                     to_savepoint: bool = False) -> RollbackResult:
    """Roll back one pending write, or the latest completed one (``to_savepoint``: one step of
    a restore, which rolls back to a savepoint whose versions the cleaner kept, so the versions
    an intermediate instant replaced may be gone)."""
    active = meta.active
    timeline = timeline if timeline is not None else active.load()
    if target.action not in ROLLBACKABLE:
        raise TimelineError(f"{target} cannot be rolled back here",
                            help="only commits, delta commits and replace commits roll back")
    # A corrupt commit file: its files are found by scanning the table, once for both uses.
    scanned = _scanned_files(active.storage, target.time) if _commit_unreadable(active, target) else None
    if target.is_completed:
        later = [i for i in timeline.completed_writes() if i.time > target.time]
        if later:
            raise TimelineError(
                f"{target.time} is not the latest completed write ({later[-1].time} came after it)",
                help="roll back the later instants first, newest first")
        if any(i.time == target.time for i in timeline.completed().filter(actions=[Action.SAVEPOINT])):
            raise TimelineError(f"{target.time} is savepointed; its files must stay",
                                help="delete the savepoint first (`lakehouse savepoint delete`)")
        gone = [] if to_savepoint else _replaced_versions_gone(active, target, timeline, scanned)
        if gone:
            # Deleting this instant's files would leave those file groups with nothing: the
            # rollback would lose the records it is meant to bring back.
            raise TimelineError(
                f"{target.time} cannot be rolled back: the base file versions it replaced were "
                f"deleted by a clean ({', '.join(gone[:3])}{', ...' if len(gone) > 3 else ''})",
                help="restore a savepoint taken before it, or write the records again; keep more "
                     "versions (hoodie.cleaner.commits.retained) to be able to roll back further")
        pending = [i for i in timeline.pending() if i.time > target.time
                   and i.action in (*ROLLBACKABLE, Action.COMPACTION)]
        if pending:
            # A later pending write or compaction may have built on this instant's files.
            raise TimelineError(
                f"{target.time} cannot be rolled back while {pending[-1].action} {pending[-1].time} "
                "is pending", help="commit or roll back that instant first")
    started = time.time()
    plan = plan_rollback(active, target, scanned)
    if target.is_completed and timeline.is_compaction(target.time):
        # Undo the compaction with its plan, so it does not run again over restored slices.
        plan = RollbackPlan(instant_to_rollback=InstantInfo(commit_time=target.time,
                                                            action=str(Action.COMPACTION)),
                            rollback_requests=plan.rollback_requests)
    # request() checks the lease: a commit step may have taken the lock from a recovery that
    # stalled past it and published the write this would delete.
    requested = request(meta, Action.ROLLBACK, plan.to_bytes())
    fault_point("rollback.after_plan")
    inflight = start(meta, requested)
    return _finish(meta, inflight, plan, started)


def pending_rollback_plan(active: ActiveTimeline, inst: Instant) -> RollbackPlan:
    """The plan of a requested or inflight rollback."""
    req = inst.with_state(State.REQUESTED)
    return RollbackPlan.from_bytes(active.read(req), active.storage.uri(active.path(req)))


def resume_pending_rollbacks(meta: "TableMetaClient", timeline: Timeline) -> list[RollbackResult]:
    """Finish rollbacks a crashed process left requested or inflight."""
    active = meta.active
    out = []
    for inst in timeline.pending().filter(actions=[Action.ROLLBACK]):
        started = time.time()
        plan = pending_rollback_plan(active, inst)
        inflight = inst if inst.is_inflight else start(meta, inst)
        out.append(_finish(meta, inflight, plan, started))
    return out


def rollback_failed_writes(meta: "TableMetaClient", timeline: Timeline | None = None, *,
                           keep: set[str] = frozenset()) -> list[RollbackResult]:
    """Single-writer recovery: every pending write on the timeline is a failed one."""
    active = meta.active
    timeline = timeline if timeline is not None else active.load()
    results = resume_pending_rollbacks(meta, timeline)
    if results:
        timeline = active.load()
    # Pending clusterings are a table service's work, not failed writes (Hudi's
    # getInflightTimelineExcludeCompactionAndClustering): their executor undoes and redoes them.
    pending = [i for i in timeline.pending_writes(ROLLBACKABLE) if i.time not in keep]
    for inst in sorted(pending, reverse=True):
        results.append(rollback_instant(meta, inst, timeline))
    return results


def rollback_expired_writes(meta: "TableMetaClient", timeline: Timeline | None = None) -> Timeline:
    """Several writers (Hudi's LAZY failed-writes policy, BaseHoodieTableServiceClient
    .rollbackFailedWrites): roll back, under the table lock, the pending writes whose heartbeat
    expired (their writer is gone), and finish pending rollbacks. A live writer's write is left
    alone. Returns the timeline after that."""
    active = meta.active
    timeline = timeline if timeline is not None else active.load()
    beats = meta.heartbeats
    writes = [i.time for i in timeline.pending_writes(ROLLBACKABLE)]
    rollbacks = timeline.pending().filter(actions=[Action.ROLLBACK]).instants
    if not rollbacks and not any(beats.is_expired(t) for t in writes):
        return timeline
    with exclusive(meta):
        timeline = active.load()
        live = {i.time for i in timeline.pending() if not beats.is_expired(i.time)}
        done = rollback_failed_writes(meta, timeline, keep=live)
    for r in done:  # only those rolled back: a live writer's heartbeat is not ours to touch
        beats.stop(r.target)
    return active.load()
