"""The data commands of ``lakehouse``: ``create``, ``write``, ``delete-partitions``, ``commit``,
``read``, ``rollback``, ``stats``, ``options`` and ``iceberg-sync``, and the reading and writing
of the data files they take and give.
"""

from __future__ import annotations

import contextlib
import csv
import datetime as dt
import decimal
import json
import re
import sys
from pathlib import Path
from typing import Any, Sequence

import click
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.json as pjson
import pyarrow.parquet as pq

from lakehouse.cli.common import (console, instant_arg, note, options_arg, rich_table,
                                  split_names)
from lakehouse.columns import META_FIELDS
from lakehouse.config import IndexType, MergeMode, TableType, option_docs
from lakehouse.errors import LakehouseError, SchemaError
from lakehouse.iceberg import sync_iceberg
from lakehouse.inspect.describe import human_bytes
from lakehouse.inspect.stats import STAT_KEYS, table_stats
from lakehouse.table import create_table, open_table

OPERATIONS = ("upsert", "insert", "bulk_insert", "delete", "insert_overwrite", "insert_overwrite_table",
              "delete_partition")
_INPUT_SUFFIXES = {".parquet": "parquet", ".pq": "parquet", ".jsonl": "jsonl", ".ndjson": "jsonl",
                   ".json": "jsonl", ".csv": "csv"}
# Console print of a read without --limit stays short; --output or --limit get everything asked.
DEFAULT_SHOWN_ROWS = 20


# --- reading input files ------------------------------------------------------------------


def _input_format(path: str, fmt: str) -> str:
    # pyarrow decompresses by suffix, so trips.csv.gz is a CSV file.
    name = re.sub(r"\.(gz|bz2|zst)$", "", path.lower())
    found = fmt if fmt != "auto" else _INPUT_SUFFIXES.get(Path(name).suffix)
    if found is None:
        raise click.BadParameter(f"cannot tell the format of {path} from its name",
                                 param_hint="--format")
    return found


def _strings_as_table_types(data: pa.Table, types: dict[str, pa.DataType]) -> pa.Table:
    """JSON has no timestamp, date or decimal: such values arrive as strings."""
    for i, f in enumerate(data.schema):
        want = types.get(f.name)
        if want is not None and pa.types.is_string(f.type) and want != f.type:
            col = data.column(i)
            # A zoned column takes zone-less strings as UTC (Arrow's cast needs an offset).
            zoned = pa.types.is_timestamp(want) and want.tz
            for via in [None] + ([pa.timestamp(want.unit)] if zoned else []):
                with contextlib.suppress(pa.ArrowInvalid, pa.ArrowNotImplementedError):
                    data = data.set_column(i, f.name, (col.cast(via) if via else col).cast(want))
                    break
            # Anything not cast stays a string: the write's schema check names the column.
    return data


def read_input(path: str, fmt: str, table_schema: pa.Schema | None = None) -> pa.Table:
    """One input file as Arrow. Text formats carry no (or few) types, so columns the table
    already has are read as the table's types: a CSV key "007" would otherwise become 7."""
    fmt = _input_format(path, fmt)
    types = {f.name: f.type for f in table_schema or () if f.name not in META_FIELDS}
    try:
        if fmt == "parquet":
            return pq.read_table(path)
        if fmt == "jsonl":
            return _strings_as_table_types(pjson.read_json(path), types)
        return pcsv.read_csv(path, convert_options=pcsv.ConvertOptions(column_types=types))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError) as e:
        raise LakehouseError(f"cannot read {path} as {fmt}: {e}",
                             help="check the file, or name its format with --format") from None


