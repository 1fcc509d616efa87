"""The `lakehouse` command, driven through click's CliRunner (and once as a real process)."""

from __future__ import annotations

import datetime as dt
import json
import os
import pathlib
import subprocess
import sys

import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import lakehouse
from deploy import demo
from lakehouse import cli
from lakehouse.config import FLINK_KEYS
from lakehouse.errors import CommitConflictError, CommitOutcomeUnknownError
from lakehouse.table import Table, open_table

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
DATA_COLUMNS = ["id", "city", "ts", "fare", "at"]


def run(*args: str, ok: bool = True):
    res = CliRunner().invoke(cli.main, [str(a) for a in args])
    if ok and res.exit_code != 0:
        raise AssertionError(f"{args} exited {res.exit_code}\nstdout:\n{res.stdout}\n"
                             f"stderr:\n{res.stderr}\n{res.exception!r}")
    return res


def batch(ids, *, city=None, ts=100, fare=1.0) -> pa.Table:
    ids = list(ids)
    n = len(ids)
    return pa.table({
        "id": [f"{i:03d}" for i in ids],
        "city": [city or ("sf" if i % 2 else "nyc") for i in ids],
        "ts": pa.array([ts] * n, pa.int64()),
        "fare": pa.array([fare + i for i in ids], pa.float64()),
        "at": pa.array([dt.datetime(2024, 6, 1, tzinfo=dt.timezone.utc) + dt.timedelta(minutes=i)
                        for i in ids], pa.timestamp("ms", tz="UTC")),
    })


def write_file(data: pa.Table, path: pathlib.Path) -> pathlib.Path:
    if path.suffix == ".parquet":
        pq.write_table(data, path)
    elif path.suffix == ".csv":
        pcsv.write_csv(data, path)
    else:
        with open(path, "w") as f:
            for row in data.to_pylist():
                f.write(json.dumps(row, default=lambda o: o.isoformat()) + "\n")
    return path


def rows(table_path, **kw) -> list[dict]:
    got = open_table(str(table_path)).read(columns=DATA_COLUMNS, **kw)
    return sorted(got.to_pylist(), key=lambda r: r["id"])


def make_table(tmp_path) -> pathlib.Path:
    path = tmp_path / "trips"
    run("create", path, "--record-key", "id", "--partition-by", "city", "--ordering-field", "ts")
    return path


def load(table, tmp_path) -> tuple[pathlib.Path, str]:
    """A table holding ids 0..19 written by one committed insert; returns (path, instant)."""
    f = write_file(batch(range(20)), tmp_path / "b1.parquet")
    res = run("write", table, f, "--op", "insert")
    return table, res.stdout.strip()


@pytest.fixture
def table(tmp_path) -> pathlib.Path:
    return make_table(tmp_path)


@pytest.fixture
def loaded(table, tmp_path):
    return load(table, tmp_path)


def timeline_json(path) -> list[dict]:
    return json.loads(run("timeline", path, "--json").stdout)


# --- help, version, entry point -------------------------------------------------------------


def test_group_help_documents_every_command_and_the_exit_codes():
    out = run("--help").stdout
    for name in ("create", "write", "commit", "read", "timeline", "rollback", "stats", "options",
                 "compaction", "clean", "savepoint", "restore", "archive"):
        assert name in out
    for line in ("0  success", "1  lakehouse error", "2  usage error", "3  table not found",
                 "4  commit conflict"):
        assert line in out
    assert "Exit codes" in cli.__doc__ and "3 the path holds no table" in cli.__doc__


@pytest.mark.parametrize("command", sorted(cli.main.commands))
def test_every_command_has_help(command):
    res = run(command, "--help")
    assert res.stdout.startswith(f"Usage: lakehouse {command} [OPTIONS]")
    if command not in ("options", "catalog"):  # neither works on one table
        assert "PATH" in res.stdout


def test_version():
    assert "0.1.0" in run("--version").stdout


