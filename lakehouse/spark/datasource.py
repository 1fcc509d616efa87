"""``format("lakehouse")``: a table as a Spark data source (PySpark's Python Data Source API).

Reads (``spark.read.format("lakehouse").load(path)``) take Hudi's read options::

    hoodie.datasource.query.type           snapshot (default) | read_optimized | incremental
    as.of.instant                          time travel (snapshot, read_optimized)
    hoodie.datasource.read.begin.instanttime / .end.instanttime   an incremental range

and are planned by the same planner as ``Table.read`` (:mod:`lakehouse.spark.reader`): one Spark
partition per group of file slices, each merged whole on an executor.

Writes (``df.write.format("lakehouse").option(...).mode("append").save(path)``) take
``hoodie.datasource.write.operation`` (upsert by default; insert, bulk_insert, delete,
insert_overwrite, insert_overwrite_table) and the write's ``hoodie.*`` options. A missing table
is created from Hudi's datasource keys (``hoodie.table.name``, ``hoodie.datasource.write.
recordkey.field``, ``.partitionpath.field``, ``.precombine.field``, ``.table.type``).
``mode("overwrite")`` is ``insert_overwrite_table``: the table keeps its history and its
settings (Hudi's Spark datasource drops and recreates the table; lakehouse never deletes a table
a write names). Other save modes than append and overwrite are refused by Spark itself.

How a write runs: the executors stage their rows as parquet under the table's
``.hoodie/.aux/lakehouse/staging/<id>/``; the commit step, which PySpark runs once on the driver
(in a Python worker with no Spark session), writes the staged rows as one instant with the
Python writer and removes the staging folder. Staged files are invisible to every reader; a
failed job leaves none behind (``abort``), a killed one leaves a folder the next write of the
table sweeps once it is a day old.

A streaming query (``writeStream.format("lakehouse")``) commits each micro-batch the same way,
with the batch id in the commit's extra metadata under Hudi's streaming sink key
(``_hudi_streaming_sink_checkpoint``: ``{"<identifier>": "<batch id>"}``, the identifier from
``hoodie.datasource.write.streaming.checkpoint.identifier``). A batch replayed after a restart
whose id the table already holds for that identifier is skipped, so each batch is applied once;
later commits carry the ids forward (lakehouse.timeline.carried), so archival never hides them.
Options whose keys start with ``hoodie.datasource.write.commitmeta.key.prefix`` (default ``_``)
go into the commit's extra metadata, as in Hudi's ``HoodieSparkSqlWriter`` (Spark lower-cases
option keys). ``hoodie.compact.inline=true`` schedules and runs a compaction after a batch when its trigger
(``hoodie.compact.inline.max.delta.commits``...) is met; else compaction is left to the
Airflow DAGs.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from lakehouse.config import SERVICE_OPTION_KEYS
from lakehouse.errors import CheckpointLostError, ConfigError, CorruptFileError, TableNotFoundError
from lakehouse.faults import fault_point
from lakehouse.iceberg import background
from lakehouse.keygen import KeyGenerator
from lakehouse.meta_client import split_storage_options
from lakehouse.partition_path import check_paths
from lakehouse.read.reader import Filter
from lakehouse.spark.reader import SparkReadPlan, exact_kind, group_slices, plan_read
from lakehouse.spark.types import arrow_schema, spark_schema
from lakehouse.storage import get_storage
from lakehouse.table import Table, create_table, open_table
from lakehouse.timeline.instant import WRITE_ACTIONS
from lakehouse.services.archive import archived_extras
from lakehouse.timeline.active import Timeline
from lakehouse.timeline.carried import SINK_CHECKPOINT_KEY, believable, origins, sink_map, values
from lakehouse.write.client import WriteClient
from lakehouse.write.source import BatchSource, ParquetSource, TableSource
from lakehouse.write.operation import Operation
from lakehouse.write.prepare import committed_partition_depth
from lakehouse import layout

try:  # the Python Data Source API: pyspark >= 4.0, an optional dependency
    from pyspark.sql.datasource import (DataSource, DataSourceArrowWriter, DataSourceReader,
                                        DataSourceStreamArrowWriter, InputPartition, WriterCommitMessage)
except ImportError:  # pragma: no cover - lakehouse without Spark
    DataSource = DataSourceArrowWriter = DataSourceReader = DataSourceStreamArrowWriter = object
    InputPartition = WriterCommitMessage = object

FORMAT = "lakehouse"
QUERY_TYPE = "hoodie.datasource.query.type"
AS_OF = "as.of.instant"
BEGIN = "hoodie.datasource.read.begin.instanttime"
END = "hoodie.datasource.read.end.instanttime"
OPERATION = "hoodie.datasource.write.operation"
CHECKPOINT_IDENTIFIER = "hoodie.datasource.write.streaming.checkpoint.identifier"
DEFAULT_IDENTIFIER = "default_single_writer"
INLINE_COMPACTION = "hoodie.compact.inline"
COMMIT_META_PREFIX = "hoodie.datasource.write.commitmeta.key.prefix"
DEFAULT_COMMIT_META_PREFIX = "_"
STALE_STAGING_S = 24 * 3600
# Hudi's datasource keys that create a table (read only when the table does not exist yet).
CREATE_KEYS = {
    "hoodie.table.name": "name", "hoodie.datasource.write.table.name": "name",
    "hoodie.datasource.write.recordkey.field": "record_key",
    "hoodie.datasource.write.partitionpath.field": "partition_by",
    "hoodie.datasource.write.precombine.field": "ordering_field",
    "hoodie.datasource.write.table.type": "table_type",
    "hoodie.datasource.write.hive_style_partitioning": "hive_style_partitioning",
}
READ_KEYS = {QUERY_TYPE, AS_OF, BEGIN, END}
# Options Spark itself reads and passes along (keys come lower-cased).
SPARK_KEYS = {"path", "checkpointlocation"}
SINK_KEYS = {OPERATION, CHECKPOINT_IDENTIFIER, INLINE_COMPACTION, COMMIT_META_PREFIX, "path", *CREATE_KEYS}
WRITE_OPS = (Operation.UPSERT, Operation.INSERT, Operation.BULK_INSERT, Operation.DELETE,
             Operation.INSERT_OVERWRITE, Operation.INSERT_OVERWRITE_TABLE)


PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


def register(spark: Any) -> None:
    """Make ``format("lakehouse")`` known to ``spark`` (once per session), with filter pushdown:
    PySpark hands a Python data source the query's filters only under
    ``spark.sql.python.filterPushdown.enabled`` (default false), and refuses a reader that takes
    them while it is off. So this turns it on unless the session set it to false, and then
    registers the reader that takes them. (The ``DefaultSource`` Spark finds in
    ``pyspark_lakehouse`` without registering takes none: it works under either setting.)"""
    if spark.conf.get(PUSHDOWN_CONF, None) is None:
        spark.conf.set(PUSHDOWN_CONF, "true")
    pushdown = str(spark.conf.get(PUSHDOWN_CONF)).lower() == "true"
    spark.dataSource.register(PushdownDataSource if pushdown else LakehouseDataSource)


def _path(options: Mapping[str, str]) -> str:
    path = options.get("path")
    if not path:
        raise ConfigError("no table path given to format('lakehouse')",
                          help="pass it to load(path) / save(path) / start(path)")
    return path


def _store_options(options: Mapping[str, str]) -> dict[str, str]:
    return split_storage_options(options)[0]


def read_plan(options: Mapping[str, str], filters: Sequence[Filter] | None = None,
              timeline: Timeline | None = None) -> SparkReadPlan:
    """The read that Hudi's read options ask for (and ``filters``: those Spark pushed down),
    planned on the driver (on ``timeline``: the one the query's first plan saw)."""
    path = _path(options)
    qtype = str(options.get(QUERY_TYPE, "snapshot")).lower()
    if qtype not in ("snapshot", "read_optimized", "incremental"):
        raise ConfigError(f"{QUERY_TYPE}={qtype!r} is not snapshot, read_optimized or incremental",
                          help="pick one of those")
    unknown = sorted(k for k in options if k.startswith(("hoodie.", "as.of")) and k not in READ_KEYS)
    if unknown:
        raise ConfigError(f"read option(s) {', '.join(unknown)} are not read by format('lakehouse')",
                          help=f"reads take {', '.join(sorted(READ_KEYS))}")
    store = _store_options(options)
    target = get_storage(path, store or None) if store else path
    if qtype == "incremental":
        if not options.get(BEGIN):
            raise ConfigError(f"an incremental read needs {BEGIN}",
                              help="pass the instant after which changes are read ('000' for all)")
        if options.get(AS_OF):
            raise ConfigError(f"an incremental read takes {END}, not {AS_OF}", help=f"drop {AS_OF}")
        return plan_read(target, changes_from=options[BEGIN], changes_to=options.get(END), filters=filters,
                         timeline=timeline)
    if options.get(BEGIN) or options.get(END):
        raise ConfigError(f"{BEGIN} / {END} are read by incremental queries only",
                          help=f"set {QUERY_TYPE}=incremental")
    return plan_read(target, as_of=options.get(AS_OF), read_optimized=qtype == "read_optimized",
                     filters=filters, timeline=timeline)


def pushable_filters(filters: Sequence[Any], schema: pa.Schema) -> tuple[list[Filter], list[Any]]:
    """Spark's pushed filters split into those lakehouse applies exactly as Spark would, as
    ``Table.read`` filters, and the rest (which Spark evaluates after the scan).

    Taken: ``=``, ``<``, ``<=``, ``>``, ``>=`` and ``IN`` (without a null in the list) on a
    top-level string, integer or boolean column. Left to Spark, where Arrow's answer could
    differ from Spark's: floating point (Spark orders NaN above every number and equal to itself;
    Arrow compares it false), ``NOT IN`` and null-safe equality (nulls), timestamps and dates
    (time zones), and what ``Table.read`` filters cannot say (IS NULL, LIKE, NOT ...)."""
    from pyspark.sql import datasource as ds  # noqa: PLC0415 - optional: pyspark

    ops = {ds.EqualTo: "=", ds.GreaterThan: ">", ds.GreaterThanOrEqual: ">=", ds.LessThan: "<",
           ds.LessThanOrEqual: "<=", ds.In: "in"}
    taken: list[Filter] = []
    rest: list[Any] = []
    for f in filters:
        op = ops.get(type(f))
        ref = getattr(f, "attribute", ())
        name = ref[0] if len(ref) == 1 else None
        kind = exact_kind(schema.field(name).type) if name in schema.names else None
        values = (list(f.value) if op == "in" else [f.value]) if op is not None and kind else []
        if not values or not all(type(v) is kind for v in values):  # noqa: E721 - bool is no int here
            rest.append(f)
            continue
        taken.append((name, op, values if op == "in" else values[0]))
    return taken, rest


class LakehouseDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self):
        return spark_schema(read_plan(self.options).output_schema)

    def reader(self, schema) -> "LakehouseReader":
        return LakehouseReader(read_plan(self.options), schema, self.options)

    def writer(self, schema, overwrite: bool) -> "LakehouseWriter":
        return LakehouseWriter(Sink.of(dict(self.options), schema, overwrite))

    def streamWriter(self, schema, overwrite: bool) -> "LakehouseStreamWriter":
        return LakehouseStreamWriter(Sink.of(dict(self.options), schema, overwrite, streaming=True))


