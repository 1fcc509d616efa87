"""What the Lakehouse view shows of a table, read from its timeline and files (never written).

Plain data (dicts of JSON types), so the same content serves the JSON endpoints, the HTML pages
and the tests. Instant start and end come from the timeline files' modification times (layout 1
records no completion time); the Airflow task run that made an instant comes from its tags
(:mod:`lakehouse.timeline.tags`).
"""

from __future__ import annotations

from typing import Any

from lakehouse.errors import LakehouseError
from lakehouse.file_group.view import FileSystemView
from lakehouse.services.clean import BYTES_FREED
from lakehouse.table import Table, open_table
from lakehouse.timeline.avro_files import CleanMetadata
from lakehouse.timeline.instant import Action, State
from lakehouse.timeline.instant_time import parse_instant_time
from lakehouse.timeline.tags import instant_extra

#: How many of the newest instants a page shows (the active timeline is bounded by archival).
TIMELINE_LIMIT = 200


def _open(path: str) -> Table | None:
    try:
        return open_table(path)
    except LakehouseError:
        return None


def summary(name: str, path: str, table_type: str, table: Table | None = None) -> dict[str, Any]:
    """One row of the tables page: size, file groups, last commit, pending work, log backlog
    (``table``: already open)."""
    t = table or _open(path)
    if t is None:
        return {"name": name, "path": path, "table_type": table_type, "exists": False}
    timeline = t.timeline
    stats = t.stats()
    pending_cleans = timeline.pending().filter(actions=[Action.CLEAN]).instants
    return {"name": name, "path": path, "exists": True, "table_type": t.config.table_type.value,
            "size_bytes": stats.base_bytes + stats.log_bytes, "file_groups": stats.file_groups,
            "partitions": stats.partitions, "last_commit": stats.last_commit,
            "pending_compactions": stats.pending_compactions, "pending_cleans": len(pending_cleans),
            "log_files": stats.log_files, "log_bytes": stats.log_bytes}


def _task_link(tags: dict[str, str], prefix: str = "airflow.") -> dict[str, str] | None:
    dag, run, task = (tags.get(prefix + k) for k in ("dag_id", "run_id", "task_id"))
    if not (dag and run and task):
        return None
    return {"dag_id": dag, "run_id": run, "task_id": task, "try_number": tags.get(prefix + "try_number", "")}


def timeline(t: Table, limit: int = TIMELINE_LIMIT) -> list[dict[str, Any]]:
    """The newest ``limit`` instants, oldest first: action, state, start, end, duration and the
    task runs that made and committed them."""
    tl = t.timeline
    times = t.active.state_times()
    out = []
    for inst in tl.instants[-limit:]:
        st = times.get((inst.time, inst.action is Action.SAVEPOINT), {})
        try:
            start = parse_instant_time(inst.time).timestamp()
        except (ValueError, LakehouseError):
            start = min(st.values()) / 1e9 if st else None
        end = st.get(State.COMPLETED) / 1e9 if inst.is_completed and State.COMPLETED in st else None
        action = "compaction" if inst.is_completed and tl.is_compaction(inst.time) else str(inst.action)
        tags = instant_extra(t.active, inst, tl)
        out.append({"instant": inst.time, "action": action, "state": inst.state.name,
                    "start": start, "end": end,
                    "duration_s": round(end - start, 3) if end is not None and start is not None else None,
                    "made_by": _task_link(tags), "committed_by": _task_link(tags, "airflow.commit.")})
    return out


def file_groups(t: Table) -> list[dict[str, Any]]:
    """Health of every file group's latest slice: base size, number and bytes of log files."""
    view = FileSystemView.load(t.storage, t.timeline, t.active)
    return [{"partition": s.partition, "file_id": s.file_id, "base_instant": s.base_instant,
             "base_bytes": s.base_size, "log_files": len(s.log_files), "log_bytes": s.total_log_size}
            for s in sorted(view.latest_slices_for_write(), key=lambda s: (s.partition, s.file_id))]


def clean_history(t: Table) -> list[dict[str, Any]]:
    """Every completed clean on the active timeline: files and bytes freed."""
    out = []
    for inst in t.timeline.completed().filter(actions=[Action.CLEAN]).instants:
        try:
            meta = CleanMetadata.from_bytes(t.active.read(inst), t.active.path(inst))
        except LakehouseError:
            continue
        freed = meta.extra_metadata.get(BYTES_FREED)
        out.append({"instant": inst.time, "files_deleted": meta.total_files_deleted,
                    "bytes_freed": int(freed) if freed and freed.isdigit() else None,
                    "earliest_retained": meta.earliest_commit_to_retain or None,
                    "partitions": len(meta.partition_metadata)})
    return out


def details(name: str, path: str, table_type: str) -> dict[str, Any]:
    """Everything the table page shows."""
    t = _open(path)
    out = summary(name, path, table_type, t)
    if t is None:
        return {**out, "timeline": [], "groups": [], "cleans": []}
    return {**out, "timeline": timeline(t), "groups": file_groups(t), "cleans": clean_history(t)}


__all__ = ["summary", "details", "timeline", "file_groups", "clean_history"]
