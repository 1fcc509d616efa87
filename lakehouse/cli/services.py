"""The table-service commands of ``lakehouse``: ``compaction schedule|run|commit|show``,
``clean plan|run|show``, ``savepoint create|list|delete``, ``restore`` and ``archive``.

They keep the conventions of :mod:`lakehouse.cli`: what a script consumes (instant times,
``--json`` documents, tables) goes to stdout, notes and errors to stderr, and the exit codes of
``lakehouse --help``. Each compaction step shares nothing with the others but the timeline, so
schedule, run and commit may be separate processes (an Airflow task each)::

    T=$(lakehouse compaction schedule PATH)          # empty when nothing was scheduled
    [ -n "$T" ] && lakehouse compaction run PATH "$T" && lakehouse compaction commit PATH "$T"
"""

from __future__ import annotations

import getpass
import sys
from typing import Any

import click

from lakehouse.cli.common import (EPILOG, clock, console, emit, instant_arg, json_flag,
                                  ms_iso, note, options_for, rich_table, service_options_flag)
from lakehouse.config import ArchivalConfig, CleanConfig, CompactionConfig
from lakehouse.errors import InstantNotFoundError, LakehouseError
from lakehouse.inspect.describe import human_bytes
from lakehouse.inspect.timeline import plan_or_none
from lakehouse.services.compaction import require_mor
from lakehouse.services.results import read_results
from lakehouse.services.savepoint import pending_clean_plan
from lakehouse.table import Table, open_table
from lakehouse.timeline.active import Timeline
from lakehouse.timeline.avro_files import CleanMetadata, CompactionPlan
from lakehouse.timeline.instant import Action, Instant


def _mor_table(path: str) -> Table:
    return require_mor(open_table(path))


# --- compaction -------------------------------------------------------------------------------


@click.group(epilog=EPILOG)
def compaction() -> None:
    """Compact a Merge-On-Read table at PATH: schedule a plan, run it, commit it.

    \b
    Each step is its own process if need be (an Airflow task each):
      T=$(lakehouse compaction schedule PATH)   # empty when nothing was scheduled
      lakehouse compaction run PATH $T
      lakehouse compaction commit PATH $T
    """


@compaction.command("schedule")
@click.argument("path")
@click.option("--force", is_flag=True, help="Plan even if the trigger has not fired.")
@service_options_flag("compaction (hoodie.compact*)")
@json_flag
def compaction_schedule(path: str, force: bool, options: dict[str, str], as_json: bool) -> dict:
    """Plan a compaction if its trigger fires (or with --force).

    Prints the new compaction instant on stdout; when nothing is scheduled, stdout stays empty,
    "nothing scheduled: <reason>" goes to stderr and the exit code is 0.
    """
    table = _mor_table(path)
    res = table.schedule_compaction(force=force, options=options_for(options, CompactionConfig, "compaction"))
    doc = {**res.to_json(), "scheduled": res.scheduled}
    if as_json:
        emit(doc)
    elif res.scheduled:
        note(f"scheduled compaction {res.instant}: {res.operations} operation(s) over "
             f"{res.log_files} log file(s), {human_bytes(res.log_bytes)} ({res.reason})")
        click.echo(res.instant)
    else:
        note(f"nothing scheduled: {res.reason}")
    return doc


@compaction.command("run")
@click.argument("path")
@click.argument("instant", required=False, callback=instant_arg)
@click.option("--parallelism", type=click.IntRange(min=1), help="Operations run at once at most.")
@json_flag
def compaction_run(path: str, instant: str | None, parallelism: int | None, as_json: bool) -> dict:
    """Execute compaction INSTANT (default: the oldest pending one).

    Writes the new base files and leaves the compaction inflight; `compaction commit` makes them
    visible. A compaction left inflight by a crashed run is undone and run again from the start.
    Exits 1 if an operation failed (running it again retries the whole plan).
    """
    table = _mor_table(path)
    res = table.run_compaction(instant, parallelism=parallelism)
    doc = res.to_json()
    failures: list[dict] = []
    if res.failed:
        failures = (read_results(table.storage, res.instant) or ([], []))[1]
        doc["failures"] = failures
    if as_json:
        emit(doc)
    if res.instant is None:
        note(f"nothing to run: {res.reason}")
        return doc
    if res.failed:
        first = f": {failures[0]['partitionPath']}/{failures[0]['fileId']}: {failures[0]['error']}" \
            if failures else ""
        raise LakehouseError(
            f"{res.failed} of {res.operations} operation(s) of compaction {res.instant} failed{first}",
            help=f"fix the cause and run `lakehouse compaction run {path} {res.instant}` again (it "
                 "redoes the whole plan); committing now would put the plan back to requested")
    if res.reason:
        note(f"compaction {res.instant}: {res.reason}")
    else:
        note(f"ran compaction {res.instant}{' again' if res.redone else ''}: {res.operations} "
             f"operation(s), {res.rows:,} records, {human_bytes(res.bytes_written)} written; "
             f"commit it with `lakehouse compaction commit {path} {res.instant}`")
    if not as_json:
        click.echo(res.instant)
    return doc


