"""``stream TABLE --source-dir DIR``: a Structured Streaming query from a landing folder into the
table through ``writeStream.format("lakehouse")``.

By default it runs with ``trigger(availableNow=True)``: every file landed and not yet taken is
applied, in micro-batches of at most ``--max-files-per-trigger`` files, then the query stops (what
a scheduled task runs). ``--processing-time S`` starts a micro-batch every S seconds instead and
runs until ``--run-for`` seconds have passed (or for ever, as a service).

Exactly once across crashes and restarts: Spark's checkpoint (``--checkpoint``; by default
``.hoodie/.aux/lakehouse/streams/<identifier>`` inside a table on local storage) records which
files each batch took, and the sink keeps the batch id in the commit's extra metadata (Hudi's
``_hudi_streaming_sink_checkpoint``), so a batch replayed after a crash between the commit and
Spark's checkpoint is skipped. Do not also ``ingest`` the same folder: the two keep separate
records of what they took.

The input schema is the landed files' (parquet schemas merged), else the table's. ``--tag``s go
into every commit's extra metadata (through Hudi's ``hoodie.datasource.write.commitmeta.key.prefix``:
the tags must share a prefix, as Airflow's ``airflow.*`` do; Spark lower-cases option keys).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import time
from typing import Any

from lakehouse.errors import ConfigError, LakehouseError
from lakehouse.sources import demo
from lakehouse.sources.files import FORMATS
from lakehouse.spark.apps import (NOTHING, OK, UsageError, add_option_arg, add_tag_arg, key_values,
                                  new_parser, positive_int, run_app, spark_info)
from lakehouse.spark.apps.ingest import add_create_args, open_or_create
from lakehouse.spark.datasource import (CHECKPOINT_IDENTIFIER, COMMIT_META_PREFIX, DEFAULT_IDENTIFIER,
                                        FORMAT, OPERATION, sink_commits)
from lakehouse.spark.types import spark_schema
from lakehouse.storage import get_storage
from lakehouse.table import open_table
from lakehouse.timeline.tags import parse_tags
from lakehouse.write.validate import data_schema
from lakehouse import layout

NEEDS_SESSION = True
APP = "stream"
_SPARK_FORMAT = {"parquet": "parquet", "jsonl": "json", "csv": "csv"}
_GLOB = {"parquet": "*.parquet", "jsonl": "*.json*", "csv": "*.csv"}


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--source-dir", required=True, help="the folder files land in")
    p.add_argument("--format", default="auto", choices=["auto", "parquet", "jsonl", "csv"])
    p.add_argument("--op", default="upsert", choices=["upsert", "insert", "bulk_insert", "delete"])
    p.add_argument("--checkpoint", help="Spark's checkpoint folder (default: inside a local table)")
    p.add_argument("--identifier", default=DEFAULT_IDENTIFIER,
                   help="this query's name among the streams writing the table "
                        f"({CHECKPOINT_IDENTIFIER}; default: %(default)s)")
    p.add_argument("--processing-time", type=float, metavar="S",
                   help="a micro-batch every S seconds, until --run-for (default: available-now)")
    p.add_argument("--run-for", type=float, metavar="S", help="stop the query after S seconds")
    p.add_argument("--stop-file", metavar="PATH",
                   help="stop the query, between micro-batches, once this file exists (a supervisor's "
                        "graceful stop; --run-for stays the limit)")
    p.add_argument("--max-files-per-trigger", type=positive_int, default=100, metavar="N")
    p.add_argument("--demo-batches", type=int, default=0,
                   help="first land this many batches of the built-in demo change stream")
    p.add_argument("--demo-rows", type=positive_int, default=1000)
    p.add_argument("--demo-seed", type=int, default=7)
    add_create_args(p)
    add_option_arg(p, "write")
    add_tag_arg(p)


def landed_format(source_dir: str, fmt: str) -> str | None:
    """The format of the files in ``source_dir`` (None: nothing landed yet)."""
    if fmt != "auto":
        return fmt
    kinds = {FORMATS[os.path.splitext(i.name)[1].lower()] for i in get_storage(source_dir).list("")
             if not i.is_dir and not i.name.startswith((".", "_"))
             and os.path.splitext(i.name)[1].lower() in FORMATS}
    if len(kinds) > 1:
        raise ConfigError(f"{source_dir} holds files of several formats ({', '.join(sorted(kinds))})",
                          help="stream one format per folder, or pass --format")
    return kinds.pop() if kinds else None


def checkpoint_location(table_path: str, given: str | None, identifier: str) -> str:
    if given:
        return given
    path = table_path.removeprefix("file://")
    if "://" in path:
        raise ConfigError(f"{table_path} is not on local storage: Spark's checkpoint cannot default to it",
                          help="pass --checkpoint with a folder Spark's checkpoint manager can write")
    return os.path.join(path, layout.STREAMS, identifier)


def source_files(checkpoint: str) -> dict[int, list[str]]:
    """The files each micro-batch took, by batch id, from the file source's log in Spark's
    checkpoint (``sources/0/<batch>`` and its ``.compact`` files: a version line, then one JSON
    entry per file)."""
    folder = os.path.join(checkpoint.removeprefix("file://"), "sources", "0")
    out: dict[int, list[str]] = {}
    seen: set[str] = set()
    names = sorted((n for n in (os.listdir(folder) if os.path.isdir(folder) else [])
                    if re.fullmatch(r"\d+(\.compact)?", n)), key=lambda n: int(n.split(".")[0]))
    for name in reversed(names):  # newest first: a .compact file repeats what came before it
        with open(os.path.join(folder, name)) as f:
            for line in f.read().splitlines()[1:]:
                entry = json.loads(line)
                if entry["path"] not in seen:
                    seen.add(entry["path"])
                    out.setdefault(int(entry["batchId"]), []).append(entry["path"])
    return out


def tag_options(tags: dict[str, str]) -> dict[str, str]:
    """Tags as sink options under one commit-metadata prefix (their common prefix)."""
    if not tags:
        return {}
    keys = [k.lower() for k in tags]
    prefix = os.path.commonprefix(keys)
    if not prefix or "hoodie.".startswith(prefix) or prefix.startswith("hoodie."):
        raise ConfigError(f"the tags {', '.join(sorted(tags))} share no prefix of their own",
                          help="give a stream's tags one prefix (e.g. airflow.): it selects them as "
                               f"commit metadata ({COMMIT_META_PREFIX})")
    return {COMMIT_META_PREFIX: prefix, **{k.lower(): v for k, v in tags.items()}}


def run(args: argparse.Namespace, spark) -> dict[str, Any]:
    options = key_values(args.option)
    tagged = tag_options(parse_tags(args.tag))
    if args.run_for is not None and args.run_for <= 0:
        raise UsageError("--run-for must be positive")
    if args.demo_batches:
        demo.write_batches(args.source_dir, args.demo_batches,
                           demo.DemoStream(seed=args.demo_seed, rows=args.demo_rows))
    fmt = landed_format(args.source_dir, args.format)
    if fmt is None and args.processing_time is None:
        return {"action": "stream", "batches": 0, "rows": 0,
                "status": NOTHING, "reason": f"no files have landed in {args.source_dir}"}
    table = open_or_create(args, options)
    if fmt is None:
        fmt = "parquet"
        schema = spark_schema(data_schema(table.schema()))
    else:
        reader = spark.read.format(_SPARK_FORMAT[fmt]).option("pathGlobFilter", _GLOB[fmt])
        if fmt == "parquet":
            reader = reader.option("mergeSchema", "true")
        elif fmt == "csv":
            reader = reader.option("header", "true").option("inferSchema", "true")
        schema = reader.load(args.source_dir).schema
    checkpoint = checkpoint_location(table.path, args.checkpoint, args.identifier)
    before = table.timeline.completed_writes().instants
    last = before[-1].time if before else None

    stream = (spark.readStream.format(_SPARK_FORMAT[fmt]).schema(schema)
              .option("pathGlobFilter", _GLOB[fmt])
              .option("maxFilesPerTrigger", args.max_files_per_trigger))
    if fmt == "csv":
        stream = stream.option("header", "true")
    writer = (stream.load(args.source_dir).writeStream.format(FORMAT)
              .option("checkpointLocation", checkpoint)
              .option(OPERATION, args.op).option(CHECKPOINT_IDENTIFIER, args.identifier)
              .options(**options).options(**tagged))
    if args.processing_time is None:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{args.processing_time} seconds")
    from pyspark.errors import StreamingQueryException  # noqa: PLC0415 - optional: pyspark

    query = writer.start(table.path)
    try:
        await_query(query, args.run_for, args.stop_file)
    except StreamingQueryException as e:
        raise StreamFailedError(f"the streaming query into {table.path} failed: {_first_line(e)}",
                                help="fix the cause (the traceback is above); run again: it resumes from "
                                     f"{checkpoint} and applies nothing twice") from e
    finally:
        # Stopped mid-batch, the batch is replayed by the next run (and skipped if it committed).
        query.stop()
    rows = sum(int(p["numInputRows"] if isinstance(p, dict) else p.numInputRows) for p in query.recentProgress)
    made = sink_commits(open_table(table.path), args.identifier, after=last)
    doc = {"action": "stream", "instant": made[-1][0] if made else None,
           "instants": [t for t, _ in made], "batches": [b for _, b in made], "rows": rows,
           "checkpoint": checkpoint, "spark": spark_info(spark.sparkContext)}
    if not made:
        return {**doc, "status": NOTHING, "reason": "no new files to apply"}
    return {**doc, "status": OK}


def await_query(query, run_for: float | None, stop_file: str | None, poll_s: float = 1.0) -> None:
    """Until the query ends, ``run_for`` seconds pass, or ``stop_file`` exists; a stop file takes
    effect between micro-batches (up to ``run_for``), so the batch under way commits first."""
    if stop_file is None:
        if run_for is None:
            query.awaitTermination()
        else:
            query.awaitTermination(run_for)
        return
    deadline = None if run_for is None else time.monotonic() + run_for
    while deadline is None or time.monotonic() < deadline:
        wait = poll_s if deadline is None else max(0.01, min(poll_s, deadline - time.monotonic()))
        if query.awaitTermination(wait):
            return
        if os.path.exists(stop_file) and not query.status.get("isTriggerActive"):
            return


class StreamFailedError(LakehouseError):
    """The streaming query stopped with an error (what it committed before stays committed)."""


def _first_line(e: Exception) -> str:
    text = str(getattr(e, "desc", None) or e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def main(argv: list[str], spark=None) -> int:
    return run_app(APP, argv, new_parser(APP, __doc__, configure), lambda a: run(a, spark))
