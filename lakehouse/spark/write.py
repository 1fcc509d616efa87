"""A DataFrame written into a table by Spark executors, as one lakehouse instant.

The driver validates, owns the timeline (rollback of failed writes, requested, inflight, results,
commit) and never holds the data. Executors compute keys per Arrow batch; then, as in Hudi's Spark
write path:

* BUCKET index: a record's file group follows from its key alone, so a shuffle on (partition
  path, bucket) brings each file group's records into one task, which precombines them and runs
  the same handle as :class:`~lakehouse.write.client.WriteClient` (create, merge or append).
* SIMPLE / BLOOM (and their GLOBAL_ forms): records are precombined after a shuffle on their key,
  tagged with their stored location by a distributed join (:mod:`lakehouse.spark.index`), and
  routed (updates to their file group; partition moves). The driver collects only the number of
  inserts per partition (Hudi's workload profile), spreads them over small and new file groups
  (:func:`lakehouse.write.assign.plan_inserts`), and executors pick each insert's file group by a
  hash of its key, weighted by the plan. A shuffle on (partition path, file group) then writes.
* bulk_insert without a bucket index: a range shuffle on (partition path, key), each task writing
  new file groups of its sorted run.

A write task whose rows pass an eighth of ``write.task.max.size`` does not hold them: it spills
them by file group (bucket, or a run of the bulk insert's) to local files and writes one group at a time, as
the Python writer does with a batch larger than the budget (:mod:`lakehouse.write.spill`).

insert_overwrite (whose replaced file groups depend on the whole batch) falls back to
``df.toArrow()`` on the driver and :meth:`Table.write`: correct, but the batch must fit there.

Executors get the write's context (lakehouse.write.context: table and write config, key generator,
column ids) with the task, and open the store at ``table.path``: that location must be reachable
from them.
A Python exception on an executor comes back as a value (as in :mod:`lakehouse.spark.engine`),
so Spark does not retry a task that would fail again; the driver rolls the instant back.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import pickle
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterator, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse.config import IndexType
from lakehouse.errors import RecordKeyError
from lakehouse.faults import fault_point
from lakehouse.file_group.view import FileSystemView
from lakehouse.columns import DELETE, KEY, PARTITION, SEQ, UNCONDITIONAL
from lakehouse.bloom_filter import murmur_hash
from lakehouse.merge import delete_flags
from lakehouse.spark.types import arrow_schema
from lakehouse.spark.engine import Failure, Guarded, SparkTaskError, java_failure_summary
from lakehouse.spark.index import LOC_KEY, IndexJob, tag
from lakehouse.timeline.commit_metadata import WriteStat
from lakehouse.write import assign, bucket_sizing, spill
from lakehouse.write.memory import bounded_allocator, release_unused
from lakehouse.write.spill_store import Spill
from lakehouse.io.partition_metafile import ensure_partitions
from lakehouse.storage import Storage, get_storage
from lakehouse.write.client import ExtraMetadata, WriteClient
from lakehouse.write.context import WriteContext
from lakehouse.write.operation import Operation, TargetKind
from lakehouse.write.index.lookup import LOC_FILE_ID, LOC_ORDERING, LOC_PARTITION
from lakehouse.partition_path import check_paths
from lakehouse.write.prepare import combines, committed_partition_depth, precombine
from lakehouse.write.validate import conform

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from lakehouse.table import Table

BUCKET = "__lh_bucket"
ERROR = "__lh_error"
# Room for 2^40 rows per input partition: SEQ must order rows as the DataFrame does, across tasks.
_SEQ_SHIFT = 40
# Rows whose size estimates a first write's partition bytes (lakehouse.write.bucket_sizing).
_SIZE_SAMPLE_ROWS = 10_000
_SPARK_OPS = (Operation.UPSERT, Operation.INSERT, Operation.DELETE, Operation.BULK_INSERT)
# Task numbers (in write tokens and sequence numbers) a write task's file groups take, from
# its partition id times this: several file groups share a task.
_TASK_STRIDE = 1_000_000
_RUN = "__lh_run"  # a bulk insert's spilled runs
# A write task holds its rows whole up to this share of write.task.max.size: written whole, rows
# are held several times over (keyed, routed, merged: a Copy-On-Write task of 0.9x the budget
# peaked at 3.6x it), spilled they are not. At the default budget (1 GiB) a task the driver
# sizes at one file's records (hoodie.parquet.max.file.size) still goes whole.
_WHOLE_SHARE = 8


def write_dataframe(table: "Table", df: "DataFrame", operation: str = "upsert", *, commit: bool = True,
                    extra_metadata: ExtraMetadata | None = None,
                    options: Mapping[str, Any] | None = None) -> str:
    """Write ``df`` as one instant of ``operation``; returns the instant time.

    Same validation, instant content and errors as ``table.write(df.toArrow(), operation)``.
    With ``commit=False`` only phase 1 runs (commit later with :meth:`Table.commit`).
    """
    op = Operation(operation)
    if op not in _SPARK_OPS:
        return table.write(df.toArrow(), op.value, commit=commit, options=options,
                           extra_metadata=extra_metadata)
    client = WriteClient(table.meta_client, options)
    # An empty batch of the DataFrame's schema goes through the Python path's own validation:
    # the same reconciled schema and the same typed errors, before anything is written.
    # Its tasks key rows with the stored key generator: this write chooses none.
    prepared = client.prepare(arrow_schema(df.schema).empty_table(), op, choose_keygen=False)
    job = _Job(table.path, dict(options or {}), op, prepared.data_schema, client.context)
    counts = _check(df, job, client)
    if bucket_sizing.is_provisional(client.config) and op is not Operation.DELETE:
        prepared = dataclasses.replace(prepared,
                                       largest_partition_bytes=_estimated_largest_partition(df, counts))
    files = _file_writer(client, df, job, counts)
    # The same phase 1, commit and retries on a conflict as the Python writer.
    return client.run(lambda: client.write_prepared(prepared, extra_metadata=extra_metadata, files=files),
                      commit=commit)


class Routing(enum.StrEnum):
    """How a write task finds the file groups of its rows."""

    BUCKET = "bucket"  # by the bucket of each key (the BUCKET index)
    BULK = "bulk"  # new file groups of its sorted run (a bulk insert without a bucket index)
    INDEXED = "indexed"  # as the index located each key and the driver planned the inserts


@dataclass
class _Job:
    """What executors need to turn Arrow batches into rows and files; small, and pickled."""

    path: str
    options: dict
    op: Operation
    data_schema: pa.Schema
    # The write's context (with the instant's column ids once phase 1 has them): what the tasks
    # key, route and write with, no table opened.
    context: WriteContext
    instant: str = ""
    latest: dict = field(default_factory=dict)
    pending: dict = field(default_factory=dict)
    mode: Routing = Routing.BUCKET
    avg_size: int = 1
    plan: dict = field(default_factory=dict)  # partition -> [(file id, inserts, small)]

    def storage(self) -> Storage:
        return get_storage(self.path)

    def rows(self, batch: pa.Table, subset: bool = False) -> pa.Table:
        """``batch`` conformed as WriteClient.prepare conforms it (without helper columns);
        ``subset``: only to the columns the batch has (the check reads just a few)."""
        schema = self.data_schema
        if self.op is Operation.DELETE:
            # A delete keeps only the key and partition columns, as prepare does.
            batch = batch.select([c for c in batch.column_names if c in schema.names])
        elif subset:
            schema = pa.schema([f for f in schema if f.name in batch.column_names])
        return conform(batch, schema)

    def check_ordering(self, rows: pa.Table) -> None:
        ordering = self.context.config.ordering_field
        if self.context.spec.uses_ordering and self.op is not Operation.DELETE and rows.column(ordering).null_count:
            raise RecordKeyError(f"ordering field {ordering!r} has "
                                 f"{rows.column(ordering).null_count} null value(s)",
                                 help="give every record an ordering value")


def _failure_bytes(fn, *args) -> bytes | None:
    out = Guarded(lambda a: fn(*a))(args)
    return pickle.dumps(out) if isinstance(out, Failure) else None


def _raise_failure(blob: bytes) -> None:
    f: Failure = pickle.loads(blob)
    if f.error is not None:
        f.error.add_note(f"raised on a Spark executor; remote traceback:\n{f.remote_traceback}")
        raise f.error
    raise SparkTaskError(f"a Spark task failed: {f.type_name}: {f.message}",
                         help="fix the cause (the executor's traceback follows) and write again")


def _collect(df: "DataFrame", what: str) -> list:
    from py4j.protocol import Py4JJavaError  # noqa: PLC0415
    from pyspark.errors import PySparkException  # noqa: PLC0415
    try:
        return df.collect()
    except (Py4JJavaError, PySparkException) as e:
        raise SparkTaskError(f"the Spark job that {what} failed: {java_failure_summary(e)}",
                             help="see the executor logs; the write can be run again") from e


def _check(df: "DataFrame", job: _Job, client: WriteClient) -> dict[str, int]:
    """Keys, partition paths and ordering values of every row, checked on the executors and
    only on the columns they need (Spark prunes the rest); returns the rows per partition path
    (which size the shuffles)."""
    def per_task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        keygen = job.context.keygen
        seen: dict[str, int] = {}

        def one(b: pa.RecordBatch) -> None:
            rows = job.rows(pa.Table.from_batches([b]), subset=True)
            keygen.record_keys(rows)
            counts = pc.value_counts(keygen.partition_paths(rows, row_offset=None).combine_chunks())
            for v, c in zip(counts.field("values").to_pylist(), counts.field("counts").to_pylist()):
                seen[v] = seen.get(v, 0) + c
            job.check_ordering(rows)

        for b in batches:
            err = _failure_bytes(one, b)
            if err is not None:
                yield pa.record_batch({"partition": pa.array([None], pa.string()),
                                       "n": pa.array([0], pa.int64()), ERROR: pa.array([err], pa.binary())})
                return
        yield pa.record_batch({"partition": pa.array(list(seen), pa.string()),
                               "n": pa.array(list(seen.values()), pa.int64()),
                               ERROR: pa.nulls(len(seen), pa.binary())})

    needed = [*client.keygen.required_columns(), client.config.ordering_field]
    cols = [c for c in df.columns if c in needed]
    out = _collect(df.select(*cols).mapInArrow(per_task, f"partition string, n long, {ERROR} binary"),
                   "checks the record keys")
    counts: dict[str, int] = {}
    for r in out:
        if r[ERROR] is not None:
            _raise_failure(r[ERROR])
        counts[r["partition"]] = counts.get(r["partition"], 0) + r["n"]
    # Each task checked its values; one depth for the table is a check of all tasks' paths.
    check_paths(pa.chunked_array([pa.array(list(counts), pa.string())]),
                depth=committed_partition_depth(client.active, client.active.load()), row_offset=None)
    return counts


def _keyed(df: "DataFrame", job: _Job) -> "DataFrame":
    """``df`` with the helper columns prepare adds, plus the bucket, computed per batch."""
    from pyspark.sql.types import (  # noqa: PLC0415
        BinaryType, BooleanType, IntegerType, LongType, StringType, StructField, StructType)

    def per_task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext  # noqa: PLC0415
        cfg, keygen = job.context.config, job.context.keygen
        offset = TaskContext.get().partitionId() << _SEQ_SHIFT
        for b in batches:
            n = b.num_rows
            box: dict = {}

            def one(b=b):
                rows = job.rows(pa.Table.from_batches([b]))
                keys = keygen.record_keys(rows)
                delete = pa.repeat(True, n) if job.op is Operation.DELETE else \
                    delete_flags(rows).combine_chunks() if n else pa.array([], pa.bool_())
                parts = keygen.partition_paths(rows, row_offset=None)
                box.update({KEY: keys, PARTITION: parts,
                            SEQ: pa.array(np.arange(offset + 1, offset + n + 1, dtype=np.int64)),
                            DELETE: delete, UNCONDITIONAL: pa.repeat(job.op is Operation.DELETE, n),
                            BUCKET: pa.array(job.context.buckets.buckets(pa.table({KEY: keys, PARTITION: parts}), cfg)
                                             if n and job.mode is Routing.BUCKET else np.zeros(n, np.int32))})

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


def _targets(job: _Job, rows: pa.Table) -> list:
    """This task's file groups and their rows (sorted by SEQ, precombined where needed)."""
    op, context = job.op, job.context
    if job.mode is Routing.INDEXED:
        out = []
        new = {(p, f) for p, slots in job.plan.items() for f, _, small in slots if not small}
        small = {(p, f) for p, slots in job.plan.items() for f, _, s in slots if s}
        for (partition, fid), part in assign.split_groups(rows, [PARTITION, assign.FID]):
            if fid is None:  # deletes of keys the table does not hold
                continue
            part = part.drop_columns([assign.FID])
            if (partition, fid) in new:
                part = part.filter(pc.invert(part.column(DELETE)))
                tg = assign.new_target(partition, fid, None, None, TargetKind.CREATE)
                tg.inserts = part.num_rows
            else:
                tg = assign.update_target(context, partition, fid, job.latest, job.pending,
                                          (partition, fid) in small)
            tg.rows.append(part)
            out.append(tg)
        return out
    if job.mode is Routing.BUCKET and combines(context, op) and rows.num_rows > 1:
        rows = precombine(context, rows)
    if op is Operation.BULK_INSERT:
        rows = rows.filter(pc.invert(rows.column(DELETE))).sort_by([(KEY, "ascending")])
        if job.mode is Routing.BULK:
            return assign.bulk_targets(rows, job.avg_size, context.write_config)
    return assign.bucket_targets(context, rows, job.latest, job.pending)


