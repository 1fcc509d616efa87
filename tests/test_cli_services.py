"""The table-service commands of `lakehouse` (compaction, clean, savepoint, restore, archive) and
the timeline view, on real Merge-On-Read tables, driven through click's CliRunner and, for the
Airflow-style compaction, as separate processes."""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import pathlib
import subprocess
import sys

import pytest
from click.testing import CliRunner

from lakehouse import cli
from lakehouse.cli import services as service_commands
from lakehouse.services import clean as clean_service
from lakehouse.services.compaction import execute as compaction_execute
from lakehouse.table import open_table
from tests.test_cli import batch, rows, write_file

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]


def run(*args, ok: bool = True, input: str | None = None):
    # A wide console, so rich does not fold the cells the human-output checks look for.
    res = CliRunner().invoke(cli.main, [str(a) for a in args], input=input, env={"COLUMNS": "250"})
    if ok and res.exit_code != 0:
        raise AssertionError(f"{args} exited {res.exit_code}\nstdout:\n{res.stdout}\n"
                             f"stderr:\n{res.stderr}\n{res.exception!r}")
    return res


def run_json(*args):
    return json.loads(run(*args, "--json").stdout)


def files_on_disk(path: pathlib.Path) -> dict[str, tuple[int, int]]:
    """Every file under the table (timeline included): relative path -> (size, mtime)."""
    return {p.relative_to(path).as_posix(): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in path.rglob("*") if p.is_file()}


def data_files(path: pathlib.Path) -> set[str]:
    return {f for f in files_on_disk(path) if not f.startswith(".hoodie")
            and not f.endswith(".hoodie_partition_metadata")}


def states(path) -> dict[tuple[str, str], str]:
    return {(r["time"], r["action"]): r["state"] for r in run_json("timeline", path)}


@pytest.fixture
def mor(tmp_path):
    return make_mor(tmp_path)


def make_mor(tmp_path):
    """A MOR table: an insert of ids 0..19, then two upserts that go to log files."""
    path = tmp_path / "trips"
    run("create", path, "--record-key", "id", "--partition-by", "city", "--ordering-field", "ts")
    writes = [run("write", path, write_file(batch(range(20)), tmp_path / "b.parquet"),
                  "--op", "insert").stdout.strip()]
    for n, ids in enumerate(([1, 2, 3], [4, 5])):
        f = write_file(batch(ids, ts=200 + n, fare=100.0 * (n + 1)), tmp_path / f"u{n}.parquet")
        writes.append(run("write", path, f).stdout.strip())
    assert open_table(str(path)).stats().log_files > 0, "the upserts should have written logs"
    return path, writes


def upsert(path, tmp_path, ids, ts, fare, name):
    f = write_file(batch(ids, ts=ts, fare=fare), tmp_path / f"{name}.parquet")
    return run("write", path, f).stdout.strip()


# --- help -------------------------------------------------------------------------------------

NEW = [["compaction", "schedule"], ["compaction", "run"], ["compaction", "commit"],
       ["compaction", "show"], ["clean", "plan"], ["clean", "run"], ["clean", "show"],
       ["savepoint", "create"], ["savepoint", "list"], ["savepoint", "delete"], ["restore"],
       ["archive"], ["timeline"]]


@pytest.mark.parametrize("words", NEW, ids=" ".join)
def test_every_service_command_has_help_and_json(words):
    out = run(*words, "--help").stdout
    assert out.startswith(f"Usage: lakehouse {' '.join(words)} [OPTIONS] PATH")
    assert "--json" in out


@pytest.mark.parametrize("group", ["compaction", "clean", "savepoint"])
def test_groups_list_their_commands_and_exit_codes(group):
    out = run(group, "--help").stdout
    for sub in cli.main.commands[group].commands:
        assert sub in out
    assert "Exit codes" in out and "3  table not found" in out


