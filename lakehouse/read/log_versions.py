"""The committed log records of a file slice as versions for the merge: each visible data or
delete block decoded in log order, with the merge helper columns (key, arrival sequence, delete
flags), pinned keys only, held within the merge budget."""

from __future__ import annotations

from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse.columns import DELETE, KEY, RECORD_KEY, SEQ, UNCONDITIONAL
from lakehouse.config import MergeMode
from lakehouse.log.block import BlockType, LogBlock
from lakehouse.log.block import decode_avro_data_block, decode_delete_block, decode_parquet_data_block
from lakehouse.log.reader import check_committed_blocks, read_log_blocks
from lakehouse.merge import AFTER_CUT, delete_flags, resolve
from lakehouse.read.slice_context import SliceReadContext
from lakehouse.schema import conform_table


# Decoded Arrow records per byte of (zstd parquet or avro) log file, roughly: a slice whose log
# files exceed the merge budget divided by this is read one log file at a time.
LOG_EXPANSION = 4


def file_blocks(lf, ctx: SliceReadContext, *, count: bool = True) -> list[LogBlock]:
    try:
        data = ctx.storage.read(lf.path)
    except FileNotFoundError:
        # Gone since the listing: a rollback removes a log file only when the failed write
        # created it (uncommitted blocks only) and a clean only outside the latest slices,
        # so its blocks are not part of what this read shows.
        ctx.stats["vanished_logs"] += count
        return []
    file_blocks = read_log_blocks(data, ctx.storage.uri(lf.path))
    # A torn block of a failed write is expected (skipped below); one whose header names a
    # committed instant is committed data the storage lost: say so, never read on with less.
    headless = not file_blocks or any(b.block_type is BlockType.CORRUPT and b.instant_time is None
                                      for b in file_blocks)
    size = ctx.committed_log_size(lf.path) if headless and ctx.committed_log_size else None
    check_committed_blocks(file_blocks, ctx.storage.uri(lf.path), ctx.is_visible, size)
    return file_blocks


def rolled_back_instants(blocks: list[LogBlock]) -> set[str]:
    return {b.target_instant_time for b in blocks
            if b.block_type is BlockType.COMMAND and b.target_instant_time}


def log_blocks(log_files, ctx: SliceReadContext, streaming: bool) -> Iterator[tuple[int, LogBlock, set[str]]]:
    """(sequence, block, rolled-back instants) of every block, in log order. ``streaming``: one
    log file's bytes held at a time (the rollback command blocks are found in a first pass, as a
    command may follow the blocks it cancels)."""
    if not streaming:
        blocks = [b for lf in log_files for b in file_blocks(lf, ctx)]
        rolled_back = rolled_back_instants(blocks)
        for seq, b in enumerate(blocks, start=1):
            yield seq, b, rolled_back
        return
    rolled_back = set()
    for lf in log_files:
        rolled_back |= rolled_back_instants(file_blocks(lf, ctx, count=False))
    seq = 0
    for lf in log_files:
        for b in file_blocks(lf, ctx):
            seq += 1
            yield seq, b, rolled_back


BLOCK_SEQ = 1 << 32  # a block's records arrive at SEQ = its place in the log * BLOCK_SEQ + row


def decoded(b: LogBlock, rolled_back: set[str], ctx: SliceReadContext) -> bool:
    """Whether a read decodes block ``b``: a data or delete block of a visible instant that no
    rollback command cancels (a torn block is counted and skipped)."""
    if b.block_type is BlockType.CORRUPT:
        ctx.stats["corrupt_blocks"] += 1
        return False
    if b.block_type is BlockType.COMMAND:
        return False
    t = b.instant_time
    return t is not None and t not in rolled_back and ctx.is_visible(t)