def read_inputs(files: Sequence[str], fmt: str, table_schema: pa.Schema | None) -> pa.Table:
    # Typed files go first so that CSV files of the same batch can borrow their column types.
    order = sorted(range(len(files)), key=lambda i: _input_format(files[i], fmt) == "csv")
    known, read = list(table_schema or ()), {}
    for i in order:
        read[i] = read_input(files[i], fmt, pa.schema(known) if known else None)
        known += [f for f in read[i].schema if f.name not in {k.name for k in known}]
    tables = [read[i] for i in range(len(files))]
    if len(tables) == 1:
        return tables[0]
    try:
        return pa.concat_tables(tables, promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
        raise SchemaError(f"the input files do not share a schema: {e}",
                          help="write files with different column types in separate writes") from None


# --- filters and output of reads ----------------------------------------------------------

_CMP_RE = re.compile(r"^\s*([^\s=!<>]+)\s*(==|!=|<=|>=|=|<|>)\s*(.*?)\s*$")
_IN_RE = re.compile(r"^\s*(\S+)\s+(not\s+in|in)\s+(.*?)\s*$", re.IGNORECASE)


def coerce_value(raw: str, typ: pa.DataType | None, column: str) -> Any:
    """A filter value typed after its column, so `id = 007` on a string column stays "007"."""
    s = raw.strip()
    quoted = len(s) >= 2 and s[0] == s[-1] and s[0] in "'\""
    s = s[1:-1] if quoted else s
    try:
        if typ is None:  # a column the schema lacks: the read reports it; guess meanwhile
            for conv in () if quoted else (int, float):
                with contextlib.suppress(ValueError):
                    return conv(s)
            return s
        if pa.types.is_string(typ) or pa.types.is_large_string(typ):
            return s
        if pa.types.is_boolean(typ):
            return {"true": True, "1": True, "false": False, "0": False}[s.lower()]
        for check, conv in ((pa.types.is_integer, int), (pa.types.is_floating, float),
                            (pa.types.is_decimal, decimal.Decimal),
                            (pa.types.is_date, dt.date.fromisoformat)):
            if check(typ):
                return conv(s)
        if pa.types.is_timestamp(typ):
            t = dt.datetime.fromisoformat(s)
            # Instant times and event times are UTC here; a bare "2024-06-01" means UTC too.
            return t.replace(tzinfo=dt.timezone.utc) if typ.tz and t.tzinfo is None else t
        return pa.scalar(s).cast(typ).as_py()
    except (KeyError, ValueError, decimal.InvalidOperation, pa.ArrowInvalid,
            pa.ArrowNotImplementedError):
        raise click.BadParameter(f"{raw!r} is not a valid {typ} value for column {column!r}",
                                 param_hint="--filter") from None


def parse_filter(text: str, schema: pa.Schema | None) -> tuple[str, str, Any]:
    """``"col op value"`` as the (column, op, value) triple Table.read takes."""
    m = _IN_RE.match(text) or _CMP_RE.match(text)
    if not m or not m.group(3):
        raise click.BadParameter(f"{text!r} is not 'COLUMN OP VALUE' "
                                 "(ops: = != < <= > >= in, not in)", param_hint="--filter")
    col, op, raw = m.group(1), " ".join(m.group(2).lower().split()), m.group(3)
    typ = schema.field(col).type if schema is not None and col in schema.names else None
    if op not in ("in", "not in"):
        value = coerce_value(raw, typ, col)
        # A Python datetime compared with a zoned timestamp column needs the column's type.
        return col, "=" if op == "==" else op, pa.scalar(value, typ) if typ is not None else value
    inner = raw[1:-1] if raw[:1] in "([" and raw[-1:] in ")]" else raw
    # csv splitting lets a quoted value hold a comma: city in "Washington, D.C.",nyc
    items = [coerce_value(x, typ, col) for x in next(csv.reader([inner], skipinitialspace=True), [])
             if x.strip()]
    if not items:
        raise click.BadParameter(f"{text!r} lists no values", param_hint="--filter")
    return col, op, pa.array(items, type=typ)


def _output_format(path: str) -> str:
    fmt = _INPUT_SUFFIXES.get(Path(path).suffix.lower())
    if fmt is None:
        raise click.BadParameter(f"{path}: use a .parquet, .csv or .jsonl file name",
                                 param_hint="--output")
    return fmt


def write_output(data: pa.Table, path: str) -> None:
    fmt = _output_format(path)
    if fmt != "jsonl":
        (pq.write_table if fmt == "parquet" else pcsv.write_csv)(data, path)
        return
    with open(path, "w", encoding="utf-8") as f:
        for row in data.to_pylist():
            f.write(json.dumps(row, default=lambda o: o.isoformat() if hasattr(o, "isoformat")
                               else o.hex() if isinstance(o, bytes) else str(o)) + "\n")


@click.command()
@click.argument("path")
@click.option("--name", help="Table name (letters, digits, underscores). Default: the folder name.")
@click.option("--type", "table_type", default="MERGE_ON_READ", show_default=True,
              type=click.Choice([t.value for t in TableType], case_sensitive=False))
@click.option("--record-key", multiple=True, required=True,
              help="Record key column; repeat or give a comma list for a composite key.")
@click.option("--partition-by", multiple=True, help="Partition column(s); repeat or comma list.")
@click.option("--ordering-field", help="Column whose highest value wins among versions of a record.")
@click.option("--merge-mode", default=None, type=click.Choice([m.value for m in MergeMode], case_sensitive=False),
              help="Default: EVENT_TIME_ORDERING with an ordering field, else COMMIT_TIME_ORDERING.")
@click.option("--index", default=None, type=click.Choice([i.value for i in IndexType], case_sensitive=False),
              help="Default: BUCKET for MERGE_ON_READ (sized by the first write), SIMPLE for COPY_ON_WRITE.")
@click.option("--hive-style/--no-hive-style", default=False, show_default=True,
              help="Partition folders as col=value.")
@click.option("--schema-from", type=click.Path(exists=True, dir_okay=False),
              help="Take the column types from this data file (so CSV input is typed from the start).")
@click.option("--option", "options", multiple=True, callback=options_arg, metavar="KEY=VALUE",
              help="Any hoodie.* option (repeatable); `lakehouse options` lists them.")
def create(path: str, name: str | None, table_type: str, record_key: tuple[str, ...],
           partition_by: tuple[str, ...], ordering_field: str | None, merge_mode: str | None, index: str | None,
           hive_style: bool, schema_from: str | None, options: dict[str, str]) -> str:
    """Create an empty table at PATH."""
    name = name or Path(path.removeprefix("file://").rstrip("/")).name
    schema = read_input(schema_from, "auto").schema if schema_from else None
    table = create_table(path, name=name, record_key=list(record_key), table_type=table_type,
                         partition_by=list(partition_by) or None, ordering_field=ordering_field,
                         merge_mode=merge_mode, index=index, hive_style_partitioning=hive_style,
                         schema=schema, options=options)
    c = table.config
    parts = ", ".join(c.partition_fields) or "nothing (not partitioned)"
    note(f"created {c.table_type} table {c.name} at {table.path}\n"
         f"  record key {', '.join(c.record_key_fields)}; partitioned by {parts}; "
         f"{c.merge_mode}{f' on {c.ordering_field}' if c.ordering_field else ''}; "
         f"{c.index_type} index")
    return table.path


@click.command(short_help="Write parquet, JSON lines or CSV files as one instant.")
@click.argument("path")
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--op", "operation", default="upsert", show_default=True,
              type=click.Choice(OPERATIONS, case_sensitive=False))