@pytest.mark.parametrize("module", ["lakehouse.cli", "lakehouse"])
def test_module_entry_point_runs_as_a_process(module):
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True,
                          text=True, env=env, cwd=REPO_ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("Usage: lakehouse [OPTIONS] COMMAND")
    assert "Exit codes" in proc.stdout and "rollback" in proc.stdout


def test_module_entry_point_exit_code_for_a_missing_table(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([sys.executable, "-m", "lakehouse.cli", "stats", str(tmp_path)],
                          capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=120)
    assert proc.returncode == 3
    assert proc.stderr.startswith("error: ") and "\nHelp: " in proc.stderr
    assert "Traceback" not in proc.stderr


# --- create and options -----------------------------------------------------------------------


def test_create_writes_the_table_config(tmp_path):
    path = tmp_path / "t"
    run("create", path, "--name", "sales_2024", "--type", "copy_on_write", "--record-key", "a",
        "--record-key", "b", "--partition-by", "region,day", "--ordering-field", "ts",
        "--index", "bloom", "--hive-style", "--option", "hoodie.parquet.max.file.size=2000000",
        "--option", "hoodie.parquet.small.file.limit=1000")
    c = open_table(str(path)).config
    assert (c.name, str(c.table_type), str(c.index_type)) == ("sales_2024", "COPY_ON_WRITE", "BLOOM")
    assert c.record_key_fields == ("a", "b") and c.partition_fields == ("region", "day")
    assert c.ordering_field == "ts" and c.hive_style_partitioning is True
    assert c.extra["hoodie.parquet.max.file.size"] == "2000000"
    assert c.key_generator_type.value == "COMPLEX"


def test_create_defaults_name_to_folder_and_accepts_comma_keys(tmp_path):
    path = tmp_path / "orders"
    run("create", path, "--record-key", "a,b", "--merge-mode", "commit_time_ordering")
    c = open_table(str(path)).config
    assert c.name == "orders" and c.record_key_fields == ("a", "b") and not c.partition_fields
    assert str(c.table_type) == "MERGE_ON_READ" and str(c.merge_mode) == "COMMIT_TIME_ORDERING"


def test_create_twice_is_a_lakehouse_error(table):
    res = run("create", table, "--record-key", "id", "--ordering-field", "ts", ok=False)
    assert res.exit_code == 1
    assert res.stderr.startswith("error: a table already exists") and "\nHelp: " in res.stderr


def test_unknown_hoodie_option_exits_1_with_a_help_line(tmp_path):
    res = run("create", tmp_path / "t", "--record-key", "id", "--ordering-field", "ts",
              "--option", "hoodie.no.such.option=1", ok=False)
    assert res.exit_code == 1
    assert "error: unknown option(s): hoodie.no.such.option" in res.stderr
    assert "Help: " in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / "t" / ".hoodie").exists()


def test_missing_ordering_field_for_event_time_is_a_config_error(tmp_path):
    res = run("create", tmp_path / "t", "--record-key", "id", "--merge-mode", "event_time_ordering", ok=False)
    assert res.exit_code == 1 and "ordering field" in res.stderr and "Help:" in res.stderr
    assert "--ordering-field" in res.stderr  # the Help names the CLI's flag, not only Python's


def test_without_ordering_field_the_latest_write_wins(tmp_path):
    """Hudi 1.x's inference for tables before version 9
    (HoodieTableConfig.inferMergingConfigsForPreV9Table): nothing set, the ordering field decides:
    none, COMMIT_TIME_ORDERING; one, EVENT_TIME_ORDERING."""
    run("create", tmp_path / "t", "--record-key", "id")
    run("create", tmp_path / "u", "--record-key", "id", "--ordering-field", "ts")
    assert lakehouse.open_table(str(tmp_path / "t")).config.merge_mode.value == "COMMIT_TIME_ORDERING"
    assert lakehouse.open_table(str(tmp_path / "u")).config.merge_mode.value == "EVENT_TIME_ORDERING"
    # The ordering field given as Hudi's table option counts as one too.
    run("create", tmp_path / "v", "--record-key", "id", "--option", "hoodie.table.precombine.field=ts")
    v = lakehouse.open_table(str(tmp_path / "v")).config
    assert v.merge_mode.value == "EVENT_TIME_ORDERING" and v.ordering_field == "ts"


