"""A DataFrame written into a BUCKET-index table by Spark executors, as one lakehouse instant.

The driver validates, owns the timeline (rollback of failed writes, requested, inflight, results,
commit) and never holds the data. Executors compute keys and buckets per Arrow batch; a shuffle on
(partition path, bucket) brings each file group's records into one task, which precombines them
and runs the same handle as :class:`~lakehouse.write.client.WriteClient` (create, merge or append).
The bucket index needs no lookup, so a record's file group is known from its key alone: that is
what makes the write distributable without a join. Other indexes (and insert_overwrite, whose
replaced file groups depend on the whole batch) fall back to ``df.toArrow()`` on the driver and
:meth:`Table.write`: correct, but the batch must fit in the driver's memory.

Executors reopen the table from ``table.path``: that location must be reachable from them.
A Python exception on an executor comes back as a value (as in :mod:`lakehouse.spark.engine`),
so Spark does not retry a task that would fail again; the driver rolls the instant back.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterator, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse.config import IndexType
from lakehouse.errors import RecordKeyError
from lakehouse.faults import InjectedFault, fault_point
from lakehouse.file_group.view import FileSystemView
from lakehouse.read.merge import DELETE, KEY, SEQ, UNCONDITIONAL, delete_flags
from lakehouse.schema import arrow_to_avro_schema
from lakehouse.spark.engine import SparkTaskError, _Failure, _Guarded, _java_failure_summary
from lakehouse.timeline.commit_metadata import CommitMetadata, WriteStat
from lakehouse.timeline.instant import State
from lakehouse.write.client import PARTITION, Operation, WriteClient
from lakehouse.write.handles import HandleContext, schema_json

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from lakehouse.table import Table

BUCKET = "__lh_bucket"
ERROR = "__lh_error"
# Room for 2^40 rows per input partition: SEQ must order rows as the DataFrame does, across tasks.
_SEQ_SHIFT = 40
_SPARK_OPS = (Operation.UPSERT, Operation.INSERT, Operation.DELETE, Operation.BULK_INSERT)


def write_dataframe(table: "Table", df: "DataFrame", operation: str = "upsert", *, commit: bool = True,
                    extra_metadata: Mapping[str, str] | None = None,
                    options: Mapping[str, Any] | None = None) -> str:
    """Write ``df`` as one instant of ``operation``; returns the instant time.

    Same validation, instant content and errors as ``table.write(df.toArrow(), operation)``.
    With ``commit=False`` only phase 1 runs (commit later with :meth:`Table.commit`).
    """
    op = Operation(operation)
    if table.config.index_type is not IndexType.BUCKET or op not in _SPARK_OPS:
        return table.write(df.toArrow(), op.value, commit=commit, options=options,
                           extra_metadata=extra_metadata)
    client = WriteClient(table, options)
    # An empty batch of the DataFrame's schema goes through the Python path's own validation:
    # the same reconciled schema and the same typed errors, before anything is written.
    prepared = client.prepare(arrow_schema(df.schema).empty_table(), op)
    job = _Job(table.path, dict(options or {}), op, prepared.data_schema)
    partitions = _check(df, job, client)
    return _write(client, df, job, prepared, partitions, commit, extra_metadata)


def arrow_schema(schema) -> pa.Schema:
    """The Arrow schema of a Spark schema, with the plain (not large) string/binary/list types
    that a batch built in Python has, so the reconciled table schema is the same."""
    from pyspark.sql.pandas.types import to_arrow_schema

    def plain(t: pa.DataType) -> pa.DataType:
        if pa.types.is_large_string(t):
            return pa.string()
        if pa.types.is_large_binary(t):
            return pa.binary()
        if pa.types.is_large_list(t) or pa.types.is_list(t):
            return pa.list_(pa.field(t.value_field.name, plain(t.value_type), t.value_field.nullable))
        if pa.types.is_struct(t):
            return pa.struct([pa.field(f.name, plain(f.type), f.nullable) for f in t])
        if pa.types.is_map(t):
            return pa.map_(plain(t.key_type), plain(t.item_type))
        return t
    s = to_arrow_schema(schema, timezone="UTC")
    return pa.schema([pa.field(f.name, plain(f.type), f.nullable) for f in s])


@dataclass
class _Job:
    """What executors need to turn Arrow batches into rows and files; small, and pickled."""

    path: str
    options: dict
    op: Operation
    data_schema: pa.Schema
    instant: str = ""
    latest: dict = field(default_factory=dict)
    pending: dict = field(default_factory=dict)

    def client(self) -> WriteClient:
        import lakehouse
        return WriteClient(lakehouse.open_table(self.path), self.options)

    def rows(self, client: WriteClient, batch: pa.Table, subset: bool = False) -> pa.Table:
        """``batch`` conformed as WriteClient.prepare conforms it (without helper columns);
        ``subset``: only to the columns the batch has (the check reads just a few)."""
        from lakehouse.write.validate import conform
        schema = self.data_schema
        if self.op is Operation.DELETE:
            # A delete keeps only the key and partition columns, as prepare does.
            batch = batch.select([c for c in batch.column_names if c in schema.names])
        elif subset:
            schema = pa.schema([f for f in schema if f.name in batch.column_names])
        return conform(batch, schema)

    def check_ordering(self, client: WriteClient, rows: pa.Table) -> None:
        ordering = client.config.ordering_field
        if client.spec.uses_ordering and self.op is not Operation.DELETE and rows.column(ordering).null_count:
            raise RecordKeyError(f"ordering field {ordering!r} has "
                                 f"{rows.column(ordering).null_count} null value(s)",
                                 help="give every record an ordering value")


def _failure_bytes(fn, *args) -> bytes | None:
    import pickle
    out = _Guarded(lambda a: fn(*a))(args)
    return pickle.dumps(out) if isinstance(out, _Failure) else None


def _raise_failure(blob: bytes) -> None:
    import pickle
    f: _Failure = pickle.loads(blob)
    if f.error is not None:
        f.error.add_note(f"raised on a Spark executor; remote traceback:\n{f.remote_traceback}")
        raise f.error
    raise SparkTaskError(f"a Spark task failed: {f.type_name}: {f.message}",
                         help="fix the cause (the executor's traceback follows) and write again")


def _collect(df: "DataFrame", what: str) -> list:
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException
    try:
        return df.collect()
    except (Py4JJavaError, PySparkException) as e:
        raise SparkTaskError(f"the Spark job that {what} failed: {_java_failure_summary(e)}",
                             help="see the executor logs; the write can be run again") from e


def _check(df: "DataFrame", job: _Job, client: WriteClient) -> set[str]:
    """Keys, partition paths and ordering values of every row, checked on the executors and
    only on the columns they need (Spark prunes the rest); returns the partition paths."""
    def per_task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        client = job.client()
        seen: set[str] = set()

        def one(b: pa.RecordBatch) -> None:
            rows = job.rows(client, pa.Table.from_batches([b]), subset=True)
            client.keygen.record_keys(rows)
            seen.update(pc.unique(client.keygen.partition_paths(rows)).to_pylist())
            job.check_ordering(client, rows)

        for b in batches:
            err = _failure_bytes(one, b)
            if err is not None:
                yield pa.record_batch({"partition": pa.array([None], pa.string()),
                                       ERROR: pa.array([err], pa.binary())})
                return
        yield pa.record_batch({"partition": pa.array(sorted(seen), pa.string()),
                               ERROR: pa.nulls(len(seen), pa.binary())})

    needed = [*client.keygen.required_columns(), client.config.ordering_field]
    cols = [c for c in df.columns if c in needed]
    out = _collect(df.select(*cols).mapInArrow(per_task, f"partition string, {ERROR} binary"),
                   "checks the record keys")
    for r in out:
        if r[ERROR] is not None:
            _raise_failure(r[ERROR])
    return {r["partition"] for r in out}


def _keyed(df: "DataFrame", job: _Job) -> "DataFrame":
    """``df`` with the helper columns prepare adds, plus the bucket, computed per batch."""
    from pyspark.sql.types import BinaryType, BooleanType, IntegerType, LongType, StringType, StructField, StructType
    from lakehouse.write.index.bucket import bucket_ids, hash_columns

    def per_task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext
        client = job.client()
        cfg = client.config
        complex_keys = len(cfg.record_key_fields) > 1 or cfg.key_generator_type.value == "COMPLEX"
        offset = TaskContext.get().partitionId() << _SEQ_SHIFT
        for b in batches:
            n = b.num_rows
            box: dict = {}

            def one(b=b):
                rows = job.rows(client, pa.Table.from_batches([b]))
                keys = client.keygen.record_keys(rows)
                delete = pa.repeat(True, n) if job.op is Operation.DELETE else \
                    delete_flags(rows).combine_chunks() if n else pa.array([], pa.bool_())
                box.update({KEY: keys, PARTITION: client.keygen.partition_paths(rows),
                            SEQ: pa.array(np.arange(offset + 1, offset + n + 1, dtype=np.int64)),
                            DELETE: delete, UNCONDITIONAL: pa.repeat(job.op is Operation.DELETE, n),
                            BUCKET: pa.array(bucket_ids(hash_columns(
                                rows, keys, cfg.bucket_hash_fields, cfg.record_key_fields,
                                complex_keys), cfg.bucket_num) if n else np.zeros(0, np.int32))})

            err = _failure_bytes(one)
            if err is not None:
                cols = {c: pa.nulls(1, t) for c, t in zip(b.schema.names, b.schema.types)}
                cols.update({k: pa.nulls(1, t) for k, t in _HELPER_TYPES.items()})
                yield pa.record_batch({**cols, ERROR: pa.array([err], pa.binary())})
                return
            offset += n
            cols = dict(zip(b.schema.names, b.columns))
            cols.update({k: pa.array(v).cast(_HELPER_TYPES[k]) if not isinstance(v, pa.ChunkedArray)
                         else v.combine_chunks().cast(_HELPER_TYPES[k]) for k, v in box.items()})
            yield pa.record_batch({**cols, ERROR: pa.nulls(n, pa.binary())})

    spark_types = {KEY: StringType(), PARTITION: StringType(), SEQ: LongType(), DELETE: BooleanType(),
                   UNCONDITIONAL: BooleanType(), BUCKET: IntegerType(), ERROR: BinaryType()}
    # All nullable: a batch that failed is one all-null row carrying the error.
    schema = StructType([StructField(f.name, f.dataType, True) for f in df.schema.fields]
                        + [StructField(k, t) for k, t in spark_types.items()])
    return df.mapInArrow(per_task, schema)


_HELPER_TYPES = {KEY: pa.string(), PARTITION: pa.string(), SEQ: pa.int64(), DELETE: pa.bool_(),
                 UNCONDITIONAL: pa.bool_(), BUCKET: pa.int32()}


def _write_task(job: _Job):
    """The per-task function: this task's file groups, precombined and written by their handles."""
    from lakehouse.write import assign

    def per_task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext
        batches = [b for b in batches if b.num_rows]
        if not batches:
            return
        table = pa.Table.from_batches(batches)
        errors = table.column(ERROR).drop_null()
        if len(errors):
            yield pa.record_batch({"stat": pa.nulls(1, pa.string()), ERROR: errors.combine_chunks()[:1]})
            return
        pid = TaskContext.get().partitionId()

        def run() -> list[str]:
            client = job.client()
            ctx = _context(client, job.data_schema, job.instant)
            helpers = table.select([KEY, PARTITION, SEQ, DELETE, UNCONDITIONAL])
            data = job.rows(client, table.drop_columns([*_HELPER_TYPES, ERROR]))
            rows = pa.Table.from_arrays(data.columns + helpers.columns,
                                        names=data.column_names + helpers.column_names).sort_by(SEQ)
            op = job.op
            combine = {Operation.UPSERT: client.write_config.combine_before_upsert,
                       Operation.DELETE: True}.get(op, client.write_config.combine_before_insert)
            if combine and rows.num_rows > 1:
                rows = client._precombine(rows)
            if op is Operation.BULK_INSERT:
                rows = rows.filter(pc.invert(rows.column(DELETE))).sort_by([(KEY, "ascending")])
            out = []
            # Several file groups can share a task; the task number keeps their write tokens
            # and sequence numbers apart, as the Python path's per-target numbering does.
            for i, tg in enumerate(assign.bucket_targets(client, rows, job.latest, job.pending)):
                part = pa.concat_tables(tg.rows) if len(tg.rows) > 1 else tg.rows[0]
                out += [json.dumps(s.to_json()) for s in
                        assign.run_target(client, ctx, tg, part, pid * 1000 + i)]
            return out

        box: list = []
        err = _failure_bytes(lambda: box.extend(run()))
        if err is not None:
            yield pa.record_batch({"stat": pa.nulls(1, pa.string()), ERROR: pa.array([err], pa.binary())})
        elif box:
            yield pa.record_batch({"stat": pa.array(box, pa.string()), ERROR: pa.nulls(len(box), pa.binary())})
    return per_task


