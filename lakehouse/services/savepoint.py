"""Savepoints: pin every file a reader needs to read the table as of one completed write.

Format, as Hudi 0.14/0.15 writes it (SavepointActionExecutor, TimelineMetadataUtils):

- the savepoint's instant time *is* the savepointed commit's time, so ``<t>.savepoint`` sits
  beside ``<t>.commit`` (or ``.deltacommit``/``.replacecommit``);
- ``<t>.savepoint.inflight`` (empty) is created first, then ``<t>.savepoint`` holding an Avro
  ``HoodieSavepointMetadata`` {savepointedBy, savepointedAt, comments, partitionMetadata:
  {partition: {partitionPath, savepointDataFile: [file names]}}, version 1};
- ``savepointedAt`` is ``System.currentTimeMillis()``: epoch *milliseconds*;
- the files are the base and log file names of the file slices readable as of ``t`` (Hudi 0.15
  lists slices, 0.14 listed base files only: the slices are a superset, so cleaning keeps more).

Deleting a savepoint removes the completed file, then the inflight one (Hudi's order), so a crash
in between leaves only an inflight file, which no reader or cleaner takes for a savepoint.

A savepoint shares its commit's instant time: ``Timeline.get(t)`` gives the commit, so savepoints
are found by action (:func:`load_timeline`), never by time alone.
"""

from __future__ import annotations

import time as _time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping

from lakehouse.commit import complete
from lakehouse.errors import InstantNotFoundError, TimelineError
from lakehouse.file_group.file_slice import FileSlice
from lakehouse.file_group.naming import BaseFileName, LogFileName
from lakehouse.file_group.view import FileSystemView
from lakehouse.timeline.active import ActiveTimeline, Timeline
from lakehouse.timeline.avro_files import AvroKind, CleanerPlan, CleanMetadata, deserialize, serialize
from lakehouse.timeline.instant import WRITE_ACTIONS, Action, Instant, State

if TYPE_CHECKING:
    from lakehouse.meta_client import TableMetaClient


@dataclass(frozen=True)
class Savepoint:
    instant: str
    savepointed_by: str = ""
    savepointed_at: int = 0  # epoch milliseconds, as Hudi writes it
    comments: str = ""
    files: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # partition -> file names

    @property
    def file_names(self) -> set[str]:
        return {n for names in self.files.values() for n in names}

    def to_avro(self) -> dict:
        return {"savepointedBy": self.savepointed_by, "savepointedAt": self.savepointed_at,
                "comments": self.comments,
                "partitionMetadata": {p: {"partitionPath": p, "savepointDataFile": list(names)}
                                      for p, names in self.files.items()},
                "version": 1}

    @classmethod
    def from_avro(cls, instant: str, r: Mapping) -> "Savepoint":
        files = {p: tuple(m.get("savepointDataFile") or ())
                 for p, m in (r.get("partitionMetadata") or {}).items()}
        return cls(instant, r.get("savepointedBy") or "", int(r.get("savepointedAt") or 0),
                   r.get("comments") or "", files)

    def to_json(self) -> dict:
        return {"instant": self.instant, "savepointed_by": self.savepointed_by,
                "savepointed_at": self.savepointed_at, "comments": self.comments,
                "partitions": len(self.files), "files": sum(len(v) for v in self.files.values())}


# --- timeline ------------------------------------------------------------------------------


def load_timeline(active: ActiveTimeline) -> tuple[Timeline, tuple[str, ...]]:
    """(the timeline, the completed savepoint times), from one listing."""
    timeline = active.load()
    return timeline, tuple(i.time for i in timeline.completed().filter(actions=[Action.SAVEPOINT]))


def _completed(time: str) -> Instant:
    return Instant(time, Action.SAVEPOINT, State.COMPLETED)


def read_savepoint(active: ActiveTimeline, time: str) -> Savepoint:
    inst = _completed(time)
    data = active.read(inst)
    return Savepoint.from_avro(time, deserialize(AvroKind.SAVEPOINT_METADATA, data,
                                                 active.storage.uri(active.path(inst))))


def list_savepoints(meta: "TableMetaClient") -> list[Savepoint]:
    _, times = load_timeline(meta.active)
    return [read_savepoint(meta.active, t) for t in times]


def savepointed_file_names(active: ActiveTimeline, times: tuple[str, ...]) -> set[str]:
    """Every file name any of the savepoints at ``times`` pins (names, as the cleaner compares)."""
    out: set[str] = set()
    for t in times:
        out |= read_savepoint(active, t).file_names
    return out


# --- create / delete -----------------------------------------------------------------------


def _slice_files(s: FileSlice | None) -> list[str]:
    out: list[str] = []
    while s is not None:
        if s.base_file is not None:
            out.append(str(s.base_file.name))
        out.extend(str(lf.name) for lf in s.log_files)
        s = s.previous  # a pending compaction's input slice is read under the new one
    return out


def _parse_group(name: str) -> tuple[str, str] | None:
    """(file id, base instant) of a data file name."""
    b = BaseFileName.parse(name)
    if b is not None:
        return b.file_id, b.instant_time
    lf = LogFileName.parse(name)
    return (lf.file_id, lf.base_instant) if lf is not None else None