@click.option("--format", "fmt", default="auto", show_default=True,
              type=click.Choice(["auto", "parquet", "jsonl", "csv"], case_sensitive=False),
              help="Input format; auto goes by the file suffix.")
@click.option("--no-commit", is_flag=True,
              help="Run phase 1 only (files written, instant left inflight); finish with "
                   "`lakehouse commit`. The next write rolls back an uncommitted instant.")
@click.option("--option", "options", multiple=True, callback=options_arg, metavar="KEY=VALUE",
              help="A hoodie.* write option for this write (repeatable).")
def write(path: str, files: tuple[str, ...], operation: str, fmt: str, no_commit: bool,
          options: dict[str, str]) -> str:
    """Write FILE... (parquet, JSON lines or CSV) to the table as one instant.

    Prints the instant time on stdout. For --op delete the files need only the key columns
    (and the partition columns for a non-global index); for --op delete_partition the partition
    columns (every partition the rows name is dropped).
    """
    table = open_table(path)
    current = table.schema()
    batch = read_inputs(files, fmt.lower(), current if len(current) > len(META_FIELDS) else None)
    instant = table.write(batch, operation.lower(), commit=not no_commit, options=options or None)
    what = f"{operation.lower()} of {batch.num_rows:,} records from {len(files)} file(s)"
    note(f"{what}: phase 1 done, {instant} is inflight; complete it with `lakehouse commit "
         f"{path} {instant}`" if no_commit else f"{what} committed as instant {instant}")
    click.echo(instant)
    return instant


