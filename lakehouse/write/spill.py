"""A write larger than ``write.task.max.size`` on the paths that cannot append chunk by chunk.

Merge-On-Read writes on the bucket index append each chunk as it comes (lakehouse.write.buffer).
Every other write (Copy-On-Write merges, the SIMPLE and BLOOM indexes, bulk inserts, the replace
operations) must see all of a file group's records before it writes that file group once, as
Hudi's Spark writer does after its shuffle. Without holding the batch, this takes two passes:

1. **Route.** The batch is read a chunk at a time (an eighth of the budget); each chunk's keys
   are looked up in the index as it stood before the write, and its rows are spilled to local
   Arrow files, one group per target: the file group an update or delete goes to (found by the
   index, or the key's bucket), or, for records the index does not know, one of ``H`` groups by a
   hash of the key, with ``H`` chosen so that a group is about an eighth of the budget. Every
   version of a key lands in one group, whichever chunk it came in.
2. **Write.** Groups are read back one at a time per task (tasks in parallel while what they
   hold fits in the budget), their duplicate keys reduced as the whole batch would be
   (``hoodie.combine.before.*``, the merge mode's precombine), and written: an update group
   through its file group's handle (a Copy-On-Write merge reads the old file a row group at a
   time: lakehouse.io.base_file_writer), a partition's insert groups into new file groups of at
   most ``hoodie.parquet.max.file.size``, a file rolled over when full (Hudi's
   CopyOnWriteInsertHandler). A group larger than an eighth of the budget is written in parts
   (:func:`_write_split`): a merge's by the piece of the old file holding each key (its keys
   the old file lacks by key, after the old file), a log append's and a new file's by key.

A Spark write task larger than an eighth of the budget goes through the same second pass on
its executor (:func:`write_groups`, into the file groups its driver planned).

The table is the one the batch written whole makes: the same records, keys and merge results.
The files differ in one way: a small file group takes at most an eighth of the budget of new
records per write (its merge holds them), so a large insert leaves the rest of its room to the
next write. Only an ``insert`` of keys the table already holds can tell: Hudi's insert does not
look keys up, so whether a re-inserted key replaces its stored copy (in a small file group it is
merged into) or stands beside it (in a new file group) depends on the files, in Hudi as here.
"""

from __future__ import annotations

import dataclasses
import math
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse.bloom_filter import murmur_hash
from lakehouse.columns import DELETE, KEY, PARTITION, SEQ, UNCONDITIONAL
from lakehouse.config import BulkInsertSortMode, IndexType
from lakehouse.file_group.naming import new_file_id
from lakehouse.io.base_file_writer import BaseFileWriter
from lakehouse.io.handles import (HandleContext, base_file_pieces, create_base_file_in_parts, merge_base_file,
                                  with_meta)
from lakehouse.io.markers import MarkerType
from lakehouse.timeline.commit_metadata import WriteStat
from lakehouse.io.partition_metafile import ensure_partitions
from lakehouse.write.assign import (FID, Target, bucket_target, data_columns, new_target, records_per_file,
                                   route, run_target, small_file_room, split_bounds, split_groups, update_target)
from lakehouse.write.buffer import default_parallelism
from lakehouse.write.memory import release_unused
from lakehouse.write.index import tag_location
from lakehouse.write.operation import Operation, TargetKind
from lakehouse.write.prepare import Prepared, combines, precombine

from lakehouse.write.spill_store import Group, Spill

if TYPE_CHECKING:
    from lakehouse.meta_client import TableMetaClient
    from lakehouse.write.context import WriteContext


def _hash_groups(keys: pa.ChunkedArray, n: np.ndarray | int) -> np.ndarray:
    """A group in ``[0, n)`` per key (``n`` per key, or one for all) by a hash of the key."""
    if np.all(n == 1):
        return np.zeros(len(keys), dtype=np.int64)
    return (murmur_hash(keys).astype(np.int64) & 0x7FFFFFFF) % n


