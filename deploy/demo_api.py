"""A walk-through of lakehouse's Python API on local files: ``python -m deploy.demo_api [--dir DIR]``
(``make demo-api``; ``make demo-cli`` tells the same story with the ``lakehouse`` command).

Each step prints the Python it runs, then runs it in one namespace, as a notebook would, so any
step can be pasted into a Python prompt. The story: a Merge-On-Read table of taxi trips,
partitioned by city, where the latest *event time* wins: create it, insert, upsert with late
events, delete, scan (filters, DuckDB, pandas), time travel, incremental read, compaction,
clean, the timeline, a rollback, and the table read as Iceberg. The final table is checked.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

from deploy.demo import prepare_dir, report

# (title, code): every step's code is printed, then run in the walk-through's namespace.
STEPS: list[tuple[str, str]] = [
    ("create a Merge-On-Read table (the defaults: the bucket index, event-time ordering)", """
        import datetime as dt
        import pyarrow as pa
        import lakehouse

        t = lakehouse.create_table(f"{DIR}/trips", name="trips", table_type="MERGE_ON_READ",
                                   record_key="trip_id", partition_by="city", ordering_field="event_time")
        t.path
    """),
    ("insert 1,000 trips", """
        start = dt.datetime(2024, 6, 1, tzinfo=dt.timezone.utc)
        cities = ["amsterdam", "chennai", "new_york", "sao_paulo", "san_francisco"]

        def trips(ids, minutes, fare):
            return pa.table({
                "trip_id": [f"trip-{i:04d}" for i in ids],
                "city": [cities[i % 5] for i in ids],
                "event_time": pa.array([start + dt.timedelta(minutes=minutes + i) for i in ids],
                                       pa.timestamp("us", tz="UTC")),
                "fare": [fare + i % 7 for i in ids],
            })

        first = t.insert(trips(range(1000), 0, 10.0))
        first  # the instant time of the commit
    """),
    ("upsert: 100 updates (newer events), 50 late replays (older events: they lose), 20 new trips", """
        batch = pa.concat_tables([trips(range(0, 100), 30, 20.0),      # newer: they win
                                  trips(range(100, 150), -120, 0.0),   # older: the table keeps its rows
                                  trips(range(1000, 1020), 0, 15.0)])  # new keys
        second = t.upsert(batch)
        t.read(filters=[("trip_id", "in", ["trip-0000", "trip-0100"])], columns=["trip_id", "fare"]).to_pylist()
    """),
    ("delete 10 trips by key (the partition column names where they are)", """
        gone = [f"trip-{i:04d}" for i in range(500, 510)]
        t.delete(pa.table({"trip_id": gone, "city": [cities[i % 5] for i in range(500, 510)]}))
        t.read(columns=["trip_id"]).num_rows  # 1,000 + 20 - 10
    """),
    ("scan: filters and columns, read lazily; a filter on the partition column lists one folder", """
        scan = t.scan(filters=[("city", "=", "amsterdam"), ("fare", ">", 15.0)], columns=["trip_id", "fare"])
        scan.to_arrow().num_rows
    """),
    ("the same scan as a DuckDB relation and as pandas (Arrow streams, no copy into a file)", """
        import duckdb
        print(duckdb.sql("SELECT count(*) AS trips, round(avg(fare), 2) AS avg_fare FROM scan").fetchall())
        scan.to_pandas().describe().loc[["count", "mean"]]
    """),
    ("time travel: the table as of the first insert", """
        t.read(as_of=first, columns=["trip_id"]).num_rows, t.read(columns=["trip_id"]).num_rows
    """),
    ("incremental read: the records that changed after the first insert", """
        changes = t.read_changes(first)
        changes.num_rows, sorted(set(changes.column("_hoodie_commit_time").to_pylist()))
    """),
    ("compaction: the logs merged into new base files (plan, execute, commit in one call)", """
        done = t.compact(force=True)
        done
    """),
    ("one more upsert, then clean: the slices the compaction replaced go (one commit retained here)", """
        t.upsert(trips(range(0, 10), 60, 25.0))
        t.clean(options={"hoodie.cleaner.commits.retained": "1"})
    """),
    ("the timeline: every instant, as Hudi writes it under .hoodie/", """
        [(i.time, str(i.action), i.state.name.lower()) for i in t.timeline.instants]
    """),
    ("a buggy write, rolled back", """
        bad = t.upsert(trips(range(200, 210), 600, -1.0))
        t.rollback(bad)
        t.read(filters=[("fare", "<", 0.0)]).num_rows  # the negative fares are gone
    """),
    ("the same table read as Apache Iceberg (metadata published after every commit)", """
        from pyiceberg.table import StaticTable
        from lakehouse.iceberg import background
        background.wait_all()  # the publish runs beside the writer
        StaticTable.from_metadata(f"{t.path}/.hoodie/iceberg").scan().to_arrow().num_rows
    """),
]


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 400 else text[:400] + " ..."


def run(base: Path, echo=print) -> dict[str, Any]:
    """Every step, printed then run; returns the walk-through's namespace."""
    prepare_dir(base, "python -m deploy.demo_api")
    ns: dict[str, Any] = {"DIR": str(base.resolve())}
    for n, (title, code) in enumerate(STEPS, 1):
        code = textwrap.dedent(code).strip("\n")
        echo(f"\n=== {n}. {title}")
        echo(textwrap.indent(code, ">>> ", lambda line: True))
        # As a notebook cell: the statements, then the value of the last line if it is an
        # expression of its own (not inside a block).
        *head, last = code.split("\n")
        try:
            expr = compile(last, f"<step {n}>", "eval") if not last.startswith((" ", "#")) else None
        except SyntaxError:
            expr = None
        exec(compile("\n".join(head if expr else [*head, last]), f"<step {n}>", "exec"), ns)
        if expr is not None and (value := eval(expr, ns)) is not None:
            echo(_show(value))
    return ns


def check(ns: dict[str, Any]) -> list[tuple[str, bool]]:
    t = ns["t"]
    rows = t.read(columns=["trip_id", "fare"])
    ids = set(rows.column("trip_id").to_pylist())
    fares = dict(zip(rows.column("trip_id").to_pylist(), rows.column("fare").to_pylist()))
    return [
        (f"{rows.num_rows:,} trips (1,000 inserted + 20 new - 10 deleted)", rows.num_rows == 1010),
        ("updates won, late replays lost", fares["trip-0050"] == 21.0 and fares["trip-0100"] == 12.0),
        ("the deleted trips are gone", ids.isdisjoint(f"trip-{i:04d}" for i in range(500, 510))),
        ("no negative fare survived the rollback", min(fares.values()) >= 0),
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m deploy.demo_api", description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default="demo-api-tables", type=Path,
                    help="folder for the demo table (recreated each run)")
    args = ap.parse_args(argv)
    started = time.perf_counter()
    ns = run(args.dir)
    print()
    passed = report(check(ns))
    print(f"Table: {ns['t'].path}  ({time.perf_counter() - started:.1f} s)")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
