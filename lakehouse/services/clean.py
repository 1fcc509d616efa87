"""Cleaning: delete file slices no reader needs any more, as Hudi's cleaner does (seed 003).

Two steps that share nothing but the timeline, so each may run in its own process:

1. :func:`plan_clean` decides (trigger: ``hoodie.clean.max.commits`` completed writes since the
   last clean) and writes ``<t>.clean.requested``, an Avro ``HoodieCleanerPlan`` (version 2, full
   file paths per partition, the earliest instant to retain, partitions to delete).
2. :func:`execute_clean` moves it to ``<t>.clean.inflight`` (the plan again, as Hudi writes it),
   deletes the files (a file already gone counts as deleted, so a killed clean is simply executed
   again), removes partitions left empty and completes ``<t>.clean`` (``HoodieCleanMetadata``).

What a policy keeps follows Hudi's CleanPlanner (0.14/0.15):

- KEEP_LATEST_COMMITS / KEEP_LATEST_BY_HOURS: the earliest instant to retain ``E`` is the N-th
  latest completed write (never past the earliest pending write or compaction), or the first
  completed write within H hours before *now* (Hudi measures from the wall clock, not from the
  latest commit). Per file group it keeps the latest slice, the latest slice based before ``E``
  (a reader as of ``E`` may read it) and every slice based at or after ``E``; it deletes the rest.
- KEEP_LATEST_FILE_VERSIONS: the latest V slices per file group (one fewer when the group is in
  a pending compaction, whose input slice is kept anyway).
- Always kept: slices a pending compaction reads (base instant >= the operation's), slices with a
  savepointed file. File groups replaced before ``E`` (any replaced group for FILE_VERSIONS) are
  deleted whole. A scanned partition left with no file but ``.hoodie_partition_metadata`` is
  deleted too (never while a write is pending: it might be about to fill it).

Incremental mode (``hoodie.cleaner.incremental.mode``) scans only the partitions written by the
completed instants in [last clean's ``E``, new ``E``); it falls back to all partitions when there
was no such clean, and (beyond Hudi, which rescans only the savepointed commit's partitions) when a
savepoint was deleted since the last clean, because its files may sit in any partition.
"""

from __future__ import annotations

import dataclasses
import functools
import time as _time
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Mapping

from lakehouse.config import CleanConfig
from lakehouse.commit import complete, exclusive, request, start
from lakehouse.engine import Engine, default_engine
from lakehouse.errors import InstantNotFoundError
from lakehouse.faults import fault_point
from lakehouse.file_group.file_slice import FileGroup, FileSlice
from lakehouse.file_group.naming import join
from lakehouse.file_group.view import FileSystemView, list_data_files
from lakehouse.services.rollback import rollback_expired_writes
from lakehouse.services.savepoint import load_timeline, pending_clean_plan, savepointed_file_names
from lakehouse.storage.base import FileInfo, Storage
from lakehouse.timeline.active import ActiveTimeline, Timeline
from lakehouse.timeline.avro_files import (ActionInstant, CleanerPlan, CleanFileInfo, CleanMetadata,
                                           CleanPartitionMetadata, CompactionPlan)
from lakehouse.timeline.instant import WRITE_ACTIONS, Action, Instant, State
from lakehouse.timeline.instant_time import format_instant_time, parse_instant_time
from lakehouse import layout

if TYPE_CHECKING:
    from lakehouse.meta_client import TableMetaClient

SAVEPOINTED_TIMESTAMPS = "savepointed_timestamps"  # Hudi 0.15's plan/metadata extraMetadata key
_CLEAN_KEYS = frozenset(f.metadata["key"] for f in dataclasses.fields(CleanConfig) if "key" in f.metadata)


@dataclass(frozen=True)
class CleanPlanResult:
    instant: str | None  # the requested clean; None for a dry run or when nothing is to be done
    plan: CleanerPlan | None = None
    reason: str = ""
    files: tuple[str, ...] = ()  # paths relative to the table root
    bytes: int = 0
    scanned_partitions: tuple[str, ...] = ()
    incremental: bool = False
    dry_run: bool = False

    @property
    def planned(self) -> bool:
        return self.plan is not None

    def to_json(self) -> dict:
        p = self.plan
        return {"action": "clean", "step": "plan", "instant": self.instant, "dry_run": self.dry_run,
                "policy": p.policy if p else None,
                "earliest_instant_to_retain": (p.earliest_instant_to_retain.timestamp
                                               if p and p.earliest_instant_to_retain else None),
                "files": len(self.files), "bytes": self.bytes,
                "partitions_to_delete": list(p.partitions_to_be_deleted) if p else [],
                "scanned_partitions": len(self.scanned_partitions),
                "incremental": self.incremental, "reason": self.reason}


