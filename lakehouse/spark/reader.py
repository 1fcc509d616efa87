"""A table as a Spark DataFrame: the driver plans the file slices, the executors read them.

The plan is the one :class:`~lakehouse.read.reader.TableReader` makes (visibility, time travel,
partition pruning, the file groups an incremental range touched), so Spark and ``Table.read`` /
``Table.read_changes`` return the same rows. Each Spark task merges whole file slices with
:func:`~lakehouse.read.file_slice_reader.iter_file_slice`: a slice is the unit the merge needs
entire, so it is never split across tasks; its base file is streamed past its log records.

Not a Spark data source: ``read_table`` is a function, and :func:`register` only binds it to a
session for convenience.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakehouse.columns import IS_DELETED
from lakehouse.config import TableConfig
from lakehouse.errors import ConfigError
from lakehouse.file_group.file_slice import FileSlice
from lakehouse.read.file_slice_reader import SliceReadContext, iter_file_slice
from lakehouse.read.reader import STREAM_BATCH_ROWS, Filter, ReadPlan, TableReader
from lakehouse.spark.types import spark_schema
from lakehouse.storage import Storage, get_storage
from lakehouse.table import open_table
from lakehouse.timeline.active import ActiveTimeline, Timeline

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession



@dataclass(frozen=True)
class SparkReadPlan:
    """A :class:`~lakehouse.read.reader.ReadPlan` with what an executor needs to carry it out;
    plain data, so it pickles."""

    path: str
    config: TableConfig
    # The driver's timeline travels with the plan: executors then judge log blocks by the same
    # instants even if the table moves on (or archives) while the job runs.
    timeline: Timeline
    plan: ReadPlan

    @property
    def slices(self) -> tuple[FileSlice, ...]:
        return self.plan.slices

    @property
    def output_schema(self) -> pa.Schema:
        return self.plan.output_schema

    def context(self) -> SliceReadContext:
        storage = get_storage(self.path)
        reader = TableReader(storage, self.config, ActiveTimeline(storage, archive_folder=self.config.archive_folder), self.timeline)
        return reader.slice_context(self.plan)

    def read_slice(self, index: int, ctx: SliceReadContext) -> Iterator[pa.Table]:
        """The slice's rows in pieces (a batch of base records at a time, the merge of those its
        logs touch last), so a task holds about one piece of a large file slice."""
        target = self.plan.read_schema
        for table in iter_file_slice(self.plan.slices[index], ctx, STREAM_BATCH_ROWS):
            yield self.plan.finish(table if table.schema == target else table.cast(target))


def plan_read(path: str | Storage, *, as_of: str | None = None,
              columns: Sequence[str] | None = None,
              filters: Sequence[Filter] | pc.Expression | None = None,
              read_optimized: bool = False, changes_from: str | None = None,
              changes_to: str | None = None, timeline: Timeline | None = None) -> SparkReadPlan:
    """The slices and read parameters of ``Table.read`` (or, with ``changes_from`` or
    ``changes_to``, of ``Table.read_changes``), made on the driver by the same planner;
    ``timeline``: the one an earlier plan of the same query was made on (default: loaded)."""
    table = open_table(path)
    reader = TableReader(table.storage, table.config, table.active, timeline)
    incremental = changes_from is not None or changes_to is not None
    if incremental and (as_of is not None or read_optimized):
        raise ConfigError("an incremental read takes neither as_of nor read_optimized",
                          help="changes_to is the incremental read's end instant")
    plan = (reader.plan_changes(changes_from, changes_to, columns=columns, filters=filters)
            if incremental else
            reader.plan_snapshot(as_of=as_of, columns=columns, filters=filters,
                                 read_optimized=read_optimized))
    return SparkReadPlan(table.path, table.config, reader.timeline, plan)


def group_slices(slices: Sequence[FileSlice], parallelism: int) -> list[list[int]]:
    """Slice indices in at most ``parallelism`` groups of similar bytes (largest first into the
    lightest group), each group in plan order; one group per slice when parallelism allows."""
    if parallelism >= len(slices):
        return [[i] for i in range(len(slices))]

    def size(s: FileSlice) -> int:
        return s.total_size

    groups: list[list[int]] = [[] for _ in range(parallelism)]
    loads = [0] * parallelism
    for i in sorted(range(len(slices)), key=lambda i: -size(slices[i])):
        g = loads.index(min(loads))
        groups[g].append(i)
        loads[g] += size(slices[i])
    return [sorted(g) for g in groups if g]


class _ReadGroups:
    """The mapInArrow function: reads the slices of the group ids it is given. A module-level
    class so that executors import it rather than unpickle its code."""

    def __init__(self, plan: SparkReadPlan, groups: list[list[int]], arrow_schema: pa.Schema) -> None:
        self.plan = plan
        self.groups = groups
        self.arrow_schema = arrow_schema

    def __call__(self, batches):
        ctx = None
        for batch in batches:
            for g in batch.column(0).to_pylist():
                for i in self.groups[g]:
                    if ctx is None:
                        ctx = self.plan.context()
                    for table in self.plan.read_slice(i, ctx):
                        # Spark accepts only its own Arrow types (microsecond timestamps, ...).
                        yield from table.cast(self.arrow_schema).to_batches()


def read_table(spark: "SparkSession", path: str | Storage, *, as_of: str | None = None,
               columns: Sequence[str] | None = None,
               filters: Sequence[Filter] | pc.Expression | None = None,
               read_optimized: bool = False, changes_from: str | None = None,
               changes_to: str | None = None, parallelism: int | None = None,
               native: bool = True) -> "DataFrame":
    """The rows of ``Table.read(as_of, columns, filters, read_optimized)``, or with
    ``changes_from``/``changes_to`` those of ``Table.read_changes(changes_from, changes_to,
    columns, filters)``, as a DataFrame. File slices with nothing to merge are read by Spark's
    own parquet reader (see :func:`native_slices`; ``native=False``: none are), the others
    merged by lakehouse in one partition per slice (at most ``parallelism`` partitions, slices
    grouped by size)."""
    from pyspark.sql.pandas.types import to_arrow_schema  # noqa: PLC0415

    if parallelism is not None and parallelism < 1:
        raise ConfigError(f"parallelism {parallelism} must be at least 1", help="pass 1 or more")
    plan = plan_read(path, as_of=as_of, columns=columns, filters=filters,
                     read_optimized=read_optimized, changes_from=changes_from,
                     changes_to=changes_to)
    schema = spark_schema(plan.output_schema)
    native, merged = native_slices(plan, filters) if native else ([], list(range(len(plan.slices))))
    parts = []
    if native:
        parts.append(_parquet_frame(spark, plan, [plan.slices[i] for i in native], filters))
    if merged or not native:
        sub = dataclasses.replace(plan.plan, slices=tuple(plan.slices[i] for i in merged))
        merged_plan = dataclasses.replace(plan, plan=sub)
        groups = group_slices(merged_plan.slices, parallelism or max(1, len(merged_plan.slices)))
        fn = _ReadGroups(merged_plan, groups, to_arrow_schema(schema, timezone="UTC"))
        # One row per partition, so each group is one task (and no slices, no task). The plan
        # travels in the function's closure; PySpark broadcasts a closure once it exceeds its
        # broadcast threshold.
        parts.append(spark.range(len(groups), numPartitions=len(groups)).mapInArrow(fn, schema))
    return functools.reduce(lambda a, b: a.unionByName(b), parts)


def exact_kind(t: pa.DataType) -> type | None:
    """The Python type of the values Spark compares with a column of ``t`` as Arrow does (None:
    Spark's answer may differ, e.g. NaN ordering for floats, time zones for timestamps)."""
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return str
    if pa.types.is_integer(t):
        return int
    if pa.types.is_boolean(t):
        return bool
    return None


# Column types whose parquet values Spark's reader returns exactly as lakehouse's reader does.
def _native_type(t: pa.DataType) -> bool:
    return (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_boolean(t)
            or pa.types.is_floating(t) or pa.types.is_date32(t) or pa.types.is_decimal128(t)
            or pa.types.is_binary(t) or pa.types.is_large_binary(t)
            or (pa.types.is_integer(t) and pa.types.is_signed_integer(t))
            or (pa.types.is_timestamp(t) and t.tz is not None))


def native_slices(plan: SparkReadPlan, filters) -> tuple[list[int], list[int]]:
    """Which of the plan's slices Spark's own parquet reader reads (column pruning, filter
    pushdown, vectorised decoding: Hudi's Spark integration reads log-free slices so), and
    which go through the merge: a slice qualifies when nothing merges into its base file (no log
    to read: read-optimized, compacted or Copy-On-Write), its file is on local storage, its
    parquet schema is the table's for the columns read, and the read's filters are tuples
    Spark answers as Arrow does (see :func:`_spark_condition`). Incremental reads merge all."""
    p = plan.plan
    storage = get_storage(plan.path)
    every = list(range(len(p.slices)))
    if p.commit_range is not None or not storage.uri().startswith("file:") or _spark_condition(filters, p.schema) is False:
        return [], every
    wanted = _native_columns(p, filters)
    if not all(_native_type(p.schema.field(c).type) for c in wanted):
        return [], every
    native, merged = [], []
    for i, fs in enumerate(p.slices):
        base = fs.merged_base_file
        logs = fs.merged_log_files if p.read_logs else ()
        if base is None or logs or not _same_schema(storage, base.path, p.schema, wanted):
            merged.append(i)
        else:
            native.append(i)
    return native, merged


def _native_columns(p: ReadPlan, filters) -> list[str]:
    """What Spark's parquet reader reads: the projection, the filters' columns, the delete flag."""
    want = set(p.read_columns or p.schema.names) | {IS_DELETED}
    want |= {f[0] for f in filters or ()} if isinstance(filters, (list, tuple)) else set()
    return [n for n in p.schema.names if n in want]


def _same_schema(storage: Storage, path: str, schema: pa.Schema, columns: Sequence[str]) -> bool:
    with storage.open_input(path) as f:
        have = pq.read_schema(f)
    return all(c in have.names and have.field(c).type == schema.field(c).type for c in columns)


_SPARK_OPS = {"=": "__eq__", "==": "__eq__", "!=": "__ne__", "<": "__lt__", "<=": "__le__",
              ">": "__gt__", ">=": "__ge__"}


def _spark_condition(filters, schema: pa.Schema):
    """The read's filters as one Spark condition (None: no filter), or False where Spark's
    answer could differ from Arrow's: an expression, floats (NaN), 'not in' (nulls), timestamps."""
    if filters is None or (isinstance(filters, (list, tuple)) and not filters):
        return None
    if isinstance(filters, pc.Expression):
        return False
    from pyspark.sql import functions as F  # noqa: PLC0415 - optional: pyspark

    cond = None
    for c, op, v in filters:
        op = op.lower()
        if exact_kind(schema.field(c).type) is None or op == "not in":
            return False
        term = F.col(c).isin(list(v)) if op == "in" else getattr(F.col(c), _SPARK_OPS[op])(v)
        cond = term if cond is None else cond & term
    return cond


def _parquet_frame(spark: "SparkSession", plan: SparkReadPlan, slices: list[FileSlice], filters) -> "DataFrame":
    from pyspark.sql import functions as F  # noqa: PLC0415 - optional: pyspark

    p = plan.plan
    storage = get_storage(plan.path)
    wanted = _native_columns(p, filters)
    files = [storage.uri(fs.merged_base_file.path) for fs in slices]
    df = spark.read.schema(spark_schema(pa.schema([p.schema.field(c) for c in wanted]))).parquet(*files)
    if IS_DELETED in wanted:
        df = df.where(F.col(IS_DELETED).isNull() | ~F.col(IS_DELETED))
    cond = _spark_condition(filters, p.schema)
    if cond is not None:
        df = df.where(cond)
    return df.select(*p.columns)


def register(spark: "SparkSession") -> Any:
    """Bind :func:`read_table` to the session: ``spark.read_lakehouse(path, **options)``."""
    bound = functools.partial(read_table, spark)
    spark.read_lakehouse = bound
    return bound