def block_versions(seq: int, b: LogBlock, ctx: SliceReadContext, target: pa.Schema) -> pa.Table:
    """The records of data or delete block ``b``, the ``seq``-th block of its slice's logs, in
    ``target``'s columns with the merge helper columns."""
    ctx.stats["log_blocks"] += 1
    if b.block_type in (BlockType.AVRO_DATA, BlockType.PARQUET_DATA):
        rows = decode_avro_data_block(b) if b.block_type is BlockType.AVRO_DATA else \
            decode_parquet_data_block(b, None if ctx.columns is None and ctx.key_field is None
                                      else ctx.needed_columns(), copies=ctx.copies)
        rows = conform_table(rows, target, extra="ignore")
        return with_helpers(rows, ctx.record_keys(rows), seq * BLOCK_SEQ, delete_flags(rows),
                            pa.repeat(False, rows.num_rows))
    dels = decode_delete_block(b)
    n = dels.num_rows
    ordering = ctx.spec.ordering_field
    cols = {}
    if ordering and ordering in target.names and "ordering_value" in dels.column_names:
        try:
            cols[ordering] = pc.cast(dels.column("ordering_value"), target.field(ordering).type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            cols[ordering] = pa.nulls(n, target.field(ordering).type)
    arrays = [cols.get(f.name, pa.nulls(n, f.type)) if f.name != RECORD_KEY
              else dels.column("record_key") for f in target]
    rows = pa.Table.from_arrays(arrays, schema=target)
    uncond = dels.column("unconditional") if "unconditional" in dels.column_names \
        else pa.repeat(True, n)
    return with_helpers(rows, dels.column("record_key"), seq * BLOCK_SEQ, pa.repeat(True, n), uncond)


def log_versions(log_files, ctx: SliceReadContext, target: pa.Schema,
                 streaming: bool) -> Iterator[pa.Table]:
    """The committed log records of a slice, a table with the merge helper columns per block."""
    for seq, b, rolled_back in log_blocks(log_files, ctx, streaming):
        if decoded(b, rolled_back, ctx):
            yield block_versions(seq, b, ctx, target)


def fold(versions: list[pa.Table], ctx: SliceReadContext) -> pa.Table:
    """Log versions merged down to one per key, deletes kept, helpers kept: the log level of the
    two-level merge. It is associative (the winner per key is a maximum, a cutting delete keeps
    its place), so folding in steps gives what folding all at once gives. Not for partial
    updates (every version takes part there)."""
    merged = resolve(versions[0] if len(versions) == 1 else pa.concat_tables(versions, promote_options="permissive"),
                     ctx.spec, keep_deletes=True)
    if AFTER_CUT in merged.column_names:  # read by partial updates only
        merged = merged.drop_columns([AFTER_CUT])
    return merged


def held_logs(versions: Iterator[pa.Table], ctx: SliceReadContext) -> list[pa.Table]:
    """The log versions, merged down to one per key whenever they pass the memory budget
    (:func:`fold`): a backlog of many rounds of updates to the same keys then holds about one
    round."""
    held: list[pa.Table] = []
    size = 0
    limit = ctx.merge_max_bytes
    foldable = limit is not None and ctx.spec.mode is not MergeMode.PARTIAL_UPDATE
    for t in versions:
        held.append(t)
        size += t.nbytes
        if foldable and size > limit:
            merged = fold(held, ctx)
            held, size = [merged], merged.nbytes
            ctx.stats["log_folds"] += 1
            # Distinct keys past the budget: fold again only when the held versions doubled.
            limit = max(limit, 2 * size)
    return held


def with_helpers(table: pa.Table, keys: pa.ChunkedArray | pa.Array, seq_base: int,
                  is_delete: pa.ChunkedArray | pa.Array, unconditional) -> pa.Table:
    n = table.num_rows
    seq = pa.array(np.arange(seq_base, seq_base + n, dtype=np.int64))
    return (table.append_column(KEY, keys).append_column(SEQ, seq)
            .append_column(DELETE, is_delete).append_column(UNCONDITIONAL, unconditional))


def visible_logs(log_files, ctx: SliceReadContext) -> list[pa.Table]:
    """The committed log versions of ``log_files`` with the merge helpers, in the columns the
    merge needs, only the pinned keys' (``ctx.keys``), held within the merge budget."""
    target = pa.schema([ctx.schema.field(c) for c in ctx.needed_columns()])
    streaming = ctx.merge_max_bytes is not None and \
        sum(lf.size or 0 for lf in log_files) * LOG_EXPANSION > ctx.merge_max_bytes
    versions = log_versions(log_files, ctx, target, streaming)
    if ctx.keys is not None:
        versions = (v.filter(pc.is_in(v.column(KEY), value_set=ctx.keys)) for v in versions)
    return [v for v in held_logs(versions, ctx) if v.num_rows]
