"""The Hudi side: what each completed instant changed in the read-optimized view.

The read-optimized view of a file group is its latest committed base file (a pending
compaction's group keeps the base file the compaction reads). Every base file a commit, delta
commit, compaction or replace commit writes is in its write stats, and a replace commit names
the file groups it retires, so replaying commit metadata in timeline order gives the view as of
each instant without listing the table. Files of archived instants are not in any active commit
metadata; they are found by listing, as lakehouse's file-system view does (files older than the
active timeline count as committed).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from lakehouse.errors import CorruptFileError, StorageError
from lakehouse.file_group.naming import BaseFileName, LogFileName
from lakehouse.file_group.view import list_data_files
from lakehouse.storage.base import Storage
from lakehouse.timeline.active import ActiveTimeline, Timeline
from lakehouse.timeline.avro_files import CleanerPlan, CleanMetadata, RollbackMetadata, RollbackPlan
from lakehouse.timeline.instant import Action, Instant, State

# Instants that delete data files: after one, published snapshots may refer to files now gone.
_REMOVING = (Action.CLEAN, Action.ROLLBACK, Action.RESTORE)


@dataclass(frozen=True)
class BaseFileWrite:
    partition: str
    file_id: str
    path: str  # relative to the table
    instant: str  # the base file's instant time
    new_group: bool  # the file group had no earlier slice (Hudi's prevCommit "null")
    # From the write stats: what describes the file should it be gone before it is published.
    records: int = 0
    size: int = 0


@dataclass(frozen=True)
class LogFileWrite:
    """A log file an instant appended blocks to (the snapshot view reads its records)."""

    partition: str
    file_id: str
    path: str  # relative to the table
    name: LogFileName
    size: int


@dataclass(frozen=True)
class InstantChanges:
    instant: Instant
    operation: str  # Hudi's operationType
    compaction: bool
    writes: tuple[BaseFileWrite, ...]
    replaced: frozenset[tuple[str, str]]  # (partition, file id) retired by a replace commit
    logs: tuple[LogFileWrite, ...] = ()  # log files written (a Merge-On-Read delta commit)


def base_file_write(path: str, prev_commit: str | None = None, records: int = 0,
                    size: int = 0) -> BaseFileWrite | None:
    partition, _, name = path.rpartition("/")
    parsed = BaseFileName.parse(name)
    if parsed is None:
        return None
    return BaseFileWrite(partition, parsed.file_id, path, parsed.instant_time,
                         prev_commit in (None, "", "null"), records, size)


def instant_changes(active: ActiveTimeline, timeline: Timeline, inst: Instant) -> InstantChanges:
    meta = active.commit_metadata(inst)
    writes, logs = [], {}
    for s in meta.write_stats():
        w = base_file_write(s.path, s.prev_commit, s.num_writes, s.file_size_in_bytes)
        if w is not None:
            writes.append(w)
            continue
        partition, _, name = s.path.rpartition("/")
        parsed = LogFileName.parse(name)
        if parsed is not None:
            # One log file may take several handles' blocks: the largest size covers them all.
            size = max(s.file_size_in_bytes, logs[s.path].size if s.path in logs else 0)
            logs[s.path] = LogFileWrite(partition, parsed.file_id, s.path, parsed, size)
    return InstantChanges(inst, meta.operation_type, timeline.is_compaction(inst.time), tuple(writes),
                          frozenset(meta.replaced_file_ids()), tuple(logs.values()))


def archived_base_files(storage: Storage, timeline: Timeline) -> list[BaseFileWrite]:
    """The latest base file of each file group written before the active timeline begins."""
    first = timeline.first
    if first is None:
        return []
    latest: dict[tuple[str, str], BaseFileWrite] = {}
    for info in list_data_files(storage):
        w = base_file_write(info.path)
        if w is None or w.instant >= first.time:
            continue
        key = (w.partition, w.file_id)
        if key not in latest or latest[key].instant < w.instant:
            latest[key] = w
    return sorted(latest.values(), key=lambda w: w.path)


def existing_data_files(storage: Storage, partitions: list[str] | None = None) -> set[str]:
    """The table's data files (of ``partitions`` only, if given)."""
    return {info.path for info in list_data_files(storage, partitions)}