def test_module_entry_point_has_the_service_commands():
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([sys.executable, "-m", "lakehouse.cli", "compaction", "--help"],
                          capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "schedule" in proc.stdout and "commit" in proc.stdout


@pytest.mark.parametrize("words", [w + {"delete": ["20240101000000000"], "restore": ["20240101000000000",
                                   "--yes"]}.get(w[-1], []) for w in NEW], ids=lambda w: " ".join(w[:2]))
def test_not_a_table_exits_3(tmp_path, words):
    n = 2 if words[0] in ("compaction", "clean", "savepoint") else 1
    res = run(*words[:n], tmp_path, *words[n:], ok=False)
    assert res.exit_code == 3 and "is not a table" in res.stderr and "Help: " in res.stderr


@pytest.mark.parametrize("args", [
    ["compaction"],                                                   # no subcommand
    ["compaction", "run", "{t}", "--parallelism", "0"],
    ["compaction", "show", "{t}", "yesterday"],                       # not an instant
    ["compaction", "schedule", "{t}", "--option", "noequals"],
    ["savepoint", "delete", "{t}"],                                   # INSTANT missing
    ["restore", "{t}"],                                               # SAVEPOINT missing
    ["clean", "nosuch", "{t}"],
])
def test_usage_errors_exit_2(mor, args):
    path, _ = mor
    res = run(*[a.format(t=path) for a in args], ok=False)
    assert res.exit_code == 2, res.stderr
    assert "Usage:" in res.stderr or "Error:" in res.stderr


# --- compaction -------------------------------------------------------------------------------


def test_compaction_steps_as_separate_processes(mor):
    """schedule, run and commit as three processes, handing over only the instant (Airflow)."""
    path, _ = mor
    before = rows(path)
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}

    def step(*args):
        proc = subprocess.run([sys.executable, "-m", "lakehouse.cli", *map(str, args)],
                              capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=300)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.strip()

    t = step("compaction", "schedule", path, "--force")
    assert t.isdigit() and len(t) == 17
    assert step("compaction", "run", path, t) == t
    assert states(path)[(t, "compaction")] == "inflight"
    assert step("compaction", "commit", path, t) == t
    assert states(path)[(t, "compaction")] == "completed"
    assert rows(path) == before
    assert open_table(str(path)).stats().log_files == 0


def test_compaction_json_instant_flows_from_schedule_to_run_and_commit(mor):
    path, writes = mor
    before = rows(path)
    assert rows(path, read_optimized=True) != before  # the upserts are still in log files
    logs_before = open_table(str(path)).stats().log_files
    sched = run_json("compaction", "schedule", path, "--force")
    t = sched["instant"]
    assert sched["scheduled"] is True and t > writes[-1]
    assert sched["operations"] == 2 and sched["log_files"] == logs_before  # one group per city

    shown = run_json("compaction", "show", path, t)
    assert shown["state"] == "requested" and len(shown["plan"]) == 2
    on_disk = data_files(path)
    for op in shown["plan"]:
        assert op["status"] == "planned" and op["base_instant"] == writes[0]
        assert all(f"{op['partition']}/{name}" in on_disk for name in op["log_files"])
        assert op["log_bytes"] == sum((path / op["partition"] / n).stat().st_size for n in op["log_files"])
    assert sum(len(op["log_files"]) for op in shown["plan"]) == shown["log_files"] == logs_before

    ran = run_json("compaction", "run", path, t, "--parallelism", "2")
    assert (ran["instant"], ran["operations"], ran["failed"], ran["rows"]) == (t, 2, 0, 20)
    assert rows(path) == before and rows(path, read_optimized=True) != before  # not yet visible
    shown = run_json("compaction", "show", path, t)
    assert shown["state"] == "inflight" and {o["status"] for o in shown["plan"]} == {"done"}
    new_files = {f"{o['partition']}/{o['new_base_file']}" for o in shown["plan"]}
    assert new_files <= data_files(path) and all(t in f for f in new_files)

    done = run_json("compaction", "commit", path, t)
    assert (done["instant"], done["committed"], done["operations"], done["rows"]) == (t, True, 2, 20)
    assert rows(path) == before
    assert rows(path, read_optimized=True) == before  # the logs are merged into the base files
    listed = run_json("compaction", "show", path)
    assert [(c["instant"], c["state"], c["operations"], c["records_written"]) for c in listed] == \
        [(t, "completed", 2, 20)]
    # A second commit of the same instant says so and changes nothing.
    again = run("compaction", "commit", path, t)
    assert again.stdout.strip() == t and "already committed" in again.stderr