def _task_rows(job: _Job, table: pa.Table, keep: tuple[str, ...] = ()) -> pa.Table:
    """A write task's rows as WriteClient.prepare makes them: data conformed, helper columns
    (and ``keep`` of the routing ones) after."""
    helpers = table.select([c for c in (KEY, PARTITION, SEQ, DELETE, UNCONDITIONAL, assign.FID, *keep)
                            if c in table.column_names])
    data = job.rows(table.drop_columns(
        [c for c in table.column_names if c in _HELPER_TYPES or c in (ERROR, assign.FID)]))
    return pa.Table.from_arrays(data.columns + helpers.columns, names=data.column_names + helpers.column_names)


def _refusal(batch: pa.RecordBatch) -> pa.Array | None:
    """The failure an earlier task put on a batch (a key it could not compute), if any."""
    errors = batch.column(ERROR).drop_null()
    return errors[:1] if len(errors) else None


def _write_task(job: _Job):
    """The per-task function: this task's file groups, written by their handles; held whole
    while the task's rows fit in an eighth of ``write.task.max.size``, else spilled
    (:func:`_write_spilled`)."""

    def per_task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext  # noqa: PLC0415
        tc = TaskContext.get()
        pid = tc.partitionId()
        rest = (b for b in batches if b.num_rows)
        held: list[pa.RecordBatch] = []
        nbytes, refused = 0, []
        whole = job.context.write_config.task_max_bytes // _WHOLE_SHARE
        for b in rest:
            bad = _refusal(b)
            if bad is not None:
                yield pa.record_batch({"stat": pa.nulls(1, pa.string()), ERROR: bad})
                return
            held.append(b)
            nbytes += b.nbytes
            if nbytes > whole:
                break
        if not held:
            return

        def run() -> list[str]:
            ctx = job.context.handle_context(job.storage(), job.data_schema, job.instant,
                                             stage=tc.stageId(), attempt=tc.attemptNumber(), op=job.op)
            if nbytes > whole:
                with bounded_allocator():  # as the Python writer's (lakehouse.write.memory)
                    stats = _write_spilled(job, ctx, pid, held, rest, refused)
            else:
                rows = _task_rows(job, pa.Table.from_batches(held)).sort_by(SEQ)
                stats = []
                # Several file groups can share a task; the task number keeps their write tokens
                # and sequence numbers apart, as the Python path's per-target numbering does.
                for i, tg in enumerate(_targets(job, rows)):
                    part = assign.materialize(tg.rows)
                    stats += assign.run_target(ctx, tg, part, pid * _TASK_STRIDE + i)
            # A task lost here (executor gone) is retried by Spark: its new attempt writes files
            # under another write token, and phase 2 removes the lost attempt's.
            fault_point("spark.write_task.after_files")
            return [json.dumps(s.to_json()) for s in stats]

        box: list = []
        err = _failure_bytes(lambda: box.extend(run()))
        if refused:
            yield pa.record_batch({"stat": pa.nulls(1, pa.string()), ERROR: refused[0]})
        elif err is not None:
            yield pa.record_batch({"stat": pa.nulls(1, pa.string()), ERROR: pa.array([err], pa.binary())})
        elif box:
            yield pa.record_batch({"stat": pa.array(box, pa.string()), ERROR: pa.nulls(len(box), pa.binary())})
    return per_task


