"""``compaction-plan TABLE [--force] [--option hoodie.compact...=V ...]``: schedule a compaction
of a Merge-On-Read table if its trigger fires (or with ``--force``).

Writes ``<t>.compaction.requested`` and reports its instant, which compaction-execute and commit
take next; "nothing_to_do" with the reason when the trigger has not fired. Driver only: planning
reads the timeline and lists files, so no SparkContext is started.
"""

from __future__ import annotations

import argparse
from typing import Any

from lakehouse.config import CompactionConfig
from lakehouse.errors import TableNotFoundError
from lakehouse.spark.apps import (NOTHING, OK, add_option_arg, add_tag_arg, new_parser, not_created,
                                  parse_options, run_app)
from lakehouse.timeline.tags import parse_tags
from lakehouse.services.compaction import require_mor
from lakehouse.table import Table, open_table

NEEDS_SESSION = False  # Spark starts only if there is work for executors (SparkEngine)
APP = "compaction-plan"
DESCRIPTION = "Schedule a compaction if its trigger fires (or with --force)."


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--force", action="store_true", help="plan even if the trigger has not fired")
    add_option_arg(p, "compaction (hoodie.compact*)")
    add_tag_arg(p)


def open_mor_table(path: str) -> Table:
    return require_mor(open_table(path))


def run(args: argparse.Namespace) -> dict[str, Any]:
    options = parse_options(args.option, CompactionConfig, APP)
    try:
        table = open_mor_table(args.table)
    except TableNotFoundError as e:
        return not_created(e, "compact")
    res = table.schedule_compaction(force=args.force, options=options,
                                                         extra_metadata=parse_tags(args.tag))
    return {**res.to_json(), "status": OK if res.scheduled else NOTHING}


def main(argv: list[str], spark=None) -> int:
    return run_app(APP, argv, new_parser(APP, __doc__, configure), run)