def test_options_lists_every_option_with_defaults():
    listed = json.loads(run("options", "--json").stdout)
    by_key = {o["key"]: o for o in listed}
    # Hudi's names: hoodie.* keys, and the Flink writer's buffer sizes under Flink's own keys.
    assert all(k.startswith("hoodie.") or k in FLINK_KEYS for k in by_key)
    assert by_key["write.task.max.size"]["default"] == "1024.0"
    assert by_key["hoodie.parquet.max.file.size"]["default"] == "125829120"
    assert by_key["hoodie.parquet.max.file.size"]["doc"] == "target size of a base file"
    assert by_key["hoodie.populate.meta.fields"]["default"] == "true"
    assert "hoodie.table.type" in by_key and "hoodie.logfile.max.size" in by_key
    assert "hoodie.parquet.small.file.limit" in run("options").stdout


# --- exit codes -------------------------------------------------------------------------------


@pytest.mark.parametrize("args", [["read"], ["timeline"], ["stats"], ["rollback"],
                                  ["commit", "20240101000000000"], ["write", "{file}"]])
def test_not_a_table_exits_3(tmp_path, args):
    f = write_file(batch(range(2)), tmp_path / "x.parquet")
    empty = tmp_path / "empty"
    empty.mkdir()
    res = run(args[0], empty, *[a.format(file=f) for a in args[1:]], ok=False)
    assert res.exit_code == cli.EXIT_TABLE_NOT_FOUND == 3
    assert res.stderr.startswith("error: ") and "is not a table" in res.stderr
    assert "Help: " in res.stderr and isinstance(res.exception, SystemExit)


@pytest.mark.parametrize("args", [
    ["read", "{t}", "--bogus"],                                   # unknown flag
    ["create", "{t}2"],                                            # --record-key missing
    ["create", "{t}2", "--record-key", "id", "--type", "HEAP"],    # bad choice
    ["create", "{t}2", "--record-key", "id", "--option", "noequals"],
    ["read", "{t}", "--filter", "fare"],                           # not COL OP VALUE
    ["read", "{t}", "--filter", "ts > abc"],                       # not an int for an int column
    ["read", "{t}", "--as-of", "2024"],                            # not an instant
    ["read", "{t}", "--output", "{t}.txt"],                        # unknown output format
    ["read", "{t}", "--as-of", "20240101000000000", "--changes-from", "20240101000000000"],
    ["read", "{t}", "--sort", "nope"],
    ["write", "{t}", "{t}/missing.parquet"],                       # file does not exist
    ["write", "{t}", "{t}/.hoodie/hoodie.properties"],             # format unknown from name
    ["write", "{t}", "{f}", "--op", "merge"],
    ["nosuchcommand"],
])
def test_usage_errors_exit_2(loaded, tmp_path, args):
    t, _ = loaded
    f = write_file(batch(range(2)), tmp_path / "x.parquet")
    res = run(*[a.format(t=t, f=f) for a in args], ok=False)
    assert res.exit_code == 2, res.stderr
    assert "Usage:" in res.stderr or "Error:" in res.stderr


@pytest.mark.parametrize("error", [CommitConflictError, CommitOutcomeUnknownError])
def test_commit_conflict_and_unknown_outcome_exit_4(loaded, tmp_path, monkeypatch, error):
    t, _ = loaded
    res = run("write", t, write_file(batch([50]), tmp_path / "y.parquet"), "--no-commit")
    pending = res.stdout.strip()

    def refuse(self, instant_time, **kw):
        raise error(f"{instant_time} collided with another writer", help="check the timeline")
    monkeypatch.setattr(Table, "commit", refuse)
    res = run("commit", t, pending, ok=False)
    assert res.exit_code == 4
    assert res.stderr == f"error: {pending} collided with another writer\nHelp: check the timeline\n"