@dataclass(frozen=True)
class CleanResult:
    instant: str | None
    files_deleted: int = 0
    bytes_freed: int = 0
    partitions_deleted: tuple[str, ...] = ()
    failed_files: tuple[str, ...] = ()
    earliest_retained: str = ""
    reason: str = ""  # why nothing (more) was done
    resumed: tuple[str, ...] = ()  # pending cleans finished first (clean() only)

    def to_json(self) -> dict:
        return {"action": "clean", "instant": self.instant, "files_deleted": self.files_deleted,
                "bytes_freed": self.bytes_freed, "partitions_deleted": list(self.partitions_deleted),
                "failed_files": list(self.failed_files), "earliest_retained": self.earliest_retained,
                "resumed": list(self.resumed), "reason": self.reason}


def clean_config(meta: "TableMetaClient", config: CleanConfig | None = None) -> CleanConfig:
    if config is not None:
        return config
    return CleanConfig.from_options(meta.options(None, "clean"))


# --- deciding --------------------------------------------------------------------------------


def _read_clean_metadata(active: ActiveTimeline, inst: Instant) -> CleanMetadata | None:
    data = active.read(inst)
    return CleanMetadata.from_bytes(data, active.storage.uri(active.path(inst))) if data else None


def _commits_since_last_clean(timeline: Timeline, last: CleanMetadata | None) -> int:
    # Hudi counts completed commits after the last clean's lastCompletedCommitTimestamp.
    since = last.last_completed_commit_timestamp if last else ""
    return sum(1 for i in timeline.completed().filter(actions=WRITE_ACTIONS) if i.time > since)


def _now(now: datetime | str | None) -> datetime:
    if now is None:
        return datetime.now(timezone.utc)
    return parse_instant_time(now) if isinstance(now, str) else now


def _cutoff(now: datetime, hours: int, timeline_timezone: str) -> str:
    """``now - hours`` as an instant time in the timeline's zone (Java tables may use LOCAL)."""
    dt = now - timedelta(hours=hours)
    if timeline_timezone.upper() != "LOCAL":
        return format_instant_time(dt)
    local = dt.astimezone()
    return local.strftime("%Y%m%d%H%M%S") + f"{local.microsecond // 1000:03d}"


def earliest_instant_to_retain(timeline: Timeline, cfg: CleanConfig,
                               now: datetime | str | None = None,
                               timeline_timezone: str = "UTC") -> tuple[Instant | None, str]:
    """Hudi's CleanerUtils.getEarliestCommitToRetain; (None, why) when there is none."""
    completed = timeline.completed_writes().instants
    if cfg.policy == "KEEP_LATEST_COMMITS":
        n = cfg.commits_retained
        if len(completed) <= n:
            return None, (f"{len(completed)} completed commits; hoodie.cleaner.commits.retained "
                          f"keeps the latest {n}")
        nth = completed[len(completed) - n]
        pending = timeline.pending().filter(
            actions=WRITE_ACTIONS | {Action.COMPACTION, Action.LOG_COMPACTION}).instants
        if pending and nth.time > pending[0].time:
            # A pending instant may still need what its predecessors read.
            before = [i for i in completed if i.time < pending[0].time]
            if not before:
                return None, f"pending {pending[0].action} {pending[0].time} precedes every commit"
            return before[-1], ""
        return nth, ""
    if cfg.policy == "KEEP_LATEST_BY_HOURS":
        cutoff = _cutoff(_now(now), cfg.hours_retained, timeline_timezone)
        for i in completed:
            if i.time >= cutoff:
                return i, ""
        return None, f"no completed commit since {cutoff} (hoodie.cleaner.hours.retained={cfg.hours_retained})"
    return None, ""


def _partitions_of(active: ActiveTimeline, inst: Instant) -> set[str]:
    meta = active.commit_metadata(inst)
    return set(meta.partition_to_write_stats) | set(meta.partition_to_replace_file_ids or {})