def test_schedule_says_why_nothing_was_scheduled_and_takes_trigger_options(mor):
    path, _ = mor
    res = run("compaction", "schedule", path)
    assert res.exit_code == 0 and res.stdout == ""
    assert res.stderr.strip() == "nothing scheduled: not yet: 3 of 5 delta commits"
    doc = run_json("compaction", "schedule", path)
    assert doc["scheduled"] is False and doc["instant"] is None and "3 of 5" in doc["reason"]
    assert not run_json("compaction", "show", path)
    res = run("compaction", "schedule", path, "--option", "hoodie.compact.inline.max.delta.commits=3")
    t = res.stdout.strip()
    assert states(path)[(t, "compaction")] == "requested"
    # run/commit with nothing to do are no-ops that succeed (the DAG's later tasks).
    assert "nothing committed" in run("compaction", "commit", path).stderr


def test_options_of_another_service_are_refused(mor):
    path, _ = mor
    res = run("compaction", "schedule", path, "--option", "hoodie.cleaner.commits.retained=1", ok=False)
    assert res.exit_code == 1 and "not an option of compaction" in res.stderr
    assert "Help: compaction takes hoodie.compact" in res.stderr
    res = run("clean", "run", path, "--option", "hoodie.compact.inline.max.delta.commits=1", ok=False)
    assert res.exit_code == 1 and "Help:" in res.stderr
    res = run("archive", path, "--option", "hoodie.keep.min.commits=5",
              "--option", "hoodie.keep.max.commits=5", ok=False)
    assert res.exit_code == 1 and "must be below" in res.stderr and "Help:" in res.stderr
    assert not run_json("compaction", "show", path) and not run_json("clean", "show", path)


@pytest.mark.parametrize("words", [["compaction", "schedule"], ["compaction", "run"],
                                   ["compaction", "commit"], ["compaction", "show"]])
def test_compaction_on_a_copy_on_write_table_is_an_error(tmp_path, words):
    path = tmp_path / "cow"
    run("create", path, "--type", "copy_on_write", "--record-key", "id", "--ordering-field", "ts")
    run("write", path, write_file(batch(range(3)), tmp_path / "b.parquet"))
    res = run(*words, path, ok=False)
    assert res.exit_code == 1
    assert res.stderr == ("error: cow is a COPY_ON_WRITE table; only MERGE_ON_READ tables compact\n"
                          "Help: copy-on-write tables have no logs to compact\n")


def test_failed_operations_fail_run_and_commit_rolls_back_to_requested(mor, monkeypatch):
    path, _ = mor
    before = rows(path)
    t = run("compaction", "schedule", path, "--force").stdout.strip()
    real = compaction_execute.compact_operation

    def broken(task):
        if task.op.partition_path == "sf":
            raise OSError("disk full")
        return real(task)
    monkeypatch.setattr(compaction_execute, "compact_operation", broken)
    res = run("compaction", "run", path, t, "--json", ok=False)
    assert res.exit_code == 1
    doc = json.loads(res.stdout)
    assert doc["failed"] == 1 and doc["operations"] == 2
    assert [(f["partitionPath"], f["error"]) for f in doc["failures"]] == [("sf", "OSError: disk full")]
    assert f"1 of 2 operation(s) of compaction {t} failed: sf/" in res.stderr
    assert "disk full" in res.stderr and "Help: fix the cause" in res.stderr
    monkeypatch.setattr(compaction_execute, "compact_operation", real)

    res = run("compaction", "commit", path, t, ok=False)
    assert res.exit_code == 1
    assert f"error: compaction {t} was not committed: rolled back to requested: sf/" in res.stderr
    assert "OSError: disk full" in res.stderr and "Help: run it again" in res.stderr
    assert states(path)[(t, "compaction")] == "requested"
    assert not any(t in f for f in data_files(path))  # the half-done output is gone
    assert rows(path) == before
    run("compaction", "run", path, t)
    run("compaction", "commit", path, t)
    assert states(path)[(t, "compaction")] == "completed" and rows(path) == before