class PushdownDataSource(LakehouseDataSource):
    """``format("lakehouse")`` whose reader takes the filters Spark pushes down (see
    :func:`register`): partitions, buckets and base files pruned by them, rows filtered on the
    executors before they cross into the JVM."""

    def reader(self, schema) -> "PushdownReader":
        return PushdownReader(read_plan(self.options), schema, self.options)


class LakehouseReader(DataSourceReader):
    def __init__(self, plan: SparkReadPlan, schema, options: Mapping[str, str]) -> None:
        from pyspark.sql.pandas.types import to_arrow_schema  # noqa: PLC0415 - optional: pyspark
        self.plan = plan
        self.options = dict(options)
        self.arrow_schema = to_arrow_schema(schema, timezone="UTC")

    def partitions(self) -> Sequence[InputPartition]:
        if not self.plan.slices:
            return []
        return [InputPartition(g) for g in group_slices(self.plan.slices, len(self.plan.slices))]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        ctx = self.plan.context()
        for i in partition.value:
            for table in self.plan.read_slice(i, ctx):
                # Spark accepts only its own Arrow types (microsecond timestamps, ...).
                yield from table.cast(self.arrow_schema).to_batches()


class PushdownReader(LakehouseReader):
    def pushFilters(self, filters: list) -> Iterator[Any]:  # noqa: N802 - PySpark's name
        taken, rest = pushable_filters(filters, self.plan.output_schema)
        if taken:
            # Planned again with the filters on the timeline the first plan saw: the rows come
            # from the instant whose schema Spark was given, and the timeline is not listed again.
            self.plan = read_plan(self.options, taken, self.plan.timeline)
        return iter(rest)


