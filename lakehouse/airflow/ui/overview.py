"""What the Lakehouse view shows of a table: plain data (dicts of JSON types) that serves the JSON
endpoints, the HTML pages and the tests alike.

Its numbers are those of the CLI by construction: the timeline rows are ``lakehouse timeline
--json``'s (:mod:`lakehouse.inspect.timeline`), the sizes ``lakehouse stats --json``'s
(:mod:`lakehouse.inspect.stats`); the health series, file sizes and alerts come from
:mod:`lakehouse.inspect.health` and :mod:`lakehouse.inspect.alerts`. The Airflow task runs that
made and committed an instant come from its tags (:mod:`lakehouse.timeline.tags`). One listing of
the file groups serves a page.
"""

from __future__ import annotations

from typing import Any, Mapping

from lakehouse.errors import LakehouseError
from lakehouse.inspect.alerts import alerts
from lakehouse.inspect.health import file_sizes, history
from lakehouse.inspect.stats import table_stats
from lakehouse.inspect.timeline import Fact, instant_facts
from lakehouse.table import Table, open_table
from lakehouse.timeline.tags import task_run

#: The tag prefixes of the task run that made an instant and of the one that committed it.
MADE, COMMITTED = "airflow.", "airflow.commit."
#: How many of the newest instants a page lists (the charts cover them all, archived included).
TIMELINE_LIMIT = 200


def open_or_none(path: str) -> Table | None:
    """The table at ``path``; None while its first ingest has not created it (or it cannot be read)."""
    try:
        return open_table(path)
    except LakehouseError:
        return None


def _summary(name: str, path: str, t: Table, stats: Mapping[str, Any], facts: list[Fact]) -> dict[str, Any]:
    pending_cleans = sum(1 for f in facts if f.row["action"] == "clean" and f.row["state"] != "completed")
    return {"name": name, "path": path, "exists": True, "table_type": t.config.table_type.value,
            "size_bytes": stats["base_bytes"] + stats["log_bytes"], "file_groups": stats["file_groups"],
            "partitions": stats["partitions"], "last_commit": stats["last_commit"],
            "pending_compactions": stats["pending_compactions"], "pending_cleans": pending_cleans,
            "log_files": stats["log_files"], "log_bytes": stats["log_bytes"]}


def summary(name: str, path: str, table_type: str) -> dict[str, Any]:
    """One row of the tables page: size, file groups, last commit, pending work, log backlog."""
    t = open_or_none(path)
    if t is None:
        return {"name": name, "path": path, "table_type": table_type, "exists": False}
    return _summary(name, path, t, table_stats(t), instant_facts(t))


def timeline(facts: list[Fact], limit: int = TIMELINE_LIMIT) -> list[dict[str, Any]]:
    """The newest ``limit`` instants, oldest first: ``lakehouse timeline --json``'s rows with the
    task runs that made and committed them."""
    return [{**f.row, "made_by": task_run(f.tags, MADE), "committed_by": task_run(f.tags, COMMITTED)}
            for f in facts[-limit:]]


def file_groups(slices) -> list[dict[str, Any]]:
    """Health of every file group's latest slice: base size, number and bytes of log files."""
    return [{"partition": s.partition, "file_id": s.file_id, "base_instant": s.base_instant,
             "base_bytes": s.base_size, "log_files": len(s.log_files), "log_bytes": s.total_log_size}
            for s in sorted(slices, key=lambda s: (s.partition, s.file_id))]


def details(name: str, path: str, table_type: str, *, options: Mapping[str, Any] | None = None,
            compaction_after: int | None = None, now: float | None = None) -> dict[str, Any]:
    """Everything the table page shows (``options``, ``compaction_after``: the registry's, for
    the alerts' thresholds)."""
    t = open_or_none(path)
    if t is None:
        return {"name": name, "path": path, "table_type": table_type, "exists": False, "timeline": [],
                "groups": [], "cleans": [], "alerts": [], "history": None, "file_sizes": None, "stats": None}
    slices = t.file_system_view().latest_slices_for_write()
    facts = instant_facts(t, archived=True)
    active = [f for f in facts if not f.row["archived"]]
    stats = table_stats(t, slices)
    hist = history(t, facts)
    points = hist["points"]
    found = alerts(t, active, points[-1] if points else None, options=options,
                   compaction_after=compaction_after, now=now)
    return {**_summary(name, path, t, stats, active), "stats": stats, "timeline": timeline(active),
            "instants": len(facts), "archived_instants": len(facts) - len(active),
            "history": hist, "file_sizes": file_sizes(t, slices), "alerts": [a.to_json() for a in found],
            "groups": file_groups(slices), "cleans": hist["cleans"]}


__all__ = ["summary", "details", "timeline", "file_groups", "open_or_none", "TIMELINE_LIMIT", "MADE", "COMMITTED"]
