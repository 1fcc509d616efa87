"""``clean TABLE [--dry-run] [--option hoodie.clean...=V ...]``: finish pending cleans, then
plan and execute one if its trigger fires, deleting files on Spark (one task per batch of files,
at most ``hoodie.cleaner.parallelism`` tasks).

``--dry-run`` only plans and reports what would be deleted (files, bytes); it writes nothing and
starts no SparkContext. The clean's result is ``<t>.clean`` on the timeline.
"""

from __future__ import annotations

import argparse
from typing import Any

from lakehouse.config import CleanConfig
from lakehouse.errors import TableNotFoundError
from lakehouse.spark.apps import (FAILED, NOTHING, OK, add_option_arg, add_tag_arg, new_parser, not_created,
                                  parse_options, run_app, spark_info)
from lakehouse.timeline.tags import parse_tags
from lakehouse.spark.engine import SparkEngine
from lakehouse.table import open_table

NEEDS_SESSION = False  # Spark starts only if there is work for executors (SparkEngine)
APP = "clean"


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dry-run", action="store_true", help="report what would be deleted; write nothing")
    add_option_arg(p, "clean (hoodie.clean*, hoodie.cleaner*)")
    add_tag_arg(p)


def run(args: argparse.Namespace, spark) -> dict[str, Any]:
    options = parse_options(args.option, CleanConfig, APP)
    try:
        table = open_table(args.table)
    except TableNotFoundError as e:
        return not_created(e, "clean")
    tags = parse_tags(args.tag)
    if args.dry_run:
        res = table.clean(options=options, dry_run=True, extra_metadata=tags)
        return {**res.to_json(), "status": OK if res.planned else NOTHING}
    engine = SparkEngine(spark, app_name=f"lakehouse-{APP}")
    res = table.clean(options=options, engine=engine, extra_metadata=tags)
    doc: dict[str, Any] = res.to_json()
    if res.instant is None:
        return {**doc, "status": NOTHING}
    if engine.started:
        doc["spark"] = spark_info(engine.context)
    if res.failed_files:
        return {**doc, "status": FAILED,
                "reason": f"{len(res.failed_files)} file(s) could not be deleted ({res.reason}); the "
                          "clean completed and the next clean plans them again"}
    return {**doc, "status": OK}


def main(argv: list[str], spark=None) -> int:
    return run_app(APP, argv, new_parser(APP, __doc__, configure), lambda a: run(a, spark))
