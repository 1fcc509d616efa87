"""Every instant of a table, active and archived: when it started and completed (the timeline
files' modification times; layout 1 records no completion time) and what it touched, read from the
timeline files alone. ``lakehouse timeline --json`` prints these rows and the Lakehouse view
shows them, so the two cannot disagree."""

from __future__ import annotations

import datetime as dt
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Mapping

from lakehouse.errors import CorruptFileError, InstantNotFoundError
from lakehouse.file_group.naming import is_log_file
from lakehouse.services.archive import archive_files, read_archived
from lakehouse.services.clean import BYTES_FREED
from lakehouse.services.compaction import read_plan
from lakehouse.services.savepoint import read_savepoint
from lakehouse.table import Table
from lakehouse.timeline.active import Timeline
from lakehouse.timeline.avro_files import (
    CleanerPlan,
    CleanMetadata,
    CompactionPlan,
    RollbackMetadata,
    RollbackPlan,
)
from lakehouse.timeline.commit_metadata import CommitMetadata
from lakehouse.timeline.instant import WRITE_ACTIONS, Action, Instant, State
from lakehouse.timeline.tags import instant_extra
from lakehouse import layout


def ns_iso(ns: int | None) -> str | None:
    """Nanoseconds since the epoch as ISO 8601 UTC, to the millisecond."""
    if ns is None:
        return None
    t = dt.datetime.fromtimestamp(ns // 1_000_000_000, dt.timezone.utc)
    return f"{t:%Y-%m-%dT%H:%M:%S}.{ns % 1_000_000_000 // 1_000_000:03d}Z"


def plan_or_none(table: Table, t: str) -> CompactionPlan | None:
    """The compaction plan of instant ``t``; None where a Hudi table kept only the completed commit."""
    try:
        return read_plan(table, t)
    except InstantNotFoundError:
        return None


def snapshot(table: Table) -> tuple[Timeline, dict[tuple[str, bool], dict[State, int]]]:
    """The timeline and when each instant entered each state, from one listing.

    Keyed by (time, is a savepoint) as ActiveTimeline.state_times() is; one listing keeps the
    states and their times consistent.
    """
    infos = [i for i in table.storage.list(layout.METAFOLDER) if not i.is_dir]
    times: dict[tuple[str, bool], dict[State, int]] = {}
    for info in infos:
        inst = Instant.parse(info.name)
        if inst is not None and info.mtime_ns is not None:
            times.setdefault((inst.time, inst.action is Action.SAVEPOINT), {})[inst.state] = info.mtime_ns
    return Timeline.from_file_names(i.name for i in infos), times


def _write_facts(meta: CommitMetadata, completed: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if meta.operation_type != "UNKNOWN":
        out["operation"] = meta.operation_type.lower()
    if meta.write_stats() or completed:
        # Hudi's HoodieAppendHandle counts every record appended to an existing file group's log
        # as an update: the bucket index routes a key without looking it up, so whether it is new
        # is not known. Those are "appended", apart from the updates a base file merge counted.
        appended = sum(s.num_update_writes for s in meta.write_stats() if is_log_file(s.path))
        out.update(records_written=meta.total("num_writes"), records_inserted=meta.total("num_inserts"),
                   records_updated=meta.total("num_update_writes") - appended, records_appended=appended,
                   records_deleted=meta.total("num_deletes"),
                   files_written=len(meta.write_stats()), file_groups=len(meta.file_ids()))
    if meta.partition_to_replace_file_ids is not None:
        out["file_groups_replaced"] = len(meta.replaced_file_ids())
    return out


def _details(table: Table, tl: Timeline, inst: Instant) -> tuple[dict[str, Any], CommitMetadata | None]:
    """What an instant touched, read from its timeline files, and a write's commit metadata."""
    a, active = inst.action, table.active
    if a is Action.COMPACTION or (a is Action.COMMIT and tl.is_compaction(inst.time)):
        plan = plan_or_none(table, inst.time)
        out: dict[str, Any] = {"operations": len(plan.operations) if plan else None}
        meta = None
        if inst.is_completed:
            meta = active.commit_metadata(inst)
            out.update(records_written=meta.total("num_writes"), file_groups=len(meta.file_ids()))
            if plan is None:
                out["operations"] = len(meta.write_stats())
        return out, meta
    if a in WRITE_ACTIONS:
        if inst.is_requested:
            return {}, None
        # Phase 1 records its results on the inflight file, so those are shown too.
        meta = active.commit_metadata(inst) if inst.is_completed else \
            CommitMetadata.from_bytes(active.read(inst), active.path(inst))
        return _write_facts(meta, inst.is_completed), meta
    if a is Action.SAVEPOINT:
        if not inst.is_completed:
            return {}, None
        return {"savepointed_commit": inst.time, "files": len(read_savepoint(active, inst.time).file_names)}, None
    if a not in (Action.CLEAN, Action.ROLLBACK):
        return {}, None
    # Completed: what was done; pending: the plan (an empty plan file is Hudi's "nothing to do").
    read_inst = inst if inst.is_completed else inst.with_state(State.REQUESTED)
    data, uri = active.read(read_inst), table.storage.uri(active.path(read_inst))
    if not data:
        return {}, None
    if a is Action.CLEAN:
        if inst.is_completed:
            m = CleanMetadata.from_bytes(data, uri)
            return {"files_deleted": m.total_files_deleted, "earliest_retained": m.earliest_commit_to_retain,
                    "bytes_freed": _bytes_freed(m.extra_metadata)}, None
        p = CleanerPlan.from_bytes(data, uri)
        return {"files_to_delete": sum(len(v) for v in p.file_paths_to_be_deleted_per_partition.values())}, None
    if inst.is_completed:
        m = RollbackMetadata.from_bytes(data, uri)
        return {"rolled_back": list(m.commits_rollback), "files_deleted": m.total_files_deleted}, None
    return {"rolled_back": [RollbackPlan.from_bytes(data, uri).instant_to_rollback.commit_time]}, None


def _bytes_freed(extra: Mapping[str, str]) -> int | None:
    """What a clean freed, as lakehouse records it (None for a clean by Hudi, which does not)."""
    freed = extra.get(BYTES_FREED)
    return int(freed) if freed and freed.isdigit() else None


@dataclass(frozen=True)
class Fact:
    """One instant as the timeline tells it: its row (``lakehouse timeline --json``) and, for a
    write or compaction, its commit metadata (file by file)."""

    row: Mapping[str, Any]
    meta: CommitMetadata | None = None
    #: Its extra metadata (lakehouse.timeline.tags: the Airflow task runs that made it).
    tags: Mapping[str, str] = field(default_factory=dict)


#: Completed instants never change, so their facts are kept: a page over a table with a thousand
#: instants then reads only what is new since the last one (one listing, no file reads).
_FACTS: OrderedDict[tuple, Fact] = OrderedDict()
_FACTS_MAX = 50_000


def _remember(key: tuple, make) -> Fact:
    fact = _FACTS.get(key)
    if fact is None:
        fact = make()
        _FACTS[key] = fact
        if len(_FACTS) > _FACTS_MAX:
            _FACTS.popitem(last=False)
    else:
        _FACTS.move_to_end(key)
    return fact


def _instant_fact(table: Table, tl: Timeline, inst: Instant, times: Mapping[State, int]) -> Fact:
    compaction = inst.action is Action.COMMIT and tl.is_compaction(inst.time)
    start = times.get(State.REQUESTED, times.get(State.INFLIGHT))
    end = times.get(State.COMPLETED) if inst.is_completed else None
    row: dict[str, Any] = {
        "time": inst.time, "action": "compaction" if compaction else str(inst.action),
        "state": inst.state.name.lower(), "start": ns_iso(start), "end": ns_iso(end),
        "duration_s": round((end - start) / 1e9, 6) if start is not None and end is not None else None,
        "start_ns": start, "end_ns": end, "archived": False}
    meta = None
    try:
        details, meta = _details(table, tl, inst)
        row.update(details)
    except CorruptFileError:
        if inst.is_completed:
            raise  # lakehouse never skips a corrupt completed instant silently
        # a crashed writer's torn pending file says nothing reliable
    except InstantNotFoundError:
        pass  # rolled back or archived while the timeline was read
    return Fact(row, meta, instant_extra(table.active, inst, tl))


def _archived_fact(e: Mapping[str, Any]) -> Fact:
    action = e.get("actionType") or ""
    row: dict[str, Any] = {"time": e.get("commitTime"), "action": action, "state": "completed",
                           "start": None, "end": None, "duration_s": None, "start_ns": None,
                           "end_ns": None, "archived": True}
    meta = e.get("hoodieCommitMetadata") or e.get("hoodieReplaceCommitMetadata")
    commit = CommitMetadata.from_json(meta, f"archived {row['time']}") if meta is not None else None
    if commit is not None:
        op = (meta.get("operationType") or "").lower()
        if op == "compact":
            row.update(action="compaction", operations=len(commit.write_stats()))
        elif op:
            row["operation"] = op
        row.update(records_written=commit.total("num_writes"), records_deleted=commit.total("num_deletes"),
                   file_groups=len(commit.file_ids()))
    elif (m := e.get("hoodieCleanMetadata")) is not None:
        row.update(files_deleted=m.get("totalFilesDeleted"),
                   earliest_retained=m.get("earliestCommitToRetain"),
                   bytes_freed=_bytes_freed(m.get("extraMetadata") or {}))
    elif (m := e.get("hoodieRollbackMetadata")) is not None:
        row.update(rolled_back=list(m.get("commitsRollback") or ()), files_deleted=m.get("totalFilesDeleted"))
    elif e.get("hoodieSavePointMetadata") is not None:
        row["savepointed_commit"] = row["time"]
    return Fact(row, commit, dict(commit.extra_metadata) if commit else {})


def instant_facts(table: Table, archived: bool = False) -> list[Fact]:
    """Every instant's :class:`Fact`, oldest first (the archived ones first, with ``archived``)."""
    tl, times = snapshot(table)
    facts = []
    for i in tl:
        t = times.get((i.time, i.action is Action.SAVEPOINT), {})
        if i.is_completed and State.COMPLETED in t:
            key = (table.path, i.time, str(i.action), t.get(State.REQUESTED), t.get(State.INFLIGHT),
                   t[State.COMPLETED])
            facts.append(_remember(key, lambda i=i, t=t: _instant_fact(table, tl, i, t)))
        else:
            facts.append(_instant_fact(table, tl, i, t))
    if archived:
        # An interrupted archival leaves instants both archived and active: the active one wins.
        have = {(f.row["time"], f.row["action"] == "savepoint") for f in facts}
        old = [f for f in _archived_facts(table) if (f.row["time"], f.row["action"] == "savepoint") not in have]
        facts = sorted(old + facts, key=lambda f: (f.row["time"], f.row["action"] == "savepoint"))
    return facts


_ARCHIVED: dict[str, tuple[tuple, list[Fact]]] = {}


def _archived_facts(table: Table) -> list[Fact]:
    """The archived instants' facts, read again only when the archive's files change."""
    files = tuple((i.name, i.size) for i in archive_files(table.active))
    seen = _ARCHIVED.get(table.path)
    if seen is None or seen[0] != files:
        seen = (files, [_archived_fact(e) for e in read_archived(table)] if files else [])
        _ARCHIVED[table.path] = seen
    return list(seen[1])


def timeline_rows(table: Table, archived: bool = False) -> list[dict[str, Any]]:
    """``lakehouse timeline --json``: each instant's row, oldest first."""
    return [dict(f.row) for f in instant_facts(table, archived)]


__all__ = ["Fact", "instant_facts", "timeline_rows", "snapshot", "plan_or_none", "ns_iso"]