def _write_spilled(job: _Job, ctx, pid: int, held: list[pa.RecordBatch],
                   rest: Iterator[pa.RecordBatch], refused: list) -> list[WriteStat]:
    """A write task's rows larger than an eighth of ``write.task.max.size``: spilled by the group each goes
    to (its file group, its bucket, or for a bulk insert a run of an eighth of the budget, in
    the order the range shuffle sorted them), then written a group at a time, a group larger
    than an eighth of the budget in parts (lakehouse.write.spill). The file groups are the ones
    the driver planned; only a bulk insert's runs roll over into new files as they fill. A
    refused batch (``refused``) stops the task before any file is written."""
    # The worker holds more than the writer's own rows (pyspark's stream from the JVM and its
    # buffers; the first task's imports): the spill works to half the budget (measured: a
    # Copy-On-Write task spilling to the whole budget peaked at 2.0-2.6x it, 2x the Python
    # writer's peak on the same rows).
    budget = job.context.write_config.task_max_bytes // 2
    route = {Routing.BUCKET: ([PARTITION, BUCKET], "bucket"), Routing.INDEXED: ([PARTITION, assign.FID], "fg"),
             Routing.BULK: ([PARTITION, _RUN], "new")}
    by, kind = route[job.mode]
    run_bytes = max(1, budget // 8)
    with Spill(budget) as sp:
        seen = 0
        for b in _chain(held, rest):
            bad = _refusal(b)
            if bad is not None:
                refused.append(bad)
                return []
            rows = _task_rows(job, pa.Table.from_batches([b]), keep=(BUCKET,) if kind == "bucket" else ())
            if kind == "fg":  # deletes of keys the table does not hold: nothing to write
                rows = rows.filter(pc.is_valid(rows.column(assign.FID)))
            elif kind == "new":
                rows = rows.append_column(_RUN, pa.repeat(pa.scalar(seen // run_bytes, pa.int64()), rows.num_rows))
                seen += rows.nbytes
            if rows.num_rows:
                sp.add_block(*spill.block(rows, by, lambda k: (kind, k[0], k[1])))
            del b, rows
            release_unused()
        sp.finish()
        created = frozenset((p, f) for p, slots in job.plan.items() for f, _, small in slots if not small)
        small = frozenset((p, f) for p, slots in job.plan.items() for f, _, s in slots if s)
        return spill.write_groups(job.context, job.op, dataclasses.replace(ctx, packed_bloom=True), sp, job.latest,
                                  job.pending, job.avg_size, budget, first_task=pid * _TASK_STRIDE,
                                  parallelism=1, created=created, small=small, by_seq=True)


def _chain(held: list[pa.RecordBatch], rest: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``held`` then ``rest``, letting go of each held batch once taken."""
    while held:
        yield held.pop(0)
    yield from rest


def _precombine_task(job: _Job):
    """Duplicate keys in a batch reduced to one record each, as the Python path's prepare does;
    the shuffle before it brought every copy of a key into one task."""
    def per_task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        batches = list(batches)
        if not batches:
            return
        table = pa.Table.from_batches(batches)
        if table.column(ERROR).null_count < table.num_rows:
            yield from table.filter(pc.is_valid(table.column(ERROR))).to_batches()
            return
        out = precombine(job.context, table.sort_by(SEQ)) if table.num_rows > 1 else table
        yield from out.select(table.column_names).cast(table.schema).to_batches()
    return per_task


def _route_task(job: _Job):
    """Tagged records to their file groups (FID; null for inserts), partition moves included."""
    def per_task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            t = pa.Table.from_batches([b])
            loc_cols = [c for c in (LOC_PARTITION, LOC_FILE_ID, LOC_ORDERING) if c in t.column_names]
            loc = t.select(loc_cols)
            rows = t.drop_columns(loc_cols + [c for c in (LOC_KEY,) if c in t.column_names])
            yield from assign.route(job.context, rows, loc).to_batches()
    return per_task


def _pick_task(job: _Job):
    """Each insert's file group, by a hash of its key weighted by the driver's insert plan (as
    Hudi's UpsertPartitioner does): the same on a retried task, so no record moves."""
    weights = {p: (np.cumsum([c for _, c, _ in slots]) / max(1, sum(c for _, c, _ in slots)),
                   pa.array([f for f, _, _ in slots], pa.string()))
               for p, slots in job.plan.items() if slots}

    def per_task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            t = pa.Table.from_batches([b])
            fid = t.column(assign.FID).combine_chunks()
            insert = pc.fill_null(pc.and_(pc.is_null(fid), pc.invert(t.column(DELETE).combine_chunks())), False)
            if pc.any(insert).as_py():
                ins = np.flatnonzero(insert.to_numpy(zero_copy_only=False))
                parts = t.column(PARTITION).combine_chunks().take(pa.array(ins))
                r = (murmur_hash(t.column(KEY).combine_chunks().take(pa.array(ins))).astype(np.int64)
                     % (1 << 31)) / float(1 << 31)
                chosen = pa.nulls(len(ins), pa.string())
                for p in pc.unique(parts).to_pylist():
                    cum, fids = weights[p]
                    mask = pc.equal(parts, p)
                    sel = np.flatnonzero(mask.to_numpy(zero_copy_only=False))
                    idx = np.minimum(np.searchsorted(cum, r[sel], side="right"), len(fids) - 1)
                    chosen = pc.replace_with_mask(chosen, mask, fids.take(pa.array(idx)))
                picked = pc.replace_with_mask(fid, insert, chosen)
                t = t.set_column(t.schema.get_field_index(assign.FID), assign.FID, picked)
            yield from t.to_batches()
    return per_task


def _write_files(client: WriteClient, df: "DataFrame", job: _Job, view: FileSystemView, timeline,
                 counts: dict[str, int]) -> list[WriteStat]:
    cfg = job.context.config
    index = cfg.index_type
    partitions = set(counts)
    par = df.sparkSession.sparkContext.defaultParallelism
    # Shuffles sized by the batch: a small batch in a few tasks, a big one in enough to keep
    # every core busy (and no task with more than about one file's worth of rows to write).
    avg_size = client.avg_record_size(timeline)
    job.avg_size = avg_size
    per_file = assign.records_per_file(avg_size, job.context.write_config)
    rows = sum(counts.values())
    tasks = max(1, min(par * 4, math.ceil(rows / per_file)))
    global_ = index.is_global and index is not IndexType.BUCKET
    # Only the file groups a write task may touch travel to the executors.
    job.latest = {(g.partition, g.file_id): g.slices[-1] for g in view.file_groups()
                  if global_ or g.partition in partitions}
    if index is IndexType.BUCKET:
        job.mode = Routing.BUCKET
        rings = job.context.buckets.rings
        buckets = sum(len(rings[p].nodes) for p in partitions) if rings is not None else len(partitions) * cfg.bucket_num
        tasks = max(1, min(buckets, par * 4))
        return _run_writes(_keyed(df, job).repartition(tasks, PARTITION, BUCKET), job)
    keyed = _keyed(df, job)
    op = job.op
    if combines(job.context, op):
        by = [KEY] if global_ else [PARTITION, KEY]
        keyed = keyed.repartition(tasks, *by).mapInArrow(_precombine_task(job), keyed.schema)
    if op is Operation.BULK_INSERT:
        job.mode = Routing.BULK
        return _run_writes(keyed.repartitionByRange(tasks, PARTITION, KEY), job)
    job.mode = Routing.INDEXED
    from pyspark.sql import functions as F  # noqa: PLC0415
    from pyspark.sql.types import StringType, StructField, StructType  # noqa: PLC0415
    if op is Operation.INSERT:  # inserts skip the index, as in Hudi
        files, ordering = [], None
    else:
        files = [g.latest_base_file for g in view.file_groups()
                 if g.latest_base_file is not None and (global_ or g.partition in partitions)]
        ordering = cfg.ordering_field if global_ and job.context.spec.uses_ordering else None
    # On MOR the index sees merged keys (log deletes count), as WriteClient._assign does.
    ijob = IndexJob(job.path, job.context, files, ordering, cfg.is_mor,
                    {(s.partition, s.file_id): s for s in view.latest_slices()} if cfg.is_mor else {})
    ordering_type = job.data_schema.field(ordering).type if ordering else None
    tagged = tag(keyed, ijob, index, ordering_type)
    routed_schema = StructType(keyed.schema.fields + [StructField(assign.FID, StringType(), True)])
    routed = tagged.mapInArrow(_route_task(job), routed_schema).persist()
    try:
        counts = _collect(routed.where((F.col(assign.FID).isNull() & ~F.col(DELETE)) | F.col(ERROR).isNotNull())
                          .groupBy(PARTITION).agg(F.count(F.lit(1)).alias("n"),
                                                  F.first(ERROR, ignorenulls=True).alias("err")),
                          "counts the inserts")
        for r in counts:
            if r["err"] is not None:
                _raise_failure(r["err"])
        plan = assign.plan_inserts(job.context, {r[PARTITION]: r["n"] for r in counts}, job.latest,
                                   job.pending, avg_size)
        job.plan = {p: [(s.file_id, s.count, s.small) for s in slots] for p, slots in plan.items()}
        picked = routed.mapInArrow(_pick_task(job), routed_schema)
        return _run_writes(picked.repartition(tasks, PARTITION, assign.FID), job)
    finally:
        routed.unpersist()


def _run_writes(shuffled: "DataFrame", job: _Job) -> list[WriteStat]:
    out = _collect(shuffled.mapInArrow(_write_task(job), f"stat string, {ERROR} binary"),
                   f"writes instant {job.instant}")
    for r in out:
        if r[ERROR] is not None:
            _raise_failure(r[ERROR])
    return [WriteStat.from_json(json.loads(r["stat"])) for r in out]


def _file_writer(client: WriteClient, df: "DataFrame", job: _Job, counts: dict[str, int]):
    """Phase 1's data files, written by the executors (WriteClient.write_prepared runs the rest
    of phase 1, as for a batch written in this process)."""
    def write_files(context: WriteContext, t: str, timeline) -> tuple[list[WriteStat], None]:
        job.instant, job.context = t, context
        # The partitions the rows go to (WriteClient.write_scope): all of them for a global index.
        scope = None if job.context.config.index_type.is_global else sorted(counts)
        view, timeline = client.write_view(timeline, scope)
        job.pending = client.pending_compaction_fgs(timeline)
        job.context = client.bucket_context(context.for_clustering(client.pending_clustering_fgs(timeline)),
                                            sorted(counts), timeline)
        if not counts:
            return [], None
        ensure_partitions(client.storage, set(counts), t)
        return _write_files(client, df, job, view, timeline, counts), None
    return write_files


def _estimated_largest_partition(df: "DataFrame", counts: dict[str, int]) -> int:
    """In-memory bytes of the largest partition of ``df``, from the bytes of a sample of its
    rows (what a table's first write sizes its bucket count by: lakehouse.write.bucket_sizing)."""
    if not counts:
        return 0
    sample = df.limit(_SIZE_SAMPLE_ROWS).toArrow()
    per_row = sample.nbytes / max(1, sample.num_rows)
    return int(max(counts.values()) * per_row)


__all__ = ["write_dataframe", "arrow_schema"]