@click.command("delete-partitions")
@click.argument("path")
@click.argument("partitions", nargs=-1, required=True)
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation (needed without a terminal).")
@click.option("--no-commit", is_flag=True, help="Run phase 1 only; finish with `lakehouse commit`.")
def delete_partitions(path: str, partitions: tuple[str, ...], yes: bool, no_commit: bool) -> str:
    """Drop PARTITION... (paths as `lakehouse stats` lists them) as one replacecommit, as Hudi's
    delete_partition does: their records disappear from reads at once, their files go at the
    next clean. Asks first unless --yes."""
    table = open_table(path)
    if not yes:
        if not sys.stdin.isatty():
            raise click.UsageError("delete-partitions drops every record of "
                                   f"{', '.join(partitions)}; pass --yes to confirm, there is no "
                                   "terminal to ask on")
        if not click.confirm(f"Drop every record of {', '.join(partitions)} from {table.name}?", err=True):
            raise LakehouseError("delete-partitions cancelled: nothing was changed",
                                 help="answer y to drop them, or pass --yes")
    instant = table.delete_partitions(list(partitions), commit=not no_commit)
    note(f"partition(s) {', '.join(partitions)} dropped as instant {instant}"
         + (" (phase 1 only)" if no_commit else ""))
    click.echo(instant)
    return instant


@click.command()
@click.argument("path")
@click.argument("instant", callback=instant_arg)
def commit(path: str, instant: str) -> str:
    """Complete INSTANT, an inflight write left by `write --no-commit` (phase 2)."""
    table = open_table(path)
    meta = table.commit(instant)
    note(f"committed {instant}: {meta.operation_type.lower()}, "
         f"{meta.total('num_writes'):,} records written, {meta.total('num_deletes'):,} deleted")
    click.echo(instant)
    return instant


@click.command()
@click.argument("path")
@click.option("--as-of", callback=instant_arg, help="Time travel: the table as of this instant.")
@click.option("--columns", help="Comma list of columns to return.")
@click.option("--filter", "filters", multiple=True, metavar='"COL OP VALUE"',
              help="Row filter (repeatable, all must hold); ops = != < <= > >= in 'not in'; "
                   "e.g. \"city = sf\", \"fare >= 10.5\", \"city in sf,nyc\".")
@click.option("--read-optimized", is_flag=True, help="Base files only (MOR logs not merged).")
@click.option("--changes-from", callback=instant_arg,
              help="Incremental read: records written by commits after this instant.")
@click.option("--changes-to", callback=instant_arg, help="Incremental read up to this instant.")
@click.option("--output", "-o", type=click.Path(dir_okay=False),
              help="Write rows to FILE (.parquet, .csv or .jsonl) instead of printing them.")
@click.option("--limit", type=click.IntRange(min=0), help="At most N rows.")
@click.option("--sort", "sort_by", help="Comma list of columns to sort by (ascending).")
@click.option("--no-meta", is_flag=True, help="Leave out the _hoodie_* columns not named in --columns.")
def read(path: str, as_of: str | None, columns: str | None, filters: tuple[str, ...],
         read_optimized: bool, changes_from: str | None, changes_to: str | None,
         output: str | None, limit: int | None, sort_by: str | None, no_meta: bool) -> pa.Table:
    """Read the table: a snapshot (default), as of an instant, or the changes in a range."""
    incremental = changes_from is not None or changes_to is not None
    if incremental and (as_of is not None or read_optimized):
        raise click.UsageError("--changes-from/--changes-to cannot be combined with "
                               "--as-of or --read-optimized")
    if output:
        _output_format(output)  # fail on a bad name before reading anything
    table = open_table(path)
    cols = split_names(columns) or None
    schema = table.schema(changes_to if incremental else as_of)
    flts = [parse_filter(f, schema) for f in filters] or None
    if incremental:
        data = table.read_changes(changes_from, changes_to, columns=cols, filters=flts)
    else:
        data = table.read(as_of=as_of, columns=cols, filters=flts, read_optimized=read_optimized)
    if no_meta:
        data = data.drop_columns([c for c in data.column_names
                                  if c in META_FIELDS and c not in (cols or ())])
    if sort_by:
        keys = split_names(sort_by)
        if missing := [k for k in keys if k not in data.column_names]:
            raise click.BadParameter(f"{missing} not among the columns read", param_hint="--sort")
        data = data.sort_by([(k, "ascending") for k in keys])
    total = data.num_rows
    if output:
        data = data if limit is None else data.slice(0, limit)
        write_output(data, output)
        note(f"wrote {data.num_rows:,} of {total:,} rows to {output}")
        return data
    shown = data.slice(0, DEFAULT_SHOWN_ROWS if limit is None else limit)
    caption = f"{total:,} rows" if shown.num_rows == total else f"{shown.num_rows:,} of {total:,} rows"
    numeric = [f.name for f in shown.schema
               if pa.types.is_integer(f.type) or pa.types.is_floating(f.type)]
    console().print(rich_table(None, shown.column_names,
                               [tuple(r.values()) for r in shown.to_pylist()], caption, numeric))
    return data