def hash_group_counts(prepared: Prepared, budget: int, global_: bool) -> dict[Any, int]:
    """How many hash groups each partition's new records take (key None: a global index's, for
    all partitions): enough for a group to hold about an eighth of the budget."""
    per_row = prepared.source_bytes / max(1, prepared.source_rows)
    target = max(1, budget // 8)
    if global_:
        return {None: max(1, math.ceil(prepared.source_bytes / target))}
    return {p: max(1, math.ceil(n * per_row / target)) for p, n in (prepared.partition_rows or {}).items()}


def locator(meta: "TableMetaClient", context: "WriteContext", base_files: dict, timeline,
            read_slices: dict) -> Callable[[pa.Table], pa.Table]:
    """A chunk's rows with the file group each updates (FID; null: none), by the index as it
    stood before the write (lakehouse.write.index.tag_location)."""
    def locate(rows: pa.Table) -> pa.Table:
        # One file's keys at a time: a bounded write looks every chunk up.
        rows, loc = tag_location.tag_location(meta, context, rows, base_files, timeline, read_slices, per_read=1)
        return route(context, rows, loc)
    return locate


def route_chunk(context: "WriteContext", rows: pa.Table, op: Operation,
                locate: Callable[[pa.Table], pa.Table] | None, groups: dict[Any, int]) -> Iterator["Block"]:
    """A chunk's rows by the group each is spilled to, as blocks (rows in group order with each
    group's bounds; ``groups``: how many hash groups take the records no file group holds, per
    partition: :func:`hash_group_counts`)."""
    cfg = context.config
    if cfg.index_type is IndexType.BUCKET:
        rows = rows.append_column("__lh_bucket", pa.array(context.record_buckets(rows)))
        yield block(rows, [PARTITION, "__lh_bucket"], lambda k: ("bucket", k[0], k[1]))
        return
    if locate is not None:
        rows = locate(rows)  # with FID: the file group an update goes to (null: none)
    else:
        rows = rows.append_column(FID, pa.nulls(rows.num_rows, pa.string()))
    known = pc.is_valid(rows.column(FID))
    fresh = rows
    if pc.any(known).as_py():
        yield block(rows.filter(known), [PARTITION, FID], lambda k: ("fg", k[0], k[1]))
        fresh = rows.filter(pc.invert(known))
    fresh = fresh.drop_columns([FID])
    if op is Operation.DELETE or fresh.num_rows == 0:
        return  # deletes of keys the table does not hold: nothing to write
    if cfg.index_type.is_global:
        n = groups[None]
    else:
        enc = pc.dictionary_encode(fresh.column(PARTITION).combine_chunks())
        per_partition = np.array([groups.get(p, 1) for p in enc.dictionary.to_pylist()], dtype=np.int64)
        n = per_partition[enc.indices.to_numpy(zero_copy_only=False)]
    h = _hash_groups(fresh.column(KEY), n)
    # A global index reduces a key's versions across partitions: its groups span partitions.
    by = ["__lh_h"] if cfg.index_type.is_global else [PARTITION, "__lh_h"]
    fresh = fresh.append_column("__lh_h", pa.array(h))
    yield block(fresh, by, (lambda k: ("new", None, k)) if cfg.index_type.is_global
                 else (lambda k: ("new", k[0], k[1])))


Block = tuple[pa.Table, list[Group], list[int], list[int]]


def block(rows: pa.Table, by: list[str], group_of: Callable[[Any], Group]) -> Block:
    """``rows`` in the order of the ``by`` columns' groups, without them (the last ``by``
    column is the router's own), with each group's bounds."""
    ordered, keys, starts, ends = split_bounds(rows, by)
    return ordered.drop_columns([by[-1]]), [group_of(k) for k in keys], starts, ends


def write_spilled(context: "WriteContext", prepared: Prepared, ctx: HandleContext, latest: dict,
                  pending: dict, avg_size: int, locate: Callable[[pa.Table], pa.Table] | None,
                  budget: int) -> list[WriteStat]:
    """Writes ``prepared`` (in chunks) by the two passes above; returns the write results."""
    op = prepared.operation
    groups = hash_group_counts(prepared, budget, context.config.index_type.is_global)
    ctx = dataclasses.replace(ctx, packed_bloom=True)
    with Spill(budget) as spill:
        for rows in prepared.iter_rows():
            if rows.num_rows:
                per_row = rows.nbytes / rows.num_rows
                for blk in route_chunk(context, rows, op, locate, groups):
                    spill.add_block(*blk, nbytes=int(blk[0].num_rows * per_row))
            del rows
            release_unused()
        spill.finish()
        ensure_partitions(ctx.storage, {g[1] for g in spill.groups if g[1] is not None}, ctx.instant_time,
                      ctx.partitions_with_metafile)
        return write_groups(context, op, ctx, spill, latest, pending, avg_size, budget)


def _reduced(context: "WriteContext", op: Operation, rows: pa.Table, by_seq: bool = False) -> pa.Table:
    """A group's versions reduced across the chunks they came in, as the whole batch's would be
    (``by_seq``: put in the batch's order first, for rows that came in another)."""
    if by_seq and rows.num_rows > 1:
        rows = rows.sort_by(SEQ)
    if combines(context, op) and rows.num_rows > 1:
        rows = precombine(context, rows)
    if op in _DROPS_DELETES and pc.any(rows.column(DELETE)).as_py():
        rows = rows.filter(pc.invert(rows.column(DELETE)))
    return rows


# A bulk insert and the replace operations write no deletes (WriteClient drops them too): a
# bucket's merge must not apply them to the stored records.
_DROPS_DELETES = (Operation.BULK_INSERT, Operation.INSERT_OVERWRITE, Operation.INSERT_OVERWRITE_TABLE)


def write_groups(context: "WriteContext", op: Operation, ctx: HandleContext, spill: Spill, latest: dict,
                 pending: dict, avg_size: int, budget: int, *, first_task: int = 0,
                 parallelism: int | None = None, created: frozenset = frozenset(), small: frozenset = frozenset(),
                 by_seq: bool = False) -> list[WriteStat]:
    """Records no file group holds first (they may fill small file groups, whose groups they
    join), then every file group's and bucket's group. For a Spark write task (whose driver
    planned the file groups): task numbers from ``first_task``, ``parallelism`` threads,
    ``created``/``small``: the (partition, file id) of file groups planned new / small (their
    groups create the file group / merge inserts into it), ``by_seq``: rows in another order
    than the batch's."""
    cfg, wc = context.config, context.write_config
    sort_keys = op is Operation.BULK_INSERT and wc.bulk_insert_sort_mode is not BulkInsertSortMode.NONE
    # Bulk inserts and the replace operations write new file groups only, as Hudi's do.
    fills_small = op in (Operation.INSERT, Operation.UPSERT)
    per_file = records_per_file(avg_size, wc)
    new_by_partition: dict[Any, list[Group]] = {}
    for group in sorted(spill.groups, key=str):
        if group[0] == "new":
            new_by_partition.setdefault(group[1], []).append(group)
    small_filled: set[tuple[str, str]] = set(small)
    lock = threading.Lock()
    stats: list[WriteStat] = []
    tasks = []
    for partition, groups in new_by_partition.items():
        def work(task: int, groups=groups) -> list[WriteStat]:
            writer = _NewRecords(context, op, ctx, spill, latest, pending, avg_size, per_file, sort_keys,
                                 fills_small, first_task + task, lock, budget, by_seq)
            out = writer.run(groups)
            with lock:
                small_filled.update(writer.small_filled)
            return out
        tasks.append((_held(max(spill.sizes[g] for g in groups), budget), work))
    stats += _run_bounded(tasks, budget, parallelism)
    spill.finish()  # the small file groups' new records
    first = first_task + len(tasks)  # task numbers (in write tokens and sequence numbers) go on

    existing = context.buckets.existing(list(latest.values())) if cfg.index_type is IndexType.BUCKET and not op.replaces else {}
    tasks = []
    for group in sorted((g for g in spill.groups if g[0] != "new"), key=str):
        kind, partition, which = group

        def work(task: int, group=group, kind=kind, partition=partition, which=which) -> list[WriteStat]:
            if kind == "fg" and (partition, which) in created:
                tg = new_target(partition, which, None, None, TargetKind.CREATE)
            elif kind == "fg":
                tg = update_target(context, partition, which, latest, pending, (partition, which) in small_filled)
            else:
                tg = bucket_target(context, partition, which, existing.get((partition, which)), pending)
            if _splits(spill.sizes[group], budget, tg, ctx):
                stats = _write_split(context, op, ctx, tg, spill, group, first + task, budget, by_seq,
                                     sort_keys and kind != "fg")
                if stats is not None:
                    return stats
            rows = _reduced(context, op, spill.read(group), by_seq)
            if kind != "fg" and sort_keys:
                rows = rows.sort_by(KEY)
            return run_target(ctx, tg, rows, first + task)
        size = spill.sizes[group]
        tasks.append((_held(size, budget) if size <= _split_above(budget) else budget, work))
    return stats + _run_bounded(tasks, budget, parallelism)


def _split_above(budget: int) -> int:
    """Groups larger than this are written in parts (:func:`_write_split`)."""
    return max(1, budget // 8)


def _splits(size: int, budget: int, tg: Target, ctx: HandleContext) -> bool:
    """Whether a group of ``size`` bytes for target ``tg`` is written in parts: a Copy-On-Write
    merge into a base file (by the piece of the old file each record hits), a log append or a
    new base file (by key; a log append's parts to log files of their own)."""
    if size <= _split_above(budget):
        return False
    if tg.kind in (TargetKind.APPEND, TargetKind.CREATE) or _creates(tg):
        return True
    return tg.kind is TargetKind.MERGE and not ctx.concat_inserts


def _creates(tg: Target) -> bool:
    """A merge into a file group with no base file yet writes a new one."""
    return tg.kind is TargetKind.MERGE and (tg.slice is None or tg.slice.base_file is None)


class _Pieces:
    """A merge's records spilled by the piece of the old file they hit (handles.RoutedIncoming)."""

    def __init__(self, spill: Spill, prepare: Callable[[pa.Table], pa.Table]) -> None:
        self.spill, self.prepare = spill, prepare

    def _take(self, index: int) -> pa.Table | None:
        if ("piece", index) not in self.spill.runs:
            return None
        out = self.prepare(self.spill.read(("piece", index)))
        release_unused()
        return out

    def piece(self, index: int) -> pa.Table | None:
        return self._take(index)

    def rest(self) -> Iterator[pa.Table]:
        for index in sorted((g[1] for g in self.spill.groups if g[1] < 0), reverse=True):
            out = self._take(index)
            if out is not None:
                yield out


def _write_split(context: "WriteContext", op: Operation, ctx: HandleContext, tg: Target, spill: Spill, group: Group, task: int,
                 budget: int, by_seq: bool = False, sort_keys: bool = False) -> list[WriteStat] | None:
    """A group too large to hold, written in parts that each hold all versions of their keys
    (so each part reduces as the whole group would): a merge's records by the piece of the old
    file holding their key, one piece's records held at a time, as Hudi's HoodieMergeHandle
    holds them in a spillable map; a log append's by a hash of the key, each part appended to
    log files of its own (the records of a write spread over several log files of the file
    group, as when a log file rolls over); a new base file's by key too, each part added to the
    one file. None: not split (a base file with a key twice)."""
    size = spill.sizes[group]
    merges = tg.kind is TargetKind.MERGE and not _creates(tg)
    if merges:
        keys = pa.concat_arrays([b.column(0) for b in spill.batches(group, [KEY])])
        pieces = base_file_pieces(ctx, tg.slice.base_file.path, keys)
        del keys
        if pieces is None:
            return None
    # By key: a log append's parts, a new file's, and a merge's records of keys the old file
    # does not hold (numbered -1, -2, ...).
    parts = max(2, math.ceil(size / _split_above(budget)))
    with Spill(budget) as sub:
        at = 0
        for batch in spill.batches(group):
            rows = pa.Table.from_batches([batch])
            if merges:
                ids = pieces[at:at + rows.num_rows]
                if (ids < 0).any():
                    ids = np.where(ids >= 0, ids, -1 - _hash_groups(rows.column(KEY), parts)).astype(np.int32)
            else:
                ids = _hash_groups(rows.column(KEY), parts).astype(np.int32)
            at += rows.num_rows
            sub.add_block(*block(rows.append_column("__lh_part", pa.array(ids)), ["__lh_part"],
                                  lambda k: ("piece", k)), nbytes=rows.nbytes)
            del batch, rows
        sub.finish()
        part_ids = sorted(g[1] for g in sub.groups)
        if merges:
            def prepare(rows: pa.Table) -> pa.Table:
                rows = _reduced(context, op, rows, by_seq)
                return rows.select(data_columns(rows) + [KEY, SEQ, DELETE, UNCONDITIONAL])
            return [merge_base_file(ctx, base_slice=tg.slice, incoming=_Pieces(sub, prepare), task=task)]
        if tg.kind is not TargetKind.APPEND:
            def live_parts() -> Iterator[tuple[pa.Table, pa.ChunkedArray]]:
                for part_id in part_ids:
                    rows = _reduced(context, op, sub.read(("piece", part_id)), by_seq)
                    rows = rows.filter(pc.invert(rows.column(DELETE)))
                    if sort_keys:
                        rows = rows.sort_by(KEY)
                    yield rows.select(data_columns(rows)), rows.column(KEY)
                    del rows
                    release_unused()
            stat = create_base_file_in_parts(ctx, partition=tg.partition, file_id=tg.file_id, parts=live_parts(),
                                             task=task)
            return [stat] if stat is not None else []
        stats: list[WriteStat] = []
        version, seqno = 0, 0
        for part_id in part_ids:
            rows = _reduced(context, op, sub.read(("piece", part_id)), by_seq)
            out = run_target(ctx, tg, rows, task, min_log_version=version, first_seqno=seqno)
            seqno += rows.num_rows
            version = max([version] + [s.log_version + 1 for s in out])
            stats += out
            del rows
            release_unused()
        return stats


def _held(group_bytes: int, budget: int) -> int:
    """What a task on a group of ``group_bytes`` holds at its peak, roughly: the group, its
    records with their meta columns, the merge's result, a row group of the old file and one
    being encoded (measured on Copy-On-Write merges)."""
    return 3 * group_bytes + 2 * max(1 << 16, budget // 8)


class _NewRecords:
    """Records no file group holds, group by group: the partition's small file groups take
    them first, up to their room (spilled to their groups, merged later with their updates, as
    Hudi's UpsertPartitioner assigns them), then new file groups of at most ``per_file`` records
    each (a file rolled over when full). The groups of a global index span partitions."""

    def __init__(self, context, op, ctx, spill, latest, pending, avg_size, per_file, sort_keys,
                 fills_small, task, lock, budget, by_seq=False) -> None:
        self.budget, self.by_seq = budget, by_seq
        self.context, self.op, self.ctx, self.spill = context, op, ctx, spill
        self.latest, self.pending, self.avg_size = latest, pending, avg_size
        self.per_file, self.sort_keys, self.fills_small, self.task = per_file, sort_keys, fills_small, task
        self.lock = lock
        self.stats: list[WriteStat] = []
        self.small_filled: set[tuple[str, str]] = set()
        self.rooms: dict[str, list[list]] = {}  # partition -> [[file id, room left], ...]
        self.writers: dict[str, _Rolling] = {}
        self.written = [0]  # records this task wrote: its sequence numbers go on across files

    def run(self, groups: list[Group]) -> list[WriteStat]:
        try:
            for group in groups:
                rows = _reduced(self.context, self.op, self.spill.read(group), self.by_seq)
                deletes = rows.column(DELETE)
                live = rows.filter(pc.invert(deletes)) if pc.any(deletes).as_py() else rows
                if self.sort_keys:
                    live = live.sort_by([(PARTITION, "ascending"), (KEY, "ascending")])
                parts = [(group[1], live)] if group[1] is not None else split_groups(live, [PARTITION])
                for partition, part in parts:
                    self._place(partition, part)
                del rows, live, parts
                release_unused()
            for w in self.writers.values():
                w.close()
        except BaseException as e:
            for w in self.writers.values():
                w.abort(e)
            raise
        return self.stats

    def _place(self, partition: str, rows: pa.Table) -> None:
        if self.fills_small:
            rooms = self.rooms.get(partition)
            if rooms is None:
                # A small file group's merge holds its new records: at most an eighth of the
                # budget of them per write (the next write tops the file up).
                cap = max(1, int(self.budget // 8 // max(1.0, rows.nbytes / max(1, rows.num_rows))))
                rooms = self.rooms[partition] = [
                    [fid, min(room, cap)] for fid, room in small_file_room(
                        self.context, partition, self.latest, self.pending, self.avg_size)]
            offset = 0
            while rooms and offset < rows.num_rows:
                fid, room = rooms[0]
                take = min(room, rows.num_rows - offset)
                with self.lock:
                    self.spill.add(("fg", partition, fid), rows.slice(offset, take))
                self.small_filled.add((partition, fid))
                offset += take
                rooms[0][1] -= take
                if rooms[0][1] <= 0:
                    rooms.pop(0)
            rows = rows.slice(offset)
        if rows.num_rows:
            w = self.writers.get(partition)
            if w is None:
                w = self.writers[partition] = _Rolling(self.ctx, partition, self.per_file, self.task, self.stats,
                                                     self.written)
            w.write(rows)


class _Rolling:
    """New file groups of one partition, each closed at ``per_file`` records."""

    def __init__(self, ctx: HandleContext, partition: str, per_file: int, task: int,
                 stats: list[WriteStat], written: list[int]) -> None:
        self.ctx, self.partition, self.per_file, self.task, self.stats = ctx, partition, per_file, task, stats
        self.written = written
        self.writer: BaseFileWriter | None = None
        self.file_id = ""

    def write(self, rows: pa.Table) -> None:
        data_cols = data_columns(rows)
        offset = 0
        while offset < rows.num_rows:
            if self.writer is None:
                self.file_id = new_file_id()
                self.writer = BaseFileWriter(self.ctx, self.partition, self.file_id, self.task, MarkerType.CREATE)
            w = self.writer
            take = min(rows.num_rows - offset, self.per_file - w.num_rows)
            piece = rows.slice(offset, take)
            w.write(with_meta(piece.select(data_cols), instant_time=self.ctx.instant_time, task=self.task,
                              partition=self.partition, file_name=str(w.name), keys=piece.column(KEY),
                              schema=self.ctx.schema, dictionary_constants=True, first_seqno=self.written[0]))
            self.written[0] += take
            offset += take
            if w.num_rows >= self.per_file:
                self.close()

    def close(self) -> None:
        w, self.writer = self.writer, None
        if w is None:
            return
        try:
            size = w.close()
        except BaseException as e:
            w.abort(e)
            raise
        self.stats.append(WriteStat(file_id=self.file_id, path=w.path, partition_path=self.partition,
                                    prev_commit="null", num_writes=w.num_rows, num_inserts=w.num_rows,
                                    total_write_bytes=size, file_size_in_bytes=size))

    def abort(self, error: BaseException) -> None:
        if self.writer is not None:
            self.writer.abort(error)
            self.writer = None


def _run_bounded(tasks: list[tuple[int, Callable[[int], list[WriteStat]]]], limit: int,
                 parallelism: int | None = None) -> list[WriteStat]:
    """Runs ``tasks`` (largest first) on up to :func:`default_parallelism` threads while the
    bytes their groups hold stay within ``limit`` (one task runs whatever its size). Results
    come back in the tasks' order; task numbers (in the write tokens) follow it too."""
    order = sorted(range(len(tasks)), key=lambda i: -tasks[i][0])
    results: dict[int, list[WriteStat]] = {}
    workers = min(len(tasks), parallelism or default_parallelism())
    if workers <= 1:
        for i in order:
            results[i] = tasks[i][1](i)
            release_unused()
        return [s for i in range(len(tasks)) for s in results[i]]
    cond = threading.Condition()
    held = [0]

    def run(i: int) -> list[WriteStat]:
        try:
            return tasks[i][1](i)
        finally:
            release_unused()
            with cond:
                held[0] -= tasks[i][0]
                cond.notify_all()

    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {}
        for i in order:
            size = tasks[i][0]
            with cond:
                while held[0] and held[0] + size > limit:
                    cond.wait()
                held[0] += size
            futures[i] = pool.submit(run, i)
        for i, f in futures.items():
            results[i] = f.result()
    return [s for i in range(len(tasks)) for s in results[i]]

