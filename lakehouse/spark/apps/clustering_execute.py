"""``clustering-execute TABLE [--instant T] [--parallelism N]``: execute a planned clustering on
Spark, one task per group of file slices.

Default instant: the oldest pending clustering. A clustering left inflight by a crashed run is
undone and executed again from the start. The new base files are written by the executors; the
results go to ``.hoodie/.aux`` and the clustering stays inflight until ``commit``. Fails (exit 1)
when a group failed; running it again redoes the whole plan.
"""

from __future__ import annotations

import argparse
from typing import Any

from lakehouse.services.clustering import execute_clustering
from lakehouse.services.results import read_results
from lakehouse.spark.apps import FAILED, NOTHING, OK, new_parser, positive_int, run_app, spark_info
from lakehouse.spark.apps.clustering_plan import open_clusterable_table
from lakehouse.spark.engine import SparkEngine

NEEDS_SESSION = False  # Spark starts only if there is work for executors (SparkEngine)
APP = "clustering-execute"


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--instant", metavar="T", help="the clustering to execute (default: the oldest pending)")
    p.add_argument("--parallelism", type=positive_int, metavar="N",
                   help="Spark tasks at most (default: spark.default.parallelism)")


def run(args: argparse.Namespace, spark) -> dict[str, Any]:
    table = open_clusterable_table(args.table)
    engine = SparkEngine(spark, app_name=f"lakehouse-{APP}")
    res = execute_clustering(table, args.instant, engine=engine, parallelism=args.parallelism)
    doc: dict[str, Any] = res.to_json()
    if res.instant is None or res.reason:
        return {**doc, "status": NOTHING}
    doc["spark"] = spark_info(engine.context, engine.slices(res.groups, args.parallelism))
    if not res.failed:
        return {**doc, "status": OK}
    failures = (read_results(table.storage, res.instant, "clustering") or ([], []))[1]
    first = f"{failures[0]['partitionPath']}: {failures[0]['error']}" if failures else ""
    return {**doc, "failures": failures[:20], "status": FAILED,
            "reason": f"{res.failed} of {res.groups} group(s) failed ({first}); fix the cause and run "
                      "clustering-execute again (it redoes the whole plan)"}


def main(argv: list[str], spark=None) -> int:
    return run_app(APP, argv, new_parser(APP, __doc__, configure), lambda a: run(a, spark))