def _incremental_partitions(active: ActiveTimeline, timeline: Timeline, cfg: CleanConfig,
                            last_clean: Instant | None, last: CleanMetadata | None,
                            earliest: Instant | None, savepoints: tuple[str, ...]) -> list[str] | None:
    """Partitions to scan, or None for all of them."""
    if not cfg.incremental or cfg.policy == "KEEP_LATEST_FILE_VERSIONS" or last is None or last_clean is None:
        return None
    prev = last.earliest_commit_to_retain
    writes = timeline.completed_writes().instants
    if not prev or earliest is None or not writes or prev < writes[0].time:
        return None
    before = set(filter(None, last.extra_metadata.get(SAVEPOINTED_TIMESTAMPS, "").split(",")))
    if before - set(savepoints):
        return None
    out = _kept_partitions(active, last_clean, last)
    for i in writes:
        if prev <= i.time < earliest.time:
            out |= _partitions_of(active, i)
    return sorted(out)


def _kept_partitions(active: ActiveTimeline, clean: Instant, done: CleanMetadata) -> set[str]:
    """Partitions the clean ``clean`` planned to remove but kept (a write was pending when it
    ran): the next incremental clean looks at them again, or nothing would."""
    try:
        plan = pending_clean_plan(active, clean)
    except InstantNotFoundError:
        return set()
    deleted = {p for p, m in done.partition_metadata.items() if m.is_partition_deleted}
    return set(plan.partitions_to_be_deleted) - deleted if plan is not None else set()


# --- listing ---------------------------------------------------------------------------------


def _list(storage: Storage, partitions: list[str] | None) -> dict[str, list[FileInfo]]:
    """Files by partition: every partition (one recursive listing) or just the given ones."""
    by_part: dict[str, list[FileInfo]] = defaultdict(list)
    if partitions is None:
        for f in list_data_files(storage):
            by_part[f.path.rpartition("/")[0]].append(f)
        return {p: fs for p, fs in by_part.items()
                if any(f.name == layout.PARTITION_METAFILE or _is_data(f.name) for f in fs)}
    for p in partitions:
        by_part[p] = list(storage.list(p))
    return dict(by_part)


def _is_data(name: str) -> bool:
    return name.endswith(".parquet") or ".log." in name


def _pending_compaction_bases(active: ActiveTimeline, timeline: Timeline) -> dict[tuple[str, str], str]:
    """(partition, file id) -> base instant of the slice a pending (log) compaction reads."""
    out: dict[tuple[str, str], str] = {}
    for inst in timeline.pending().filter(actions=[Action.COMPACTION, Action.LOG_COMPACTION]):
        req = inst.with_state(State.REQUESTED)
        data = active.read(req)
        if not data:
            continue
        plan = CompactionPlan.from_bytes(data, active.storage.uri(active.path(req)))
        for op in plan.operations:
            key = (op.partition_path or "", op.file_id)
            out[key] = min(out.get(key, op.base_instant_time), op.base_instant_time)
    return out


def _replaced_groups(active: ActiveTimeline, timeline: Timeline) -> dict[tuple[str, str], str]:
    """(partition, file id) -> time of the completed replace commit that replaced it."""
    out: dict[tuple[str, str], str] = {}
    for inst in timeline.completed().filter(actions=[Action.REPLACE_COMMIT]):
        for key in active.commit_metadata(inst).replaced_file_ids():
            out.setdefault(key, inst.time)
    return out


def _just_before(t: str) -> str:
    return format_instant_time(parse_instant_time(t) - timedelta(milliseconds=1))


def _replaced_slices(view: FileSystemView, replaced: dict[tuple[str, str], str],
                     partitions: set[str], cutoff: str | None) -> list[FileSlice]:
    """Slices of groups replaced before ``cutoff`` (any, if None), as they were before it."""
    by_time: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for key, r in replaced.items():
        if key[0] in partitions and (cutoff is None or r < cutoff):
            by_time[r].add(key)
    out: list[FileSlice] = []
    for r, keys in sorted(by_time.items()):
        for g in view.file_groups(as_of=_just_before(r), partitions={p for p, _ in keys}):
            if (g.partition, g.file_id) in keys:
                out.extend(g.slices)
    return out


# --- what to delete --------------------------------------------------------------------------


def _files_of(s: FileSlice) -> list[tuple[str, int]]:
    out = [(s.base_file.path, s.base_file.size)] if s.base_file else []
    return out + [(lf.path, lf.size) for lf in s.log_files]