@dataclass(frozen=True)
class Staged(WriterCommitMessage):
    """What one write task staged: a parquet file of its rows (none for an empty task)."""

    path: str | None
    rows: int


@dataclass
class Sink:
    """A write (or a streaming query's batches) into one table; pickled to the executors."""

    path: str
    store: dict[str, str]
    op: Operation
    write_options: dict[str, str]
    arrow_schema: pa.Schema
    staging: str
    identifier: str = DEFAULT_IDENTIFIER
    inline_compaction: bool = False
    create: dict[str, Any] = field(default_factory=dict)
    extra_metadata: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, options: dict[str, str], schema, overwrite: bool, *, streaming: bool = False) -> "Sink":
        """Checks everything that can be checked before a row is staged."""
        path = _path(options)
        store, rest = split_storage_options(options)
        rest = {k: v for k, v in rest.items() if k not in SPARK_KEYS}
        prefix = str(rest.get(COMMIT_META_PREFIX, DEFAULT_COMMIT_META_PREFIX))
        if not prefix:
            raise ConfigError(f"{COMMIT_META_PREFIX} is empty: every option would go into the commit metadata",
                              help=f"give it a prefix (Hudi's default is {DEFAULT_COMMIT_META_PREFIX!r})")
        # Hudi's HoodieSparkSqlWriter: options under the prefix are the commit's extra metadata.
        extra = {k: str(v) for k, v in rest.items() if k.startswith(prefix) and k not in SINK_KEYS}
        rest = {k: v for k, v in rest.items() if k not in extra}
        foreign = sorted(k for k in rest if not k.startswith(("hoodie.", "write.")))
        if foreign:
            raise ConfigError(f"option(s) {', '.join(foreign)} are not read by format('lakehouse')",
                              help=f"writes take hoodie.* options (and s3.* for the store); keys starting "
                                   f"with {prefix!r} ({COMMIT_META_PREFIX}) go into the commit metadata")
        op_name = str(rest.get(OPERATION, "upsert")).lower()
        try:
            op = Operation.INSERT_OVERWRITE_TABLE if overwrite else Operation(op_name)
        except ValueError:
            op = None
        if op not in WRITE_OPS:
            raise ConfigError(f"{OPERATION}={op_name!r} is not a write format('lakehouse') takes",
                              help="one of " + ", ".join(o.value for o in WRITE_OPS))
        if overwrite and OPERATION in rest and op_name != op.value:
            raise ConfigError(f"mode('overwrite') is insert_overwrite_table, but {OPERATION}={op_name}",
                              help="use mode('append') with that operation, or drop the option")
        if streaming and op.replaces:
            raise ConfigError(f"a streaming query cannot {op.value} the table on every batch",
                              help="stream with upsert, insert, bulk_insert or delete")
        create = {CREATE_KEYS[k]: v for k, v in rest.items() if k in CREATE_KEYS}
        sink = cls(path=path, store=store, op=op,
                   write_options={k: str(v) for k, v in rest.items() if k not in SINK_KEYS},
                   arrow_schema=arrow_schema(schema),
                   staging=f"{layout.SPARK_STAGING}/{time.strftime('%Y%m%d%H%M%S')}-{uuid.uuid4().hex[:12]}",
                   identifier=str(rest.get(CHECKPOINT_IDENTIFIER, DEFAULT_IDENTIFIER)),
                   inline_compaction=str(rest.get(INLINE_COMPACTION, "false")).lower() == "true",
                   create=create, extra_metadata=extra)
        table = sink.table(create_missing=True)
        # The batch's schema goes through the Python writer's own checks now, before anything
        # is staged: the same typed errors as Table.write.
        WriteClient(table.meta_client, sink.write_options).prepare(sink.arrow_schema.empty_table(), op)
        return sink

    def table(self, *, create_missing: bool = False) -> Table:
        options = self.store or None
        try:
            return open_table(self.path, options)
        except TableNotFoundError:
            if not create_missing:
                raise
        if not self.create.get("name") or not self.create.get("record_key"):
            raise TableNotFoundError(f"there is no table at {self.path} to write into",
                                     help="create it (lakehouse create, create_table), or pass "
                                          "hoodie.table.name and hoodie.datasource.write.recordkey."
                                          "field so that the write creates it")
        args = dict(self.create)
        if "hive_style_partitioning" in args:
            args["hive_style_partitioning"] = str(args["hive_style_partitioning"]).lower() == "true"
        if not args.get("ordering_field"):
            args["merge_mode"] = "COMMIT_TIME_ORDERING"
        # The batch schema goes with it: a key, partition or ordering column it lacks is refused
        # before the table is created.
        return create_table(self.path, **args, schema=self.arrow_schema,
                            options={**self.store, **self.write_options})

    def storage(self):
        return get_storage(self.path, self.store or None)

    def stage(self, batches: Iterator[pa.RecordBatch], task: str) -> Staged:
        """On an executor: the task's rows as one parquet file under the staging folder, streamed
        to storage a batch at a time (a task never holds its rows). A refused batch discards
        the file."""
        path = f"{self.staging}/part-{task}-{uuid.uuid4().hex[:8]}.parquet"
        out = writer = None
        rows = 0
        check = None
        try:
            for b in batches:
                if b.num_rows == 0:
                    continue
                if check is None:
                    check = self.row_check()
                t = pa.Table.from_batches([b])
                check(t)
                if writer is None:
                    out = self.storage().open_output(path)
                    out.__enter__()  # left published below, or discarded on a failure
                    writer = pq.ParquetWriter(out, self.arrow_schema)
                writer.write_table(t.cast(self.arrow_schema))
                rows += b.num_rows
            if writer is None:
                return Staged(None, 0)
            writer.close()
        except BaseException as e:
            if out is not None:
                out.__exit__(type(e), e, e.__traceback__)
                self.storage().delete(path)  # a refused value leaves no staged file behind
            raise
        out.__exit__(None, None, None)
        return Staged(path, rows)

    def row_check(self) -> Callable[[pa.Table], None]:
        """On an executor: the checks of record keys and partition values the driver's write
        makes again, made before the task stages its rows, so that a refused value (a partition
        path outside the table, say) leaves no staged file behind."""
        table = self.table()
        keygen = KeyGenerator(table.config)
        depth = [committed_partition_depth(table.active, table.timeline)]

        def check(rows: pa.Table) -> None:
            keygen.record_keys(rows)
            paths = keygen.partition_paths(rows, row_offset=None)
            depth[0] = check_paths(paths, depth=depth[0], row_offset=None) or depth[0]
        return check

    def staged_rows(self, messages: Sequence[Staged | None]) -> BatchSource:
        """The staged files as the write's source: read a row group at a time, so a write the
        table takes in chunks (lakehouse.write.buffer) never holds the whole batch on the driver."""
        paths = [m.path for m in messages if m is not None and m.path]
        if not paths:
            return TableSource(self.arrow_schema.empty_table())
        return ParquetSource(paths, self.storage().open_input, self.arrow_schema)

    def discard(self) -> None:
        storage = self.storage()
        storage.delete_dir(self.staging)
        now = time.time()
        for info in storage.list(layout.SPARK_STAGING):
            # Folders of killed jobs: never committed, never read.
            if info.is_dir and info.name != self.staging.rsplit("/", 1)[-1] and \
                    info.mtime_ns and now - info.mtime_ns / 1e9 > STALE_STAGING_S:
                storage.delete_dir(f"{layout.SPARK_STAGING}/{info.name}")

    def commit(self, messages: Sequence[Staged | None], extra_metadata: Mapping[str, str] | None = None,
               table: Table | None = None) -> str:
        """On the driver: the staged rows as one instant; then the staging folder goes."""
        table = table or self.table()
        try:
            fault_point("datasource.before_commit")  # staged, nothing committed yet
            instant = table.write(self.staged_rows(messages), self.op.value, options=self.write_options,
                                  extra_metadata={**self.extra_metadata, **(extra_metadata or {})})
        finally:
            self.discard()
        if self.inline_compaction and table.config.is_mor:
            # Hudi's inline compaction reads its trigger from the writer's config: the write's
            # hoodie.compact.* options count, over the table's.
            table.compact(options={k: v for k, v in self.write_options.items() if k in SERVICE_OPTION_KEYS})
        # Spark runs this in a Python worker it may reuse or end as soon as the commit returns
        # (no exit hook runs there): the commit's Iceberg snapshot is published before it does,
        # or it would wait for the next commit (for a stream's last batch: for ever).
        background.wait(table.storage.uri())
        return instant

    def last_batch(self, table: Table) -> int | None:
        """The id of the newest batch this sink's identifier committed to ``table``: carried on
        every later commit (lakehouse.timeline.carried), else on its own commit, else in the
        archived timeline. A query whose batches the table recorded once but no longer shows
        (the archive removed) is refused: :class:`CheckpointLostError`."""
        found = values(table.active, table.timeline, lambda k: k.startswith(SINK_CHECKPOINT_KEY),
                       archived=lambda: archived_extras(table.meta_client),
                       in_order=not table.concurrency.multi_writer)
        ids = []
        for origin, _, value, _ in found:
            try:
                ids += _batch_ids(value, self.identifier)
            except ValueError as e:
                raise CorruptFileError(f"{table.path} (commit {origin})",
                                       f"its {SINK_CHECKPOINT_KEY} is not a checkpoint map ({e})",
                                       help="fix the value in the commit's extraMetadata (a JSON map of "
                                            "the streaming query's identifier to its batch id)") from e
        if ids:
            return max(ids)
        storage = self.storage()
        mark = storage.read(_sink_mark(self.identifier)).decode() if storage.exists(_sink_mark(self.identifier)) else None
        # A marked commit rolled back since (on the active timeline's span, absent) lost nothing.
        if mark is not None and believable(table.timeline, mark):
            raise CheckpointLostError(
                f"the streaming query {self.identifier!r} committed to {table.path} before (at "
                f"{mark}), but no commit, active or "
                "archived, records its batches: going on "
                "would apply replayed batches again",
                help=f"if the table is meant to start over, delete {_sink_mark(self.identifier)}; else "
                     f"restore the archived timeline ({layout.ARCHIVED}) the records were in")
        return None


