"""One instant explained, from its timeline files: what a write did partition by partition (records
inserted, updated, deleted; files added, rewritten, appended to, replaced), what a pending
compaction or clean plans, what a rollback undid, what a savepoint keeps. The Lakehouse view's
instant page and ``GET /lakehouse/api/tables/{name}/instants/{instant}`` show it."""

from __future__ import annotations

from typing import Any

from lakehouse.errors import InstantNotFoundError, LakehouseError
from lakehouse.file_group.naming import is_log_file
from lakehouse.inspect.timeline import Fact, instant_facts, plan_or_none
from lakehouse.services.savepoint import read_savepoint
from lakehouse.table import Table
from lakehouse.timeline.avro_files import CleanerPlan, CleanMetadata, RollbackMetadata, RollbackPlan
from lakehouse.timeline.commit_metadata import CommitMetadata
from lakehouse.timeline.instant import Action, Instant, State

#: Files listed per instant at most (the counts cover them all).
FILES_SHOWN = 500


def _kind(path: str) -> str:
    return "log" if is_log_file(path) else "base"


def _write(meta: CommitMetadata) -> dict[str, Any]:
    parts: dict[str, dict[str, Any]] = {}
    files = []
    for s in meta.write_stats():
        p = parts.setdefault(s.partition_path, dict.fromkeys(
            ("inserted", "updated", "appended", "deleted", "written", "files_added", "files_rewritten",
             "logs_written", "bytes_written"), 0))
        kind = _kind(s.path)
        # A base file with a previous commit replaces that version of its file group (copy on
        # write); one without starts a file group; a log file adds to the group's current slice.
        change = "log" if kind == "log" else ("rewritten" if s.prev_commit not in ("", "null") else "added")
        p["inserted"] += s.num_inserts
        # A log append to an existing file group: new and updated keys, not told apart
        # (lakehouse.inspect.timeline, where the timeline counts them so too).
        p["appended" if kind == "log" else "updated"] += s.num_update_writes
        p["deleted"] += s.num_deletes
        p["written"] += s.num_writes
        p["bytes_written"] += s.total_write_bytes
        p[{"log": "logs_written", "rewritten": "files_rewritten", "added": "files_added"}[change]] += 1
        if len(files) < FILES_SHOWN:
            files.append({"partition": s.partition_path, "file_id": s.file_id, "path": s.path, "change": change,
                          "previous": None if s.prev_commit in ("", "null") else s.prev_commit,
                          "records": s.num_writes, "inserted": s.num_inserts, "updated": s.num_update_writes,
                          "deleted": s.num_deletes, "bytes": s.file_size_in_bytes})
    replaced = sorted(meta.replaced_file_ids())
    for partition, _ in replaced:
        parts.setdefault(partition, {}).setdefault("file_groups_replaced", 0)
        parts[partition]["file_groups_replaced"] += 1
    return {"operation": meta.operation_type.lower(), "partitions": [{"partition": k, **v} for k, v in sorted(parts.items())],
            "files": files, "file_groups_replaced": [{"partition": p, "file_id": f} for p, f in replaced]}


def _compaction(table: Table, fact: Fact) -> dict[str, Any]:
    plan = plan_or_none(table, fact.row["time"])
    ops = plan.operations if plan else ()
    out: dict[str, Any] = {"plan": [
        {"partition": o.partition_path, "file_id": o.file_id, "base_instant": o.base_instant_time,
         "base_file": o.data_file_path, "log_files": len(o.delta_file_paths),
         "log_bytes": int(o.metrics.get("TOTAL_LOG_FILES_SIZE", 0) or 0)} for o in ops[:FILES_SHOWN]],
        "operations": len(ops)}
    if fact.meta is not None:
        out["result"] = _write(fact.meta)
    return out


def _clean(table: Table, inst: Instant) -> dict[str, Any]:
    active = table.active
    if inst.is_completed:
        m = CleanMetadata.from_bytes(active.read(inst), active.path(inst))
        return {"earliest_retained": m.earliest_commit_to_retain, "files_deleted": m.total_files_deleted,
                "partitions": [{"partition": p, "policy": pm.policy, "deleted": len(pm.success_delete_files),
                                "failed": len(pm.failed_delete_files), "partition_deleted": pm.is_partition_deleted}
                               for p, pm in sorted(m.partition_metadata.items())]}
    req = inst.with_state(State.REQUESTED)
    data = active.read(req)
    if not data:
        return {"plan": None}
    plan = CleanerPlan.from_bytes(data, active.path(req))
    return {"plan": {"policy": plan.policy,
                     "earliest_retained": plan.earliest_instant_to_retain.timestamp
                     if plan.earliest_instant_to_retain else None,
                     "partitions": [{"partition": p, "files": len(v)}
                                    for p, v in sorted(plan.file_paths_to_be_deleted_per_partition.items())],
                     "partitions_deleted": list(plan.partitions_to_be_deleted)}}