@compaction.command("commit")
@click.argument("path")
@click.argument("instant", required=False, callback=instant_arg)
@json_flag
def compaction_commit(path: str, instant: str | None, as_json: bool) -> dict:
    """Commit compaction INSTANT (default: the oldest inflight one) once every operation has its
    file; otherwise put the plan back to requested and exit 1 with the reason."""
    table = _mor_table(path)
    res = table.commit_compaction(instant)
    doc = res.to_json()
    if as_json:
        emit(doc)
    if res.instant is None:
        note(f"nothing committed: {res.reason}")
        return doc
    if not res.committed:
        raise LakehouseError(f"compaction {res.instant} was not committed: {res.reason}",
                             help=f"run it again: `lakehouse compaction run {path} {res.instant}`, "
                                  "then commit it")
    note(f"compaction {res.instant}: {res.reason}" if res.reason else
         f"committed compaction {res.instant}: {res.operations} file group(s), {res.rows:,} records")
    if not as_json:
        click.echo(res.instant)
    return doc


def _compactions(timeline: Timeline) -> list[Instant]:
    return sorted([*timeline.pending_compactions(),
                   *(i for i in timeline.completed_writes() if timeline.is_compaction(i.time))])


def _compaction_summary(table: Table, inst: Instant) -> dict[str, Any]:
    plan = plan_or_none(table, inst.time)
    ops = plan.operations if plan else ()
    row: dict[str, Any] = {"instant": inst.time, "state": inst.state.name.lower(),
                           "operations": len(ops) if plan else None,
                           "log_files": sum(len(o.delta_file_paths) for o in ops),
                           "log_bytes": int(sum(o.metrics.get("TOTAL_LOG_FILES_SIZE", 0) for o in ops)),
                           "records_written": None}
    if inst.is_completed:
        meta = table.active.commit_metadata(inst)
        row.update(records_written=meta.total("num_writes"),
                   bytes_written=meta.total("file_size_in_bytes"))
        if plan is None:
            row["operations"] = len(meta.write_stats())
    return row


def _operations(table: Table, inst: Instant, plan: CompactionPlan) -> list[dict[str, Any]]:
    """The plan's operations, each with what became of it so far."""
    done: dict[tuple[str, str], str] = {}
    failed: dict[tuple[str, str], str] = {}
    if inst.is_completed:
        done = {(s.partition_path, s.file_id): s.file_name
                for s in table.active.commit_metadata(inst).write_stats()}
    elif inst.is_inflight:
        stats, fails = read_results(table.storage, inst.time) or ([], [])
        done = {(s.partition_path, s.file_id): s.file_name for s in stats}
        failed = {(f["partitionPath"], f["fileId"]): f["error"] for f in fails}
    out = []
    for o in plan.operations:
        key = (o.partition_path, o.file_id)
        status = ("compacted" if inst.is_completed else "done") if key in done else \
            f"failed: {failed[key]}" if key in failed else \
            "running or crashed" if inst.is_inflight else "missing" if inst.is_completed else "planned"
        out.append({"partition": o.partition_path, "file_id": o.file_id,
                    "base_instant": o.base_instant_time, "base_file": o.data_file_path,
                    "log_files": list(o.delta_file_paths),
                    "log_bytes": int(o.metrics.get("TOTAL_LOG_FILES_SIZE", 0)),
                    "status": status, "new_base_file": done.get(key)})
    return out