def sink_commits(table: Table, identifier: str = DEFAULT_IDENTIFIER,
                 after: str | None = None) -> list[tuple[str, int]]:
    """(instant, batch id) of every completed write a streaming query of ``identifier`` committed
    to ``table`` (only instants after ``after``, when given), oldest first."""
    return [(t, b) for t, ids in _sink_batches(table, identifier) if after is None or t > after for b in ids]


def sink_checkpoint(identifier: str, batch_id: int) -> str:
    """The value of ``_hudi_streaming_sink_checkpoint`` for a micro-batch, as Hudi's
    ``CommitUtils.getCheckpointValueAsString`` writes it: a JSON map of identifier to batch id."""
    return json.dumps({identifier: str(batch_id)})


def _batch_ids(value: str | None, identifier: str) -> list[int]:
    """The batch ids of ``identifier`` in a sink checkpoint value, read as Hudi's
    ``CommitUtils.readCheckpointValue`` reads it (identifier to batch id). lakehouse before
    2026-11-24 wrote the pairs the other way round (batch id to identifier); those are read too,
    so a query restarted on a table it streamed into then still skips what it applied. A value
    that is not a JSON map raises ValueError (Hudi fails there too: skipping it could apply a
    batch twice)."""
    if not value:
        return []
    pairs = json.loads(value)
    if not isinstance(pairs, dict):
        raise ValueError("not a JSON map")
    ids = []
    for k, v in pairs.items():
        if k == identifier and str(v).lstrip("-").isdigit():
            ids.append(int(v))
        elif v == identifier and k.lstrip("-").isdigit():
            ids.append(int(k))
    return ids


