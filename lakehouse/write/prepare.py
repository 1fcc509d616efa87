"""Phase 0 of a write: a batch checked against the table and turned into keyed rows.

Everything that can be wrong with a batch (missing key or ordering columns, null values, an
incompatible schema, missing table columns) is found here, before the instant exists or any file
is written. The rows get the helper columns the writer works with: the record key, the partition
path, the batch position (SEQ), the delete flag and whether a delete is unconditional.

A batch larger than ``write.task.max.size`` that the write can take in chunks (see
:mod:`lakehouse.write.buffer`) is checked chunk by chunk first and then prepared again chunk by
chunk as the write goes, so the helper columns never exist for the whole batch at once. (A
smaller batch is prepared whole: the write then holds about its size again, within the budget.)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse.errors import RecordKeyError
from lakehouse.config import MergeMode
from lakehouse.columns import DELETE, KEY, PARTITION, SEQ, UNCONDITIONAL
from lakehouse.merge import MergeSpec, delete_flags, resolve
from lakehouse.partition_path import check_paths
from lakehouse.schema import arrow_to_avro_schema
from lakehouse.timeline.schema_resolver import recorded_schema
from lakehouse.write import bucket_sizing
from lakehouse.write.memory import release_unused
from lakehouse.write.operation import Operation
from lakehouse.write.source import as_source
from lakehouse.write.validate import check_missing_columns, conform, reconcile
from lakehouse.write.validate import data_schema as data_schema_of

if TYPE_CHECKING:
    from lakehouse.timeline.active import ActiveTimeline
    from lakehouse.write.context import WriteContext



@dataclass
class Prepared:
    operation: Operation
    rows: pa.Table | None  # data columns + KEY, PARTITION, SEQ, DELETE, UNCONDITIONAL; None: chunked
    data_schema: pa.Schema
    schema_changed: bool
    record_schema: bool = True  # false for a delete on a table that has no schema yet
    chunks: Callable[[], Iterator[pa.Table]] | None = field(default=None, repr=False)
    # In-memory bytes of the batch's largest partition (measured where a table's first write
    # sizes its bucket count: lakehouse.write.bucket_sizing; else 0).
    largest_partition_bytes: int = 0
    # Taken in chunks: the batch's records per partition path, its size in memory and its
    # records (else None and 0).
    partition_rows: dict[str, int] | None = None
    source_bytes: int = 0
    source_rows: int = 0

    def batch_partitions(self) -> set[str]:
        """The partition paths the batch's records go to."""
        if self.rows is not None:
            return set(pc.unique(self.rows.column(PARTITION)).to_pylist())
        assert self.partition_rows is not None
        return set(self.partition_rows)

    def iter_rows(self) -> Iterator[pa.Table]:
        """The prepared rows, whole or chunk by chunk (each chunk prepared as it is needed)."""
        if self.rows is not None:
            yield self.rows
        else:
            assert self.chunks is not None
            yield from self.chunks()