class _Rules:
    def __init__(self, cfg: CleanConfig, earliest: Instant | None, compaction: dict, savepointed: set[str]):
        self.cfg, self.earliest, self.compaction, self.savepointed = cfg, earliest, compaction, savepointed

    def needed_by_compaction(self, s: FileSlice) -> bool:
        base = self.compaction.get((s.partition, s.file_id))
        return base is not None and s.base_instant >= base

    def savepointed_slice(self, s: FileSlice) -> bool:
        return any(p.rsplit("/", 1)[-1] in self.savepointed for p, _ in _files_of(s))

    def deletable(self, g: FileGroup) -> list[FileSlice]:
        newest_first = list(reversed(g.slices))
        if self.cfg.policy == "KEEP_LATEST_FILE_VERSIONS":
            candidates = [s for s in newest_first if not self.needed_by_compaction(s)]
            keep = self.cfg.file_versions_retained
            if (g.partition, g.file_id) in self.compaction:
                keep -= 1  # its compaction input (kept above) counts as one version
            out = candidates[max(keep, 0):]
        else:
            e = self.earliest.time
            latest = newest_first[0].base_instant
            before_e = next((s.base_instant for s in newest_first if s.base_instant < e), None)
            out = [s for s in newest_first
                   if s.base_instant not in (latest, before_e) and s.base_instant < e
                   and not self.needed_by_compaction(s)]
        # The newest slice of a live group is never deleted, whatever the policy says.
        return [s for s in out if s is not newest_first[0] and not self.savepointed_slice(s)]


BYTES_FREED = "lakehouse.clean.bytes.freed"


def plan_clean(meta: "TableMetaClient", config: CleanConfig | None = None, *,
               now: datetime | str | None = None, dry_run: bool = False,
               extra_metadata: Mapping[str, str] | None = None) -> CleanPlanResult:
    """Decide and, unless ``dry_run``, write ``<t>.clean.requested``; else say why not."""
    cfg = clean_config(meta, config)
    active = meta.active
    timeline, savepoints = load_timeline(active)
    if not cfg.services_enabled:
        return CleanPlanResult(None, reason="table services are off (hoodie.table.services.enabled=false)",
                               dry_run=dry_run)
    pending = timeline.pending().filter(actions=[Action.CLEAN]).instants
    if pending and not cfg.allow_multiple:
        return CleanPlanResult(None, reason=f"clean {pending[0].time} is still pending: "
                               "finish it first (`lakehouse clean run`, or Table.clean()), or set "
                               "hoodie.clean.allow.multiple=true", dry_run=dry_run)
    cleans = timeline.completed().filter(actions=[Action.CLEAN]).instants
    last = _read_clean_metadata(active, cleans[-1]) if cleans else None
    n = _commits_since_last_clean(timeline, last)
    if n < cfg.max_commits:
        since = "the last clean" if last else "the table was created"
        return CleanPlanResult(None, reason=f"{n} of {cfg.max_commits} commits since {since} "
                               "(hoodie.clean.max.commits)", dry_run=dry_run)
    earliest, why = earliest_instant_to_retain(timeline, cfg, now, meta.config.timeline_timezone)
    if earliest is None and cfg.policy != "KEEP_LATEST_FILE_VERSIONS":
        return CleanPlanResult(None, reason=f"nothing to clean: {why}", dry_run=dry_run)

    scan = _incremental_partitions(active, timeline, cfg, cleans[-1] if cleans else None, last,
                                   earliest, savepoints)
    listing = _list(meta.storage, scan)
    partitions = set(listing)
    view = FileSystemView([f for fs in listing.values() for f in fs if not f.is_dir], timeline, active)
    rules = _Rules(cfg, earliest, _pending_compaction_bases(active, timeline),
                   savepointed_file_names(active, savepoints))

    delete: dict[str, list[tuple[str, int]]] = defaultdict(list)
    replaced = _replaced_groups(active, timeline)
    cutoff = None if cfg.policy == "KEEP_LATEST_FILE_VERSIONS" else earliest.time
    for s in _replaced_slices(view, replaced, partitions, cutoff):
        if not rules.savepointed_slice(s):
            delete[s.partition].extend(_files_of(s))
    for g in view.file_groups(partitions=partitions):
        for s in rules.deletable(g):
            delete[g.partition].extend(_files_of(s))

    # Planned even while a write is pending: the execution looks again under the table lock
    # and keeps it then, and the next clean looks at what was kept (_kept_partitions).
    empty: list[str] = []
    for p, files in listing.items():
        doomed = {path for path, _ in delete.get(p, ())}
        rest = [f for f in files if f.is_dir or (f.name != layout.PARTITION_METAFILE and f.path not in doomed)]
        if p and not rest:
            empty.append(p)

    files = sorted((path, size) for fs in delete.values() for path, size in fs)
    if not files and not empty:
        return CleanPlanResult(None, reason=f"nothing to clean: every file slice in the "
                               f"{len(partitions)} scanned partition(s) is still needed",
                               scanned_partitions=tuple(sorted(partitions)),
                               incremental=scan is not None, dry_run=dry_run)
    commits = timeline.completed().filter(actions=WRITE_ACTIONS).instants
    plan = CleanerPlan(
        earliest_instant_to_retain=(ActionInstant(earliest.time, str(earliest.action), "COMPLETED")
                                    if earliest is not None else None),
        last_completed_commit_timestamp=commits[-1].time if commits else "",
        policy=cfg.policy,
        file_paths_to_be_deleted_per_partition={
            p: tuple(CleanFileInfo(meta.storage.uri(path), False) for path, _ in sorted(fs))
            for p, fs in sorted(delete.items()) if fs} | {p: () for p in empty if p not in delete},
        partitions_to_be_deleted=tuple(sorted(empty)),
        extra_metadata={**(extra_metadata or {}),
                        **({SAVEPOINTED_TIMESTAMPS: ",".join(savepoints)} if savepoints else {})})
    instant = None
    if not dry_run:
        instant = request(meta, Action.CLEAN, plan.to_bytes()).time
        fault_point("clean.after_plan")
    return CleanPlanResult(instant, plan, files=tuple(p for p, _ in files),
                           bytes=sum(s for _, s in files), scanned_partitions=tuple(sorted(partitions)),
                           incremental=scan is not None, dry_run=dry_run)