def test_commit_rolls_back_when_a_written_file_is_missing(mor):
    path, _ = mor
    t = run("compaction", "schedule", path, "--force").stdout.strip()
    run("compaction", "run", path, t)
    victim = next(p for p in path.rglob("*.parquet") if t in p.name)
    victim.unlink()
    res = run("compaction", "commit", path, t, "--json", ok=False)
    assert res.exit_code == 1
    doc = json.loads(res.stdout)
    assert doc["committed"] is False and doc["reason"].startswith("rolled back to requested")
    assert victim.name in doc["reason"] and "missing" in doc["reason"]
    assert "rolled back to requested" in res.stderr
    assert states(path)[(t, "compaction")] == "requested"


def test_compaction_show_human_output_and_unknown_instant(mor):
    path, writes = mor
    t = run("compaction", "schedule", path, "--force").stdout.strip()
    plan = run_json("compaction", "show", path, t)["plan"]
    out = run("compaction", "show", path, t).stdout
    for op in plan:
        assert op["file_id"] in out
    assert writes[0] in out and "planned" in out
    listing = run("compaction", "show", path).stdout
    assert t in listing and "requested" in listing
    res = run("compaction", "show", path, writes[1], ok=False)
    assert res.exit_code == 1 and "is not a compaction" in res.stderr and "Help:" in res.stderr


@pytest.fixture
def bulk(tmp_path):
    """A MOR table of 300 records by bulk_insert, an upsert, and a compaction scheduled over
    both; returns (path, the writes' instants, the compaction's instant)."""
    path = tmp_path / "trips"
    run("create", path, "--record-key", "id", "--partition-by", "city", "--ordering-field", "ts")
    writes = [run("write", path, write_file(batch(range(300)), tmp_path / "b.parquet"),
                  "--op", "bulk_insert").stdout.strip(),
              upsert(path, tmp_path, [1, 2, 3], 200, 100.0, "u")]
    return path, writes, run("compaction", "schedule", path, "--force").stdout.strip()


def test_piped_tables_keep_every_cell_whole(bulk):
    """Off a terminal (CliRunner's stdout is none) nothing is sized to a screen, not even to the
    COLUMNS a shell exports: every cell comes out whole, on one line."""
    path, writes, t = bulk

    def piped(*args):
        res = CliRunner().invoke(cli.main, [str(a) for a in args], env={"COLUMNS": "80"})
        assert res.exit_code == 0, res.stderr
        return res.stdout

    listing = piped("compaction", "show", path)
    assert t in listing and "requested" in listing and "records written" in listing
    plan = piped("compaction", "show", path, t)
    for op in run_json("compaction", "show", path, t)["plan"]:
        assert op["file_id"] in plan and op["base_instant"] == writes[0]
    assert plan.count(writes[0]) == 2 and plan.count("planned") == 2
    out = piped("timeline", path)
    for time in (*writes, t):
        assert time in out
    assert "bulk_insert: 300 written, 300 inserted, 2 file group(s)" in out
    assert "upsert: 3 written, 3 appended, 2 file group(s)" in out and "completed" in out


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("columns", ["80", "60"])
def test_tables_on_a_narrow_terminal_keep_identifiers_whole(bulk, monkeypatch, columns):
    path, writes, t = bulk
    plan = run_json("compaction", "show", path, t)["plan"]
    monkeypatch.setenv("COLUMNS", columns)
    monkeypatch.setenv("NO_COLOR", "1")

    def on_terminal(*args):
        term = _Terminal()
        monkeypatch.setattr(sys, "stdout", term)  # restored at teardown
        cli.main([str(a) for a in args], standalone_mode=False)
        return term.getvalue()

    out = on_terminal("compaction", "show", path, t)
    for op in plan:
        assert op["file_id"] in out
    assert out.count(writes[0]) == 2
    assert t in on_terminal("compaction", "show", path)
    out = on_terminal("timeline", path)
    for time in (*writes, t):
        assert time in out