def test_unexpected_exceptions_keep_their_traceback(loaded, monkeypatch):
    t, _ = loaded

    def broken(self):
        raise ZeroDivisionError("a bug")
    monkeypatch.setattr(Table, "file_system_view", broken)
    res = run("stats", t, ok=False)
    assert isinstance(res.exception, ZeroDivisionError)
    assert "error:" not in res.stderr


@pytest.mark.parametrize("debug", [[], ["--debug"]])
def test_debug_flag_adds_the_traceback_and_keeps_the_exit_code(tmp_path, debug):
    res = run(*debug, "read", tmp_path, ok=False)
    assert res.exit_code == cli.EXIT_TABLE_NOT_FOUND == 3 and isinstance(res.exception, SystemExit)
    assert "is not a table" in res.stderr and "Help: " in res.stderr
    assert ("Traceback (most recent call last)" in res.stderr) == bool(debug)
    if debug:
        assert "TableNotFoundError" in res.stderr
    assert cli.main([*debug, "read", str(tmp_path)], standalone_mode=False) == 3


def test_debug_flag_keeps_the_exit_code_of_a_commit_conflict(loaded, tmp_path, monkeypatch):
    t, _ = loaded
    pending = run("write", t, write_file(batch([50]), tmp_path / "y.parquet"), "--no-commit").stdout.strip()

    def refuse(self, instant_time, **kw):
        raise CommitConflictError(f"{instant_time} collided with another writer")
    monkeypatch.setattr(Table, "commit", refuse)
    res = run("--debug", "commit", t, pending, ok=False)
    assert res.exit_code == cli.EXIT_COMMIT_UNCERTAIN == 4
    assert "Traceback" in res.stderr and "CommitConflictError" in res.stderr
    assert res.stderr.endswith(f"error: {pending} collided with another writer\n")


def test_in_process_main_returns_exit_code_without_standalone_mode(tmp_path, capsys):
    assert cli.main(["stats", str(tmp_path)], standalone_mode=False) == 3
    assert "is not a table" in capsys.readouterr().err


# --- writes -----------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".parquet", ".jsonl", ".csv"])
def test_every_input_format_lands_the_same_rows(tmp_path, suffix):
    data = batch(range(30))
    path = tmp_path / "t"
    # CSV has no types: a first write would read id "000" as 0 and fare "1" as an integer.
    typed = ["--schema-from", write_file(data.slice(0, 1), tmp_path / "s.parquet")] if suffix == ".csv" else []
    run("create", path, "--record-key", "id", "--partition-by", "city", "--ordering-field", "ts", *typed)
    res = run("write", path, write_file(data, tmp_path / f"in{suffix}"), "--op", "insert")
    instant = res.stdout.strip()
    assert instant.isdigit() and len(instant) == 17
    assert f"committed as instant {instant}" in res.stderr
    assert rows(path) == sorted(data.to_pylist(), key=lambda r: r["id"])
    schema = open_table(str(path)).schema()
    # CSV and JSON carry no types; what they infer must still be the table's natural types.
    assert schema.field("id").type == pa.string() and schema.field("ts").type == pa.int64()
    assert pa.types.is_timestamp(schema.field("at").type)


@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_text_formats_take_the_table_types(loaded, tmp_path, suffix):
    t, _ = loaded
    # "007" in CSV would infer as the integer 7; the table says id is a string.
    upd = batch([7, 8], ts=200, fare=100.0)
    run("write", t, write_file(upd, tmp_path / f"u{suffix}"), "--op", "upsert")
    got = {r["id"]: r for r in rows(t)}
    assert len(got) == 20 and "7" not in got
    assert got["007"]["fare"] == 107.0 and got["008"]["fare"] == 108.0