# --- executing -------------------------------------------------------------------------------


def _delete_file(storage: Storage, path: str) -> tuple[str, bool, int, str | None]:
    """(path, deleted or already gone, bytes freed here, error)."""
    try:
        info = storage.info(path)
        existed = storage.delete(path, missing_ok=True)
    except Exception as e:  # noqa: BLE001 - recorded as a failed delete, as Hudi does
        return path, False, 0, f"{type(e).__name__}: {e}"
    fault_point("clean.mid_delete")
    return path, True, info.size if (info is not None and existed) else 0, None


def _delete_partitions(meta: "TableMetaClient", partitions: tuple[str, ...]) -> tuple[str, ...]:
    """Remove the partitions the plan found empty (those still empty), unless a write may be
    putting files in them. Under the table lock: a write creates its instant under it before it
    writes any file, so with no write pending on a fresh timeline, none can write here until
    the folders are gone (the recursive delete would take a racing write's new file with it)."""
    if not partitions:
        return ()
    storage = meta.storage
    deleted = []
    with exclusive(meta):
        timeline = meta.active.load()
        if timeline.pending_writes().instants or timeline.pending_clusterings().instants:
            return ()
        for partition in partitions:
            # Re-checked here: a writer may have put a file in it since the plan was made.
            if not partition or any(e.is_dir or e.name != layout.PARTITION_METAFILE for e in storage.list(partition)):
                continue
            meta.check_lock()  # "no write pending" holds only while the lock does
            storage.delete_dir(partition)
            deleted.append(partition)
    return tuple(deleted)


