"""What the Lakehouse view shows of a table: plain data (dicts of JSON types) that serves the JSON
endpoints, the HTML pages and the tests alike.

Its numbers are those of the CLI by construction: the timeline rows are ``lakehouse timeline
--json``'s (:mod:`lakehouse.inspect.timeline`), the sizes ``lakehouse stats --json``'s
(:mod:`lakehouse.inspect.stats`); the health series, file sizes and alerts come from
:mod:`lakehouse.inspect.health` and :mod:`lakehouse.inspect.alerts`, the schema and its history
from :mod:`lakehouse.inspect.schema_history`, the partitions from
:mod:`lakehouse.inspect.partitions`, the Iceberg side (and the rows a reader gets) from
:mod:`lakehouse.iceberg.status`, the query snippets from :mod:`lakehouse.airflow.ui.query`. The
Airflow task runs that made and committed an instant come from its tags
(:mod:`lakehouse.timeline.tags`). One listing of the file groups serves a page.
"""

from __future__ import annotations

import time
from typing import Any, Mapping

from lakehouse.airflow.ui.query import snippets
from lakehouse.errors import LakehouseError
from lakehouse.iceberg.status import iceberg_status
from lakehouse.inspect.alerts import CRITICAL, alerts
from lakehouse.inspect.health import file_sizes, history
from lakehouse.inspect.partitions import partitions
from lakehouse.inspect.schema_history import schema_history
from lakehouse.inspect.stats import table_stats
from lakehouse.inspect.timeline import Fact, instant_facts
from lakehouse.table import Table, open_table
from lakehouse.timeline.instant_time import parse_instant_time
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


def _age_s(instant: str | None, now: float) -> float | None:
    if not instant:
        return None
    try:
        return max(0.0, now - parse_instant_time(instant).timestamp())
    except ValueError:
        return None


def _attention(found: list[dict[str, Any]], backlog_age_s: float | None, small_files: int) -> dict[str, Any]:
    """What ranks a table on the tables page: its alerts (critical before warning), then how long
    its oldest log has waited for compaction, then its small base files."""
    critical = sum(1 for a in found if a["severity"] == CRITICAL)
    warning = len(found) - critical
    return {"critical": critical, "warning": warning, "backlog_age_s": backlog_age_s, "small_files": small_files,
            "score": [critical, warning, round(backlog_age_s or 0), small_files]}


def _read(t: Table, options: Mapping[str, Any] | None, compaction_after: int | None,
          now: float) -> dict[str, Any]:
    """One listing of the file groups and one read of the timeline, with what follows from them."""
    slices = t.file_system_view().latest_slices_for_write()
    facts = instant_facts(t, archived=True)
    active = [f for f in facts if not f.row["archived"]]
    stats = table_stats(t, slices)
    hist = history(t, facts)
    points = hist["points"]
    found = [a.to_json() for a in alerts(t, active, points[-1] if points else None, options=options,
                                          compaction_after=compaction_after, now=now)]
    sizes = file_sizes(t, slices)
    oldest = points[-1]["oldest_uncompacted"] if points and t.config.table_type.value == "MERGE_ON_READ" else None
    return {"slices": slices, "facts": facts, "active": active, "stats": stats, "history": hist,
            "alerts": found, "file_sizes": sizes, "oldest_uncompacted": oldest,
            "attention": _attention(found, _age_s(oldest, now), sizes["small_files"])}


def summary(name: str, path: str, table_type: str, *, options: Mapping[str, Any] | None = None,
            compaction_after: int | None = None, now: float | None = None) -> dict[str, Any]:
    """One row of the tables page: size, file groups, last commit, pending work, log backlog,
    and its alerts and what ranks it (``attention``)."""
    t = open_or_none(path)
    if t is None:
        return {"name": name, "path": path, "table_type": table_type, "exists": False,
                "alerts": [], "attention": _attention([], None, 0)}
    now = time.time() if now is None else now
    r = _read(t, options, compaction_after, now)
    return {**_summary(name, path, t, r["stats"], r["active"]), "alerts": r["alerts"],
            "attention": r["attention"], "oldest_uncompacted": r["oldest_uncompacted"]}


def ranked(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tables page's order: the tables that most need attention first, then by name."""
    return sorted(rows, key=lambda r: ([-n for n in r["attention"]["score"]], r["name"]))


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


def write_amplification(facts: list[Fact], table_bytes: int) -> float | None:
    """Bytes every commit on the timeline wrote (compactions and rewrites included) over the bytes
    the table holds now: how often, on average, each byte was written."""
    # A log append's file size is the whole file's (Hudi appends to a log file across commits):
    # its totalWriteBytes is what that commit wrote.
    written = sum(s.total_write_bytes or s.file_size_in_bytes for f in facts if f.meta is not None
                  and f.row["state"] == "completed" for s in f.meta.write_stats())
    return round(written / table_bytes, 2) if table_bytes else None


def _snapshot_rows(ice: Mapping[str, Any], parts: list[dict[str, Any]], last_commit: str | None) -> dict[str, Any]:
    """The rows a reader gets, without reading them: the published Iceberg snapshot's count
    (``as_of`` its instant, which may trail the newest commit while the background publisher
    catches up); else, when no log waits, the base files' rows from the write stats; else
    unknown (None): a log append's records are new and updated keys together."""
    if ice.get("enabled") and ice.get("snapshot_rows") is not None:
        return {"rows": ice["snapshot_rows"], "as_of": ice.get("instant"), "from": "iceberg"}
    if parts and all(p["base_rows"] is not None and p["log_records"] == 0 for p in parts):
        return {"rows": sum(p["base_rows"] for p in parts), "as_of": last_commit, "from": "write stats"}
    return {"rows": None, "as_of": None, "from": None}


def details(name: str, path: str, table_type: str, *, options: Mapping[str, Any] | None = None,
            compaction_after: int | None = None, now: float | None = None) -> dict[str, Any]:
    """Everything the table page shows (``options``, ``compaction_after``: the registry's, for
    the alerts' thresholds)."""
    t = open_or_none(path)
    if t is None:
        return {"name": name, "path": path, "table_type": table_type, "exists": False, "timeline": [],
                "groups": [], "cleans": [], "alerts": [], "history": None, "file_sizes": None, "stats": None,
                "schema": None, "partitions": [], "iceberg": None, "query": [],
                "snapshot_rows": {"rows": None, "as_of": None, "from": None}}
    now = time.time() if now is None else now
    r = _read(t, options, compaction_after, now)
    facts, active, stats, hist = r["facts"], r["active"], r["stats"], r["history"]
    size = stats["base_bytes"] + stats["log_bytes"]
    ice = iceberg_status(t)
    parts = partitions(r["slices"], facts)
    return {**_summary(name, path, t, stats, active), "stats": stats, "timeline": timeline(active),
            "instants": len(facts), "archived_instants": len(facts) - len(active),
            "history": hist, "file_sizes": r["file_sizes"], "alerts": r["alerts"], "attention": r["attention"],
            "oldest_uncompacted": r["oldest_uncompacted"], "groups": file_groups(r["slices"]),
            "cleans": hist["cleans"], "schema": schema_history(facts), "partitions": parts,
            "snapshot_rows": _snapshot_rows(ice, parts, stats["last_commit"]),
            "write_amplification": write_amplification(facts, size), "iceberg": ice,
            "query": snippets(name, t.path, ice)}


__all__ = ["summary", "ranked", "details", "timeline", "file_groups", "write_amplification", "open_or_none", "TIMELINE_LIMIT", "MADE", "COMMITTED"]