@pytest.mark.parametrize("text, expected", [
    ("2024-07-01 10:00:00", dt.datetime(2024, 7, 1, 10, tzinfo=dt.UTC)),
    # pyarrow's JSON reader leaves these as strings; the table's type decides.
    ("2024-07-01T10:00:00.250Z", dt.datetime(2024, 7, 1, 10, 0, 0, 250000, tzinfo=dt.UTC)),
    ("2024-07-01T12:00:00.000+02:00", dt.datetime(2024, 7, 1, 10, tzinfo=dt.UTC)),
])
def test_json_timestamp_strings_take_the_table_type(loaded, tmp_path, text, expected):
    t, _ = loaded
    f = tmp_path / "u.jsonl"
    f.write_text(json.dumps({"id": "001", "city": "sf", "ts": 500, "fare": 9.0, "at": text}) + "\n")
    run("write", t, f)
    got = {r["id"]: r for r in rows(t)}
    assert got["001"]["at"] == expected and got["001"]["fare"] == 9.0


def test_several_files_are_one_instant(table, tmp_path):
    a = write_file(batch(range(5)), tmp_path / "a.parquet")
    b = write_file(batch(range(5, 12)), tmp_path / "b.csv")
    run("write", table, a, b, "--op", "insert")
    assert [r["id"] for r in rows(table)] == [f"{i:03d}" for i in range(12)]
    writes = [i for i in timeline_json(table) if i["action"] == "deltacommit"]
    assert len(writes) == 1 and writes[0]["records_written"] == 12


def test_unreadable_input_is_a_lakehouse_error(table, tmp_path):
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"not parquet at all")
    res = run("write", table, bad, ok=False)
    assert res.exit_code == 1 and res.stderr.startswith(f"error: cannot read {bad} as parquet")


def test_delete_from_a_key_file(loaded, tmp_path):
    t, _ = loaded
    keys = batch([3, 4]).select(["id", "city"])
    run("write", t, write_file(keys, tmp_path / "k.csv"), "--op", "delete")
    ids = [r["id"] for r in rows(t)]
    assert len(ids) == 18 and "003" not in ids and "004" not in ids
    last = timeline_json(t)[-1]
    assert last["operation"] == "delete" and last["records_deleted"] == 2


def test_insert_overwrite_replaces_the_partition(loaded, tmp_path):
    t, _ = loaded
    run("write", t, write_file(batch([101, 103], city="sf"), tmp_path / "o.parquet"),
        "--op", "insert_overwrite")
    got = rows(t)
    assert {r["id"] for r in got if r["city"] == "sf"} == {"101", "103"}
    assert len([r for r in got if r["city"] == "nyc"]) == 10
    assert timeline_json(t)[-1]["action"] == "replacecommit"


def test_write_option_is_validated(loaded, tmp_path):
    t, _ = loaded
    res = run("write", t, write_file(batch([1]), tmp_path / "x.parquet"),
              "--option", "hoodie.parquet.max.file.size=-5", ok=False)
    assert res.exit_code == 1 and "hoodie.parquet.max.file.size" in res.stderr and "Help:" in res.stderr


def test_phase_one_then_commit(loaded, tmp_path):
    t, first = loaded
    res = run("write", t, write_file(batch([1, 50], ts=200, fare=500.0), tmp_path / "u.parquet"),
              "--no-commit")
    pending = res.stdout.strip()
    assert f"lakehouse commit {t} {pending}" in res.stderr
    entry = {i["time"]: i for i in timeline_json(t)}[pending]
    assert entry["state"] == "inflight" and entry["operation"] == "upsert"
    assert len(rows(t)) == 20 and rows(t)[1]["fare"] == 2.0  # phase 1 alone changes nothing
    res = run("commit", t, pending)
    assert res.stdout.strip() == pending
    assert {i["time"]: i for i in timeline_json(t)}[pending]["state"] == "completed"
    got = {r["id"]: r for r in rows(t)}
    assert len(got) == 21 and got["001"]["fare"] == 501.0 and got["050"]["fare"] == 550.0