# --- clean ------------------------------------------------------------------------------------


@pytest.fixture
def compacted(mor, tmp_path):
    """The MOR table compacted, then updated once more: the slices before the compaction are
    what a clean keeping one commit deletes."""
    path, writes = mor
    t = run("compaction", "schedule", path, "--force").stdout.strip()
    run("compaction", "run", path, t)
    run("compaction", "commit", path, t)
    writes.append(upsert(path, tmp_path, [6, 7], 300, 700.0, "u3"))
    return path, writes, t


KEEP_ONE = ("--option", "hoodie.cleaner.commits.retained=1")


def test_clean_plan_writes_nothing_and_clean_run_deletes_what_it_planned(compacted):
    path, writes, _ = compacted
    before_files, before_rows = files_on_disk(path), rows(path)
    plan = run_json("clean", "plan", path, *KEEP_ONE)
    assert files_on_disk(path) == before_files  # a dry run: no file created, changed or deleted
    assert plan["dry_run"] is True and plan["instant"] is None
    assert plan["earliest_instant_to_retain"] == writes[-1]
    doomed = set(plan["file_paths"])
    assert doomed and len(doomed) == plan["files"]
    assert doomed <= set(before_files)
    assert all(writes[0] in f for f in doomed)  # only the slices the compaction replaced
    assert plan["bytes"] == sum(before_files[f][0] for f in doomed)
    human = run("clean", "plan", path, *KEEP_ONE)
    assert "nothing written" in human.stdout and sorted(doomed)[0] in human.stdout
    assert files_on_disk(path) == before_files

    res = run("clean", "run", path, *KEEP_ONE, "--json")
    cleaned = json.loads(res.stdout)
    assert cleaned["files_deleted"] == len(doomed) and cleaned["bytes_freed"] == plan["bytes"]
    assert cleaned["earliest_retained"] == writes[-1]
    after = set(files_on_disk(path))
    # Exactly the plan's files, and with them (deleted by the Iceberg publish of the clean) the
    # snapshot view's files of the slices cleaned, which only the Iceberg metadata names.
    gone = set(before_files) - after
    assert not doomed & after and {f for f in gone if not f.startswith(".hoodie/iceberg/")} == doomed
    assert all(f.startswith(".hoodie/iceberg/data/") for f in gone - doomed), gone - doomed
    assert rows(path) == before_rows

    history = run_json("clean", "show", path)
    assert [(c["instant"], c["state"], c["files_deleted"], c["earliest_retained"], c["bytes_freed"])
            for c in history] == [(cleaned["instant"], "completed", len(doomed), writes[-1], None)]
    out = run("clean", "show", path).stdout
    assert cleaned["instant"] in out and "KEEP_LATEST_COMMITS" in out
    # Nothing left to clean: the plan says why, and the run prints no instant.
    assert run_json("clean", "plan", path, *KEEP_ONE)["files"] == 0
    res = run("clean", "run", path, *KEEP_ONE)
    assert res.stdout == "" and res.stderr.startswith("nothing cleaned: ")


def test_clean_run_exits_1_when_files_could_not_be_deleted(compacted, monkeypatch, tmp_path):
    path, _, _ = compacted
    doomed = set(run_json("clean", "plan", path, *KEEP_ONE)["file_paths"])
    stuck = sorted(doomed)[0]
    real = clean_service._delete_file

    def refuse(storage, file_path):
        if file_path == stuck:
            return file_path, False, 0, "PermissionError: denied"
        return real(storage, file_path)
    monkeypatch.setattr(clean_service, "_delete_file", refuse)
    res = run("clean", "run", path, *KEEP_ONE, "--json", ok=False)
    assert res.exit_code == 1
    doc = json.loads(res.stdout)
    assert doc["failed_files"] == [stuck] and doc["files_deleted"] == len(doomed) - 1
    # (services/clean.py clean() drops the delete errors from its result, so the cause is not shown)
    assert f"could not delete 1 file(s), e.g. {stuck}" in res.stderr
    assert "Help: " in res.stderr
    assert set(files_on_disk(path)) & doomed == {stuck}
    assert states(path)[(doc["instant"], "clean")] == "completed"
    monkeypatch.setattr(clean_service, "_delete_file", real)
    # The next clean (a commit later: hoodie.clean.max.commits) plans the file again.
    assert run_json("clean", "plan", path, *KEEP_ONE)["file_paths"] == []
    upsert(path, tmp_path, [11], 500, 1.0, "u5")
    assert stuck in run_json("clean", "plan", path, *KEEP_ONE)["file_paths"]
    run("clean", "run", path, *KEEP_ONE)
    assert not set(files_on_disk(path)) & doomed


