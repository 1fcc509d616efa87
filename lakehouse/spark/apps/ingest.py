"""``ingest``: apply the files that landed in a directory since the table's checkpoint.

    spark-submit [spark options] lakehouse/spark/submit.py ingest TABLE --source-dir DIR
        [--op upsert|insert|bulk_insert|delete] [--format auto|parquet|jsonl|csv]
        [--max-files N] [--commit] [--demo-batches N [--demo-rows M] [--demo-seed S]]
        [--create] [--option hoodie.x=y ...]

By default it writes phase 1 only (the ``commit`` application completes it, as the Airflow DAG
runs them); ``--commit`` does both. Each input batch is applied exactly once, whatever crashed
before: the checkpoint travels in the commit that applies the batch. ``--demo-batches`` first
lands that many batches of the built-in demo change stream in the source directory, and
``--create`` creates the table if it does not exist (with the demo's key, partition and
ordering fields unless ``--option`` says otherwise).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import pyarrow as pa

import lakehouse
from lakehouse.iceberg import background
from lakehouse.config import WRITE_OPTION_KEYS
from lakehouse.errors import LakehouseError, TableNotFoundError
from lakehouse.sources import demo
from lakehouse.sources.files import ingest, read_file
from lakehouse.spark.apps import UsageError, key_values, usage_failure
from lakehouse.spark.write import write_dataframe
from lakehouse.timeline.tags import parse_tags
from lakehouse.write.client import ExtraMetadata


def _parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="ingest", description=__doc__.split("\n\n")[0])
    p.add_argument("table")
    p.add_argument("--source-dir", required=True)
    p.add_argument("--op", default="upsert",
                   choices=["upsert", "insert", "bulk_insert", "delete", "insert_overwrite",
                            "insert_overwrite_table"])
    p.add_argument("--format", default="auto", choices=["auto", "parquet", "jsonl", "csv"])
    p.add_argument("--max-files", type=int, default=None)
    p.add_argument("--commit", action="store_true", help="also run phase 2")
    p.add_argument("--demo-batches", type=int, default=0)
    p.add_argument("--demo-rows", type=int, default=1000)
    p.add_argument("--demo-seed", type=int, default=7)
    add_create_args(p)
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--tag", action="append", default=[], metavar="KEY=VALUE",
                   help="put KEY=VALUE in the write's commit metadata (repeatable)")
    return p.parse_args(argv)


def add_create_args(p: argparse.ArgumentParser) -> None:
    """--create and the fields of a table it creates (shared with the stream application)."""
    p.add_argument("--create", action="store_true", help="create the table if it does not exist")
    p.add_argument("--table-type", default=None,
                   help="with --create (default: hoodie.table.type from --option, else MERGE_ON_READ)")
    p.add_argument("--index", default=None,
                   help="with --create (default: hoodie.index.type from --option, else BUCKET)")
    p.add_argument("--record-key", help="with --create: the record key field(s), comma-separated "
                                        "(default: the demo's)")
    p.add_argument("--partition-by", help="with --create: the partition field(s), comma-separated")
    p.add_argument("--ordering-field", help="with --create: the ordering (precombine) field")


def open_or_create(args: argparse.Namespace, options: dict[str, str]) -> lakehouse.Table:
    """The table at ``args.table``; with ``--create``, created if missing (the demo's key,
    partition and ordering fields unless ``--record-key`` names others)."""
    try:
        return lakehouse.open_table(args.table)
    except TableNotFoundError:
        if not args.create:
            raise
    name = args.table.rstrip("/").rsplit("/", 1)[-1].replace("-", "_") or "table"
    table_opts = {k: v for k, v in options.items() if k.startswith("hoodie.")}
    fields = dict(demo.TABLE_OPTIONS)
    schema = demo.SCHEMA
    if args.record_key:  # another source: its own fields, the schema from its first batch
        schema = None
        fields = {"record_key": args.record_key.split(","),
                  "partition_by": args.partition_by.split(",") if args.partition_by else None,
                  "ordering_field": args.ordering_field}
    table_type = args.table_type or table_opts.get("hoodie.table.type", "MERGE_ON_READ")
    index = args.index or table_opts.get("hoodie.index.type", "BUCKET")
    return lakehouse.create_table(args.table, name=name, table_type=table_type,
                                  index=index, schema=schema, options=table_opts, **fields)


def run(args: argparse.Namespace, spark=None) -> dict:
    options = key_values(args.option)
    if args.demo_batches:
        demo.write_batches(args.source_dir, args.demo_batches,
                           demo.DemoStream(seed=args.demo_seed, rows=args.demo_rows))
    table = open_or_create(args, options)
    write_opts = {k: v for k, v in options.items() if k in WRITE_OPTION_KEYS}
    writer = _spark_writer(spark, table, args, write_opts) if spark is not None else None
    res = ingest(table, args.source_dir, operation=args.op, fmt=args.format,
                 max_files=args.max_files, commit=args.commit, options=write_opts, writer=writer,
                 extra_metadata=parse_tags(args.tag))
    return res.to_json()


def _spark_writer(spark, table, args, options):
    """Read the landed files with Spark and write them from the executors
    (:mod:`lakehouse.spark.write`)."""
    def write(uris: list[str], extra: ExtraMetadata) -> tuple[str, int]:
        paths = [u[len("file://"):] if u.startswith("file://") else u for u in uris]
        kinds = {p.rsplit(".", 1)[-1].lower() for p in paths}
        fmt = args.format if args.format != "auto" else (kinds.pop() if len(kinds) == 1 else "mixed")
        if fmt == "parquet":
            df = spark.read.parquet(*paths)
        elif fmt in ("jsonl", "json"):
            df = spark.read.json(paths)
        elif fmt == "csv":
            df = spark.read.option("header", True).option("inferSchema", True).csv(paths)
        else:
            return _driver_write(table, uris, extra, args, options)
        df = df.persist()  # read twice: the null-key check, then the write
        try:
            instant = write_dataframe(table, df, args.op, commit=args.commit, extra_metadata=extra,
                                      options=options)
            return instant, df.count()
        finally:
            df.unpersist()
    return write


def _driver_write(table, uris, extra, args, options):
    batch = pa.concat_tables([read_file(u) for u in uris], promote_options="permissive")
    return table.write(batch, args.op, commit=args.commit, extra_metadata=extra, options=options), batch.num_rows


def main(argv: list[str], spark=None) -> int:
    args = _parse(argv)
    started, clock = time.time(), time.monotonic()
    out = {"app": "ingest", "table": args.table}
    try:
        result = run(args, spark)
        background.wait_all()  # published to Iceberg before the report (lakehouse.spark.apps.run_app)
    except UsageError as e:
        return usage_failure("ingest", e, clock, args.table)
    except LakehouseError as e:
        print(f"error: {e.message}", file=sys.stderr)
        if e.help:
            print(f"Help: {e.help}", file=sys.stderr)
        out.update(status="failed", reason=e.message, duration_s=round(time.time() - started, 3))
        print(json.dumps(out))
        return 1
    status = "ok" if result["instant"] else "nothing_to_do"
    out.update(result, status=status, duration_s=round(time.time() - started, 3))
    print(json.dumps(out))
    return 0


if __name__ == "__main__":  # pragma: no cover - spark-submit goes through submit.py
    raise SystemExit(main(sys.argv[1:]))
