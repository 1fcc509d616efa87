"""A walk-through of lakehouse on local files: ``python -m deploy.demo [--dir DIR]``.

It drives the real ``lakehouse`` command in-process, printing each command line before its output,
so every step can be repeated by hand in a shell. The story: a Merge-On-Read table of taxi trips,
partitioned by city, where the latest *event time* wins (not the latest write):

1. create the table; 2. insert 10,000 trips from parquet; 3. upsert a JSON-lines batch with
updates, late (out-of-order) replays and new trips; 4. delete trips from a CSV of keys, in two
phases (write, then commit); 5. timeline and stats; 6. a time-travel read; 7. an incremental read;
8. a buggy batch, undone with rollback; then a summary checked against the table.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import shlex
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

from lakehouse import cli
from lakehouse.table import open_table

MARKER = ".lakehouse-demo"
CITIES = ("san_francisco", "new_york", "sao_paulo", "chennai", "amsterdam")
START = dt.datetime(2024, 6, 1, tzinfo=dt.timezone.utc)
N_TRIPS, N_UPDATES, N_LATE, N_NEW, N_DELETES, N_BUGGY = 10_000, 1_000, 200, 500, 250, 300


@dataclass
class DemoResult:
    table_path: Path
    instants: dict[str, str] = field(default_factory=dict)
    updated: list[str] = field(default_factory=list)
    late: list[str] = field(default_factory=list)
    new: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    buggy: list[str] = field(default_factory=list)
    expected_rows: int = 0
    shown: list[str] = field(default_factory=list)


def _trip_ids(idx: np.ndarray) -> list[str]:
    return [f"trip-{i:05d}" for i in idx]


def generate_trips(rng: np.random.Generator, start_id: int, n: int) -> pa.Table:
    """Trips with an event time spread over one day; ids are unique, cities skewed like cities."""
    ids = np.arange(start_id, start_id + n)
    offsets_ms = np.sort(rng.integers(0, 86_400_000, n))
    return pa.table({
        "trip_id": _trip_ids(ids),
        "city": pa.array(rng.choice(CITIES, n, p=[0.3, 0.3, 0.2, 0.1, 0.1])).cast(pa.string()),
        "rider": [f"rider-{r:04d}" for r in rng.integers(0, 3_000, n)],
        "driver": [f"driver-{d:03d}" for d in rng.integers(0, 600, n)],
        "distance_km": np.round(rng.gamma(2.0, 3.0, n), 2),
        "fare": np.round(3.5 + rng.gamma(2.0, 6.0, n), 2),
        "event_time": pa.array(int(START.timestamp() * 1000) + offsets_ms,
                               pa.timestamp("ms", tz="UTC")),
    })


def _shifted(rows: pa.Table, minutes: int, fare: pa.Array) -> pa.Table:
    delta = pa.scalar(dt.timedelta(minutes=minutes), pa.duration("ms"))
    rows = rows.set_column(rows.schema.get_field_index("fare"), "fare", fare)
    return rows.set_column(rows.schema.get_field_index("event_time"), "event_time",
                           pc.add(rows.column("event_time"), delta))


def _write_jsonl(table: pa.Table, path: Path) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for row in table.to_pylist():
            row["event_time"] = row["event_time"].isoformat(timespec="milliseconds")
            f.write(json.dumps(row) + "\n")


class _Runner:
    """Runs CLI commands in-process and prints them the way a shell session would look."""

    def _show(self, arg: str) -> str:
        # Paths are shown relative to the working directory when that is shorter.
        try:
            rel = os.path.relpath(arg)
            return rel if len(rel) < len(arg) and not rel.startswith("../..") else arg
        except ValueError:
            return arg

    def __call__(self, *args: str) -> Any:
        print(f"$ lakehouse {shlex.join(self._show(a) for a in args)}", flush=True)
        # The CLI's notes go to stderr; folding them into stdout keeps the story in order.
        with contextlib.redirect_stderr(sys.stdout):
            rv = cli.main(list(args), prog_name="lakehouse", standalone_mode=False)
        sys.stdout.flush()
        if isinstance(rv, int) and not isinstance(rv, bool) and rv != 0:
            raise SystemExit(f"demo step failed: `lakehouse {shlex.join(args)}` exited with {rv}")
        return rv


def _step(n: int, title: str) -> None:
    print(f"\n=== Step {n}: {title} " + "=" * max(0, 70 - len(title)), flush=True)


def prepare_dir(base: Path, made_by: str = "python -m deploy.demo") -> None:
    """Recreate the demo folder, refusing to wipe a folder a demo did not create."""
    if base.exists() and any(base.iterdir()) and not (base / MARKER).exists():
        raise SystemExit(f"{base} exists and was not made by this demo; pass --dir with a new or "
                         "empty folder")
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    (base / MARKER).write_text(f"made by {made_by}; safe to delete\n")


def report(checks: list[tuple[str, bool]]) -> bool:
    """Print the checks on the final table; whether all hold."""
    print("Checks on the final table:")
    for text, ok in checks:
        print(f"  [{'ok' if ok else 'FAILED'}] {text}")
    return all(ok for _, ok in checks)


def run_demo(base: Path, seed: int = 7) -> DemoResult:
    base = Path(base).resolve()
    prepare_dir(base)
    table_path = base / "trips"
    inp = base / "input"
    inp.mkdir()
    rng = np.random.default_rng(seed)
    res = DemoResult(table_path)
    lh = _Runner()
    tp = str(table_path)

    _step(1, "create a Merge-On-Read table of trips, partitioned by city")
    lh("create", tp, "--name", "trips", "--type", "MERGE_ON_READ", "--record-key", "trip_id",
       "--partition-by", "city", "--ordering-field", "event_time", "--merge-mode",
       "EVENT_TIME_ORDERING")
    res.shown.append("a MOR table partitioned by city where the highest event_time wins")

    _step(2, f"insert {N_TRIPS:,} generated trips from a parquet file")
    trips = generate_trips(rng, 0, N_TRIPS)
    pq.write_table(trips, inp / "trips-batch1.parquet")
    res.instants["insert"] = lh("write", tp, str(inp / "trips-batch1.parquet"), "--op", "insert")
    res.shown.append(f"an insert of {N_TRIPS:,} trips from parquet")

    _step(3, "upsert JSON lines: fare updates, late replays and new trips")
    picks = rng.permutation(N_TRIPS)
    upd_idx, late_idx = np.sort(picks[:N_UPDATES]), np.sort(picks[N_UPDATES:N_UPDATES + N_LATE])
    upd = trips.take(upd_idx)
    # Tips added 30 minutes after the trip: newer event time, so these win.
    updates = _shifted(upd, 30, pc.round(pc.add(upd.column("fare"), 2.5), 2))
    # Replays of stale events from two hours earlier: older event time, so the table keeps
    # the current version although these arrive later.
    late = trips.take(late_idx)
    late = _shifted(late, -120, pa.array(np.zeros(N_LATE)))
    new = generate_trips(rng, N_TRIPS, N_NEW)
    batch2 = pa.concat_tables([updates, late, new])
    _write_jsonl(batch2, inp / "trips-batch2.jsonl")
    print(f"# {N_UPDATES:,} updates (event time +30 min), {N_LATE} late replays "
          f"(event time -2 h, fare 0.00), {N_NEW} new trips")
    res.instants["upsert"] = lh("write", tp, str(inp / "trips-batch2.jsonl"), "--op", "upsert")
    res.updated, res.late, res.new = (updates.column("trip_id").to_pylist(),
                                      late.column("trip_id").to_pylist(),
                                      new.column("trip_id").to_pylist())
    res.shown.append("an upsert where late events lost to newer versions already in the table")

    _step(4, f"delete {N_DELETES} trips listed in a CSV, in two phases")
    # Deleted trips are neither updated nor replayed, so each showcase key tells one story.
    del_idx = np.sort(picks[N_UPDATES + N_LATE:N_UPDATES + N_LATE + N_DELETES])
    dels = trips.take(del_idx).select(["trip_id", "city"])
    pcsv.write_csv(dels, inp / "deletes.csv")
    res.deleted = dels.column("trip_id").to_pylist()
    pending = lh("write", tp, str(inp / "deletes.csv"), "--op", "delete", "--no-commit")
    lh("commit", tp, pending)
    res.instants["delete"] = pending
    res.shown.append("a delete from a CSV of keys, written (phase 1) and then committed (phase 2)")

    _step(5, "the timeline and the table's files")
    lh("timeline", tp)
    print("# 'written' is Hudi's numWrites: every record in the files a write produced, so a")
    print("# base file rewritten to take new records counts its unchanged records too.")
    lh("stats", tp)
    res.shown.append("the timeline (one delta commit per write) and per-partition file stats")

    showcase = [res.updated[0], res.late[0], res.deleted[0], res.new[0]]
    keys = ",".join(showcase)
    cols = "trip_id,fare,event_time,_hoodie_commit_time"

    _step(6, "time travel: the showcase trips as of the first insert, and now")
    print(f"# {showcase[0]} updated, {showcase[1]} late replay (ignored), {showcase[2]} deleted, "
          f"{showcase[3]} new")
    lh("read", tp, "--as-of", res.instants["insert"], "--columns", cols,
       "--filter", f"trip_id in {keys}", "--sort", "trip_id")
    lh("read", tp, "--columns", cols, "--filter", f"trip_id in {keys}", "--sort", "trip_id")
    res.shown.append("time travel: the same trips before and after the upsert and delete")

    _step(7, "incremental read: what changed after the first insert")
    changes_file = base / "changes.parquet"
    lh("read", tp, "--changes-from", res.instants["insert"], "--output", str(changes_file))
    lh("read", tp, "--changes-from", res.instants["insert"], "--columns", cols,
       "--sort", "trip_id", "--limit", "5")
    res.shown.append(f"an incremental read of records changed since {res.instants['insert']}")

    _step(8, "a buggy job writes negative fares; roll it back")
    bad_idx = np.setdiff1d(rng.choice(N_TRIPS, N_BUGGY, replace=False), del_idx)
    bad = trips.take(bad_idx)
    bad = _shifted(bad, 60, pa.array(np.full(bad.num_rows, -1.0)))
    pq.write_table(bad, inp / "buggy.parquet")
    res.buggy = bad.column("trip_id").to_pylist()
    res.instants["buggy"] = lh("write", tp, str(inp / "buggy.parquet"), "--op", "upsert")
    lh("read", tp, "--columns", "trip_id,fare", "--filter", "fare < 0", "--limit", "3")
    res.instants["rollback"] = lh("rollback", tp)
    lh("read", tp, "--columns", "trip_id,fare", "--filter", "fare < 0")
    res.shown.append("a rollback of the latest write: its negative fares are gone")
    res.expected_rows = N_TRIPS + N_NEW - N_DELETES
    return res


def summarize(res: DemoResult, elapsed: float) -> None:
    table = open_table(str(res.table_path))
    rows = table.read(columns=["trip_id", "fare"])
    ids = set(rows.column("trip_id").to_pylist())
    checks = [
        (f"{rows.num_rows:,} trips (expected {res.expected_rows:,})", rows.num_rows == res.expected_rows),
        (f"none of the {len(res.deleted)} deleted trips remain", ids.isdisjoint(res.deleted)),
        (f"all {len(res.new)} new trips are present", ids.issuperset(res.new)),
        ("no negative fare survived the rollback", pc.min(rows.column("fare")).as_py() >= 0),
    ]
    print("\n=== What you saw " + "=" * 62)
    for i, s in enumerate(res.shown, 1):
        print(f"  {i}. {s}")
    passed = report(checks)
    print(f"Table: {res.table_path}  (try: python -m lakehouse.cli timeline {res.table_path})")
    print(f"Done in {elapsed:.1f}s.")
    if not passed:
        raise SystemExit("demo checks failed")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m deploy.demo", description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default="demo-tables", type=Path,
                    help="folder for the demo table and its input files (recreated each run)")
    args = ap.parse_args(argv)
    started = time.perf_counter()
    res = run_demo(args.dir)
    summarize(res, time.perf_counter() - started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