@compaction.command("show")
@click.argument("path")
@click.argument("instant", required=False, callback=instant_arg)
@json_flag
def compaction_show(path: str, instant: str | None, as_json: bool) -> Any:
    """List the pending and completed compactions, or the plan of INSTANT: each operation's
    partition, file id, base instant, log files and bytes, and what became of it."""
    table = _mor_table(path)
    timeline = table.timeline
    found = _compactions(timeline)
    if instant is None:
        rows = [_compaction_summary(table, i) for i in found]
        if as_json:
            emit(rows)
        elif not rows:
            note("no compaction on the active timeline")
        else:
            body = [[r["instant"], r["state"], "?" if r["operations"] is None else r["operations"],
                     r["log_files"], human_bytes(r["log_bytes"]),
                     "" if r["records_written"] is None else f"{r['records_written']:,}"] for r in rows]
            heads = ["instant", "state", "operations", "log files", "log bytes", "records written"]
            console().print(rich_table(f"compactions of {table.name}", heads, body,
                                       f"{len(rows)} compaction(s)", right=heads[2:],
                                       nowrap=heads[:2]))
        return rows
    inst = next((i for i in found if i.time == instant), None)
    if inst is None:
        raise InstantNotFoundError(f"{instant} is not a compaction on the active timeline",
                                   help=f"`lakehouse compaction show {path}` lists the compactions")
    plan = plan_or_none(table, inst.time)
    doc = {**_compaction_summary(table, inst),
           "trigger": plan.extra_metadata.get("lakehouse.trigger") if plan else None,
           "plan": _operations(table, inst, plan) if plan else None}
    if as_json:
        emit(doc)
        return doc
    note(f"compaction {inst.time}: {doc['state']}, {doc['operations']} operation(s)"
         + (f"; trigger when scheduled: {doc['trigger']}" if doc["trigger"] else ""))
    if plan is None:
        note("its plan is no longer on the timeline")
        return doc
    body = [[o["partition"] or "(none)", o["file_id"], o["base_instant"], len(o["log_files"]),
             human_bytes(o["log_bytes"]), o["status"]] for o in doc["plan"]]
    heads = ["partition", "file id", "base instant", "log files", "log bytes", "status"]
    console().print(rich_table(f"compaction {inst.time} ({doc['state']})", heads, body,
                               right=("log files", "log bytes"), nowrap=heads[:3]))
    return doc


# --- clean ------------------------------------------------------------------------------------


@click.group(epilog=EPILOG)
def clean() -> None:
    """Delete file slices of the table at PATH that no reader needs (hoodie.cleaner.* options)."""


@clean.command("plan")
@click.argument("path")
@service_options_flag("cleaning (hoodie.clean*)")
@json_flag
def clean_plan(path: str, options: dict[str, str], as_json: bool) -> dict:
    """Dry run: list what a clean would delete now. Writes nothing."""
    table = open_table(path)
    res = table.clean(options=options_for(options, CleanConfig, "cleaning"), dry_run=True)
    doc = {**res.to_json(), "file_paths": list(res.files)}
    if as_json:
        emit(doc)
        return doc
    if not res.planned:
        note(f"nothing to clean: {res.reason.removeprefix('nothing to clean: ')}")
        return doc
    con = console()
    summary = [("policy", doc["policy"]), ("earliest retained", doc["earliest_instant_to_retain"] or "-"),
               ("files to delete", f"{len(res.files):,}"), ("bytes to free", human_bytes(res.bytes)),
               ("partitions to delete", ", ".join(doc["partitions_to_delete"]) or "none"),
               ("partitions scanned", f"{doc['scanned_partitions']}"
                                      f"{' (incremental)' if res.incremental else ''}")]
    con.print(rich_table(f"clean plan of {table.name} (dry run, nothing written)", ("", "value"),
                         summary, nowrap=("",)))
    if res.files:
        con.print(rich_table("files a clean would delete", ("file",), [(f,) for f in res.files],
                             f"{len(res.files):,} file(s)"))
    return doc


@clean.command("run")
@click.argument("path")
@service_options_flag("cleaning (hoodie.clean*)")
@json_flag
def clean_run(path: str, options: dict[str, str], as_json: bool) -> dict:
    """Finish any pending clean, then plan and run a new one if its trigger fires.

    Prints the clean instant on stdout (nothing when nothing was cleaned). Exits 1 if some files
    could not be deleted: the clean completes and a later one plans them again.
    """
    table = open_table(path)
    res = table.clean(options=options_for(options, CleanConfig, "cleaning"))
    doc = res.to_json()
    if as_json:
        emit(doc)
    if res.instant is None:
        note(f"nothing cleaned: {res.reason}")
        return doc
    if res.resumed:
        note(f"finished pending clean(s) {', '.join(res.resumed)}")
    note(f"clean {res.instant}: {res.files_deleted:,} file(s) deleted, "
         f"{human_bytes(res.bytes_freed)} freed"
         + (f", partitions {', '.join(res.partitions_deleted)} removed" if res.partitions_deleted else "")
         + (f"; earliest retained instant {res.earliest_retained}" if res.earliest_retained else ""))
    if res.failed_files:
        raise LakehouseError(f"clean {res.instant} could not delete {len(res.failed_files)} file(s), "
                             f"e.g. {res.failed_files[0]}" + (f": {res.reason}" if res.reason else ""),
                             help="check the storage permissions; the next clean that runs (after another "
                                  "commit) plans them again")
    if not as_json:
        click.echo(res.instant)
    return doc