def test_clean_run_prints_the_instant(compacted):
    path, _, _ = compacted
    res = run("clean", "run", path, *KEEP_ONE)
    t = res.stdout.strip()
    assert states(path)[(t, "clean")] == "completed"
    assert "file(s) deleted" in res.stderr and "earliest retained instant" in res.stderr


# --- savepoints and restore -------------------------------------------------------------------


def test_savepoint_create_list_delete(mor):
    path, writes = mor
    res = run("savepoint", "create", path, "--user", "ana", "--comments", "before the backfill")
    assert res.stdout.strip() == writes[-1]  # the latest write by default
    sp = run_json("savepoint", "create", path, writes[0], "--user", "bo")
    assert sp["instant"] == writes[0] and sp["savepointed_by"] == "bo" and sp["files"] > 0
    listed = run_json("savepoint", "list", path)
    assert [(s["instant"], s["savepointed_by"], s["comments"]) for s in listed] == [
        (writes[0], "bo", ""), (writes[-1], "ana", "before the backfill")]
    at = dt.datetime.fromisoformat(listed[1]["savepointed_at_utc"].replace("Z", "+00:00"))
    assert abs((dt.datetime.now(dt.timezone.utc) - at).total_seconds()) < 600
    assert "before the backfill" in run("savepoint", "list", path).stdout

    res = run("savepoint", "create", path, writes[0], ok=False)
    assert res.exit_code == 1 and "already savepointed" in res.stderr and "Help:" in res.stderr
    res = run("savepoint", "create", path, "20000101000000000", ok=False)
    assert res.exit_code == 1 and "not a completed" in res.stderr

    assert run("savepoint", "delete", path, writes[0]).stdout.strip() == writes[0]
    assert [s["instant"] for s in run_json("savepoint", "list", path)] == [writes[-1]]
    res = run("savepoint", "delete", path, writes[0], ok=False)
    assert res.exit_code == 1 and f"{writes[0]} is not a savepoint" in res.stderr
    assert f"Help: savepoints: {writes[-1]}" in res.stderr
    # A savepointed write refuses a plain rollback; without the savepoint it rolls back.
    assert run("rollback", path, ok=False).exit_code == 1
    run("savepoint", "delete", path, writes[-1])
    assert run("savepoint", "list", path).stderr.strip() == "no savepoints"
    run("rollback", path)


def test_restore_yes_brings_the_data_back(mor, tmp_path):
    path, writes = mor
    sp = run("savepoint", "create", path).stdout.strip()
    saved = rows(path)
    later = [upsert(path, tmp_path, [1, 30], 900, 9000.0, "u9")]
    later.append(run("write", path, write_file(batch([2, 3]).select(["id", "city"]), tmp_path / "k.csv"),
                     "--op", "delete").stdout.strip())
    assert rows(path) != saved
    doc = run_json("restore", path, sp, "--yes")
    assert doc["savepoint"] == sp and doc["rolled_back"] == later[::-1]  # newest first
    assert rows(path) == saved
    tl = run_json("timeline", path)
    assert [r["time"] for r in tl if r["action"] == "deltacommit"] == writes
    assert [r["rolled_back"] for r in tl if r["action"] == "rollback"] == [[later[1]], [later[0]]]
    assert doc["rollbacks"] == [r["time"] for r in tl if r["action"] == "rollback"]
    # The savepoint stays, so restoring again is a no-op.
    res = run("restore", path, sp, "--yes")
    assert res.stdout.strip() == sp and "nothing (no later write)" in res.stderr


