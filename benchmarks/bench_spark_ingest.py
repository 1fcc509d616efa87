"""Spark ingest throughput beside the Python API, with Spark's fixed start-up cost shown apart.

    python benchmarks/bench_spark_ingest.py [--rows 1000000] [--files 10] [--out bench-out/spark_ingest.json]

Both paths ingest the same landed files (the demo change stream) into fresh MOR tables:
``lakehouse.sources.files.ingest`` in this process, and ``spark-submit ... ingest --commit`` on
local[2]. The Spark job's own JSON line reports the time spent inside the application; the rest
of its wall time is start-up (JVM, SparkSession), which a second run with nothing to ingest
measures on its own. Report ratios, not absolute times: these machines are shared and noisy.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)

import lakehouse  # noqa: E402
from lakehouse.sources import demo  # noqa: E402
from lakehouse.sources.files import ingest  # noqa: E402
from lakehouse.spark.submit import submit_path  # noqa: E402

BUCKETS = {"hoodie.bucket.index.num.buckets": 16}


def spark_ingest(table: str, src: str, master: str, index: str) -> tuple[float, dict]:
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable,
               PYTHONPATH=os.pathsep.join([REPO, os.environ.get("PYTHONPATH", "")]))
    cmd = [os.path.join(os.path.dirname(sys.executable), "spark-submit"), "--master", master,
           submit_path(), "ingest", table, "--source-dir", src, "--create", "--commit", "--index", index]
    if index == "BUCKET":
        cmd += ["--option", f"hoodie.bucket.index.num.buckets={BUCKETS['hoodie.bucket.index.num.buckets']}"]
    started = time.monotonic()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.monotonic() - started
    if p.returncode != 0:
        raise SystemExit(f"spark-submit failed:\n{p.stderr[-3000:]}")
    return wall, json.loads(p.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--files", type=int, default=10)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--index", default="BUCKET", choices=["BUCKET", "SIMPLE", "BLOOM"],
                    help="the tables' index (BUCKET: 16 buckets per partition)")
    ap.add_argument("--out", default=os.path.join(REPO, "bench-out", "spark_ingest.json"))
    args = ap.parse_args(argv)
    work = tempfile.mkdtemp(prefix="bench-spark-")
    src = os.path.join(work, "landing")
    demo.write_batches(src, args.files, demo.DemoStream(rows=args.rows // args.files, seed=1))
    rows = args.rows // args.files * args.files

    table = lakehouse.create_table(os.path.join(work, "python"), name="trips", table_type="MERGE_ON_READ",
                                   index=args.index, schema=demo.SCHEMA,
                                   options=BUCKETS if args.index == "BUCKET" else {}, **demo.TABLE_OPTIONS)
    started = time.monotonic()
    res = ingest(table, src)
    python_s = time.monotonic() - started

    spark_wall, doc = spark_ingest(os.path.join(work, "spark"), src, args.master, args.index)
    idle_wall, idle = spark_ingest(os.path.join(work, "spark"), src, args.master, args.index)  # nothing new
    inside = doc["duration_s"]
    same = (lakehouse.open_table(os.path.join(work, "spark")).read(columns=["trip_id", "event_ts"]).sort_by("trip_id")
            .equals(table.read(columns=["trip_id", "event_ts"]).sort_by("trip_id")))
    report = {
        "rows": rows, "files": args.files, "master": args.master, "index": args.index, "same_rows": same,
        "python_api": {"seconds": round(python_s, 3), "rows_per_s": round(rows / python_s)},
        "spark": {"wall_s": round(spark_wall, 3), "in_app_s": inside,
                  "startup_s": round(spark_wall - inside, 3),
                  "rows_per_s_in_app": round(rows / inside) if inside else None,
                  "rows_per_s_wall": round(rows / spark_wall),
                  "idle_run_wall_s": round(idle_wall, 3), "idle_status": idle["status"]},
        "ratio_spark_in_app_to_python": round(inside / python_s, 2) if python_s else None,
    }
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(report, f, indent=2)
    print(f"{rows:,} rows in {args.files} files (written: {res.rows:,}), {args.index} index")
    print(f"python API         {python_s:8.2f} s  {rows / python_s:12,.0f} rows/s")
    print(f"spark-submit wall  {spark_wall:8.2f} s  {rows / spark_wall:12,.0f} rows/s")
    print(f"  inside the app   {inside:8.2f} s  {rows / inside if inside else 0:12,.0f} rows/s "
          f"({inside / python_s:.2f}x the Python API)")
    print(f"  start-up         {spark_wall - inside:8.2f} s  (an idle run takes {idle_wall:.2f} s)")
    print(f"same rows: {same}; results: {args.out}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
