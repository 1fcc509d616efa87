"""``clustering-plan TABLE [--force] [--option hoodie.clustering...=V ...]``: schedule a
clustering if its trigger fires (or with ``--force``).

Writes ``<t>.replacecommit.requested`` (a ``HoodieClusteringPlan``) and reports its instant,
which clustering-execute and commit take next; "nothing_to_do" with the reason otherwise. Driver
only: planning reads the timeline and lists files, so no SparkContext is started.
"""

from __future__ import annotations

import argparse
from typing import Any

from lakehouse.config import ClusteringConfig
from lakehouse.errors import TableNotFoundError
from lakehouse.services.clustering import require_clusterable
from lakehouse.spark.apps import (NOTHING, OK, add_option_arg, add_tag_arg, new_parser, not_created,
                                  parse_options, run_app)
from lakehouse.table import Table, open_table
from lakehouse.timeline.tags import parse_tags

NEEDS_SESSION = False  # Spark starts only if there is work for executors (SparkEngine)
APP = "clustering-plan"
DESCRIPTION = "Schedule a clustering if its trigger fires (or with --force)."


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--force", action="store_true", help="plan even if the trigger has not fired")
    add_option_arg(p, "clustering (hoodie.clustering.*, hoodie.layout.optimize.*)")
    add_tag_arg(p)


def open_clusterable_table(path: str) -> Table:
    table = open_table(path)
    require_clusterable(table.meta_client)
    return table


def run(args: argparse.Namespace) -> dict[str, Any]:
    options = parse_options(args.option, ClusteringConfig, APP)
    try:
        table = open_clusterable_table(args.table)
    except TableNotFoundError as e:
        return not_created(e, "cluster")
    res = table.schedule_clustering(force=args.force, options=options, extra_metadata=parse_tags(args.tag))
    return {**res.to_json(), "status": OK if res.scheduled else NOTHING}


def main(argv: list[str], spark=None) -> int:
    return run_app(APP, argv, new_parser(APP, __doc__, configure), run)
