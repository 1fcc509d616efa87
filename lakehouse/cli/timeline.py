"""``lakehouse timeline``: every instant of a table, active and archived, with when it started
and completed and what it touched, read from the timeline files alone."""

from __future__ import annotations

from typing import Any, Mapping

import click
from rich import box
from rich.table import Table as RichTable
from rich.text import Text

from lakehouse.cli.common import clock, console, duration, emit, json_flag, ns_iso
from lakehouse.cli.services import compaction_plan_or_none
from lakehouse.errors import CorruptFileError, InstantNotFoundError
from lakehouse.services.archive import read_archived
from lakehouse.services.savepoint import read_savepoint
from lakehouse.table import Table, open_table
from lakehouse.timeline.active import METAFOLDER, Timeline
from lakehouse.timeline.avro_files import CleanerPlan, CleanMetadata, RollbackMetadata, RollbackPlan
from lakehouse.timeline.commit_metadata import CommitMetadata
from lakehouse.timeline.instant import WRITE_ACTIONS, Action, Instant, State


def _snapshot(table: Table) -> tuple[Timeline, dict[tuple[str, bool], dict[State, int]]]:
    """The timeline and when each instant entered each state, from one listing.

    Keyed by (time, is a savepoint) as ActiveTimeline.state_times() is; one listing keeps the
    states and their times consistent.
    """
    infos = [i for i in table.storage.list(METAFOLDER) if not i.is_dir]
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
        out.update(records_written=meta.total("num_writes"), records_inserted=meta.total("num_inserts"),
                   records_updated=meta.total("num_update_writes"), records_deleted=meta.total("num_deletes"),
                   files_written=len(meta.write_stats()), file_groups=len(meta.file_ids()))
    if meta.partition_to_replace_file_ids is not None:
        out["file_groups_replaced"] = len(meta.replaced_file_ids())
    return out


def _details(table: Table, tl: Timeline, inst: Instant) -> dict[str, Any]:
    """What an instant touched, read from its timeline files."""
    a, active = inst.action, table.active
    if a is Action.COMPACTION or (a is Action.COMMIT and tl.is_compaction(inst.time)):
        plan = compaction_plan_or_none(table, inst.time)
        out: dict[str, Any] = {"operations": len(plan.operations) if plan else None}
        if inst.is_completed:
            meta = active.commit_metadata(inst)
            out.update(records_written=meta.total("num_writes"), file_groups=len(meta.file_ids()))
            if plan is None:
                out["operations"] = len(meta.write_stats())
        return out
    if a in WRITE_ACTIONS:
        if inst.is_requested:
            return {}
        # Phase 1 records its results on the inflight file, so those are shown too.
        meta = active.commit_metadata(inst) if inst.is_completed else \
            CommitMetadata.from_bytes(active.read(inst), active.path(inst))
        return _write_facts(meta, inst.is_completed)
    if a is Action.SAVEPOINT:
        if not inst.is_completed:
            return {}
        return {"savepointed_commit": inst.time, "files": len(read_savepoint(active, inst.time).file_names)}
    if a not in (Action.CLEAN, Action.ROLLBACK):
        return {}
    # Completed: what was done; pending: the plan (an empty plan file is Hudi's "nothing to do").
    read_inst = inst if inst.is_completed else inst.with_state(State.REQUESTED)
    data, uri = active.read(read_inst), table.storage.uri(active.path(read_inst))
    if not data:
        return {}
    if a is Action.CLEAN:
        if inst.is_completed:
            m = CleanMetadata.from_bytes(data, uri)
            return {"files_deleted": m.total_files_deleted, "earliest_retained": m.earliest_commit_to_retain}
        p = CleanerPlan.from_bytes(data, uri)
        return {"files_to_delete": sum(len(v) for v in p.file_paths_to_be_deleted_per_partition.values())}
    if inst.is_completed:
        m = RollbackMetadata.from_bytes(data, uri)
        return {"rolled_back": list(m.commits_rollback), "files_deleted": m.total_files_deleted}
    return {"rolled_back": [RollbackPlan.from_bytes(data, uri).instant_to_rollback.commit_time]}


def _instant_row(table: Table, tl: Timeline, inst: Instant, times: Mapping[State, int]) -> dict[str, Any]:
    compaction = inst.action is Action.COMMIT and tl.is_compaction(inst.time)
    start = times.get(State.REQUESTED, times.get(State.INFLIGHT))
    end = times.get(State.COMPLETED) if inst.is_completed else None
    row: dict[str, Any] = {
        "time": inst.time, "action": "compaction" if compaction else str(inst.action),
        "state": inst.state.name.lower(), "start": ns_iso(start), "end": ns_iso(end),
        "duration_s": round((end - start) / 1e9, 6) if start is not None and end is not None else None,
        "start_ns": start, "end_ns": end, "archived": False}
    try:
        row.update(_details(table, tl, inst))
    except CorruptFileError:
        if inst.is_completed:
            raise  # lakehouse never skips a corrupt completed instant silently
        # a crashed writer's torn pending file says nothing reliable
    except InstantNotFoundError:
        pass  # rolled back or archived while the timeline was read
    return row


