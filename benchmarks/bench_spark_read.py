"""Spark reads of a default Merge-On-Read table against Spark's own parquet reader on its files.

    python benchmarks/bench_spark_read.py [--rows 1000000] [--out bench-out/spark_read.json]

The table is bench_core's trips table created with no options, loaded with N rows, then 3
upserts of 50k rows (1% updates): 3 rounds of logs pending over its base files. On local[2],
each query counts the rows and sums one column (best of 4), for:

- ``spark.read.parquet`` of the base files (the floor a read-optimized read is held to);
- ``read_table(read_optimized=True)``: Spark's parquet reader on the slices, as Hudi's Spark
  integration reads log-free slices; and the same with ``native=False`` (lakehouse's merge path);
- ``format("lakehouse")`` read-optimized and snapshot (PySpark's Python data source);
- ``read_table`` snapshot (its slices all have logs: the merge path).

Every count is checked against ``Table.read``. Report ratios to the parquet floor, not times:
these machines are shared and noisy.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)

import lakehouse  # noqa: E402
from benchmarks.bench_core import KEY, ORDERING, PARTITION, Model  # noqa: E402


def build(path: str, n: int) -> lakehouse.Table:
    model = Model(7)
    t = lakehouse.create_table(path, name="trips", table_type="MERGE_ON_READ", record_key=KEY,
                               partition_by=PARTITION, ordering_field=ORDERING)
    t.bulk_insert(model.initial(n))
    for _ in range(3):
        t.upsert(model.upsert_batch(50_000, 0.01, 0.1)[0])
    return t


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--repeats", type=int, default=4)
    p.add_argument("--out", default=os.path.join(REPO, "bench-out", "spark_read.json"))
    args = p.parse_args(argv)

    from pyspark.sql import functions as F

    from lakehouse.spark.reader import read_table
    from lakehouse.spark.session import build_session

    # Spark's lookup of installed Python data sources runs in PYSPARK_PYTHON: this interpreter.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = build_session("bench-spark-read", master="local[2]", ui=False,
                          conf={"spark.ui.showConsoleProgress": "false"})
    spark.sparkContext.setLogLevel("ERROR")
    with tempfile.TemporaryDirectory(prefix="bench-spark-read-") as tmp:
        t = build(os.path.join(tmp, "trips"), args.rows)
        files = [t.storage.uri(s.base_file.path) for s in t.scan(read_optimized=True).plan_files()]
        want = {"read_optimized": t.read(read_optimized=True, columns=[KEY]).num_rows,
                "snapshot": t.read(columns=[KEY]).num_rows}
        reads = {
            "parquet_floor": ("read_optimized", lambda: spark.read.parquet(*files)),
            "read_table_ro": ("read_optimized", lambda: read_table(spark, t.path, read_optimized=True)),
            "read_table_ro_merged": ("read_optimized",
                                     lambda: read_table(spark, t.path, read_optimized=True, native=False)),
            "format_ro": ("read_optimized", lambda: spark.read.format("lakehouse")
                          .option("hoodie.datasource.query.type", "read_optimized").load(t.path)),
            "read_table_snapshot": ("snapshot", lambda: read_table(spark, t.path)),
            "format_snapshot": ("snapshot", lambda: spark.read.format("lakehouse").load(t.path)),
        }
        results = {}
        for name, (kind, frame) in reads.items():
            best, rows = float("inf"), None
            for _ in range(args.repeats):
                start = time.perf_counter()
                rows = frame().agg(F.count("*"), F.sum("fare")).collect()[0][0]
                best = min(best, time.perf_counter() - start)
            if rows != want[kind]:
                raise SystemExit(f"{name}: {rows} rows, Table.read has {want[kind]}")
            results[name] = {"seconds": round(best, 4), "rows": rows}
    floor = results["parquet_floor"]["seconds"]
    for r in results.values():
        r["vs_parquet"] = round(r["seconds"] / floor, 2)
    doc = {"rows": args.rows, "master": "local[2]", "query": "count(*), sum(fare)", "results": results}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=2)
    for name, r in results.items():
        print(f"{name:22s} {r['seconds']:7.3f}s  {r['vs_parquet']:5.2f}x parquet  ({r['rows']:,} rows)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
