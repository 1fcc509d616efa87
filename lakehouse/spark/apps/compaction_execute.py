"""``compaction-execute TABLE [--instant T] [--parallelism N]``: execute a planned compaction on
Spark, one task per operation (file slice) when N >= the number of operations (default N:
``spark.default.parallelism``, i.e. the cores of the application).

Default instant: the oldest pending compaction. A compaction left inflight by a crashed run is
undone and executed again from the start. The new base files are written by the executors; the
results go to ``.hoodie/.aux`` and the compaction stays inflight until ``commit``. Fails (exit 1)
when an operation failed; running it again redoes the whole plan.
"""

from __future__ import annotations

import argparse
from typing import Any

from lakehouse.services.compaction import execute_compaction
from lakehouse.services.results import read_results
from lakehouse.spark.apps import FAILED, NOTHING, OK, new_parser, positive_int, run_app, spark_info
from lakehouse.spark.apps.compaction_plan import open_mor_table
from lakehouse.spark.engine import SparkEngine

NEEDS_SESSION = False  # Spark starts only if there is work for executors (SparkEngine)
APP = "compaction-execute"


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--instant", metavar="T", help="the compaction to execute (default: the oldest pending)")
    p.add_argument("--parallelism", type=positive_int, metavar="N",
                   help="Spark tasks at most (default: spark.default.parallelism)")


def run(args: argparse.Namespace, spark) -> dict[str, Any]:
    table = open_mor_table(args.table)
    engine = SparkEngine(spark, app_name=f"lakehouse-{APP}")
    res = execute_compaction(table, args.instant, engine=engine, parallelism=args.parallelism)
    doc: dict[str, Any] = res.to_json()
    if res.instant is None or res.reason:
        return {**doc, "status": NOTHING}
    doc["spark"] = spark_info(engine.context, engine.slices(res.operations, args.parallelism))
    if not res.failed:
        return {**doc, "status": OK}
    failures = (read_results(table.storage, res.instant) or ([], []))[1]
    first = f"{failures[0]['partitionPath']}/{failures[0]['fileId']}: {failures[0]['error']}" if failures else ""
    return {**doc, "failures": failures[:20], "status": FAILED,
            "reason": f"{res.failed} of {res.operations} operation(s) failed ({first}); fix the cause "
                      f"and run compaction-execute again (it redoes the whole plan)"}


def main(argv: list[str], spark=None) -> int:
    return run_app(APP, argv, new_parser(APP, __doc__, configure), lambda a: run(a, spark))
