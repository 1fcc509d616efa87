"""Write handles: create a base file, merge into a base file (COW), append to a log file (MOR).

Every handle creates its marker before its data file, fills the meta columns, and returns the
:class:`WriteStat` that phase 2 verifies and the commit records.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from typing import Iterable, Iterator, Mapping, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse.config import IndexType, LogBlockFormat, WriteConfig
from lakehouse.faults import fault_point
from lakehouse.file_group.file_slice import FileSlice
from lakehouse.file_group.naming import LogFileName, join, write_token
from lakehouse.log.block import encode_avro_data_block, encode_delete_block, encode_parquet_data_block
from lakehouse.read.file_slice_reader import iter_base_file
from lakehouse.columns import COMMIT_SEQNO, COMMIT_TIME, DELETE, FILE_NAME, KEY, PARTITION_PATH, RECORD_KEY, SEQ, UNCONDITIONAL
from lakehouse.merge import MergeSpec, arrange_duplicate_base_keys, drop_helpers, resolve
from lakehouse.storage.base import Storage
from lakehouse.timeline.commit_metadata import WriteStat
from lakehouse.io.base_file_writer import BaseFileWriter, row_group_bytes
from lakehouse.io.markers import Markers, MarkerType



@dataclass
class HandleContext:
    storage: Storage
    markers: Markers
    instant_time: str
    schema: pa.Schema  # full table schema with meta fields
    avro_schema: dict  # with meta fields
    avro_schema_json: str
    config: WriteConfig
    spec: MergeSpec
    # Spark's stage and task attempt: in the write token (as Hudi's), so a retried task writes
    # files of its own instead of colliding with its first attempt's (which phase 2 removes).
    stage: int = 0
    attempt: int = 0
    # Hudi writes the key bloom filter unless hoodie.parquet.bloom.filter.enabled=false, and
    # always for a BLOOM index (which needs it).
    bloom: bool = True
    # The record key columns: unique within a file, as the key and sequence meta columns are.
    key_fields: tuple[str, ...] = ()
    # Merges of this write keep both versions of a key (see merge_base_file's ``concat``).
    concat_inserts: bool = False
    # The Iceberg field id of each column path (lakehouse.field_ids), put on the base
    # files' columns so that Iceberg readers without name mapping find them.
    field_ids: Mapping[tuple[str, ...], int] | None = None
    # A write in bounded memory (lakehouse.write.spill): base files keep their bloom filter
    # packed while written (a bit per bit; bools take 2.6-5.2 MB per open file at Hudi's sizing).
    packed_bloom: bool = False
    # Partitions whose .hoodie_partition_metadata the write's listing showed: not looked for again.
    partitions_with_metafile: frozenset[str] = frozenset()

    def token(self, task: int) -> str:
        return write_token(task, self.stage, self.attempt)

    def statistics_columns(self, schema: pa.Schema) -> list[str]:
        """Columns whose min/max the footer keeps: all but the sequence number and file name,
        which no reader filters by."""
        return [f.name for f in schema if f.name not in (COMMIT_SEQNO, FILE_NAME)]

    def dictionary_columns(self, table: pa.Table) -> list[str]:
        """Columns worth dictionary encoding: all but those unique in every file and those
        whose values are (nearly) all distinct in this one. Such a column's dictionary is built
        up to its page limit and then thrown away: the key columns cost ~15% of writing a trips
        base file that way, and timestamps and coordinates another ~18% (and 6% more bytes)."""
        unique = {COMMIT_SEQNO, RECORD_KEY, *self.key_fields}
        return [f.name for f in table.schema if f.name not in unique
                and not _mostly_distinct(table.column(f.name))]


_SAMPLE = 8192


def _mostly_distinct(col: pa.ChunkedArray) -> bool:
    """Whether a flat column's values are >= 90% distinct in a strided sample (whole columns
    of fewer than twice the sample are not judged: their dictionaries are small anyway)."""
    t = col.type
    if len(col) < 2 * _SAMPLE or not (pa.types.is_primitive(t) or pa.types.is_string(t)
                                      or pa.types.is_binary(t)) or pa.types.is_boolean(t):
        return False
    sample = col.take(pa.array(np.arange(0, len(col), len(col) // _SAMPLE)[:_SAMPLE]))
    return pc.count_distinct(sample).as_py() >= 0.9 * _SAMPLE


def constant(value: str, n: int, dictionary: bool = False) -> pa.Array:
    """``value`` ``n`` times; as a one-entry dictionary, parquet writes it without copying or
    hashing the value per row (a file name is ~70 bytes: 70 MB per million rows otherwise)."""
    if dictionary:
        return pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, dtype=np.int32)),
                                              pa.array([value], pa.string()))
    return pa.repeat(value, n).cast(pa.string()) if n else pa.array([], pa.string())


def sequence_numbers(prefix: str, n: int, start: int = 0) -> pa.Array:
    """Hudi's ``_hoodie_commit_seqno`` values ``<prefix><start> .. <prefix><start+n-1>``, built
    as bytes with numpy: rows of one digit count form a fixed-width block (3x faster than
    formatting numbers and joining strings, measured on a million)."""
    if n == 0:
        return pa.array([], pa.string())
    pre = np.frombuffer(prefix.encode(), dtype=np.uint8)
    blocks, widths = [], []
    lo, digits, end = start, len(str(start)), start + n
    while lo < end:
        hi = min(end, 10 ** digits)
        if hi > lo:
            block = np.empty((hi - lo, len(pre) + digits), dtype=np.uint8)
            block[:, :len(pre)] = pre
            v = np.arange(lo, hi, dtype=np.int64)
            for k in range(digits - 1, -1, -1):
                block[:, len(pre) + k] = 48 + v % 10
                v //= 10
            blocks.append(block.reshape(-1))
            widths.append(np.full(hi - lo, len(pre) + digits, dtype=np.int64))
        lo, digits = hi, digits + 1
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.concatenate(widths), out=offsets[1:])
    data = np.concatenate(blocks)
    if offsets[-1] < 2**31:
        return pa.StringArray.from_buffers(n, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data))
    return pa.LargeStringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data)).cast(pa.string())


def with_meta(records: pa.Table, *, instant_time: str, task: int, partition: str,
              file_name: str, keys: pa.ChunkedArray | pa.Array, schema: pa.Schema,
              dictionary_constants: bool = False, first_seqno: int = 0) -> pa.Table:
    """``records`` conformed to ``schema`` with fresh meta columns (``dictionary_constants``:
    the per-file constants as dictionaries, for a table that only goes to a parquet file;
    ``first_seqno``: where the file's sequence numbers go on, for a file written in pieces)."""
    n = records.num_rows
    seq = sequence_numbers(f"{instant_time}_{task}_", n, first_seqno)
    meta = {
        COMMIT_TIME: constant(instant_time, n, dictionary_constants),
        COMMIT_SEQNO: seq,
        RECORD_KEY: keys,
        PARTITION_PATH: constant(partition, n, dictionary_constants),
        FILE_NAME: constant(file_name, n, dictionary_constants),
    }
    cols = []
    for f in schema:
        if f.name in meta:
            cols.append(meta[f.name])
        elif f.name in records.column_names:
            col = records.column(f.name)
            cols.append(col if col.type == f.type else col.cast(f.type))
        else:
            cols.append(pa.nulls(n, f.type))
    if dictionary_constants:
        return pa.Table.from_arrays(cols, names=schema.names)
    return pa.Table.from_arrays(cols, schema=schema)


def writes_bloom(config: WriteConfig, index_type: IndexType) -> bool:
    if index_type in (IndexType.BLOOM, IndexType.GLOBAL_BLOOM):
        return True
    if config.bloom_in_base_files is None:
        return index_type is not IndexType.BUCKET
    return config.bloom_in_base_files


def _write_data(ctx: HandleContext, path: str, data: bytes) -> None:
    with ctx.storage.open_output(path) as f:
        half = len(data) // 2
        f.write(data[:half])
        f.flush()
        fault_point("write.mid_data_file")
        f.write(data[half:])


def _write_file(writer: BaseFileWriter, pieces) -> int:
    """``pieces`` (tables, or a callable giving them) through ``writer``; its size. A failure
    leaves the file partial, for the rollback its marker calls for."""
    try:
        for piece in pieces:
            writer.write(piece)
        return writer.close()
    except BaseException as e:
        writer.abort(e)
        raise


def create_base_file(ctx: HandleContext, *, partition: str, file_id: str, records: pa.Table,
                     keys: pa.ChunkedArray, task: int, num_updates: int = 0) -> WriteStat:
    writer = BaseFileWriter(ctx, partition, file_id, task, MarkerType.CREATE)
    table = with_meta(records, instant_time=ctx.instant_time, task=task, partition=partition,
                      file_name=str(writer.name), keys=keys, schema=ctx.schema, dictionary_constants=True)
    size = _write_file(writer, [table])
    return WriteStat(file_id=file_id, path=writer.path, partition_path=partition, prev_commit="null",
                     num_writes=table.num_rows, num_inserts=table.num_rows - num_updates,
                     num_update_writes=num_updates, total_write_bytes=size, file_size_in_bytes=size)


def create_base_file_in_parts(ctx: HandleContext, *, partition: str, file_id: str,
                              parts: Iterable[tuple[pa.Table, pa.ChunkedArray]], task: int) -> WriteStat | None:
    """A new base file from ``parts`` (records and their keys), written one part at a time, for
    records more than a write may hold at once; sequence numbers go on across parts. None when
    every part is empty (no file)."""
    writer: BaseFileWriter | None = None
    try:
        for records, keys in parts:
            if records.num_rows == 0:
                continue
            if writer is None:
                writer = BaseFileWriter(ctx, partition, file_id, task, MarkerType.CREATE)
            writer.write(with_meta(records, instant_time=ctx.instant_time, task=task, partition=partition,
                                   file_name=str(writer.name), keys=keys, schema=ctx.schema,
                                   dictionary_constants=True, first_seqno=writer.num_rows))
        if writer is None:
            return None
        size = writer.close()
    except BaseException as e:
        if writer is not None:
            writer.abort(e)
        raise
    return WriteStat(file_id=file_id, path=writer.path, partition_path=partition, prev_commit="null",
                     num_writes=writer.num_rows, num_inserts=writer.num_rows, total_write_bytes=size,
                     file_size_in_bytes=size)


def write_compacted_base_file(ctx: HandleContext, *, partition: str, file_id: str,
                              table: pa.Table, task: int, prev_commit: str) -> WriteStat:
    """A compaction's output: records keep their commit time and sequence number (as Hudi's
    compactor preserves them); only ``_hoodie_file_name`` points at the new file. An empty
    result is still written, or the slice before the compaction would show through."""
    writer = BaseFileWriter(ctx, partition, file_id, task, MarkerType.CREATE)
    cols = []
    for f in ctx.schema:
        if f.name == FILE_NAME:
            cols.append(constant(str(writer.name), table.num_rows, dictionary=True))
        elif f.name in table.column_names:
            col = table.column(f.name)
            cols.append(col if col.type == f.type else col.cast(f.type))
        else:
            cols.append(pa.nulls(table.num_rows, f.type))
    out = pa.Table.from_arrays(cols, names=ctx.schema.names)
    size = _write_file(writer, [out])
    return WriteStat(file_id=file_id, path=writer.path, partition_path=partition, prev_commit=prev_commit,
                     num_writes=out.num_rows, total_write_bytes=size, file_size_in_bytes=size)


def _merge_piece_bytes(ctx: HandleContext) -> int:
    """The old file's piece a merge holds at a time: a quarter of an output row group (a
    piece's rows are held several times over: the piece, its touched rows with their incoming
    versions, the merged result, the writer's row group; measured on Copy-On-Write upserts)."""
    return max(1 << 16, row_group_bytes(ctx.config) // 4)


class RoutedIncoming(Protocol):
    """A merge's incoming records by the piece of the old file each replaces (pieces numbered
    as :func:`base_file_pieces` numbers them), for a merge too large to hold them all."""

    def piece(self, index: int) -> pa.Table | None:
        """The incoming records (reduced: one per key) whose key piece ``index`` holds."""

    def rest(self) -> Iterator[pa.Table]:
        """The incoming records whose key the old file does not hold, in parts (each holding
        every version of its keys, reduced)."""


def base_file_pieces(ctx: HandleContext, path: str, keys: pa.Array) -> np.ndarray | None:
    """The piece of base file ``path`` (as :func:`merge_base_file` reads it) holding each of
    ``keys`` (-1: none), from one pass over its key column; None if a key is in two pieces
    (a file with duplicate keys: every copy merges, so the records cannot be routed to one)."""
    out = np.full(len(keys), -1, dtype=np.int32)
    for i, old in enumerate(iter_base_file(ctx.storage, path, ctx.schema, [RECORD_KEY], None,
                                           batch_bytes=_merge_piece_bytes(ctx))):
        hit = pc.is_in(keys, value_set=old.column(RECORD_KEY).combine_chunks()).to_numpy(zero_copy_only=False)
        if (hit & (out >= 0)).any():
            return None
        out[hit] = i
    return out


def merge_base_file(ctx: HandleContext, *, base_slice: FileSlice, incoming: pa.Table | RoutedIncoming,
                    task: int, concat: bool = False) -> WriteStat:
    """Rewrite a file group's base file with ``incoming`` merged in (COW merge handle).

    ``incoming`` carries the helper columns KEY, SEQ (>= 1) and DELETE; rows of the old file keep
    their meta columns unless a newer version replaces them. ``concat``: Hudi's
    HoodieConcatHandle (inserts with hoodie.merge.allow.duplicate.on.inserts): the old records
    as they are and the incoming ones beside them, a key in both kept twice.

    As Hudi's HoodieMergeHandle, the old file is read a piece at a time (a row group's worth of
    memory) and written out as it goes, each old record replaced where a newer version merges
    over it; the incoming records found nowhere in it come last. So merging into a large file
    holds ``incoming`` and one piece of the file, not the file; given :class:`RoutedIncoming`
    (records spilled by the piece they hit), it holds one piece's records at a time.
    """
    assert base_slice.base_file is not None
    partition, file_id = base_slice.partition, base_slice.file_id
    path = base_slice.base_file.path
    writer = BaseFileWriter(ctx, partition, file_id, task, MarkerType.MERGE)
    name = str(writer.name)
    routed = not isinstance(incoming, pa.Table)
    seqno = [0]

    def fresh_of(records: pa.Table) -> pa.Table:
        # The per-file constants as dictionaries: plain, they cost ~90 bytes more per incoming row.
        out = with_meta(records, instant_time=ctx.instant_time, task=task, partition=partition,
                        file_name=name, keys=records.column(KEY), schema=ctx.schema,
                        dictionary_constants=True, first_seqno=seqno[0])
        seqno[0] += records.num_rows
        for c in (KEY, SEQ, DELETE, UNCONDITIONAL):
            out = out.append_column(c, records.column(c) if c in records.column_names
                                    else pa.repeat(False, records.num_rows))
        return out

    whole = None if routed else fresh_of(incoming)
    whole_keys = None if routed else incoming.column(KEY).combine_chunks()
    matched = None if routed else np.zeros(incoming.num_rows, dtype=bool)  # incoming keys the file holds
    counts = {"old": 0, "in": 0, "matched": 0, "updates": 0, "unmatched_deletes": 0}
    unmatched: list[pa.Table] = []  # routed records their piece turned out not to hold

    def pieces():
        for i, old in enumerate(iter_base_file(ctx.storage, path, ctx.schema, None, None,
                                               batch_bytes=_merge_piece_bytes(ctx))):
            counts["old"] += old.num_rows
            # Untouched winners from the old file keep their commit metadata; only the file
            # name moves.
            old = old.set_column(old.schema.get_field_index(FILE_NAME), FILE_NAME,
                                 constant(name, old.num_rows, True))
            if concat:
                yield old
                continue
            if routed:
                records = incoming.piece(i)
                if records is None or records.num_rows == 0:
                    yield old
                    continue
                fresh = fresh_of(records)
                counts["in"] += fresh.num_rows
                keys = fresh.column(KEY).combine_chunks()
            else:
                fresh, keys = whole, whole_keys
            touched = pc.is_in(old.column(RECORD_KEY), value_set=keys)
            if not pc.any(touched).as_py():
                yield old
                if routed:
                    unmatched.append(fresh)
                continue
            yield old.filter(pc.invert(touched))
            old_touched = old.filter(touched)
            n = old_touched.num_rows
            old_versions = (old_touched.append_column(KEY, old_touched.column(RECORD_KEY))
                            .append_column(SEQ, pa.repeat(pa.scalar(0, pa.int64()), n))
                            .append_column(DELETE, pa.repeat(False, n))
                            .append_column(UNCONDITIONAL, pa.repeat(False, n))).cast(fresh.schema)
            over = pc.is_in(fresh.column(KEY), value_set=old_versions.column(KEY).combine_chunks())
            if routed:
                hits = fresh.filter(over)
                counts["matched"] += hits.num_rows
                counts["updates"] += hits.num_rows - pc.sum(hits.column(DELETE)).as_py() if hits.num_rows else 0
                if hits.num_rows < fresh.num_rows:
                    unmatched.append(fresh.filter(pc.invert(over)))
            else:
                matched[over.to_numpy(zero_copy_only=False)] = True
            ov, fo, _ = arrange_duplicate_base_keys(old_versions, fresh.filter(over), "each")
            yield drop_helpers(resolve(pa.concat_tables([ov, fo]), ctx.spec))
        if routed:
            # New keys last, a part at a time (after any record its piece did not hold).
            parts = iter(incoming.rest())
            if unmatched:
                parts = itertools.chain([None], parts)
            for last in parts:
                if last is None:
                    rest = pa.concat_tables(unmatched)
                    unmatched.clear()
                elif last.num_rows:
                    rest = fresh_of(last)
                    counts["in"] += last.num_rows
                else:
                    continue
                counts["unmatched_deletes"] += int(pc.sum(rest.column(DELETE)).as_py() or 0)
                yield drop_helpers(resolve(rest, ctx.spec))
                del rest
            return
        else:
            rest = whole.filter(pa.array(~matched)) if matched.any() else whole
        if concat:
            yield drop_helpers(rest.filter(pc.invert(pc.fill_null(rest.column(DELETE), False))))
        else:
            counts["unmatched_deletes"] = int(pc.sum(rest.column(DELETE)).as_py() or 0)
            yield drop_helpers(resolve(rest, ctx.spec))

    size = _write_file(writer, pieces())
    written = writer.num_rows
    if not routed:
        inc_del = incoming.column(DELETE).to_numpy(zero_copy_only=False)
        counts.update({"in": incoming.num_rows, "matched": int(matched.sum()),
                       "updates": int((matched & ~inc_del).sum()),
                       "unmatched_deletes": int((~matched & inc_del).sum())})
    n_old = counts["old"]
    n_del = max(0, n_old + (counts["in"] - counts["matched"]) - written - counts["unmatched_deletes"])
    n_ins = written - n_old + n_del
    return WriteStat(file_id=file_id, path=writer.path, partition_path=partition,
                     prev_commit=base_slice.base_file.commit_time, num_writes=written,
                     num_update_writes=counts["updates"], num_inserts=max(0, n_ins), num_deletes=n_del,
                     total_write_bytes=size, file_size_in_bytes=size)


_DICTIONARY_ROWS = 10_000


def next_log_version(fs: FileSlice | None) -> int:
    return max((lf.name.version for lf in fs.log_files), default=0) + 1 if fs else 1


def append_log(ctx: HandleContext, *, slice_: FileSlice, partition: str, file_id: str,
               base_instant: str, records: pa.Table, record_keys: pa.ChunkedArray | None,
               deletes: pa.Table | None, task: int, num_inserts: int = 0, min_version: int = 0,
               first_seqno: int = 0) -> list[WriteStat]:
    """Write this instant's records and deletes for a file group to new log file version(s).

    Each instant gets a log file of its own (rolling over at ``hoodie.logfile.max.size``): a
    crashed append can then only tear a file that rollback deletes whole, never one holding
    committed blocks, and the layout works unchanged on object stores that cannot append.
    """
    # Versions count per (file group, base instant): a slice under a pending compaction starts at 1.
    version = next_log_version(slice_) if slice_ is not None and slice_.base_instant == base_instant else 1
    version = max(version, min_version)
    blocks: list[bytes] = []
    n_rec = records.num_rows if records is not None else 0
    if n_rec:
        table = with_meta(records, instant_time=ctx.instant_time, task=task, partition=partition,
                          file_name=file_id, keys=record_keys, schema=ctx.schema, first_seqno=first_seqno)
        # hoodie.logfile.data.block.max.size: as HoodieAppendHandle, a block holds records up to
        # that many bytes by their in-memory size.
        rows_per_block = max(1, int(ctx.config.log_block_max_size // max(1, _row_bytes(table))))
        for start in range(0, table.num_rows, rows_per_block):
            chunk = table.slice(start, rows_per_block)
            if ctx.config.log_block_format is LogBlockFormat.PARQUET:
                # Dictionaries only for big blocks: measured on 1k-row blocks (one delta commit's
                # records of one file group), plain pages are ~10% smaller and ~25% faster to
                # decode (each dictionary page is one more zstd frame to open); on 200k-row
                # blocks dictionaries are ~5% smaller and ~25% faster.
                dictionary = ctx.dictionary_columns(chunk) if chunk.num_rows >= _DICTIONARY_ROWS else False
                blocks.append(encode_parquet_data_block(
                    chunk, ctx.avro_schema, ctx.instant_time, compression=ctx.config.parquet_codec,
                    use_dictionary=dictionary, field_ids=ctx.field_ids))
            else:
                blocks.append(encode_avro_data_block(chunk, ctx.avro_schema, ctx.instant_time))
    n_del = deletes.num_rows if deletes is not None else 0
    if n_del:
        ordering = deletes.column("ordering_value") if "ordering_value" in deletes.column_names else None
        blocks.append(encode_delete_block(
            deletes.column("record_key"), deletes.column("partition_path"),
            ordering, ctx.instant_time, ctx.avro_schema,
            ordering_field=ctx.spec.ordering_field if ordering is not None else None))
    stats: list[WriteStat] = []
    current: list[bytes] = []
    size = 0
    files: list[tuple[LogFileName, bytes]] = []
    for b in blocks:
        if current and size + len(b) > ctx.config.log_max_size:
            files.append((LogFileName(file_id, base_instant, version, ctx.token(task)), b"".join(current)))
            version += 1
            current, size = [], 0
        current.append(b)
        size += len(b)
    if current:
        files.append((LogFileName(file_id, base_instant, version, ctx.token(task)), b"".join(current)))
    base_name = (str(slice_.base_file.name) if slice_ is not None and slice_.base_file is not None
                 and slice_.base_instant == base_instant else "")
    bump = 0
    for i, (name, data) in enumerate(files):
        name, bump = _create_log(ctx, partition, name, bump, data)
        path = join(partition, str(name))
        first = i == 0
        stats.append(WriteStat(
            file_id=file_id, path=path, partition_path=partition, prev_commit=base_instant,
            num_writes=n_rec if first else 0, num_deletes=n_del if first else 0,
            num_update_writes=(n_rec - num_inserts) if first else 0,
            num_inserts=num_inserts if first else 0, total_write_bytes=len(data),
            file_size_in_bytes=len(data), total_log_blocks=len(blocks) if first else 0,
            log_version=name.version, log_offset=0, base_file=base_name, log_files=(str(name),)))
    return stats


def _create_log(ctx: HandleContext, partition: str, name: LogFileName, bump: int,
                data: bytes) -> tuple[LogFileName, int]:
    """Create log file ``name`` (its version raised by ``bump``), or the next free version.

    Another writer may be appending to this file group right now and have taken the version
    (only one of us can commit; the other's commit conflicts). Its file is not ours to touch:
    our marker for that name goes, so a rollback of this instant never deletes it."""
    for _ in range(1000):
        taken = LogFileName(name.file_id, name.base_instant, name.version + bump, name.write_token)
        ctx.markers.create(partition, str(taken), MarkerType.CREATE)
        try:
            _write_data(ctx, join(partition, str(taken)), data)
            return taken, bump
        except FileExistsError:
            ctx.markers.delete(partition, str(taken), MarkerType.CREATE)
            bump += 1
    raise FileExistsError(f"{join(partition, str(name))}: no free log version")


def _row_bytes(table: pa.Table) -> float:
    return table.nbytes / max(1, table.num_rows)


def schema_json(avro: dict) -> str:
    return json.dumps(avro, separators=(",", ":"))