def prepare(context: "WriteContext", active: "ActiveTimeline", batch, op: Operation, *,
            budget: int | None = None, chunk_bytes: int | None = None) -> Prepared:
    """``batch`` (a table, an Arrow stream or a :class:`~lakehouse.write.source.BatchSource`)
    checked and keyed for ``op`` against the table's schema on ``active``. ``budget`` (bytes): a batch larger than it is prepared in chunks
    of ``chunk_bytes`` (default a sixteenth of it), as the writer takes them, and is never held
    whole."""
    source = as_source(batch)
    schema = source.schema
    keygen = context.keygen
    for col, what in [*((c, "record key") for c in keygen.record_key_fields),
                      *((c, "partition") for c in keygen.partition_fields)]:
        if col not in schema.names:
            raise RecordKeyError(f"{what} column {col!r} is missing from the batch",
                                 help=f"add the column; every record needs its {what} value")
    timeline = active.load()
    table_schema = recorded_schema(active, context.config, timeline)
    keep = None
    if op.keys_only:
        # Deleting from a table without data commits an empty instant, as Hudi does.
        data_schema = table_schema if table_schema is not None else data_schema_of(
            pa.schema([schema.field(c) for c in keygen.required_columns() if c in schema.names]))
        # Only the key and partition columns matter; other columns of the batch are ignored.
        keep = [c for c in schema.names if c in data_schema.names]
        changed = False
    else:
        data_schema = reconcile(schema, table_schema)
        changed = table_schema is None or data_schema != table_schema
        if changed:
            arrow_to_avro_schema(data_schema, context.config.name, with_meta_fields=True)
    record_schema = table_schema is not None or not op.keys_only

    depth = [committed_partition_depth(active, timeline)]

    def rows_of(chunk: pa.Table, offset: int) -> pa.Table:
        if keep is not None:
            chunk = chunk.select(keep)
        rows = _keyed_rows(context, chunk, op, data_schema, offset)
        # One depth for every partition path of the table, this batch's chunks included.
        depth[0] = check_paths(rows.column(PARTITION), depth=depth[0], row_offset=offset) or depth[0]
        return rows

    measure = bucket_sizing.is_provisional(context.config) and not op.keys_only
    row_bytes = source.nbytes / max(1, source.num_rows)
    if budget is None or source.nbytes <= budget:
        rows = rows_of(source.whole(), 0)
        if not op.keys_only:
            # Last: a batch's own errors (keys, types, ordering values) first.
            check_missing_columns(schema.empty_table(), table_schema, context.write_config, context.spec)
        largest = int(_largest_partition(rows, {}) * row_bytes) if measure else 0
        return Prepared(op, rows, data_schema, changed, record_schema, largest_partition_bytes=largest)

    def chunks() -> Iterator[pa.Table]:
        offset = 0
        for chunk in source.chunks(max(1, chunk_bytes or budget // 16)):
            n = chunk.num_rows
            yield rows_of(chunk, offset)
            del chunk
            release_unused()  # the chunk's work is done: see lakehouse.write.memory
            offset += n

    counts: dict[str, int] = {}
    for rows in chunks():  # every chunk's errors before any file is written
        _largest_partition(rows, counts)
    if not op.keys_only:
        check_missing_columns(schema.empty_table(), table_schema, context.write_config, context.spec)
    largest = int(max(counts.values(), default=0) * row_bytes) if measure else 0
    return Prepared(op, None, data_schema, changed, record_schema, chunks=chunks,
                    largest_partition_bytes=largest, partition_rows=counts,
                    source_bytes=source.nbytes, source_rows=source.num_rows)


def committed_partition_depth(active, timeline) -> int | None:
    """How many folders deep the table's partition paths are, from its newest completed write
    that names a partition (None: no such write on the active timeline, or an unpartitioned
    table). Commit metadata is cached, and the newest is read for the schema anyway."""
    for inst in reversed(timeline.completed_writes().instants):
        meta = active.commit_metadata(inst)
        for p in (*meta.partition_to_write_stats, *(meta.partition_to_replace_file_ids or {})):
            if p:
                return p.count("/") + 1
    return None


def _largest_partition(rows: pa.Table, counts: dict[str, int]) -> int:
    """Adds ``rows``' records per partition to ``counts``; returns the largest count so far."""
    vc = pc.value_counts(rows.column(PARTITION))
    for p, n in zip(vc.field("values").to_pylist(), vc.field("counts").to_pylist()):
        counts[p] = counts.get(p, 0) + n
    return max(counts.values(), default=0)


def _keyed_rows(context: "WriteContext", batch: pa.Table, op: Operation, data_schema: pa.Schema,
                offset: int) -> pa.Table:
    """``batch`` conformed to ``data_schema`` with the helper columns; SEQ counts from
    ``offset`` + 1 (the position in the whole batch)."""
    rows = conform(batch, data_schema)
    n = rows.num_rows
    keys = context.keygen.record_keys(rows)
    partitions = context.keygen.partition_paths(rows, row_offset=offset)
    ordering = context.config.ordering_field
    if context.spec.uses_ordering and not op.keys_only and ordering not in rows.column_names:
        raise RecordKeyError(f"ordering field {ordering!r} is missing from the batch",
                             help="add the column; event-time merging needs it on every record")
    if context.spec.uses_ordering and not op.keys_only and rows.column(ordering).null_count:
        raise RecordKeyError(f"ordering field {ordering!r} has "
                             f"{rows.column(ordering).null_count} null value(s)",
                             help="give every record an ordering value")
    if op.keys_only:
        is_delete = pa.chunked_array([pa.repeat(True, n)], pa.bool_()) if n else pa.chunked_array([], pa.bool_())
        uncond = is_delete
    else:
        is_delete = delete_flags(rows)
        uncond = pa.chunked_array([pa.repeat(False, n)], pa.bool_()) if n else pa.chunked_array([], pa.bool_())
    rows = (rows.append_column(KEY, keys).append_column(PARTITION, partitions)
            .append_column(SEQ, pa.array(np.arange(offset + 1, offset + n + 1, dtype=np.int64)))
            .append_column(DELETE, is_delete).append_column(UNCONDITIONAL, uncond))
    if combines(context, op) and n > 1:
        rows = precombine(context, rows)
    return rows


def combines(context: "WriteContext", op: Operation) -> bool:
    """Whether ``op`` reduces duplicate keys in a batch first (hoodie.combine.before.*;
    a delete always does)."""
    return {Operation.UPSERT: context.write_config.combine_before_upsert,
            Operation.DELETE: True}.get(op, context.write_config.combine_before_insert)


def precombine_spec(spec: MergeSpec, rows: pa.Table) -> MergeSpec:
    """How duplicates within one batch reduce. Commit-time ordering (Hudi's
    OverwriteWithLatestAvroPayload) still orders a batch's own versions of a key by the ordering
    field: its ``preCombine`` keeps the greater ordering value (a tie: the later record), while
    against the stored record the incoming one always wins (``combineAndGetUpdateValue``)."""
    if (spec.mode is MergeMode.COMMIT_TIME_ORDERING and spec.ordering_field
            and spec.ordering_field in rows.column_names):
        return MergeSpec(MergeMode.EVENT_TIME_ORDERING, spec.ordering_field)
    return spec


def precombine(context: "WriteContext", rows: pa.Table) -> pa.Table:
    # Distinct keys are distinct (partition, key) pairs too: the common case needs no joined key.
    if pc.count_distinct(rows.column(KEY)).as_py() == rows.num_rows:
        return rows
    global_ = context.config.index_type.is_global
    dedup_key = rows.column(KEY) if global_ else pc.binary_join_element_wise(
        rows.column(PARTITION), rows.column(KEY), "\x00")
    if pc.count_distinct(dedup_key).as_py() == rows.num_rows:
        return rows
    original_key = rows.column(KEY)
    tmp = rows.set_column(rows.schema.get_field_index(KEY), KEY, dedup_key).append_column(
        "__lh_orig_key", original_key)
    out = resolve(tmp, precombine_spec(context.spec, rows), keep_deletes=True)
    out = out.set_column(out.schema.get_field_index(KEY), KEY, out.column("__lh_orig_key"))
    return out.drop_columns(["__lh_orig_key"]).sort_by(SEQ)