def _sink_mark(identifier: str) -> str:
    """Written after a batch of ``identifier`` committed: from then on a table with no record of
    its batches has lost them (lakehouse.sources.files keeps the same mark for ingests)."""
    return f"{layout.SPARK_SINKS}/{hashlib.sha256(identifier.encode()).hexdigest()[:16]}"


def _sink_batches(table: Table, identifier: str, newest_first: bool = False):
    """(instant, batch ids of ``identifier``) of each completed write whose Hudi sink checkpoint
    (``_hudi_streaming_sink_checkpoint``) names ``identifier`` as its own, not carried from an
    earlier commit (lakehouse.timeline.carried)."""
    instants = table.timeline.completed_writes().filter(actions=WRITE_ACTIONS).instants
    for inst in (reversed(instants) if newest_first else instants):
        extra = table.active.commit_metadata(inst).extra_metadata
        carried = {k.removeprefix(SINK_CHECKPOINT_KEY + "/") for k in origins(extra)}
        try:
            value = extra.get(SINK_CHECKPOINT_KEY)
            if carried and value:
                value = json.dumps({k: v for k, v in sink_map(value).items() if k not in carried})
            ids = _batch_ids(value, identifier)
        except ValueError as e:
            raise CorruptFileError(table.storage.uri(table.active.path(inst)),
                                   f"its {SINK_CHECKPOINT_KEY} is not a checkpoint map ({e})",
                                   help="fix the value in the commit's extraMetadata (a JSON map of the "
                                        "streaming query's identifier to its batch id)") from e
        if ids:
            yield inst.time, ids