@click.command()
@click.argument("path")
@click.argument("instant", required=False, callback=instant_arg)
def rollback(path: str, instant: str | None) -> str:
    """Roll back INSTANT (default: the latest pending write, else the latest completed one).

    Prints the rollback instant's time on stdout.
    """
    table = open_table(path)
    result = table.rollback(instant)
    note(f"rolled back {result.target} ({result.files_deleted} file(s) deleted) "
         f"with rollback {result.rollback_instant}")
    click.echo(result.rollback_instant)
    return result.rollback_instant


@click.command()
@click.argument("path")
@click.option("--json", "as_json", is_flag=True, help="JSON instead of tables.")
def stats(path: str, as_json: bool) -> dict[str, Any]:
    """File groups, files and bytes of the latest file slices, overall and per partition."""
    st = table_stats(open_table(path))
    if as_json:
        click.echo(json.dumps(st, indent=2))
        return st
    summary = [("table", f"{st['table']} ({st['type']})"), ("file groups", f"{st['file_groups']:,}"),
               ("base files", f"{st['base_files']:,} ({human_bytes(st['base_bytes'])})"),
               ("log files", f"{st['log_files']:,} ({human_bytes(st['log_bytes'])})"),
               ("partitions", f"{st['partitions']:,}"),
               ("pending compactions", f"{st['pending_compactions']:,}"),
               ("last commit", st["last_commit"] or "none")]
    con = console()
    con.print(rich_table(f"stats of {st['table']}", ("", "value"), summary, nowrap=("", "value")))
    if st["by_partition"]:
        heads = [k.replace("_", " ") for k in STAT_KEYS]
        body = [[p["partition"] or "(not partitioned)"] +
                [human_bytes(p[k]) if k.endswith("bytes") else f"{p[k]:,}" for k in STAT_KEYS]
                for p in st["by_partition"]]
        con.print(rich_table("per partition", ["partition", *heads], body, right=heads,
                             nowrap=("partition",)))
    return st


@click.command()
@click.option("--json", "as_json", is_flag=True, help="A JSON list instead of a table.")
def options(as_json: bool) -> list[dict[str, str]]:
    """List every hoodie.* option with its default and what it does."""
    # option_docs() renders bools the Python way; Hudi's property files spell them lower case.
    rows = [{"key": k, "default": d.lower() if d in ("True", "False") else d, "doc": doc}
            for k, d, doc in option_docs()]
    if as_json:
        click.echo(json.dumps(rows, indent=2))
    else:
        console().print(rich_table("hoodie.* options", ("option", "default", "description"),
                                   [(r["key"], r["default"], r["doc"]) for r in rows],
                                   nowrap=("option",)))
    return rows


@click.command("iceberg-sync")
@click.argument("path")
@click.option("--json", "as_json", is_flag=True, help="A JSON document instead of a summary.")
def iceberg_sync(path: str, as_json: bool) -> dict[str, Any]:
    """Publish Iceberg metadata for every completed instant not yet published (commits do it
    themselves; this catches up after hoodie.meta.sync.iceberg.enabled was off or a publish
    failed). Prints the current metadata file's URI."""
    res = sync_iceberg(open_table(path))
    doc = {"metadata_location": res.metadata_location, "versions_written": list(res.versions_written),
           "published": [{"instant": t, "snapshot_id": sid} for t, sid in res.published],
           "rolled_back": list(res.rolled_back), "expired": list(res.expired),
           "current_instant": res.current_instant}
    if as_json:
        click.echo(json.dumps(doc, indent=2))
    else:
        note(f"published {len(res.published)} snapshot(s) in {len(res.versions_written)} "
             f"metadata version(s); current instant {res.current_instant or '-'}")
        if res.metadata_location:
            click.echo(res.metadata_location)
    return doc


COMMANDS = (create, write, delete_partitions, commit, read, rollback, stats, options, iceberg_sync)