def test_commit_of_an_unknown_instant_is_an_error(loaded):
    t, _ = loaded
    res = run("commit", t, "20000101000000000", ok=False)
    assert res.exit_code == 1 and "not on the timeline" in res.stderr


# --- rollback and timeline --------------------------------------------------------------------


def test_rollback_latest_completed_write(loaded, tmp_path):
    t, first = loaded
    second = run("write", t, write_file(batch([1], ts=300, fare=-1.0), tmp_path / "u.parquet")).stdout.strip()
    assert {r["id"]: r for r in rows(t)}["001"]["fare"] == 0.0
    rb = run("rollback", t).stdout.strip()
    assert {r["id"]: r for r in rows(t)}["001"]["fare"] == 2.0
    tl = timeline_json(t)
    assert [i["time"] for i in tl] == [first, rb]
    assert tl[1]["action"] == "rollback" and tl[1]["rolled_back"] == [second]


def test_rollback_prefers_a_pending_write(loaded, tmp_path):
    t, first = loaded
    pending = run("write", t, write_file(batch([77]), tmp_path / "u.parquet"), "--no-commit").stdout.strip()
    res = run("rollback", t)
    assert f"rolled back {pending}" in res.stderr
    assert [i["time"] for i in timeline_json(t) if i["action"] == "deltacommit"] == [first]
    assert len(rows(t)) == 20


def test_rollback_of_named_instant_and_of_unknown_one(loaded):
    t, first = loaded
    res = run("rollback", t, "20000101000000000", ok=False)
    assert res.exit_code == 1 and "not on the timeline" in res.stderr and "Help:" in res.stderr
    run("rollback", t, first)
    assert open_table(str(t)).read().num_rows == 0


def test_timeline_json_reports_each_write(loaded, tmp_path):
    t, first = loaded
    run("write", t, write_file(batch([1, 2, 40], ts=300), tmp_path / "u.parquet"))
    tl = timeline_json(t)
    assert [(i["action"], i["state"], i["operation"]) for i in tl] == [
        ("deltacommit", "completed", "insert"), ("deltacommit", "completed", "upsert")]
    assert tl[0]["time"] == first and tl[0]["records_written"] == 20
    assert tl[0]["records_inserted"] == 20 and tl[0]["records_deleted"] == 0
    # The default (bucket) index looks nothing up: Hudi's HoodieAppendHandle counts records
    # appended to an existing bucket's file group as updates (one of the three keys is new);
    # the timeline says "appended".
    assert tl[1]["records_written"] == 3 and tl[1]["records_appended"] + tl[1]["records_inserted"] == 3
    assert tl[1]["records_updated"] == 0
    table_out = run("timeline", t).stdout
    assert first in table_out and "upsert" in table_out


# --- stats ------------------------------------------------------------------------------------


def test_stats_json_adds_up(table, tmp_path):
    t = table
    # Tiny files make several file groups per partition, so per-partition sums are real sums
    # (the table's first write sizes its buckets to fit them).
    run("write", t, write_file(batch(range(60)), tmp_path / "b.parquet"), "--op", "bulk_insert",
        "--option", "hoodie.parquet.max.file.size=512",
        "--option", "hoodie.parquet.small.file.limit=0")
    run("write", t, write_file(batch([1, 2], ts=300), tmp_path / "u.parquet"))
    st = json.loads(run("stats", t, "--json").stdout)
    table_stats = open_table(str(t)).stats()
    assert st["file_groups"] == table_stats.file_groups
    assert all(p["file_groups"] > 1 for p in st["by_partition"])
    assert st["partitions"] == len(st["by_partition"]) == 2
    assert {p["partition"] for p in st["by_partition"]} == {"sf", "nyc"}
    for key in ("file_groups", "base_files", "base_bytes", "log_files", "log_bytes"):
        assert sum(p[key] for p in st["by_partition"]) == st[key], key
    assert st["last_commit"] == timeline_json(t)[-1]["time"] and st["pending_compactions"] == 0
    text = run("stats", t).stdout
    assert "per partition" in text and "nyc" in text