def _clean_row(table: Table, inst: Instant) -> dict[str, Any]:
    row: dict[str, Any] = {"instant": inst.time, "state": inst.state.name.lower(), "policy": None,
                           "files_deleted": None, "bytes_freed": None, "earliest_retained": None,
                           "partitions_deleted": [], "failed_files": 0, "took_ms": None}
    if inst.is_completed:
        data = table.active.read(inst)
        if data:
            m = CleanMetadata.from_bytes(data, table.storage.uri(table.active.path(inst)))
            parts = list(m.partition_metadata.values())
            row.update(policy=parts[0].policy if parts else None, files_deleted=m.total_files_deleted,
                       earliest_retained=m.earliest_commit_to_retain or None, took_ms=m.time_taken_in_millis,
                       partitions_deleted=sorted(p.partition_path for p in parts if p.is_partition_deleted),
                       failed_files=sum(len(p.failed_delete_files) for p in parts))
        return row
    plan = pending_clean_plan(table.active, inst)
    if plan is not None:
        e = plan.earliest_instant_to_retain
        row.update(policy=plan.policy, earliest_retained=e.timestamp if e else None,
                   files_to_delete=sum(len(v) for v in plan.file_paths_to_be_deleted_per_partition.values()),
                   partitions_deleted=list(plan.partitions_to_be_deleted))
    return row


@clean.command("show")
@click.argument("path")
@json_flag
def clean_show(path: str, as_json: bool) -> list[dict]:
    """The cleans on the active timeline: files deleted, earliest retained instant.

    Hudi's clean metadata records no sizes, so bytes freed are known only to `clean run`'s own
    output (null here).
    """
    table = open_table(path)
    rows = [_clean_row(table, i) for i in table.timeline.filter(actions=[Action.CLEAN])]
    if as_json:
        emit(rows)
        return rows
    if not rows:
        note("no clean on the active timeline")
        return rows
    heads = ["instant", "state", "policy", "files deleted", "bytes freed", "earliest retained",
             "partitions deleted"]
    body = [[r["instant"], r["state"], r["policy"] or "",
             f"{r['files_deleted']:,}" if r["files_deleted"] is not None
             else f"({r.get('files_to_delete', 0):,} planned)",
             "unknown" if r["bytes_freed"] is None else human_bytes(r["bytes_freed"]),
             r["earliest_retained"] or "", ", ".join(r["partitions_deleted"])] for r in rows]
    console().print(rich_table(f"cleans of {table.name}", heads, body, f"{len(rows)} clean(s)",
                               right=("files deleted",), nowrap=heads[:2]))
    return rows


# --- savepoints and restore -------------------------------------------------------------------


@click.group(epilog=EPILOG)
def savepoint() -> None:
    """Pin the files of one completed write of the table at PATH, so that no clean deletes them
    and `lakehouse restore` can go back to it."""


def _default_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no login name in some containers
        return ""


@savepoint.command("create")
@click.argument("path")
@click.argument("instant", required=False, callback=instant_arg)
@click.option("--user", default=_default_user, show_default="your login name",
              help="Who takes the savepoint.")
@click.option("--comments", default="", help="Why it was taken.")
@json_flag
def savepoint_create(path: str, instant: str | None, user: str, comments: str, as_json: bool) -> dict:
    """Savepoint the completed write INSTANT (default: the latest). Prints its instant time."""
    sp = open_table(path).create_savepoint(instant, user=user, comments=comments)
    doc = sp.to_json()
    if as_json:
        emit(doc)
        return doc
    note(f"savepointed {sp.instant}: {doc['files']:,} file(s) in {doc['partitions']} partition(s) "
         f"pinned; go back to it with `lakehouse restore {path} {sp.instant}`")
    click.echo(sp.instant)
    return doc