def _task_id() -> str:
    try:
        from pyspark import TaskContext  # noqa: PLC0415 - optional: pyspark
        ctx = TaskContext.get()
        if ctx is not None:
            return f"{ctx.partitionId()}-{ctx.stageId()}-{ctx.attemptNumber()}"
    except ImportError:  # pragma: no cover
        pass
    return "0-0-0"


class LakehouseWriter(DataSourceArrowWriter):
    def __init__(self, sink: Sink) -> None:
        self.sink = sink

    def write(self, iterator: Iterator[pa.RecordBatch]) -> Staged:
        return self.sink.stage(iterator, _task_id())

    def commit(self, messages: list) -> None:
        self.sink.commit(messages)

    def abort(self, messages: list) -> None:
        self.sink.discard()


class LakehouseStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, sink: Sink) -> None:
        self.sink = sink

    def write(self, iterator: Iterator[pa.RecordBatch]) -> Staged:
        # Each micro-batch stages into its own folder (a replayed batch never meets the files
        # of the attempt it replays).
        return self.sink.stage(iterator, _task_id())

    def commit(self, messages: list, batchId: int) -> None:
        table = self.sink.table()
        last = self.sink.last_batch(table)
        if last is not None and last >= batchId:
            # Hudi's HoodieStreamingSink.canSkipBatch: already in the table (the query died
            # between our commit and its own checkpoint).
            self.sink.discard()
            return
        instant = self.sink.commit(messages, {SINK_CHECKPOINT_KEY: sink_checkpoint(self.sink.identifier, batchId)},
                                   table)
        self.sink.storage().write(_sink_mark(self.sink.identifier), instant.encode())

    def abort(self, messages: list, batchId: int) -> None:
        self.sink.discard()