def _context(client: WriteClient, data_schema: pa.Schema, t: str) -> HandleContext:
    from lakehouse.read.reader import with_meta_fields
    from lakehouse.write.markers import Markers
    avro = arrow_to_avro_schema(data_schema, client.config.name, with_meta_fields=True)
    return HandleContext(storage=client.storage, markers=Markers(client.storage, t), instant_time=t,
                         schema=with_meta_fields(data_schema), avro_schema=avro,
                         avro_schema_json=schema_json(avro), config=client.write_config, spec=client.spec)


def _write(client: WriteClient, df: "DataFrame", job: _Job, prepared, partitions: set[str],
           commit: bool, extra_metadata: Mapping[str, str] | None) -> str:
    from lakehouse.services.rollback import rollback_failed_writes
    from lakehouse.write.markers import delete_stale_markers
    active = client.active
    rollback_failed_writes(active)
    timeline = active.load()
    delete_stale_markers(client.storage, timeline.completed_write_times)
    action = client._action(job.op)
    instant = active.create_requested(action, b"")
    t = job.instant = instant.time
    fault_point("write.after_requested")
    avro = arrow_to_avro_schema(prepared.data_schema, client.config.name, with_meta_fields=False)
    extra = {"schema": schema_json(avro)} if prepared.record_schema else {}
    base_meta = CommitMetadata(operation_type=job.op.operation_type,
                               extra_metadata={**extra, **(extra_metadata or {})})
    inflight = active.transition(instant, State.INFLIGHT, base_meta.to_bytes())
    try:
        view = FileSystemView.load(client.storage, timeline, active)
        job.pending = client._pending_compaction_fgs(timeline)
        # Only the bucket file groups of partitions this batch touches travel to the executors.
        job.latest = {(g.partition, g.file_id): g.slices[-1] for g in view.file_groups()
                      if g.partition in partitions}
        stats: list[WriteStat] = []
        if partitions:
            client._ensure_partitions(partitions, t)
            cfg = client.config
            tasks = max(1, min(len(partitions) * cfg.bucket_num,
                               df.sparkSession.sparkContext.defaultParallelism * 4))
            shuffled = _keyed(df, job).repartition(tasks, PARTITION, BUCKET)
            out = _collect(shuffled.mapInArrow(_write_task(job), f"stat string, {ERROR} binary"),
                           f"writes instant {t}")
            for r in out:
                if r[ERROR] is not None:
                    _raise_failure(r[ERROR])
            stats = [WriteStat.from_json(json.loads(r["stat"])) for r in out]
        fault_point("write.after_data_files")
    except InjectedFault:
        raise
    except Exception as e:
        client.abort(inflight, e)
    client.record_results(inflight, stats, base_meta)
    if commit:
        client.commit(t)
    return t


__all__ = ["write_dataframe", "arrow_schema"]
