"""The partitions a compaction plan lists: Hudi's incremental table service (RFC-83,
``hoodie.table.services.incremental.enabled``), so planning a compaction costs requests that
follow the writes since the last plan, not the table's partition count.

Each plan records in its extraMetadata (the table-version-6 plan has no field for it; Hudi 1.x's
``missingSchedulePartitions``):

- ``lakehouse.compaction.missing.partitions``: the partitions it looked at that still hold a
  file slice with log files it did not plan (the I/O budget, the log size threshold, a pending
  plan or write holding the file group);
- ``lakehouse.compaction.scan.after``: the time after which writes may be unknown to it: the
  newest instant it saw, or the one before the earliest write pending then. Every delta commit
  after that was requested after the plan's timeline was read, or was pending then.

The next plan lists the missing partitions, those of pending plans, and those that delta commits completed since
``scan.after`` wrote log files to (base files need no compaction). The table's first plan looks
at every delta commit on the active timeline. It lists the whole table when the last plan has no
such record (another program wrote it) or when delta commits it did not see may be archived
(``scan.after`` older than the active timeline, or a first plan, on a table with archived
instants), as RFC-83 falls back to all partitions.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Iterable, Sequence

from lakehouse.errors import CorruptFileError, InstantNotFoundError
from lakehouse.file_group.file_slice import FileSlice
from lakehouse.file_group.naming import is_log_file
from lakehouse.services.archive import archive_files
from lakehouse.timeline.active import Timeline
from lakehouse.timeline.avro_files import CompactionPlan
from lakehouse.timeline.instant import Action, Instant, State

if TYPE_CHECKING:
    from lakehouse.meta_client import TableMetaClient

MISSING_PARTITIONS_KEY = "lakehouse.compaction.missing.partitions"
SCAN_AFTER_KEY = "lakehouse.compaction.scan.after"


def _plan(meta: "TableMetaClient", time: str) -> CompactionPlan | None:
    inst = Instant(time, Action.COMPACTION, State.REQUESTED)
    try:
        return CompactionPlan.from_bytes(meta.active.read(inst), meta.storage.uri(meta.active.path(inst)))
    except (InstantNotFoundError, FileNotFoundError, CorruptFileError):
        return None  # archived, or not readable: list everything


def _log_partitions(meta: "TableMetaClient", inst: Instant) -> set[str]:
    """The partitions ``inst`` wrote log files in (its base files need no compaction)."""
    stats = meta.active.commit_metadata(inst).partition_to_write_stats
    return {p for p, ss in stats.items() if any(is_log_file(s.path) for s in ss)}


def last_compaction(timeline: Timeline) -> str | None:
    """The time of the newest compaction on ``timeline``, pending or completed."""
    compactions = timeline.filter(actions=[Action.COMPACTION]).instants + tuple(
        i for i in timeline.completed_writes() if timeline.is_compaction(i.time))
    return max((i.time for i in compactions), default=None)


def partitions_to_scan(meta: "TableMetaClient", timeline: Timeline,
                       pending_groups: Iterable[tuple[str, str]] | None = None) -> list[str] | None:
    """The partitions the next compaction plan lists (None: the whole table); ``pending_groups``:
    the (partition, file id) pairs pending compaction plans work on, if the caller read them."""
    last = last_compaction(timeline)
    if last is None:
        start, missing = "0", []  # no plan yet: every delta commit
    else:
        plan = _plan(meta, last)
        extra = plan.extra_metadata if plan is not None else None
        if not extra or MISSING_PARTITIONS_KEY not in extra or SCAN_AFTER_KEY not in extra:
            return None
        try:
            missing = json.loads(extra[MISSING_PARTITIONS_KEY])
        except ValueError:
            return None
        start = extra[SCAN_AFTER_KEY]
        if not isinstance(missing, list) or not all(isinstance(p, str) for p in missing):
            return None
    # Archival takes commits oldest first (Hudi's keeps other actions by counts of their own):
    # from the oldest write on the active timeline on, none is missing.
    first = timeline.completed_writes().first
    if (first is None or start < first.time) and any(archive_files(meta.active)):
        return None  # delta commits after ``start`` may be archived
    try:
        # A pending plan's partitions too: should it be rolled back, its slices are nobody's.
        if pending_groups is None:
            pending_groups = meta.active.pending_compaction_file_groups(timeline)
        out = set(missing) | {p for p, _ in pending_groups}
        for inst in timeline.completed().filter(actions=[Action.DELTA_COMMIT]):
            if inst.time > start:
                out |= _log_partitions(meta, inst)
    except (InstantNotFoundError, FileNotFoundError):
        return None  # archived meanwhile (archival takes no lock): the whole table then
    return sorted(out)


def scan_record(timeline: Timeline, pending: Sequence[Instant], log_slices: Iterable[FileSlice],
                planned: set[tuple[str, str]]) -> dict[str, str]:
    """The extraMetadata entries of a plan that planned ``planned`` (partition, file id) of the
    slices with log files it saw, made on ``timeline`` with the writes ``pending`` in flight."""
    times = [i.time for i in timeline.instants]
    if pending:
        before = [t for t in times if t < pending[0].time]
        after = before[-1] if before else "0"
    else:
        after = times[-1] if times else "0"
    missing = sorted({s.partition for s in log_slices if (s.partition, s.file_id) not in planned})
    return {MISSING_PARTITIONS_KEY: json.dumps(missing), SCAN_AFTER_KEY: after}