def _lookup_window_start(active: ActiveTimeline, timeline: Timeline) -> str:
    """Hudi's check: the earliest instant the last clean (completed or planned) retained."""
    cleans = timeline.filter(actions=[Action.CLEAN]).instants
    if not cleans:
        return ""
    last = cleans[-1]
    if last.is_completed:
        data = active.read(last)
        if not data:
            return ""
        meta = CleanMetadata.from_bytes(data, active.storage.uri(active.path(last)))
        return meta.earliest_commit_to_retain or ""
    plan = pending_clean_plan(active, last)
    return plan.earliest_instant_to_retain.timestamp if plan and plan.earliest_instant_to_retain else ""


def pending_clean_plan(active: ActiveTimeline, inst: Instant) -> CleanerPlan | None:
    """The plan of a pending clean; None for an empty requested file (Hudi drops those)."""
    req = inst.with_state(State.REQUESTED)
    data = active.read(req)
    return CleanerPlan.from_bytes(data, active.storage.uri(active.path(req))) if data else None


def _cleaned_files_needed(active: ActiveTimeline, timeline: Timeline, view: FileSystemView,
                          time: str) -> list[str]:
    """Files a reader as of ``time`` needs that a clean already deleted (or a pending one will).

    Hudi checks only the retained-commit window, which a KEEP_LATEST_FILE_VERSIONS clean does not
    set; so each deleted file of a slice based at or before ``time`` is checked against what is
    left: if no slice of its file group newer than it is readable as of ``time``, the slice a
    reader needs was the one deleted.
    """
    readable = {(s.partition, s.file_id): s.base_instant for s in view.latest_slices(as_of=time)}
    # Groups replaced by then are not read as of ``time``: losing them loses nothing.
    gone = view.replaced_file_groups(as_of=time)
    lost: list[str] = []
    for inst in timeline.filter(actions=[Action.CLEAN]):
        if inst.is_completed:
            data = active.read(inst)
            if not data:
                continue
            meta = CleanMetadata.from_bytes(data, active.storage.uri(active.path(inst)))
            deleted = {p: m.success_delete_files for p, m in meta.partition_metadata.items()}
        else:
            plan = pending_clean_plan(active, inst)
            deleted = {p: tuple(i.file_path.rsplit("/", 1)[-1] for i in infos)
                       for p, infos in (plan.file_paths_to_be_deleted_per_partition
                                        if plan else {}).items()}
        for partition, names in deleted.items():
            for name in names:
                parsed = _parse_group(name)
                if parsed is None or parsed[1] > time or (partition, parsed[0]) in gone:
                    continue
                have = readable.get((partition, parsed[0]))
                if have is None or have <= parsed[1]:
                    lost.append(f"{partition}/{name}" if partition else name)
    return lost


def create_savepoint(meta: "TableMetaClient", instant_time: str | None = None, user: str = "",
                     comments: str = "") -> Savepoint:
    """Savepoint a completed write (default: the latest); its files then survive every clean."""
    active = meta.active
    timeline, existing = load_timeline(active)
    writes = timeline.completed().filter(actions=WRITE_ACTIONS)
    if instant_time is None:
        if not writes.instants:
            raise InstantNotFoundError("the table has no completed write to savepoint",
                                       help="write to the table first")
        instant_time = writes.instants[-1].time
    t = str(instant_time)
    if writes.get(t) is None:
        raise InstantNotFoundError(f"{t} is not a completed commit, delta commit or replace commit",
                                   help="`lakehouse timeline` lists the completed writes")
    if t in existing:
        raise TimelineError(f"{t} is already savepointed",
                            help="delete the savepoint first to take it again")
    window = _lookup_window_start(active, timeline)
    if window and t < window:
        raise TimelineError(f"cannot savepoint {t}: cleaning already retains only instants from "
                            f"{window} on, so files {t} needs may be gone",
                            help="savepoint a later instant")
    view = FileSystemView.load(active.storage, timeline, active)
    lost = _cleaned_files_needed(active, timeline, view, t)
    if lost:
        raise TimelineError(f"cannot savepoint {t}: {len(lost)} file(s) it needs were cleaned or "
                            f"are planned for cleaning, e.g. {lost[0]}",
                            help="savepoint a later instant")
    files: dict[str, list[str]] = {}
    for s in view.latest_slices(as_of=t):
        files.setdefault(s.partition, []).extend(_slice_files(s))
    sp = Savepoint(t, user, int(_time.time() * 1000), comments,
                   {p: tuple(sorted(v)) for p, v in sorted(files.items())})
    inflight = Instant(t, Action.SAVEPOINT, State.INFLIGHT)
    # A crash after the inflight file leaves an attempt that is simply made again.
    if not active.storage.exists(active.path(inflight)):
        active.storage.create(active.path(inflight), b"")
    complete(meta, inflight, serialize(AvroKind.SAVEPOINT_METADATA, sp.to_avro()))
    return sp


def delete_savepoint(meta: "TableMetaClient", instant_time: str) -> None:
    active = meta.active
    _, existing = load_timeline(active)
    t = str(instant_time)
    if t not in existing:
        raise InstantNotFoundError(f"there is no savepoint at {t}",
                                   help="`lakehouse savepoint list` (or Table.list_savepoints()) shows the savepoints")
    active.delete_instant(t, Action.SAVEPOINT, include_completed=True)