# --- demo -------------------------------------------------------------------------------------


def test_demo_runs_end_to_end(tmp_path, capsys):
    assert demo.main(["--dir", str(tmp_path / "demo")]) == 0
    out = capsys.readouterr().out
    assert "$ lakehouse create" in out and "[ok]" in out and "FAILED" not in out
    table = open_table(str(tmp_path / "demo" / "trips"))
    data = table.read(columns=["trip_id", "fare", "event_time"])
    assert data.num_rows == demo.N_TRIPS + demo.N_NEW - demo.N_DELETES == 10_250
    ids = data.column("trip_id").to_pylist()
    assert len(set(ids)) == len(ids)
    res = demo.run_demo(tmp_path / "demo")  # reruns recreate the folder
    assert set(ids).isdisjoint(res.deleted) and set(ids).issuperset(res.new)
    tl = json.loads(run("timeline", res.table_path, "--json").stdout)
    assert [i["action"] for i in tl][-1] == "rollback" and tl[-1]["rolled_back"] == [res.instants["buggy"]]
    assert [i["operation"] for i in tl[:-1]] == ["insert", "upsert", "delete"]
    by_id = {r["trip_id"]: r for r in open_table(str(res.table_path)).read(
        columns=["trip_id", "fare", "event_time"]).to_pylist()}
    assert all(by_id[k]["fare"] > 0 for k in res.late)  # the late replays (fare 0) lost
    assert min(r["fare"] for r in by_id.values()) >= 0  # the buggy batch is rolled back


def test_demo_refuses_a_foreign_folder(tmp_path):
    (tmp_path / "precious.txt").write_text("keep me")
    with pytest.raises(SystemExit):
        demo.main(["--dir", str(tmp_path)])
    assert (tmp_path / "precious.txt").read_text() == "keep me"


def test_iceberg_sync_catches_up_a_table_that_had_it_off(tmp_path):
    from pyiceberg.table import StaticTable
    path = tmp_path / "quiet"
    run("create", path, "--record-key", "id", "--partition-by", "city", "--ordering-field", "ts",
        "--option", "hoodie.meta.sync.iceberg.enabled=false")
    f = write_file(batch(range(6)), tmp_path / "b.parquet")
    instant = run("write", path, f, "--op", "insert").stdout.strip()
    assert not (path / ".hoodie" / "iceberg").exists()
    doc = json.loads(run("iceberg-sync", path, "--json").stdout)
    assert [p["instant"] for p in doc["published"]] == [instant]
    assert doc["current_instant"] == instant
    ice = StaticTable.from_metadata(doc["metadata_location"]).scan().to_arrow()
    assert sorted(ice.column("id").to_pylist()) == [f"{i:03d}" for i in range(6)]
    again = run("iceberg-sync", path)
    assert again.stdout.strip() == doc["metadata_location"] and "published 0" in again.stderr


def test_the_python_api_walk_through_runs_every_step_and_its_checks_hold(tmp_path, capsys):
    """`make demo-api`: each step prints its Python, runs it, and the table at the end is what
    the story says (updates won, late replays lost, deletes gone, the rollback undone); the
    Iceberg step reads the same rows through pyiceberg."""
    from deploy import demo_api
    assert demo_api.main(["--dir", str(tmp_path / "d")]) == 0
    out = capsys.readouterr().out
    assert out.count("\n=== ") == len(demo_api.STEPS) and "FAILED" not in out
    assert ">>> t = lakehouse.create_table(" in out and ">>> scan = t.scan(" in out
    assert out.split("=== 13.")[1].split("Checks")[0].strip().endswith("1010")  # pyiceberg's rows
    with pytest.raises(SystemExit, match="not made by this demo"):
        demo_api.main(["--dir", str(tmp_path)])  # a folder it did not make is never deleted
