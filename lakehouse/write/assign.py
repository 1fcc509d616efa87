"""Bucket assignment: which file group each record goes to, and with which handle.

Updates and deletes go to the file group the index found. Inserts first fill small file groups
(base file under ``hoodie.parquet.small.file.limit``) up to ``hoodie.parquet.max.file.size``,
with the record size estimated from earlier commits; the rest go to new file groups of at most
that many records. On MOR tables, updates append to logs; a small file group without logs takes
its inserts through a merge (its base file is rewritten), as Hudi does when the index cannot
index log files; the bucket index can, so there everything appends.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse.config import BulkInsertSortMode, WriteConfig
from lakehouse.engine import parallel_take
from lakehouse.errors import ClusteringUpdateError
from lakehouse.file_group.file_slice import FileSlice
from lakehouse.file_group.naming import new_file_id
from lakehouse.columns import BUCKET, DELETE, KEY, PARTITION, SEQ, UNCONDITIONAL
from lakehouse.merge import HELPER_COLUMNS
from lakehouse.timeline.commit_metadata import WriteStat
from lakehouse.io.handles import HandleContext, append_log, create_base_file, merge_base_file
from lakehouse.write.index.lookup import LOC_FILE_ID, LOC_ORDERING, LOC_PARTITION
from lakehouse.write.operation import TargetKind

if TYPE_CHECKING:
    from lakehouse.write.context import WriteContext




@dataclass
class Target:
    """Records routed to one file group, and how they get there (create, merge or append)."""

    partition: str
    file_id: str
    slice: FileSlice | None
    base_instant: str | None  # for log writes
    kind: TargetKind
    rows: list[pa.Table] = field(default_factory=list)
    inserts: int = 0


def new_target(partition: str, file_id: str, slice_: FileSlice | None, base_instant: str | None,
               kind: TargetKind) -> "Target":
    return Target(partition, file_id, slice_, base_instant, kind)


def records_per_file(avg_size: int, config: WriteConfig) -> int:
    if not config.auto_split_inserts:
        return config.insert_split_size
    return max(1, config.max_file_size // max(1, avg_size))


def bulk_targets(rows: pa.Table, avg_size: int, config: WriteConfig) -> list["Target"]:
    """New file groups only, records grouped by partition and, unless the sort mode is NONE,
    sorted by key."""
    if rows.num_rows == 0:
        return []
    then = [] if config.bulk_insert_sort_mode is BulkInsertSortMode.NONE else [KEY]
    per_file = records_per_file(avg_size, config)
    targets = []
    for partition, part in split_lazily(rows, [PARTITION], then):
        n = part.num_rows
        size = math.ceil(n / math.ceil(n / per_file))
        for off in range(0, n, size):
            tg = new_target(partition, new_file_id(), None, None, TargetKind.CREATE)
            tg.rows.append(part.slice(off, min(size, n - off)))
            tg.inserts = min(size, n - off)
            targets.append(tg)
    return targets


def bucket_targets(context: "WriteContext", rows: pa.Table, latest: dict, pending: dict, *,
                   sort_keys: bool = False) -> list["Target"]:
    """One target per (partition, bucket); ``sort_keys`` also orders each bucket's records by key
    (bulk insert's sort mode) in the same sort."""
    buckets = context.record_buckets(rows)
    rows = rows.append_column(BUCKET, pa.array(buckets))
    existing = context.buckets.existing(list(latest.values()))
    targets = []
    for (partition, bucket), part in split_lazily(rows, [PARTITION, BUCKET],
                                                 then=[KEY] if sort_keys else []):
        fs = existing.get((partition, bucket))
        part = part.drop_columns([BUCKET])
        if fs is None:
            deletes = part.column(DELETE)
            live = part
            if pc.any(deletes).as_py():
                live = part.materialize()
                live = live.filter(pc.invert(live.column(DELETE)))
            if live.num_rows == 0:
                continue
            tg = bucket_target(context, partition, bucket, None, pending)
            tg.rows.append(live)
            tg.inserts = live.num_rows
        else:
            tg = bucket_target(context, partition, bucket, fs, pending)
            tg.rows.append(part)
        targets.append(tg)
    return targets


def bucket_target(context: "WriteContext", partition: str, bucket: int, fs: FileSlice | None,
                  pending: dict) -> "Target":
    """The handle for a bucket's records: a new file group where the bucket has none, else an
    append (Merge-On-Read, to the slice a pending compaction starts) or a merge."""
    if fs is None:
        return new_target(partition, context.buckets.new_file_id(partition, bucket), None, None, TargetKind.CREATE)
    if context.config.is_mor:
        return new_target(partition, fs.file_id, fs, pending.get((partition, fs.file_id), fs.base_instant), TargetKind.APPEND)
    return new_target(partition, fs.file_id, fs, None, TargetKind.MERGE)


def _group_codes(rows: pa.Table, by: list[str]) -> tuple[np.ndarray, list[pa.Array]]:
    """One int64 per row that orders like the ``by`` columns (nulls first), and each column's
    distinct values in that order: sorting small integers is far cheaper than sorting strings."""
    codes = np.zeros(rows.num_rows, dtype=np.int64)
    values = []
    for c in by:
        enc = pc.dictionary_encode(rows.column(c).combine_chunks(), null_encoding="encode")
        dictionary = enc.dictionary
        rank_of = np.empty(len(dictionary), dtype=np.int64)
        order = pc.array_sort_indices(dictionary, null_placement="at_start").to_numpy()
        rank_of[order] = np.arange(len(dictionary))
        codes = codes * max(1, len(dictionary)) + rank_of[enc.indices.to_numpy(zero_copy_only=False)]
        values.append(dictionary.take(pa.array(order)))
    return codes, values


class Taken:
    """The rows of ``table`` at ``indices``, taken only when a write task needs them: a bulk
    write's groups are then gathered by the tasks in parallel instead of by one big take first."""

    __slots__ = ("table", "indices")

    def __init__(self, table: pa.Table, indices: np.ndarray) -> None:
        self.table, self.indices = table, indices

    @property
    def num_rows(self) -> int:
        return len(self.indices)

    @property
    def nbytes(self) -> int:
        """The size of the rows once taken (in proportion to the whole table's)."""
        return self.table.nbytes * len(self.indices) // max(1, self.table.num_rows)

    def column(self, name: str) -> pa.ChunkedArray:
        return self.table.column(name).take(pa.array(self.indices))

    def slice(self, offset: int, length: int) -> "Taken":
        return Taken(self.table, self.indices[offset:offset + length])

    def drop_columns(self, columns: list[str]) -> "Taken":
        return Taken(self.table.drop_columns(columns), self.indices)

    def materialize(self) -> pa.Table:
        """The rows, each column gathered once: columns that are one array under two names (a
        record key or partition path column and the data column it was made from) stay one."""
        indices = pa.array(self.indices)
        taken: dict[tuple, pa.ChunkedArray] = {}
        columns = []
        for col in self.table.columns:
            same = _identity(col)
            got = taken.get(same)
            if got is None:
                got = taken[same] = col.take(indices)
            columns.append(got)
        return pa.Table.from_arrays(columns, schema=self.table.schema)


def _identity(col: pa.ChunkedArray) -> tuple:
    """Equal for two columns only if they are views of the same memory as the same type."""
    return (col.type, tuple((c.offset, len(c), tuple(b.address if b is not None else 0 for b in c.buffers()))
                            for c in col.chunks))


Rows = "pa.Table | Taken"


def materialize(parts: list) -> pa.Table:
    tables = [p.materialize() if isinstance(p, Taken) else p for p in parts]
    return pa.concat_tables(tables) if len(tables) > 1 else tables[0]


def _split_order(rows: pa.Table, by: list[str], then: list[str]):
    """(order, group keys, group starts, group ends): ``rows.take(order)`` lists the groups of
    the ``by`` columns in ascending order, each ordered by ``then`` (stable)."""
    n = rows.num_rows
    codes, values = _group_codes(rows, by)
    if then:
        keyed = pa.table({"__lh_group": codes, **{c: rows.column(c) for c in then}})
        order = pc.sort_indices(keyed, sort_keys=[(c, "ascending") for c in keyed.column_names])
        order = order.to_numpy()
    else:
        # Few groups (partitions x buckets): a radix sort of small integers, not a comparison sort.
        small = codes.max(initial=0) < (1 << 16)
        order = np.argsort(codes.astype(np.uint16) if small else codes, kind="stable")
    codes = codes[order]
    starts = np.flatnonzero(np.concatenate([[True], codes[1:] != codes[:-1]]))
    ends = np.append(starts[1:], n)
    sizes = [len(v) for v in values]
    keys = []
    for s in starts.tolist():
        code, key = int(codes[s]), []
        for v, size in zip(reversed(values), reversed(sizes)):
            code, r = divmod(code, max(1, size))
            key.append(v[r].as_py())
        key.reverse()
        keys.append(tuple(key) if len(key) > 1 else key[0])
    return order, keys, starts.tolist(), ends.tolist()


def split_groups(rows: pa.Table, by: list[str], then: list[str] = ()):
    """(group key, rows) per distinct value of the ``by`` columns, in ascending order, each group
    ordered by the ``then`` columns (stable: equal records keep their batch order): one sort,
    one take, then slices."""
    if rows.num_rows == 0:
        return []
    order, keys, starts, ends = _split_order(rows, by, list(then))
    rows = parallel_take(rows, pa.array(order))
    return [(k, rows.slice(s, e - s)) for k, s, e in zip(keys, starts, ends)]


def split_bounds(rows: pa.Table, by: list[str]) -> tuple[pa.Table, list[Any], list[int], list[int]]:
    """As :func:`split_groups` without a table per group: (rows in group order, group keys,
    starts, ends). Thousands of small groups made thousands of tables (of a few KB of objects
    each) per chunk."""
    if rows.num_rows == 0:
        return rows, [], [], []
    order, keys, starts, ends = _split_order(rows, by, [])
    return parallel_take(rows, pa.array(order)), keys, starts, ends


def split_lazily(rows: pa.Table, by: list[str], then: list[str] = ()) -> list[tuple[Any, Taken]]:
    """As :func:`_split`, with each group's rows still to be taken (by its write task)."""
    if rows.num_rows == 0:
        return []
    order, keys, starts, ends = _split_order(rows, by, list(then))
    return [(k, Taken(rows, order[s:e])) for k, s, e in zip(keys, starts, ends)]


FID = "__lh_fid"


@dataclass(frozen=True)
class InsertSlot:
    """Where some of a partition's inserts go: a small file group (merged: its base file is
    rewritten with them) or a new one."""

    file_id: str
    count: int
    small: bool


def route(context: "WriteContext", rows: pa.Table, loc: pa.Table) -> pa.Table:
    """``rows`` with FID, the file group each record updates (null: an insert), from the index's
    locations ``loc`` (aligned with ``rows``). A record whose key moved partition (global
    indexes) either stays in its old partition or, with update.partition.path, becomes a delete
    there (an extra row) and an insert in its new one. Row-local: it runs per batch anywhere."""
    cfg = context.config
    wc = context.write_config
    loc_p = loc.column(LOC_PARTITION)
    loc_f = loc.column(LOC_FILE_ID)
    found = pc.is_valid(loc_f)
    moved = pc.fill_null(pc.and_(found, pc.not_equal(loc_p, rows.column(PARTITION))), False)
    extra_deletes = None
    if pc.any(moved).as_py():
        update_path = (wc.bloom_update_partition_path if cfg.index_type.value.endswith("BLOOM")
                       else wc.simple_update_partition_path)
        ordering = context.spec.ordering_field
        if update_path and LOC_ORDERING in loc.column_names and context.spec.uses_ordering:
            # A stale version must not move the record: it stays an update of the stored record
            # in its old partition, where it loses the merge (Hudi merges before moving).
            stale = pc.fill_null(pc.less(rows.column(ordering), loc.column(LOC_ORDERING)), False)
            stale = pc.and_(moved, stale)
            if pc.any(stale).as_py():
                rows = rows.set_column(rows.schema.get_field_index(PARTITION), PARTITION,
                                       pc.if_else(stale, loc_p, rows.column(PARTITION)))
                moved = pc.and_(moved, pc.invert(stale))
        if update_path:
            # Delete from the old partition, insert into the new one.
            old = rows.filter(moved)
            extra_deletes = (old.set_column(old.schema.get_field_index(PARTITION), PARTITION,
                                            loc_p.filter(moved))
                             .set_column(old.schema.get_field_index(DELETE), DELETE,
                                         pa.repeat(True, old.num_rows))
                             .set_column(old.schema.get_field_index(UNCONDITIONAL), UNCONDITIONAL,
                                         pa.repeat(True, old.num_rows))
                             .append_column(FID, loc_f.filter(moved)))
            loc_f = pc.if_else(moved, pa.scalar(None, pa.string()), loc_f)
        else:
            rows = rows.set_column(rows.schema.get_field_index(PARTITION), PARTITION,
                                   pc.if_else(moved, loc_p, rows.column(PARTITION)))
    rows = rows.append_column(FID, pc.cast(loc_f, pa.string()))
    if extra_deletes is not None:
        rows = pa.concat_tables([rows, extra_deletes.cast(rows.schema)])
    return rows


def plan_inserts(context: "WriteContext", counts: dict[str, int], latest: dict[tuple[str, str], FileSlice],
                 pending: dict, avg_size: int) -> dict[str, list[InsertSlot]]:
    """Per partition, how its ``counts`` inserts are spread: small file groups first (smallest
    first, each up to hoodie.parquet.max.file.size), then new file groups of at most as many
    records as fit in one file, evenly filled (Hudi's UpsertPartitioner). On Merge-On-Read only
    the ``hoodie.merge.small.file.group.candidates.limit`` smallest base files without logs take
    inserts (Hudi's SparkUpsertDeltaCommitPartitioner.getSmallFileCandidates for an index that
    cannot index logs: each candidate's base file is rewritten)."""
    wc = context.write_config
    per_file = records_per_file(avg_size, wc)
    plan: dict[str, list[InsertSlot]] = {}
    for partition, n in sorted(counts.items()):
        slots: list[InsertSlot] = []
        offset = 0
        for file_id, room in small_file_room(context, partition, latest, pending, avg_size):
            if offset >= n:
                break
            take = min(room, n - offset)
            slots.append(InsertSlot(file_id, take, True))
            offset += take
        remaining = n - offset
        if remaining > 0:
            nfiles = math.ceil(remaining / per_file)
            size = math.ceil(remaining / nfiles)
            for off in range(offset, n, size):
                slots.append(InsertSlot(new_file_id(), min(size, n - off), False))
        plan[partition] = slots
    return plan


def small_file_room(context: "WriteContext", partition: str, latest: dict[tuple[str, str], FileSlice],
                    pending: dict, avg_size: int) -> list[tuple[str, int]]:
    """The small file groups of ``partition`` that take inserts, in the order they are filled,
    each with how many records it takes (see :func:`plan_inserts`)."""
    cfg = context.config
    wc = context.write_config
    small = [s for (p, f), s in latest.items()
             if p == partition and s.base_file is not None and (p, f) not in pending
             and (p, f) not in context.clustering
             and s.base_file.size < wc.small_file_limit and (not cfg.is_mor or not s.log_files)]
    small = sorted(small, key=lambda s: (s.base_file.size, s.file_id))
    if cfg.is_mor:
        small = small[:wc.small_file_candidates]
    out = []
    for s in small:
        room = (wc.max_file_size - s.base_file.size) // max(1, avg_size)
        if room > 0:
            out.append((s.file_id, room))
    return out


def update_target(context: "WriteContext", partition: str, fid: str, latest: dict, pending: dict,
                  small: bool = False) -> "Target":
    """The handle for a file group that takes updates or deletes (and, if ``small``, inserts)."""
    clustering = context.clustering.get((partition, fid))
    if clustering is not None:
        # Hudi's SparkRejectUpdateStrategy: the clustering would drop the change.
        where = f"{partition}/{fid}" if partition else fid
        raise ClusteringUpdateError(
            f"the write updates or deletes records in file group {where}, which clustering "
            f"{clustering} is rewriting",
            help="nothing was written; write again once the clustering is committed (`lakehouse "
                 "clustering run`, then `commit`), or roll the clustering back (`lakehouse rollback "
                 f"<table> {clustering}`)", clustering=clustering, file_groups=((partition, fid),))
    fs = latest.get((partition, fid))
    if small and fs is not None:
        return new_target(partition, fid, fs, None, TargetKind.MERGE)
    if context.config.is_mor:
        return new_target(partition, fid, fs, pending.get((partition, fid), fs.base_instant if fs else None),
                       TargetKind.APPEND)
    return new_target(partition, fid, fs, None, TargetKind.MERGE)


def assign_targets(context: "WriteContext", rows: pa.Table, loc: pa.Table, latest: dict[tuple[str, str], FileSlice],
                   pending: dict, avg_size: int) -> list["Target"]:
    rows = route(context, rows, loc)
    is_insert = pc.and_(pc.is_null(rows.column(FID)), pc.invert(rows.column(DELETE)))
    updates = rows.filter(pc.is_valid(rows.column(FID)))
    inserts = rows.filter(is_insert).drop_columns([FID])
    by_partition = dict(split_lazily(inserts, [PARTITION]))
    plan = plan_inserts(context, {p: t.num_rows for p, t in by_partition.items()}, latest, pending, avg_size)
    small = {(p, s.file_id) for p, slots in plan.items() for s in slots if s.small}

    targets: dict[tuple[str, str], "Target"] = {}
    for (partition, fid), part in split_lazily(updates, [PARTITION, FID]):
        targets[(partition, fid)] = tg = update_target(context, partition, fid, latest, pending,
                                                       (partition, fid) in small)
        tg.rows.append(part.drop_columns([FID]))
    new_targets: list["Target"] = []
    for partition, slots in plan.items():
        part, offset = by_partition[partition], 0
        for slot in slots:
            chunk = part.slice(offset, slot.count)
            offset += slot.count
            if slot.small:
                tg = targets.get((partition, slot.file_id))
                if tg is None:
                    tg = targets[(partition, slot.file_id)] = update_target(
                        context, partition, slot.file_id, latest, pending, True)
            else:
                tg = new_target(partition, slot.file_id, None, None, TargetKind.CREATE)
                new_targets.append(tg)
            tg.rows.append(chunk)
            tg.inserts += slot.count
    return list(targets.values()) + new_targets


def data_columns(rows: pa.Table) -> list[str]:
    """The columns of routed rows that go into data files (not the writer's helpers)."""
    return [c for c in rows.column_names if c not in HELPER_COLUMNS and c not in (PARTITION, FID)]


def run_target(ctx: HandleContext, tg: "Target", rows: pa.Table,
               task: int, *, min_log_version: int = 0, first_seqno: int = 0) -> list[WriteStat]:
    """Writes ``rows`` through ``tg``'s handle. An append in several parts passes each part
    the log version and sequence number the parts before it reached."""
    data_cols = data_columns(rows)
    if tg.kind is TargetKind.CREATE:
        live = rows.filter(pc.invert(rows.column(DELETE)))
        if live.num_rows == 0:
            return []
        return [create_base_file(ctx, partition=tg.partition, file_id=tg.file_id,
                                 records=live.select(data_cols), keys=live.column(KEY), task=task)]
    if tg.kind is TargetKind.MERGE:
        if tg.slice is None or tg.slice.base_file is None:
            live = rows.filter(pc.invert(rows.column(DELETE)))
            if live.num_rows == 0:
                return []
            return [create_base_file(ctx, partition=tg.partition, file_id=tg.file_id,
                                     records=live.select(data_cols), keys=live.column(KEY), task=task)]
        incoming = rows.select(data_cols + [KEY, SEQ, DELETE, UNCONDITIONAL])
        return [merge_base_file(ctx, base_slice=tg.slice, incoming=incoming, task=task,
                                concat=ctx.concat_inserts)]
    # append: data records to a data block, deletes to a delete block
    is_del = rows.column(DELETE)
    if pc.any(is_del).as_py():
        live, dels = rows.filter(pc.invert(is_del)), rows.filter(is_del)
    else:  # no copy of the rows just to drop nothing
        live, dels = rows, rows.slice(0, 0)
    deletes = None
    if dels.num_rows:
        ordering = ctx.spec.ordering_field if ctx.spec.uses_ordering else None
        uncond = dels.column(UNCONDITIONAL)
        cols = {"record_key": dels.column(KEY), "partition_path": dels.column(PARTITION)}
        if ordering and ordering in dels.column_names:
            cols["ordering_value"] = pc.if_else(uncond, pa.scalar(None, dels.column(ordering).type),
                                                dels.column(ordering))
        deletes = pa.table(cols)
    return append_log(ctx, slice_=tg.slice, partition=tg.partition, file_id=tg.file_id,
                      base_instant=tg.base_instant or ctx.instant_time,
                      records=live.select(data_cols), record_keys=live.column(KEY),
                      deletes=deletes, task=task, num_inserts=tg.inserts, min_version=min_log_version,
                      first_seqno=first_seqno)
