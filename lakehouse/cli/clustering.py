"""``lakehouse clustering schedule|run|commit|show``: the clustering service from the shell,
each step its own process if need be (an Airflow task each)::

    T=$(lakehouse clustering schedule PATH --option hoodie.clustering.plan.strategy.sort.columns=ts)
    [ -n "$T" ] && lakehouse clustering run PATH "$T" && lakehouse clustering commit PATH "$T"

A pending clustering is rolled back (its plan gone, its files deleted) with
``lakehouse rollback PATH T``.
"""

from __future__ import annotations

from typing import Any

import click

from lakehouse.cli.common import (EPILOG, console, emit, instant_arg, json_flag, note, options_for,
                                  rich_table, service_options_flag)
from lakehouse.config import ClusteringConfig
from lakehouse.errors import InstantNotFoundError, LakehouseError
from lakehouse.inspect.describe import human_bytes
from lakehouse.services.clustering import require_clusterable
from lakehouse.services.clustering.plan import last_clustering
from lakehouse.services.results import read_results
from lakehouse.table import Table, open_table
from lakehouse.timeline.instant import Action, Instant


def _table(path: str) -> Table:
    table = open_table(path)
    require_clusterable(table.meta_client)
    return table


@click.group(epilog=EPILOG)
def clustering() -> None:
    """Cluster the table at PATH: rewrite small file groups into fewer, larger ones, sorted by
    hoodie.clustering.plan.strategy.sort.columns (linear or z-order) if set.

    \b
    Each step is its own process if need be (an Airflow task each):
      T=$(lakehouse clustering schedule PATH)   # empty when nothing was scheduled
      lakehouse clustering run PATH $T
      lakehouse clustering commit PATH $T
    """


@clustering.command("schedule")
@click.argument("path")
@click.option("--force", is_flag=True, help="Plan even if the trigger has not fired.")
@service_options_flag("clustering (hoodie.clustering.*, hoodie.layout.optimize.*)")
@json_flag
def clustering_schedule(path: str, force: bool, options: dict[str, str], as_json: bool) -> dict:
    """Plan a clustering if its trigger fires (or with --force).

    Prints the new clustering instant on stdout; when nothing is scheduled, stdout stays empty,
    "nothing scheduled: <reason>" goes to stderr and the exit code is 0.
    """
    table = _table(path)
    res = table.schedule_clustering(force=force, options=options_for(options, ClusteringConfig, "clustering"))
    doc = {**res.to_json(), "scheduled": res.scheduled}
    if as_json:
        emit(doc)
    elif res.scheduled:
        note(f"scheduled clustering {res.instant}: {res.groups} group(s) of {res.file_slices} file "
             f"slice(s), {human_bytes(res.input_bytes)} into {res.output_file_groups} file group(s) "
             f"({res.reason})")
        click.echo(res.instant)
    else:
        note(f"nothing scheduled: {res.reason}")
    return doc


@clustering.command("run")
@click.argument("path")
@click.argument("instant", required=False, callback=instant_arg)
@click.option("--parallelism", type=click.IntRange(min=1), help="Groups run at once at most.")
@json_flag
def clustering_run(path: str, instant: str | None, parallelism: int | None, as_json: bool) -> dict:
    """Execute clustering INSTANT (default: the oldest pending one).

    Writes the new file groups and leaves the clustering inflight; `clustering commit` makes them
    visible and the old ones replaced. A clustering left inflight by a crashed run is undone and
    run again from the start. Exits 1 if a group failed.
    """
    table = _table(path)
    res = table.run_clustering(instant, parallelism=parallelism)
    doc = res.to_json()
    failures: list[dict] = []
    if res.failed:
        failures = (read_results(table.storage, res.instant, "clustering") or ([], []))[1]
        doc["failures"] = failures
    if as_json:
        emit(doc)
    if res.instant is None:
        note(f"nothing to run: {res.reason}")
        return doc
    if res.failed:
        first = f": {failures[0]['partitionPath']}: {failures[0]['error']}" if failures else ""
        raise LakehouseError(
            f"{res.failed} of {res.groups} group(s) of clustering {res.instant} failed{first}",
            help=f"fix the cause and run `lakehouse clustering run {path} {res.instant}` again (it "
                 "redoes the whole plan), or roll it back with `lakehouse rollback`")
    if res.reason:
        note(f"clustering {res.instant}: {res.reason}")
    else:
        note(f"ran clustering {res.instant}{' again' if res.redone else ''}: {res.groups} group(s), "
             f"{res.rows:,} records into {res.files} file(s), {human_bytes(res.bytes_written)}; "
             f"commit it with `lakehouse clustering commit {path} {res.instant}`")
    if not as_json:
        click.echo(res.instant)
    return doc


