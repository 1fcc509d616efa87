"""What the Iceberg snapshot view of a Merge-On-Read table costs (issue 42), against the
read-optimized view on the same rows in the same run.

For each view (and merge mode; the snapshot view published inline and in the background):
bulk-insert N generated trips rows into a default MOR table, then ``--rounds`` upserts of M rows
(half updates, a tenth of those late) back to back, timing each upsert, each Iceberg publish
and how long the Iceberg view lagged the last upsert; then pyiceberg's and DuckDB's read
of the table with those rounds pending, against their read after a compaction. Prints one JSON
line per view and a table.

    python benchmarks/bench_iceberg_view.py -n 1000000 -m 50000
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from benchmarks.bench_core import KEY, ORDERING, PARTITION, Model  # noqa: E402


def _best(fn, repeat: int = 3) -> float:
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return min(out)


def run(n: int, m: int, rounds: int, view: str, ordering: bool, work: pathlib.Path, background: bool) -> dict:
    import lakehouse
    from lakehouse.iceberg import background as publisher
    from lakehouse.iceberg import hook
    from pyiceberg.table import StaticTable

    model = Model(7)
    rows = model.initial(n)
    t = lakehouse.create_table(str(work / f"{view}-{ordering}-{background}"), name="trips", record_key=KEY,
                               partition_by=PARTITION, ordering_field=ORDERING if ordering else None,
                               options={"hoodie.meta.sync.iceberg.view": view,
                                        "hoodie.meta.sync.iceberg.async": str(background).lower()})
    t.bulk_insert(rows)
    spent: list[float] = []
    publish = hook.publish.sync_iceberg

    def timed(meta):
        t0 = time.perf_counter()
        try:
            return publish(meta)
        finally:
            spent.append(time.perf_counter() - t0)

    hook.publish.sync_iceberg = timed
    upserts = []
    publisher.wait(t.storage.uri())
    spent.clear()
    try:
        for _ in range(rounds):
            batch, _ = model.upsert_batch(m, 0.5, 0.1)
            t0 = time.perf_counter()
            t.upsert(batch)
            upserts.append(time.perf_counter() - t0)
        # In the background: how long the Iceberg view lagged the last upsert.
        t0 = time.perf_counter()
        publisher.wait(t.storage.uri())
        catch_up = time.perf_counter() - t0
        publishes = list(spent)
    finally:
        hook.publish.sync_iceberg = publish
    location = t.storage.uri(".hoodie/iceberg")
    reads = {"pyiceberg": lambda: StaticTable.from_metadata(location).scan().to_arrow()}
    try:
        import duckdb  # noqa: F401
        from tests.iceberg.duckdb_judge import connect
        con = connect()
        reads["duckdb"] = lambda: con.execute(f"SELECT * FROM iceberg_scan('{location}')").to_arrow_table()
    except Exception:  # noqa: BLE001 - DuckDB's extension is a dev extra
        pass
    pending = {k: _best(f) for k, f in reads.items()}
    rows_pending = reads["pyiceberg"]().num_rows
    t.compact(force=True)
    compacted = {k: _best(f) for k, f in reads.items()}
    return {"view": view, "ordering": "event_time" if ordering else "commit_time", "n": n, "m": m,
            "publishing": "background" if background else "inline",
            "upsert_s": [round(x, 3) for x in upserts], "publish_s": [round(x, 3) for x in publishes],
            "catch_up_s": round(catch_up, 3),
            "iceberg_rows_pending": rows_pending, "lakehouse_rows": t.read().num_rows,
            "read_pending_s": {k: round(v, 3) for k, v in pending.items()},
            "read_compacted_s": {k: round(v, 3) for k, v in compacted.items()}}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("-n", type=int, default=1_000_000, help="rows loaded first")
    p.add_argument("-m", type=int, default=50_000, help="rows per upsert")
    p.add_argument("--rounds", type=int, default=3, help="upserts (pending log rounds)")
    p.add_argument("--ordering", choices=["commit_time", "event_time", "both"], default="both")
    p.add_argument("--publishing", choices=["inline", "background", "both"], default="both",
                   help="hoodie.meta.sync.iceberg.async false / true (the default) for the snapshot view")
    args = p.parse_args(argv)
    orderings = {"commit_time": [False], "event_time": [True], "both": [False, True]}[args.ordering]
    modes = {"inline": [False], "background": [True], "both": [False, True]}[args.publishing]
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-iceberg-view-") as tmp:
        for ordering in orderings:
            for view, background in [("read_optimized", False)] + [("snapshot", b) for b in modes]:
                r = run(args.n, args.m, args.rounds, view, ordering, pathlib.Path(tmp), background)
                print(json.dumps(r), flush=True)
                results.append(r)
    print("\n| view | ordering | publishing | upsert s (each) | publish s (each) | Iceberg lag after the last (s) "
          "| pyiceberg read, pending / compacted s |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['view']} | {r['ordering']} | {r['publishing']} | {r['upsert_s']} | {r['publish_s']} | "
              f"{r['catch_up_s']} | {r['read_pending_s'].get('pyiceberg')} / {r['read_compacted_s'].get('pyiceberg')} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