def _rollback(table: Table, inst: Instant) -> dict[str, Any]:
    active = table.active
    if inst.is_completed:
        m = RollbackMetadata.from_bytes(active.read(inst), active.path(inst))
        return {"rolled_back": list(m.commits_rollback), "files_deleted": m.total_files_deleted,
                "partitions": [{"partition": p, "deleted": len(pm.success_delete_files),
                                "failed": len(pm.failed_delete_files)} for p, pm in sorted(m.partition_metadata.items())]}
    req = inst.with_state(State.REQUESTED)
    plan = RollbackPlan.from_bytes(active.read(req), active.path(req))
    return {"rolled_back": [plan.instant_to_rollback.commit_time],
            "plan": [{"partition": r.partition_path, "files": len(r.files_to_be_deleted)} for r in plan.rollback_requests]}


def explain(table: Table, instant_time: str, facts: list[Fact] | None = None) -> dict[str, Any]:
    """Everything the timeline says about ``instant_time`` (raises InstantNotFoundError)."""
    facts = facts if facts is not None else instant_facts(table, archived=True)
    matches = [f for f in facts if f.row["time"] == instant_time]
    if not matches:
        raise InstantNotFoundError(f"{instant_time} is not on {table.name}'s timeline",
                                   help="`lakehouse timeline --archived` lists every instant")
    fact = next((f for f in matches if f.row["action"] != "savepoint"), matches[0])
    row = dict(fact.row)
    out: dict[str, Any] = {"instant": row, "tags": dict(fact.tags)}
    if row.get("archived"):
        if fact.meta is not None:
            out["write"] = _write(fact.meta)
        return out
    action = Action(row["action"]) if row["action"] != "compaction" else Action.COMMIT
    state = State[row["state"].upper()]
    inst = Instant(instant_time, action, state)
    try:
        if action is Action.REPLACE_COMMIT and _is_clustering(table, inst, fact):
            out["clustering"] = _clustering(table, inst)
            if fact.meta is not None and state is State.COMPLETED:
                out["write"] = _write(fact.meta)
            elif state is not State.COMPLETED:
                out["note"] = ("a clustering waiting to run or be committed: writers may not update "
                               "its file groups until then; failed-write recovery leaves it alone")
        elif row["action"] == "compaction" or action is Action.COMPACTION:
            out["compaction"] = _compaction(table, fact)
        elif fact.meta is not None:
            out["write"] = _write(fact.meta)
            if state is not State.COMPLETED:
                out["note"] = ("pending: its data files are written (phase 1) but not committed; readers do "
                               "not see them, and a rollback or the next write's recovery removes them")
        elif action in (Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT):
            out["note"] = "requested: no data file written yet"
        elif action is Action.CLEAN:
            out["clean"] = _clean(table, inst)
        elif action is Action.ROLLBACK:
            out["rollback"] = _rollback(table, inst)
        elif action is Action.SAVEPOINT and state is State.COMPLETED:
            out["savepoint"] = {"files": len(read_savepoint(table.active, instant_time).file_names)}
    except (InstantNotFoundError, LakehouseError) as e:
        out["note"] = f"its files could not be read: {e}"
    return out


def _is_clustering(table: Table, inst: Instant, fact: Fact) -> bool:
    if inst.state is State.COMPLETED:
        return fact.meta is not None and fact.meta.operation_type == "CLUSTER"
    return table.timeline.is_clustering(inst.time)


def _clustering(table: Table, inst: Instant) -> dict[str, Any]:
    """What a clustering rewrites: its groups, their slices and bytes, its sort."""
    plan = table.active.clustering_plan(inst.time)
    return {"groups": len(plan.input_groups), "file_slices": len(plan.slices),
            "input_bytes": int(sum(g.metrics.get("TOTAL_IO_READ_MB", 0) for g in plan.input_groups) * 1024 * 1024),
            "output_file_groups": sum(g.num_output_file_groups for g in plan.input_groups),
            "sort_columns": list(plan.sort_columns),
            "partitions": sorted({g.partition for g in plan.input_groups}),
            # A consistent-hashing resize: buckets split (one into several) and merged (several
            # into one), each group's new ring nodes in its extra metadata.
            "buckets_split": sum(1 for g in plan.input_groups
                                 if g.resizes_buckets and g.num_output_file_groups > len(g.slices)),
            "buckets_merged": sum(len(g.slices) for g in plan.input_groups
                                  if g.resizes_buckets and len(g.slices) > 1)}


__all__ = ["explain", "FILES_SHOWN"]