def test_restore_over_a_pending_compaction(mor, tmp_path):
    path, writes = mor
    sp = run("savepoint", "create", path).stdout.strip()
    saved = rows(path)
    later = upsert(path, tmp_path, [1, 30], 900, 9000.0, "u9")
    t = run("compaction", "schedule", path, "--force").stdout.strip()
    doc = run_json("restore", path, sp, "--yes")
    assert set(doc["rolled_back"]) == {later, t} and rows(path) == saved
    assert [r["time"] for r in run_json("timeline", path) if r["action"] != "rollback"] == [*writes, sp]


def test_restore_to_a_non_savepoint_is_an_error(mor, tmp_path):
    path, writes = mor
    upsert(path, tmp_path, [1], 900, 9000.0, "u9")
    before = rows(path)
    res = run("restore", path, writes[0], "--yes", ok=False)
    assert res.exit_code == 1
    assert res.stderr == (f"error: {writes[0]} is not a savepoint\n"
                          "Help: savepoints: none; create one with `lakehouse savepoint create`\n")
    assert rows(path) == before


def test_restore_without_yes_and_without_a_terminal_refuses(mor, tmp_path):
    path, _ = mor
    sp = run("savepoint", "create", path).stdout.strip()
    upsert(path, tmp_path, [1], 900, 9000.0, "u9")
    before_files, before_rows = files_on_disk(path), rows(path)
    res = run("restore", path, sp, ok=False)
    assert res.exit_code == 2
    assert "pass --yes" in res.stderr and "no terminal" in res.stderr
    assert files_on_disk(path) == before_files and rows(path) == before_rows


def test_restore_asks_on_a_terminal(mor, tmp_path, monkeypatch):
    path, _ = mor
    sp = run("savepoint", "create", path).stdout.strip()
    saved = rows(path)
    later = upsert(path, tmp_path, [1], 900, 9000.0, "u9")
    t = run("compaction", "schedule", path, "--force").stdout.strip()
    run("compaction", "run", path, t)
    run("compaction", "commit", path, t)
    latest = upsert(path, tmp_path, [2], 901, 9000.0, "u10")
    changed = rows(path)
    monkeypatch.setattr(service_commands, "_interactive", lambda: True)
    res = run("restore", path, sp, input="n\n", ok=False)
    assert res.exit_code == 1 and "restore cancelled: nothing was changed" in res.stderr
    assert (f"rolls back 3 instant(s), newest first:\n  {latest} deltacommit (completed)\n"
            f"  {t} compaction (completed)\n  {later} deltacommit (completed)\nContinue?") in res.stderr
    assert rows(path) == changed
    res = run("restore", path, sp, input="y\n")
    assert res.stdout.strip() == sp and rows(path) == saved


# --- archive ----------------------------------------------------------------------------------


def test_archive_with_small_keep_options(mor, tmp_path):
    path, writes = mor
    writes += [upsert(path, tmp_path, [i], 300 + i, 50.0, f"a{i}") for i in range(2)]
    before = rows(path)
    keep = ("--option", "hoodie.keep.max.commits=3", "--option", "hoodie.keep.min.commits=2")
    res = run("archive", path, *keep)
    assert res.stdout.split() == writes[:3]  # five commits, two kept
    assert "archived 3 instant(s)" in res.stderr
    assert [r["time"] for r in run_json("timeline", path)] == writes[3:]
    full = run_json("timeline", path, "--archived")
    assert [(r["time"], r["archived"]) for r in full] == [(w, i < 3) for i, w in enumerate(writes)]
    assert [r.get("operation") for r in full[:3]] == ["insert", "upsert", "upsert"]
    assert full[0]["records_written"] == 20 and full[0]["start"] is None
    assert "archived" in run("timeline", path, "--archived").stdout
    assert rows(path) == before
    again = run_json("archive", path, *keep)
    assert again["archived"] == [] and again["reason"].startswith("nothing to archive")
    assert run("archive", path).stderr.startswith("nothing to archive")