def _archived_row(e: Mapping[str, Any]) -> dict[str, Any]:
    action = e.get("actionType") or ""
    row: dict[str, Any] = {"time": e.get("commitTime"), "action": action, "state": "completed",
                           "start": None, "end": None, "duration_s": None, "start_ns": None,
                           "end_ns": None, "archived": True}
    meta = e.get("hoodieCommitMetadata") or e.get("hoodieReplaceCommitMetadata")
    if meta is not None:
        stats = [s for lst in (meta.get("partitionToWriteStats") or {}).values() for s in lst or ()]
        op = (meta.get("operationType") or "").lower()
        if op == "compact":
            row.update(action="compaction", operations=len(stats))
        elif op:
            row["operation"] = op
        row.update(records_written=sum(s.get("numWrites") or 0 for s in stats),
                   records_deleted=sum(s.get("numDeletes") or 0 for s in stats),
                   file_groups=len({(s.get("partitionPath"), s.get("fileId")) for s in stats}))
    elif (m := e.get("hoodieCleanMetadata")) is not None:
        row.update(files_deleted=m.get("totalFilesDeleted"),
                   earliest_retained=m.get("earliestCommitToRetain"))
    elif (m := e.get("hoodieRollbackMetadata")) is not None:
        row.update(rolled_back=list(m.get("commitsRollback") or ()), files_deleted=m.get("totalFilesDeleted"))
    elif e.get("hoodieSavePointMetadata") is not None:
        row["savepointed_commit"] = row["time"]
    return row


def timeline_rows(table: Table, archived: bool = False) -> list[dict[str, Any]]:
    tl, times = _snapshot(table)
    rows = [_instant_row(table, tl, i, times.get((i.time, i.action is Action.SAVEPOINT), {})) for i in tl]
    if archived:
        # An interrupted archival leaves instants both archived and active: the active one wins.
        have = {(r["time"], r["action"] == "savepoint") for r in rows}
        old = [_archived_row(e) for e in read_archived(table)]
        rows = [r for r in old if (r["time"], r["action"] == "savepoint") not in have] + rows
        rows.sort(key=lambda r: (r["time"], r["action"] == "savepoint"))
    return rows


def _what(r: Mapping[str, Any]) -> str:
    """One line of what an instant touched."""
    if r["action"] == "compaction":
        n = "?" if r.get("operations") is None else r["operations"]
        return f"{n} operation(s)" + (f", {r['records_written']:,} records" if "records_written" in r else "")
    if "records_written" in r or "operation" in r:
        parts = [r.get("operation", "")]
        if "records_written" in r:
            deleted = f", {r['records_deleted']:,} deleted" if r.get("records_deleted") else ""
            parts.append(f"{r['records_written']:,} written{deleted}, {r['file_groups']:,} file group(s)")
        if r.get("file_groups_replaced"):
            parts.append(f"{r['file_groups_replaced']:,} replaced")
        return ": ".join(p for p in parts[:2] if p) + "".join(f", {p}" for p in parts[2:])
    if "files_deleted" in r and r["action"] == "clean":
        return f"{r['files_deleted']:,} file(s) deleted"
    if "files_to_delete" in r:
        return f"{r['files_to_delete']:,} file(s) to delete"
    if "rolled_back" in r:
        n = r.get("files_deleted")
        return f"rolled back {', '.join(r['rolled_back'])}" + (f", {n:,} file(s) deleted" if n else "")
    if "savepointed_commit" in r:
        return f"savepoints {r['savepointed_commit']}" + (f", {r['files']:,} file(s)" if "files" in r else "")
    return ""


@click.command()
@click.argument("path")
@click.option("--archived", is_flag=True, help="Also list the archived instants (.hoodie/archived).")
@json_flag
def timeline(path: str, archived: bool, as_json: bool) -> list[dict[str, Any]]:
    """List every instant, oldest first: action, state, when it started and completed (UTC, from
    the timeline files' times) and what it touched.

    A completed compaction is listed as a compaction (its timeline file is <instant>.commit).
    """
    table = open_table(path)
    rows = timeline_rows(table, archived)
    if as_json:
        emit(rows)
        return rows
    # One day for all (the usual case): the date goes to the caption and the cells keep the time.
    days = {r["start"].partition("T")[0] for r in rows if r["start"]}
    day = next(iter(days)) if len(days) == 1 else None
    caption = f"{len(rows)} instant(s); times in UTC" + (f" on {day}" if day else "")
    con = console()
    # A narrow terminal drops the completion time (started + took gives it; --json has it all).
    wide = con.width >= 100
    out = RichTable(title=f"timeline of {table.name}", caption=caption, box=box.SIMPLE_HEAD,
                    pad_edge=False, collapse_padding=True)
    for h in ("instant", "action", "state", "started", "completed", "took"):
        if wide or h != "completed":
            out.add_column(h, no_wrap=True, justify="right" if h == "took" else "left")
    out.add_column("what", overflow="fold", min_width=16)
    for r in rows:
        start_day = (r["start"] or "").partition("T")[0] or None
        cells = [r["time"], r["action"], "archived" if r["archived"] else r["state"],
                 clock(r["start"], day), clock(r["end"], start_day), duration(r["duration_s"]), _what(r)]
        out.add_row(*(Text(c) for i, c in enumerate(cells) if wide or i != 4))
    con.print(out)
    return rows


COMMANDS = (timeline,)
