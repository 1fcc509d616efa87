"""The table-service commands of ``lakehouse`` and its timeline view.

``compaction schedule|run|commit|show``, ``clean plan|run|show``, ``savepoint create|list|delete``,
``restore``, ``archive`` and ``timeline``. They are registered on :data:`lakehouse.cli.main` when
``lakehouse.cli`` is imported, and keep its conventions: what a script consumes (instant times,
``--json`` documents, tables) goes to stdout, notes and errors to stderr, and the exit codes of
``lakehouse --help``. Each compaction step shares nothing with the others but the timeline, so
schedule, run and commit may be separate processes (an Airflow task each)::

    T=$(lakehouse compaction schedule PATH)          # empty when nothing was scheduled
    [ -n "$T" ] && lakehouse compaction run PATH "$T" && lakehouse compaction commit PATH "$T"
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import getpass
import json
import sys
from typing import Any, Callable, Mapping

import click

from lakehouse.cli import (_EPILOG, _console, _human_bytes, _instant_arg, _note, _options_arg,
                           _rich_table, main)
from lakehouse.config import ArchivalConfig, CleanConfig, CompactionConfig
from lakehouse.errors import ConfigError, CorruptFileError, InstantNotFoundError, LakehouseError
from lakehouse.services.compaction import require_mor
from lakehouse.table import Table, open_table
from lakehouse.timeline.active import METAFOLDER, Timeline
from lakehouse.timeline.avro_files import (CleanerPlan, CleanMetadata, CompactionPlan, RollbackMetadata,
                                           RollbackPlan)
from lakehouse.timeline.commit_metadata import CommitMetadata
from lakehouse.timeline.instant import WRITE_ACTIONS, Action, Instant, State

# --- shared bits ------------------------------------------------------------------------------


def _json_flag(f: Callable) -> Callable:
    return click.option("--json", "as_json", is_flag=True,
                        help="Print one JSON document on stdout instead of text.")(f)


def _service_options_flag(what: str) -> Callable:
    return click.option("--option", "options", multiple=True, callback=_options_arg,
                        metavar="KEY=VALUE",
                        help=f"A hoodie.* {what} option for this run (repeatable); "
                             "`lakehouse options` lists them.")


def _emit(doc: Any) -> None:
    click.echo(json.dumps(doc, indent=2))


def _for(options: Mapping[str, str], cls: type, what: str) -> dict[str, str]:
    """``options`` if each one configures ``what``: another service's option would be ignored
    silently otherwise, and a misspelt one too."""
    keys = sorted(f.metadata["key"] for f in dataclasses.fields(cls) if "key" in f.metadata)
    if bad := sorted(k for k in options if k not in keys):
        raise ConfigError(f"{', '.join(bad)}: not an option of {what}",
                          help=f"{what} takes {', '.join(keys)}")
    return dict(options)


def _ns_iso(ns: int | None) -> str | None:
    if ns is None:
        return None
    t = dt.datetime.fromtimestamp(ns // 1_000_000_000, dt.timezone.utc)
    return f"{t:%Y-%m-%dT%H:%M:%S}.{ns % 1_000_000_000 // 1_000_000:03d}Z"


def _ms_iso(ms: int) -> str | None:
    return _ns_iso(ms * 1_000_000) if ms else None


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return ""
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.2f} s"
    m, s = divmod(int(seconds), 60)
    return f"{m}m {s:02d}s" if m < 60 else f"{m // 60}h {m % 60:02d}m"


def _mor_table(path: str) -> Table:
    return require_mor(open_table(path))


# --- compaction -------------------------------------------------------------------------------


@main.group(epilog=_EPILOG)
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
@_service_options_flag("compaction (hoodie.compact*)")
@_json_flag
def compaction_schedule(path: str, force: bool, options: dict[str, str], as_json: bool) -> dict:
    """Plan a compaction if its trigger fires (or with --force).

    Prints the new compaction instant on stdout; when nothing is scheduled, stdout stays empty,
    "nothing scheduled: <reason>" goes to stderr and the exit code is 0.
    """
    table = _mor_table(path)
    res = table.schedule_compaction(force=force, options=_for(options, CompactionConfig, "compaction"))
    doc = {**res.to_json(), "scheduled": res.scheduled}
    if as_json:
        _emit(doc)
    elif res.scheduled:
        _note(f"scheduled compaction {res.instant}: {res.operations} operation(s) over "
              f"{res.log_files} log file(s), {_human_bytes(res.log_bytes)} ({res.reason})")
        click.echo(res.instant)
    else:
        _note(f"nothing scheduled: {res.reason}")
    return doc


@compaction.command("run")
@click.argument("path")
@click.argument("instant", required=False, callback=_instant_arg)
@click.option("--parallelism", type=click.IntRange(min=1), help="Operations run at once at most.")
@_json_flag
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
        from lakehouse.services.compaction.results import read_results
        failures = (read_results(table.storage, res.instant) or ([], []))[1]
        doc["failures"] = failures
    if as_json:
        _emit(doc)
    if res.instant is None:
        _note(f"nothing to run: {res.reason}")
        return doc
    if res.failed:
        first = f": {failures[0]['partitionPath']}/{failures[0]['fileId']}: {failures[0]['error']}" \
            if failures else ""
        raise LakehouseError(
            f"{res.failed} of {res.operations} operation(s) of compaction {res.instant} failed{first}",
            help=f"fix the cause and run `lakehouse compaction run {path} {res.instant}` again (it "
                 "redoes the whole plan); committing now would put the plan back to requested")
    if res.reason:
        _note(f"compaction {res.instant}: {res.reason}")
    else:
        _note(f"ran compaction {res.instant}{' again' if res.redone else ''}: {res.operations} "
              f"operation(s), {res.rows:,} records, {_human_bytes(res.bytes_written)} written; "
              f"commit it with `lakehouse compaction commit {path} {res.instant}`")
    if not as_json:
        click.echo(res.instant)
    return doc


@compaction.command("commit")
@click.argument("path")
@click.argument("instant", required=False, callback=_instant_arg)
@_json_flag
def compaction_commit(path: str, instant: str | None, as_json: bool) -> dict:
    """Commit compaction INSTANT (default: the oldest inflight one) once every operation has its
    file; otherwise put the plan back to requested and exit 1 with the reason."""
    table = _mor_table(path)
    res = table.commit_compaction(instant)
    doc = res.to_json()
    if as_json:
        _emit(doc)
    if res.instant is None:
        _note(f"nothing committed: {res.reason}")
        return doc
    if not res.committed:
        raise LakehouseError(f"compaction {res.instant} was not committed: {res.reason}",
                             help=f"run it again: `lakehouse compaction run {path} {res.instant}`, "
                                  "then commit it")
    _note(f"compaction {res.instant}: {res.reason}" if res.reason else
          f"committed compaction {res.instant}: {res.operations} file group(s), {res.rows:,} records")
    if not as_json:
        click.echo(res.instant)
    return doc


def _plan_or_none(table: Table, t: str) -> CompactionPlan | None:
    from lakehouse.services.compaction import read_plan
    try:
        return read_plan(table, t)
    except InstantNotFoundError:  # a Hudi table may keep only the completed commit
        return None


def _compactions(timeline: Timeline) -> list[Instant]:
    return sorted([*timeline.pending_compactions(),
                   *(i for i in timeline.completed_writes() if timeline.is_compaction(i.time))])


def _compaction_summary(table: Table, inst: Instant) -> dict[str, Any]:
    plan = _plan_or_none(table, inst.time)
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
        from lakehouse.services.compaction.results import read_results
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
@click.argument("instant", required=False, callback=_instant_arg)
@_json_flag
def compaction_show(path: str, instant: str | None, as_json: bool) -> Any:
    """List the pending and completed compactions, or the plan of INSTANT: each operation's
    partition, file id, base instant, log files and bytes, and what became of it."""
    table = _mor_table(path)
    timeline = table.timeline
    found = _compactions(timeline)
    if instant is None:
        rows = [_compaction_summary(table, i) for i in found]
        if as_json:
            _emit(rows)
        elif not rows:
            _note("no compaction on the active timeline")
        else:
            body = [[r["instant"], r["state"], "?" if r["operations"] is None else r["operations"],
                     r["log_files"], _human_bytes(r["log_bytes"]),
                     "" if r["records_written"] is None else f"{r['records_written']:,}"] for r in rows]
            heads = ["instant", "state", "operations", "log files", "log bytes", "records written"]
            _console().print(_rich_table(f"compactions of {table.name}", heads, body,
                                         f"{len(rows)} compaction(s)", right=heads[2:],
                                         nowrap=heads))
        return rows
    inst = next((i for i in found if i.time == instant), None)
    if inst is None:
        raise InstantNotFoundError(f"{instant} is not a compaction on the active timeline",
                                   help=f"`lakehouse compaction show {path}` lists the compactions")
    plan = _plan_or_none(table, inst.time)
    doc = {**_compaction_summary(table, inst),
           "trigger": plan.extra_metadata.get("lakehouse.trigger") if plan else None,
           "plan": _operations(table, inst, plan) if plan else None}
    if as_json:
        _emit(doc)
        return doc
    _note(f"compaction {inst.time}: {doc['state']}, {doc['operations']} operation(s)"
          + (f"; trigger when scheduled: {doc['trigger']}" if doc["trigger"] else ""))
    if plan is None:
        _note("its plan is no longer on the timeline")
        return doc
    body = [[o["partition"] or "(none)", o["file_id"], o["base_instant"], len(o["log_files"]),
             _human_bytes(o["log_bytes"]), o["status"]] for o in doc["plan"]]
    heads = ["partition", "file id", "base instant", "log files", "log bytes", "status"]
    _console().print(_rich_table(f"compaction {inst.time} ({doc['state']})", heads, body,
                                 right=("log files", "log bytes"), nowrap=heads[:3]))
    return doc


# --- clean ------------------------------------------------------------------------------------


@main.group(epilog=_EPILOG)
def clean() -> None:
    """Delete file slices of the table at PATH that no reader needs (hoodie.cleaner.* options)."""


@clean.command("plan")
@click.argument("path")
@_service_options_flag("cleaning (hoodie.clean*)")
@_json_flag
def clean_plan(path: str, options: dict[str, str], as_json: bool) -> dict:
    """Dry run: list what a clean would delete now. Writes nothing."""
    table = open_table(path)
    res = table.clean(options=_for(options, CleanConfig, "cleaning"), dry_run=True)
    doc = {**res.to_json(), "file_paths": list(res.files)}
    if as_json:
        _emit(doc)
        return doc
    if not res.planned:
        _note(f"nothing to clean: {res.reason.removeprefix('nothing to clean: ')}")
        return doc
    con = _console()
    summary = [("policy", doc["policy"]), ("earliest retained", doc["earliest_instant_to_retain"] or "-"),
               ("files to delete", f"{len(res.files):,}"), ("bytes to free", _human_bytes(res.bytes)),
               ("partitions to delete", ", ".join(doc["partitions_to_delete"]) or "none"),
               ("partitions scanned", f"{doc['scanned_partitions']}"
                                      f"{' (incremental)' if res.incremental else ''}")]
    con.print(_rich_table(f"clean plan of {table.name} (dry run, nothing written)", ("", "value"),
                          summary, nowrap=("",)))
    if res.files:
        con.print(_rich_table("files a clean would delete", ("file",), [(f,) for f in res.files],
                              f"{len(res.files):,} file(s)"))
    return doc


@clean.command("run")
@click.argument("path")
@_service_options_flag("cleaning (hoodie.clean*)")
@_json_flag
def clean_run(path: str, options: dict[str, str], as_json: bool) -> dict:
    """Finish any pending clean, then plan and run a new one if its trigger fires.

    Prints the clean instant on stdout (nothing when nothing was cleaned). Exits 1 if some files
    could not be deleted: the clean completes and a later one plans them again.
    """
    table = open_table(path)
    res = table.clean(options=_for(options, CleanConfig, "cleaning"))
    doc = res.to_json()
    if as_json:
        _emit(doc)
    if res.instant is None:
        _note(f"nothing cleaned: {res.reason}")
        return doc
    if res.resumed:
        _note(f"finished pending clean(s) {', '.join(res.resumed)}")
    _note(f"clean {res.instant}: {res.files_deleted:,} file(s) deleted, "
          f"{_human_bytes(res.bytes_freed)} freed"
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
    from lakehouse.services.savepoint import pending_clean_plan
    plan = pending_clean_plan(table.active, inst)
    if plan is not None:
        e = plan.earliest_instant_to_retain
        row.update(policy=plan.policy, earliest_retained=e.timestamp if e else None,
                   files_to_delete=sum(len(v) for v in plan.file_paths_to_be_deleted_per_partition.values()),
                   partitions_deleted=list(plan.partitions_to_be_deleted))
    return row


@clean.command("show")
@click.argument("path")
@_json_flag
def clean_show(path: str, as_json: bool) -> list[dict]:
    """The cleans on the active timeline: files deleted, earliest retained instant.

    Hudi's clean metadata records no sizes, so bytes freed are known only to `clean run`'s own
    output (null here).
    """
    table = open_table(path)
    rows = [_clean_row(table, i) for i in table.timeline.filter(actions=[Action.CLEAN])]
    if as_json:
        _emit(rows)
        return rows
    if not rows:
        _note("no clean on the active timeline")
        return rows
    heads = ["instant", "state", "policy", "files deleted", "bytes freed", "earliest retained",
             "partitions deleted"]
    body = [[r["instant"], r["state"], r["policy"] or "",
             f"{r['files_deleted']:,}" if r["files_deleted"] is not None
             else f"({r.get('files_to_delete', 0):,} planned)",
             "unknown" if r["bytes_freed"] is None else _human_bytes(r["bytes_freed"]),
             r["earliest_retained"] or "", ", ".join(r["partitions_deleted"])] for r in rows]
    _console().print(_rich_table(f"cleans of {table.name}", heads, body, f"{len(rows)} clean(s)",
                                 right=("files deleted",), nowrap=heads[:2]))
    return rows


# --- savepoints and restore -------------------------------------------------------------------


@main.group(epilog=_EPILOG)
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
@click.argument("instant", required=False, callback=_instant_arg)
@click.option("--user", default=_default_user, show_default="your login name",
              help="Who takes the savepoint.")
@click.option("--comments", default="", help="Why it was taken.")
@_json_flag
def savepoint_create(path: str, instant: str | None, user: str, comments: str, as_json: bool) -> dict:
    """Savepoint the completed write INSTANT (default: the latest). Prints its instant time."""
    sp = open_table(path).create_savepoint(instant, user=user, comments=comments)
    doc = sp.to_json()
    if as_json:
        _emit(doc)
        return doc
    _note(f"savepointed {sp.instant}: {doc['files']:,} file(s) in {doc['partitions']} partition(s) "
          f"pinned; go back to it with `lakehouse restore {path} {sp.instant}`")
    click.echo(sp.instant)
    return doc


@savepoint.command("list")
@click.argument("path")
@_json_flag
def savepoint_list(path: str, as_json: bool) -> list[dict]:
    """List the savepoints, oldest first."""
    rows = [{**sp.to_json(), "savepointed_at_utc": _ms_iso(sp.savepointed_at)}
            for sp in open_table(path).list_savepoints()]
    if as_json:
        _emit(rows)
    elif not rows:
        _note("no savepoints")
    else:
        heads = ["instant", "by", "at (UTC)", "comments", "partitions", "files"]
        body = [[r["instant"], r["savepointed_by"], _clock(r["savepointed_at_utc"]),
                 r["comments"], r["partitions"], r["files"]] for r in rows]
        _console().print(_rich_table("savepoints", heads, body, f"{len(rows)} savepoint(s)",
                                     right=("partitions", "files"), nowrap=("instant",)))
    return rows


def _require_savepoint(table: Table, t: str) -> None:
    saved = [i.time for i in table.timeline.completed().filter(actions=[Action.SAVEPOINT])]
    if t not in saved:
        listed = ", ".join(saved) if saved else "none; create one with `lakehouse savepoint create`"
        raise InstantNotFoundError(f"{t} is not a savepoint", help=f"savepoints: {listed}")


@savepoint.command("delete")
@click.argument("path")
@click.argument("instant", callback=_instant_arg)
@_json_flag
def savepoint_delete(path: str, instant: str, as_json: bool) -> dict:
    """Delete the savepoint INSTANT; cleaning may then delete the files it pinned."""
    table = open_table(path)
    _require_savepoint(table, instant)
    table.delete_savepoint(instant)
    doc = {"action": "savepoint", "step": "delete", "instant": instant}
    if as_json:
        _emit(doc)
    else:
        _note(f"deleted savepoint {instant}")
        click.echo(instant)
    return doc


def _interactive() -> bool:
    return sys.stdin.isatty()


@main.command()
@click.argument("path")
@click.argument("savepoint_time", metavar="SAVEPOINT", callback=_instant_arg)
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation (needed without a terminal).")
@_json_flag
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
        _emit(doc)
        return doc
    _note(f"restored {table.name} to savepoint {res.savepoint}: rolled back "
          f"{', '.join(res.rolled_back) if res.rolled_back else 'nothing (no later write)'}")
    click.echo(res.savepoint)
    return doc


# --- archive ----------------------------------------------------------------------------------


@main.command()
@click.argument("path")
@_service_options_flag("archival (hoodie.keep.*)")
@_json_flag
def archive(path: str, options: dict[str, str], as_json: bool) -> dict:
    """Move the oldest instants to .hoodie/archived when the active timeline holds more than
    hoodie.keep.max.commits commits. Prints the archived instant times on stdout."""
    table = open_table(path)
    res = table.archive(options=_for(options, ArchivalConfig, "archival"))
    doc = res.to_json()
    if as_json:
        _emit(doc)
        return doc
    if not res.archived:
        _note(res.reason)
        return doc
    _note(f"archived {len(res.archived)} instant(s), {res.archived[0]} to {res.archived[-1]}, "
          f"into {res.archive_file} ({res.reason})")
    for t in res.archived:
        click.echo(t)
    return doc


# --- timeline ---------------------------------------------------------------------------------


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
        plan = _plan_or_none(table, inst.time)
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
        from lakehouse.services.savepoint import read_savepoint
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
        "state": inst.state.name.lower(), "start": _ns_iso(start), "end": _ns_iso(end),
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
        from lakehouse.services.archive import read_archived
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


def _clock(iso: str | None, day: str | None = None) -> str:
    """An ISO time for the table: 'date time' in UTC, the time alone on ``day``."""
    if iso is None:
        return ""
    d, _, t = iso.removesuffix("Z").partition("T")
    return t if d == day else f"{d} {t}"


@main.command()
@click.argument("path")
@click.option("--archived", is_flag=True, help="Also list the archived instants (.hoodie/archived).")
@_json_flag
def timeline(path: str, archived: bool, as_json: bool) -> list[dict[str, Any]]:
    """List every instant, oldest first: action, state, when it started and completed (UTC, from
    the timeline files' times) and what it touched.

    A completed compaction is listed as a compaction (its timeline file is <instant>.commit).
    """
    table = open_table(path)
    rows = timeline_rows(table, archived)
    if as_json:
        _emit(rows)
        return rows
    from rich import box
    from rich.table import Table as RichTable
    from rich.text import Text
    # One day for all (the usual case): the date goes to the caption and the cells keep the time.
    days = {r["start"].partition("T")[0] for r in rows if r["start"]}
    day = next(iter(days)) if len(days) == 1 else None
    caption = f"{len(rows)} instant(s); times in UTC" + (f" on {day}" if day else "")
    con = _console()
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
                 _clock(r["start"], day), _clock(r["end"], start_day), _duration(r["duration_s"]), _what(r)]
        out.add_row(*(Text(c) for i, c in enumerate(cells) if wide or i != 4))
    con.print(out)
    return rows