@savepoint.command("list")
@click.argument("path")
@json_flag
def savepoint_list(path: str, as_json: bool) -> list[dict]:
    """List the savepoints, oldest first."""
    rows = [{**sp.to_json(), "savepointed_at_utc": ms_iso(sp.savepointed_at)}
            for sp in open_table(path).list_savepoints()]
    if as_json:
        emit(rows)
    elif not rows:
        note("no savepoints")
    else:
        heads = ["instant", "by", "at (UTC)", "comments", "partitions", "files"]
        body = [[r["instant"], r["savepointed_by"], clock(r["savepointed_at_utc"]),
                 r["comments"], r["partitions"], r["files"]] for r in rows]
        console().print(rich_table("savepoints", heads, body, f"{len(rows)} savepoint(s)",
                                   right=("partitions", "files"), nowrap=("instant",)))
    return rows


def _require_savepoint(table: Table, t: str) -> None:
    saved = [i.time for i in table.timeline.completed().filter(actions=[Action.SAVEPOINT])]
    if t not in saved:
        listed = ", ".join(saved) if saved else "none; create one with `lakehouse savepoint create`"
        raise InstantNotFoundError(f"{t} is not a savepoint", help=f"savepoints: {listed}")


@savepoint.command("delete")
@click.argument("path")
@click.argument("instant", callback=instant_arg)
@json_flag
def savepoint_delete(path: str, instant: str, as_json: bool) -> dict:
    """Delete the savepoint INSTANT; cleaning may then delete the files it pinned."""
    table = open_table(path)
    _require_savepoint(table, instant)
    table.delete_savepoint(instant)
    doc = {"action": "savepoint", "step": "delete", "instant": instant}
    if as_json:
        emit(doc)
    else:
        note(f"deleted savepoint {instant}")
        click.echo(instant)
    return doc


def _interactive() -> bool:
    return sys.stdin.isatty()


@click.command()
@click.argument("path")
@click.argument("savepoint_time", metavar="SAVEPOINT", callback=instant_arg)
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation (needed without a terminal).")
@json_flag
def restore(path: str, savepoint_time: str, yes: bool, as_json: bool) -> dict:
    """Restore the table to SAVEPOINT: every later write and compaction is rolled back.

    Destructive: the data those writes added is deleted. Asks first unless --yes; without a
    terminal to ask on, it refuses (exit 2) unless --yes is given.
    """
    table = open_table(path)
    _require_savepoint(table, savepoint_time)
    tl = table.timeline
    victims = [i for i in reversed(tl.write_timeline().instants) if i.time > savepoint_time]  # newest first
    if not yes:
        if not _interactive():
            raise click.UsageError(f"restore rolls back every write after {savepoint_time} "
                                   f"({len(victims)} instant(s)); pass --yes to confirm, there is no "
                                   "terminal to ask on")
        listed = "".join(f"\n  {i.time} {'compaction' if tl.is_compaction(i.time) else i.action} "
                         f"({i.state.name.lower()})" for i in victims[:20])
        more = f"\n  ... and {len(victims) - 20} older" if len(victims) > 20 else ""
        if not click.confirm(f"Restoring {table.name} to savepoint {savepoint_time} rolls back "
                             f"{len(victims)} instant(s), newest first:{listed}{more}\nContinue?",
                             err=True):
            raise LakehouseError("restore cancelled: nothing was changed",
                                 help="answer y to restore, or pass --yes")
    res = table.restore(savepoint_time)
    doc = res.to_json()
    if as_json:
        emit(doc)
        return doc
    note(f"restored {table.name} to savepoint {res.savepoint}: rolled back "
         f"{', '.join(res.rolled_back) if res.rolled_back else 'nothing (no later write)'}")
    click.echo(res.savepoint)
    return doc


# --- archive ----------------------------------------------------------------------------------


@click.command()
@click.argument("path")
@service_options_flag("archival (hoodie.keep.*)")
@json_flag
def archive(path: str, options: dict[str, str], as_json: bool) -> dict:
    """Move the oldest instants to .hoodie/archived when the active timeline holds more than
    hoodie.keep.max.commits commits. Prints the archived instant times on stdout."""
    table = open_table(path)
    res = table.archive(options=options_for(options, ArchivalConfig, "archival"))
    doc = res.to_json()
    if as_json:
        emit(doc)
        return doc
    if not res.archived:
        note(res.reason)
        return doc
    note(f"archived {len(res.archived)} instant(s), {res.archived[0]} to {res.archived[-1]}, "
         f"into {res.archive_file} ({res.reason})")
    for t in res.archived:
        click.echo(t)
    return doc


COMMANDS = (compaction, clean, savepoint, restore, archive)