def _run(meta: "TableMetaClient", inst: Instant, engine: Engine | None) -> CleanResult:
    active, storage = meta.active, meta.storage
    started = _time.time()
    plan = pending_clean_plan(active, inst)
    if plan is None:
        # Hudi drops a clean whose plan is empty instead of failing on it.
        active.delete_instant(inst.time, Action.CLEAN)
        return CleanResult(inst.time, reason="the clean plan was empty; removed it")
    if inst.is_inflight:
        inflight = inst
    else:  # Hudi repeats the plan, byte for byte, in the inflight file
        inflight = start(meta, inst, active.read(inst.with_state(State.REQUESTED)))
    tasks: list[tuple[str, str]] = []
    for p, infos in plan.file_paths_to_be_deleted_per_partition.items():
        # The plan holds full URIs; the partition and the file name locate the file whatever the
        # URI scheme of the writer that planned it.
        tasks.extend((p, join(p, i.file_path.rsplit("/", 1)[-1])) for i in infos
                     if not i.is_bootstrap_base_file)
    cfg = clean_config(meta)
    engine = engine or default_engine()
    results = engine.map(functools.partial(_delete_file, storage), [path for _, path in tasks],
                         parallelism=max(1, min(cfg.parallelism, len(tasks))))
    ok: dict[str, list[str]] = defaultdict(list)
    failed: dict[str, list[str]] = defaultdict(list)
    freed = 0
    errors: list[str] = []
    for (p, _), (path, done, size, err) in zip(tasks, results):
        (ok if done else failed)[p].append(path.rsplit("/", 1)[-1])
        freed += size
        if err:
            errors.append(f"{path}: {err}")
    deleted_parts = _delete_partitions(meta, tuple(plan.partitions_to_be_deleted))
    fault_point("clean.before_complete")
    parts = sorted(set(plan.file_paths_to_be_deleted_per_partition) | set(plan.partitions_to_be_deleted))
    earliest = plan.earliest_instant_to_retain.timestamp if plan.earliest_instant_to_retain else ""
    cleaned = CleanMetadata(
        start_clean_time=inst.time, time_taken_in_millis=int((_time.time() - started) * 1000),
        total_files_deleted=sum(len(v) for v in ok.values()),
        earliest_commit_to_retain=earliest,
        last_completed_commit_timestamp=plan.last_completed_commit_timestamp,
        partition_metadata={p: CleanPartitionMetadata(
            partition_path=p, policy=plan.policy,
            delete_path_patterns=tuple(i.file_path.rsplit("/", 1)[-1]
                                       for i in plan.file_paths_to_be_deleted_per_partition.get(p, ())),
            success_delete_files=tuple(ok.get(p, ())), failed_delete_files=tuple(failed.get(p, ())),
            is_partition_deleted=p in deleted_parts) for p in parts},
        # Hudi's clean metadata counts files, not bytes: the bytes go with it for the history.
        extra_metadata={**plan.extra_metadata, BYTES_FREED: str(freed)})
    complete(meta, inflight, cleaned.to_bytes())  # Iceberg snapshots whose files are gone expire
    # Files that failed to go stay in the file-system view, so the next clean plans them again.
    return CleanResult(inst.time, cleaned.total_files_deleted, freed, deleted_parts,
                       tuple(join(p, n) for p, names in failed.items() for n in names), earliest,
                       reason="; ".join(errors[:3]))


def execute_clean(meta: "TableMetaClient", instant_time: str | None = None, *,
                  engine: Engine | None = None) -> CleanResult:
    """Carry out a requested or inflight clean (default: the oldest pending one)."""
    timeline, _ = load_timeline(meta.active)
    if instant_time is None:
        pending = timeline.pending().filter(actions=[Action.CLEAN]).instants
        if not pending:
            return CleanResult(None, reason="no clean is pending")
        return _run(meta, pending[0], engine)
    inst = timeline.get(str(instant_time))
    if inst is None or inst.action is not Action.CLEAN:
        raise InstantNotFoundError(f"there is no clean at {instant_time}",
                                   help="`lakehouse timeline` lists the instants")
    if inst.is_completed:
        cleaned = _read_clean_metadata(meta.active, inst)
        return CleanResult(inst.time, cleaned.total_files_deleted if cleaned else 0,
                           earliest_retained=cleaned.earliest_commit_to_retain if cleaned else "",
                           reason="already completed")
    return _run(meta, inst, engine)


def clean(meta: "TableMetaClient", config: CleanConfig | None = None, *, now: datetime | str | None = None,
          engine: Engine | None = None, extra_metadata: Mapping[str, str] | None = None) -> CleanResult:
    """Finish pending cleans, then plan and execute a new one if the trigger fires. With several
    writers it first rolls back the writes whose writer died, as Hudi's clean does under the
    LAZY failed-writes policy (``CleanerUtils.rollbackFailedWrites``)."""
    if meta.concurrency.lazy_rollback:
        rollback_expired_writes(meta)
    timeline, _ = load_timeline(meta.active)
    done = [_run(meta, i, engine) for i in timeline.pending().filter(actions=[Action.CLEAN])]
    planned = plan_clean(meta, config, now=now, extra_metadata=extra_metadata)
    if planned.instant is not None:
        done.append(execute_clean(meta, planned.instant, engine=engine))
    if not done:
        return CleanResult(None, reason=planned.reason)
    last = done[-1]
    return CleanResult(
        last.instant, sum(r.files_deleted for r in done), sum(r.bytes_freed for r in done),
        tuple(p for r in done for p in r.partitions_deleted),
        tuple(f for r in done for f in r.failed_files), last.earliest_retained,
        reason="" if planned.instant else planned.reason,
        resumed=tuple(r.instant for r in done[:len(done) - (planned.instant is not None)]))