def removal_names(timeline: Timeline) -> list[str]:
    """The cleans, rollbacks and restores on ``timeline``, each in its state, by name."""
    return sorted(str(i) for i in timeline if i.action in _REMOVING)


def _removal_partitions(active: ActiveTimeline, inst: Instant) -> set[str] | None:
    """The partitions a clean or rollback deleted files in (or, pending, may delete in); None
    when that is not known (a restore, an unreadable file)."""
    try:
        if inst.action is Action.CLEAN:
            if inst.is_completed:
                return set(CleanMetadata.from_bytes(active.read(inst), active.path(inst)).partition_metadata)
            req = inst.with_state(State.REQUESTED)
            data = active.read(req)
            if not data:
                return set()
            plan = CleanerPlan.from_bytes(data, active.path(req))
            return (set(plan.file_paths_to_be_deleted_per_partition) | set(plan.partitions_to_be_deleted)
                    | set(plan.files_to_be_deleted_per_partition))
        if inst.action is Action.ROLLBACK and inst.is_completed:
            return set(RollbackMetadata.from_bytes(active.read(inst), active.path(inst)).partition_metadata)
    except (FileNotFoundError, LookupError, CorruptFileError):
        return None
    return None


def removed_scope(active: ActiveTimeline, timeline: Timeline, seen: set[str] | None) -> set[str] | None:
    """The partitions where files may be gone since removals ``seen`` (names, as
    :func:`removal_names` gives them) were checked: those the other removals on ``timeline``
    deleted in. None: anywhere (nothing checked before, or a removal whose partitions are not
    known)."""
    if seen is None:
        return None
    out: set[str] = set()
    for inst in timeline:
        if inst.action not in _REMOVING or str(inst) in seen:
            continue
        parts = _removal_partitions(active, inst)
        if parts is None:
            return None
        out |= parts
    return out


def _rollback_target(active: ActiveTimeline, inst: Instant) -> set[str]:
    requested = inst.with_state(State.REQUESTED)
    try:
        plan = RollbackPlan.from_bytes(active.read(requested), active.storage.uri(active.path(requested)))
        return {plan.instant_to_rollback.commit_time}
    except (FileNotFoundError, LookupError, CorruptFileError):
        pass
    if inst.is_completed:
        meta = RollbackMetadata.from_bytes(active.read(inst), active.storage.uri(active.path(inst)))
        return set(meta.commits_rollback)
    return set()


def rolled_back(active: ActiveTimeline, timeline: Timeline, instants: list[str]) -> set[str]:
    """Which of these once-completed instants (in publishing order) were rolled back.

    Only the newest completed write can be rolled back, so rolled-back instants are a run of
    missing instants at the end; missing instants before a completed one were archived. In that
    run, an instant at or after the active timeline's first instant was rolled back (archival
    only removes instants older than all it keeps), and so was one a rollback names (rolling
    back the very first instant leaves nothing older on the timeline)."""
    run = []
    for t in reversed(instants):
        if timeline.is_completed(t):
            break
        run.append(t)
    first = timeline.first
    gone = {t for t in run if first is None or t >= first.time}
    if len(gone) < len(run):
        named: set[str] = set()
        for inst in timeline.filter(actions=[Action.ROLLBACK]):
            named |= _rollback_target(active, inst)
        gone |= {t for t in run if t in named}
    return gone


def removal_fingerprint(timeline: Timeline) -> str:
    """Changes whenever a clean, rollback or restore appears, progresses or is archived."""
    names = sorted(str(i) for i in timeline if i.action in _REMOVING)
    return hashlib.sha256("\n".join(names).encode()).hexdigest()[:32]


def read_footer(storage: Storage, path: str) -> tuple[pq.FileMetaData, int] | None:
    """(parquet footer, file size), or None when the file is gone."""
    try:
        with storage.open_input(path) as f:
            size = f.size()
            return pq.read_metadata(f), size
    except FileNotFoundError:
        return None
    except (pa.ArrowInvalid, OSError) as e:  # StorageError is an OSError too
        if not storage.exists(path):
            return None
        if isinstance(e, StorageError):
            raise
        raise CorruptFileError(storage.uri(path), f"not a readable parquet file ({e})") from None