@clustering.command("commit")
@click.argument("path")
@click.argument("instant", required=False, callback=instant_arg)
@json_flag
def clustering_commit(path: str, instant: str | None, as_json: bool) -> dict:
    """Commit clustering INSTANT (default: the oldest inflight one) once every group has its
    files; otherwise put it back to requested and exit 1 with the reason."""
    table = _table(path)
    res = table.commit_clustering(instant)
    doc = res.to_json()
    if as_json:
        emit(doc)
    if res.instant is None:
        note(f"nothing committed: {res.reason}")
        return doc
    if not res.committed:
        raise LakehouseError(f"clustering {res.instant} was not committed: {res.reason}",
                             help=f"run it again: `lakehouse clustering run {path} {res.instant}`, "
                                  "then commit it")
    note(f"clustering {res.instant}: {res.reason}" if res.reason else
         f"committed clustering {res.instant}: {res.file_groups_replaced} file group(s) replaced by "
         f"{res.files_written}, {res.rows:,} records")
    if not as_json:
        click.echo(res.instant)
    return doc


def _clusterings(table: Table) -> list[Instant]:
    timeline = table.timeline
    done = [i for i in timeline.completed().filter(actions=[Action.REPLACE_COMMIT])
            if table.active.commit_metadata(i).operation_type == "CLUSTER"]
    return sorted([*timeline.pending_clusterings(), *done])


def _summary(table: Table, inst: Instant) -> dict[str, Any]:
    plan = table.active.clustering_plan(inst.time)
    row: dict[str, Any] = {"instant": inst.time, "state": inst.state.name.lower(),
                           "groups": len(plan.input_groups), "file_slices": len(plan.slices),
                           "input_bytes": int(sum(g.metrics.get("TOTAL_IO_READ_MB", 0) for g in plan.input_groups)
                                              * 1024 * 1024),
                           "sort_columns": list(plan.sort_columns),
                           "output_file_groups": sum(g.num_output_file_groups for g in plan.input_groups),
                           "records_written": None}
    if inst.is_completed:
        meta = table.active.commit_metadata(inst)
        row.update(records_written=meta.total("num_writes"), files_written=len(meta.write_stats()),
                   bytes_written=meta.total("file_size_in_bytes"))
    return row


@clustering.command("show")
@click.argument("path")
@click.argument("instant", required=False, callback=instant_arg)
@json_flag
def clustering_show(path: str, instant: str | None, as_json: bool) -> Any:
    """List the pending and completed clusterings, or the plan of INSTANT: each group's file
    slices and how many file groups it writes."""
    table = _table(path)
    found = _clusterings(table)
    if instant is None:
        rows = [_summary(table, i) for i in found]
        if as_json:
            emit(rows)
        elif not rows:
            last = last_clustering(table.meta_client, table.timeline)
            note("no clustering on the active timeline" + (f" (last: {last})" if last else ""))
        else:
            body = [[r["instant"], r["state"], r["groups"], r["file_slices"], human_bytes(r["input_bytes"]),
                     r["output_file_groups"], ",".join(r["sort_columns"]) or "-",
                     "" if r["records_written"] is None else f"{r['records_written']:,}"] for r in rows]
            heads = ["instant", "state", "groups", "file slices", "input", "output files", "sort", "records written"]
            console().print(rich_table(f"clusterings of {table.name}", heads, body,
                                       f"{len(rows)} clustering(s)", right=heads[2:6], nowrap=heads[:2]))
        return rows
    inst = next((i for i in found if i.time == instant), None)
    if inst is None:
        raise InstantNotFoundError(f"{instant} is not a clustering on the active timeline",
                                   help=f"`lakehouse clustering show {path}` lists the clusterings")
    plan = table.active.clustering_plan(inst.time)
    doc = {**_summary(table, inst),
           "groups_planned": [{"partition": g.partition, "output_file_groups": g.num_output_file_groups,
                               "slices": [{"file_id": s.file_id, "base_file": s.base_file_name,
                                           "log_files": list(s.log_file_names)} for s in g.slices]}
                              for g in plan.input_groups]}
    if as_json:
        emit(doc)
        return doc
    note(f"clustering {inst.time}: {doc['state']}, {doc['groups']} group(s)")
    body = [[g["partition"] or "(none)", s["file_id"], s["base_file"] or "-", len(s["log_files"]),
             g["output_file_groups"]] for g in doc["groups_planned"] for s in g["slices"]]
    heads = ["partition", "file id", "base file", "log files", "group writes"]
    console().print(rich_table(f"clustering {inst.time} ({doc['state']})", heads, body,
                               right=("log files", "group writes"), nowrap=heads[:2]))
    return doc


COMMANDS = (clustering,)
