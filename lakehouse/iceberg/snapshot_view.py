"""The snapshot view of a Merge-On-Read table: each instant's overlay files (lakehouse.iceberg.overlay).

The Iceberg view after an instant equals lakehouse's snapshot read after it, kept so one
instant at a time:

- **a delta commit** ``T`` that wrote log records into a file group: ``T``'s parquet log blocks
  become row files as they are (:meth:`SnapshotView._copied`), and every row of the group's data
  files (its base file and earlier row files) holding a key ``T`` changed is position-deleted,
  as are the rows of ``T``'s own blocks a read does not show. Deleting a row twice is harmless,
  so earlier deletes need not be read. Under commit-time ordering (the default without an
  ordering field) the last arrival wins and every log record arrives after the base file, so
  what a read shows of ``T``'s keys is ``T``'s last record of each; under event-time ordering
  the winners are decided on a few columns (:meth:`SnapshotView._event_time_decision`), and a
  late record that loses changes nothing. Blocks that cannot be copied (Avro, no field ids) are
  decoded, merged and written again; partial updates read the file slice pinned to the keys.
- **a new base file** for a file group (a compaction, a clustering, a merge into a small base
  file): the group's overlay goes, and the log records published on the new base since
  (delta commits that completed while the compaction ran) are caught up on it: one row file of
  their merged records, position deletes of their keys in the new base file.
- **a retired file group** (a replace commit): its overlay goes with its base file.
- **a rebuild** (the first publication, after archival, or a switch of view): every file slice
  with log records is caught up on its base file as of the instant.

Positions need a file's record keys: the ``_hoodie_record_key`` column, kept in memory once read
(base files and row files never change, and their names are never reused), up to
:data:`lakehouse.iceberg.memo.ARROW_BYTES` per process, least recently used first out.
"""

from __future__ import annotations

import functools
import threading
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakehouse.storage.kept_reads import KeptReads
from lakehouse.columns import IS_DELETED, RECORD_KEY
from lakehouse.config import MergeMode
from lakehouse.engine import SharedThreads
from lakehouse.field_schema import FIELD_ID, Schema
from lakehouse.file_group.file_slice import BaseFile, FileSlice, LogFile
from lakehouse.file_group.naming import BaseFileName
from lakehouse.file_group.view import FileSystemView
from lakehouse.iceberg import background, event_time, key_index, overlay
from lakehouse.iceberg.builder import GroupFiles, PartitionChange, SnapshotWriter
from lakehouse.iceberg.key_index import Probe
from lakehouse.iceberg.manifest import DataFile, ManifestFile
from lakehouse.iceberg.replay import BaseFileWrite, InstantChanges, LogFileWrite, instant_changes
from lakehouse.iceberg.store import MetadataStore, partition_key
from lakehouse.log.block import BlockType, LogBlock, decode_delete_block
from lakehouse.log.reader import read_log_blocks
from lakehouse.merge import delete_flags
from lakehouse.read.file_slice_reader import LogChanges, read_file_slice, read_log_changes
from lakehouse.read.reader import TableReader
from lakehouse.timeline.instant import Instant

if TYPE_CHECKING:
    from lakehouse.meta_client import TableMetaClient

# File groups worked on at once: mostly waits on storage (reads, durable creates).
_WORKERS = 8
_ENGINE = SharedThreads("iceberg-overlay", _WORKERS)


@dataclass
class _Emitted:
    """One file group's new overlay files."""

    key: str  # its partition key
    adds: list[tuple[int, DataFile]] = field(default_factory=list)
    written: list[str] = field(default_factory=list)


@dataclass
class _Copy:
    """A delta commit's blocks in one file group, planned to be copied as row files."""

    fs: FileSlice
    t: str
    targets: list[tuple[int, DataFile]]
    out: _Emitted
    blocks: list[LogBlock]
    data_blocks: set[int]
    keys: pa.Array | None = None  # every arrival's key, in log order
    at: np.ndarray | None = None  # each arrival's (block, row); row -1 for a delete block's
    shown: np.ndarray | None = None  # whether a read shows the arrival
    changed: pa.Array | None = None  # keys whose shown version the commit changes
    older: pa.Table | None = None  # full rows of keys an older version is shown for again
    logged: pa.Array | None = None  # keys with versions in the slice's earlier logs (None: unknown)


Describe = Callable[[BaseFileWrite], tuple[int, DataFile]]
PartitionOf = Callable[[str, pq.FileMetaData], tuple[int, tuple]]


class SnapshotView:
    """The overlay changes of the instants one publish attempt publishes."""

    def __init__(self, meta: "TableMetaClient", timeline, store: MetadataStore, writer: SnapshotWriter,
                 describe: Describe, partition_of: PartitionOf) -> None:
        self.meta = meta
        self.timeline = timeline
        self.store = store
        # A delta commit's new log is read to plan its copy and again to decide event-time
        # order: read once (lakehouse.storage.kept_reads), for this attempt only.
        self.storage = KeptReads(meta.storage)
        self.writer = writer
        self.describe = describe
        self.partition_of = partition_of
        self.reader = TableReader(self.storage, meta.config, meta.active, timeline)
        self.commit_time_ordering = meta.config.merge_mode is MergeMode.COMMIT_TIME_ORDERING
        self.event_time = meta.config.merge_mode is MergeMode.EVENT_TIME_ORDERING and bool(meta.config.ordering_field)
        self.partial = meta.config.merge_mode is MergeMode.PARTIAL_UPDATE
        self._view: FileSystemView | None = None
        self._partition_views: dict[str, FileSystemView] = {}
        self._lock = threading.Lock()

    # --- the instants ----------------------------------------------------------------------

    def apply(self, inst: Instant, changes: InstantChanges, parts: dict[str, PartitionChange],
              parent: list[ManifestFile], schema: Schema, name_ids: dict[str, int],
              published: set[str], rebuild: bool) -> None:
        """Add ``inst``'s overlay changes to ``parts`` (keyed by partition key)."""
        visible = published | {inst.time}
        arrow = self.meta.schema(inst.time, self.timeline)
        jobs: list[Callable[[], _Emitted]] = []
        copies: list[tuple[FileSlice, list[tuple[int, DataFile]]]] = []

        def job(fs: FileSlice, log_visible: set[str], targets: list[tuple[int, DataFile]]) -> None:
            jobs.append(functools.partial(self._group, fs, log_visible, visible, inst.time, arrow, targets,
                                          schema, name_ids))

        if rebuild:
            for fs, base in self._slices_with_logs(inst, parts):
                parts.setdefault(partition_key(fs.partition), PartitionChange(replace_all=True))
                job(fs, visible, [base] if base else [])
        else:
            keys = {partition_key(p) for p, _ in changes.replaced}
            keys |= {partition_key(w.partition) for w in changes.writes}
            keys |= {partition_key(lw.partition) for lw in changes.logs}
            groups = self.writer.groups(parent, keys) if keys else {}
            rebased: set[tuple[str, str]] = set()
            for partition, fid in changes.replaced:
                self._drop(parts, partition, groups.get((partition_key(partition), fid)))
            for w in changes.writes:
                self._drop(parts, w.partition, groups.get((partition_key(w.partition), w.file_id)))
                rebased.add((w.partition, w.file_id))
                logs = self._logs_on(w, changes, published)
                if logs:  # a compaction's new slice, written while it ran: caught up on it
                    job(FileSlice(w.partition, w.file_id, w.instant, self._base(w), logs), visible,
                        [self.describe(w)])
            by_group: dict[tuple[str, str], list[LogFileWrite]] = defaultdict(list)
            for lw in changes.logs:
                by_group[(lw.partition, lw.file_id)].append(lw)
            for (partition, fid), lws in sorted(by_group.items()):
                if (partition, fid) in rebased:
                    continue  # caught up above, this instant's logs included
                g = groups.get((partition_key(partition), fid)) or GroupFiles()
                fs = FileSlice(partition, fid, lws[0].name.base_instant, None, _log_files(lws))
                if self.partial:
                    job(fs, {inst.time}, g.data_files)
                else:
                    copies.append((fs, g.data_files))
        # File groups are independent: their reads, lookups and (durable) writes overlap; the
        # event-time decision runs once for all of them.
        engine = _ENGINE
        planned = engine.map(lambda c: self._plan(c[0], inst.time, c[1]), copies)
        ready = [p for p in planned if p is not None]
        for (fs, targets), p in zip(copies, planned):
            if p is None:  # blocks that cannot be copied: decoded and written again
                job(fs, {inst.time}, targets)
        if self.event_time:
            self._decide(ready, inst.time, arrow, visible)
        background.pause()
        work: list[Callable[[], _Emitted]] = [functools.partial(self._finish, p, schema, name_ids) for p in ready]
        for e in engine.map(lambda j: j(), work + jobs):
            self.writer.written.extend(e.written)
            parts.setdefault(e.key, PartitionChange()).overlay_adds.extend(e.adds)

    def _slices_with_logs(self, inst: Instant, parts: dict[str, PartitionChange]):
        """Every file slice with log records as of ``inst``, with the base file it merges on."""
        bases: dict[str, tuple[int, DataFile]] = {}
        for change in parts.values():
            for w in change.adds.values():
                bases[w.path] = self.describe(w)
        for fs in self.view().latest_slices(as_of=inst.time):
            if not fs.merged_log_files:
                continue
            base_file = fs.merged_base_file
            base = bases.get(base_file.path) if base_file is not None else None
            if base_file is not None and base is None:
                # The read-optimized state holds another base file for this group (it was
                # published from a listing of its own): describe the one the slice merges on.
                base = self.describe(BaseFileWrite(fs.partition, fs.file_id, base_file.path,
                                                   base_file.commit_time, False))
            yield fs, base

    def _group(self, fs: FileSlice, log_visible: set[str], visible: set[str], t: str, arrow: pa.Schema,
               targets: list[tuple[int, DataFile]], schema: Schema, name_ids: dict[str, int]) -> "_Emitted":
        """One file group's overlay files for ``t``: a row file of what its visible log records
        make, a delete file of the rows of ``targets`` holding their keys."""
        key = partition_key(fs.partition)
        out = _Emitted(key)
        if self.event_time and log_visible == {t}:
            records = self._event_time_delta(fs, t, arrow, visible)
        else:
            records = self._records(fs, log_visible, visible, t, arrow)
        hits = self._hits(targets, records.keys)
        if hits:
            self._add_deletes(out, fs, t, hits, self._partition(fs, targets, None))
        if records.rows.num_rows:
            self._add_rows(out, fs, t, records.rows, targets, schema, name_ids)
        return out

    def _hits(self, targets: list[tuple[int, DataFile]], keys: pa.Array,
              logged: pa.Array | None = None) -> dict[str, np.ndarray]:
        """Positions of the rows of each target data file holding one of ``keys`` (in row files
        only those of ``logged``, where the caller knows which keys the slice's logs hold)."""
        hits: dict[str, np.ndarray] = {}
        if not len(keys):
            return hits
        probe = Probe(keys)
        in_rows = probe
        if logged is not None:
            logged = logged.filter(pc.is_in(logged, value_set=keys)) if len(logged) else logged
            in_rows = Probe(logged) if len(logged) else None
        for _, f in targets:
            p = in_rows if overlay.parse(f.path) is not None else probe
            if p is None:
                continue
            pos = key_index.load(self.storage, self.store.relative(f.path), f.file_size).positions(p)
            if len(pos):
                hits[f.path] = pos
        return hits

    def _add_rows(self, out: "_Emitted", fs: FileSlice, t: str, rows: pa.Table,
                  targets: list[tuple[int, DataFile]], schema: Schema, name_ids: dict[str, int]) -> None:
        w = overlay.write_rows(self.storage, out.key, fs.file_id, t, rows, schema)
        out.written.append(w.rel)
        spec_id, values = self._partition(fs, targets, w.footer)
        f = overlay.rows_file(w, values, schema, name_ids)
        key_index.keep(f.path, f.file_size, rows.column(RECORD_KEY))
        out.adds.append((spec_id, f))

    def _add_deletes(self, out: "_Emitted", fs: FileSlice, t: str, hits: dict[str, np.ndarray],
                     partition: tuple[int, tuple]) -> None:
        """One delete file of ``hits``: the group's files share its partition (and spec)."""
        w = overlay.write_deletes(self.storage, out.key, fs.file_id, t, hits)
        out.written.append(w.rel)
        out.adds.append((partition[0], overlay.deletes_file(w, partition[1], hits)))

    # --- pieces ----------------------------------------------------------------------------

    def view(self) -> FileSystemView:
        """The whole table's view (a rebuild needs every slice)."""
        with self._lock:
            if self._view is None:
                self._view = FileSystemView.load(self.storage, self.timeline, self.meta.active)
            return self._view

    def partition_view(self, partition: str) -> FileSystemView:
        """The view of one partition: a publish lists only the partitions its instants wrote
        (on object storage a listing is a request per partition)."""
        with self._lock:
            if self._view is not None:
                return self._view
            view = self._partition_views.get(partition)
            if view is None:
                view = FileSystemView.load(self.storage, self.timeline, self.meta.active, [partition])
                self._partition_views[partition] = view
            return view

    def _whole(self, fs: FileSlice, t: str) -> FileSlice:
        """The file slice (base file, all its logs) of ``fs``'s file group as of ``t``."""
        return next((s for s in self.partition_view(fs.partition).latest_slices(as_of=t, partitions={fs.partition})
                     if s.file_id == fs.file_id), fs)

    def _base(self, w: BaseFileWrite) -> BaseFile:
        name = BaseFileName.parse(w.path.rpartition("/")[2])
        return BaseFile(w.partition, name, w.size)

    def _logs_on(self, w: BaseFileWrite, changes: InstantChanges, published: set[str]) -> tuple[LogFile, ...]:
        """The log files of published instants (and this one) written on the base file ``w``:
        a compaction's new slice, written while the compaction ran."""
        lws = [lw for lw in changes.logs if (lw.partition, lw.file_id) == (w.partition, w.file_id)
               and lw.name.base_instant == w.instant]
        for i in self.timeline.completed_writes():
            if i.time <= w.instant or i.time not in published or i.time == changes.instant.time:
                continue
            c = instant_changes(self.meta.active, self.timeline, i)
            lws += [lw for lw in c.logs if (lw.partition, lw.file_id) == (w.partition, w.file_id)
                    and lw.name.base_instant == w.instant]
        return _log_files(lws)

    def _drop(self, parts: dict[str, PartitionChange], partition: str, g: GroupFiles | None) -> None:
        if g is None or not g.overlay:
            return
        change = parts.setdefault(partition_key(partition), PartitionChange())
        change.overlay_removes |= {f.path for _, f in g.overlay}

    def _records(self, fs: FileSlice, log_visible: set[str], visible: set[str], t: str,
                 arrow: pa.Schema) -> LogChanges:
        """The records the visible log records of ``fs`` make, for their keys, as of ``t``."""
        ctx = self.reader.slice_read_context(arrow, set(log_visible), None, None, True)
        changes = read_log_changes(fs, ctx)
        if self.commit_time_ordering or not len(changes.keys):
            return changes
        whole = self._whole(fs, t)
        ctx = self.reader.slice_read_context(arrow, set(visible), None, None, True)
        ctx.keys = changes.keys
        return LogChanges(read_file_slice(whole, ctx), changes.keys)

    def _plan(self, fs: FileSlice, t: str, targets: list[tuple[int, DataFile]]) -> "_Copy | None":
        """A delta commit's overlay in one file group without re-encoding its records: each
        parquet data block ``t`` appended is a whole parquet file with the columns' field ids,
        so it becomes a row file as it is (a copy of its bytes), and its rows that are not what a
        read shows (an earlier version of a key in the same commit, a soft delete, a record that
        loses under event-time ordering) are position-deleted with the rows the commit
        replaces. None where that does not apply: Avro blocks, blocks without field ids, a key
        written twice under event-time ordering."""
        blocks = []
        for lf in fs.log_files:
            for b in read_log_blocks(self.storage.read(lf.path), self.storage.uri(lf.path)):
                if b.instant_time != t or b.block_type is BlockType.COMMAND:
                    continue
                if b.block_type not in (BlockType.PARQUET_DATA, BlockType.DELETE):
                    return None
                blocks.append(b)
        # Every arrival of the commit in log order: (block, row, key, soft delete); deletes row -1.
        keys, where, soft = [], [], []
        data_blocks: set[int] = set()
        for j, b in enumerate(blocks):
            if b.block_type is BlockType.DELETE:
                k = decode_delete_block(b).column("record_key")
                keys.append(k.combine_chunks() if isinstance(k, pa.ChunkedArray) else k)
                where.append(np.column_stack([np.full(len(k), j), np.full(len(k), -1)]))
                soft.append(np.ones(len(k), dtype=bool))
                continue
            pf = pq.ParquetFile(pa.BufferReader(b.content))
            if not _all_ids(pf.schema_arrow) or RECORD_KEY not in pf.schema_arrow.names:
                return None
            data_blocks.add(j)
            narrow = pf.read(columns=[c for c in (RECORD_KEY, IS_DELETED) if c in pf.schema_arrow.names])
            keys.append(narrow.column(RECORD_KEY).combine_chunks())
            where.append(np.column_stack([np.full(narrow.num_rows, j), np.arange(narrow.num_rows)]))
            soft.append(delete_flags(narrow).to_numpy())
        plan = _Copy(fs, t, targets, _Emitted(partition_key(fs.partition)), blocks, data_blocks)
        if not keys:
            return plan  # nothing of the commit in this group (a command block only)
        plan.keys = pa.concat_arrays(keys)
        plan.at = np.concatenate(where)
        is_soft = np.concatenate(soft)
        codes = pc.dictionary_encode(plan.keys).indices.to_numpy()
        # The last arrival of each key (commit-time: what a read shows of the commit's records).
        last = np.full(codes.max() + 1, -1, dtype=np.int64)
        last[codes] = np.arange(len(codes))
        shown = np.zeros(len(codes), dtype=bool)
        shown[last] = True
        plan.shown = shown & ~is_soft & (plan.at[:, 1] >= 0)
        plan.changed = pc.unique(plan.keys)
        if self.event_time and len(plan.changed) != len(codes):
            return None  # a key twice in the commit: its winner needs the full merge
        return plan

    def _decide(self, plans: list["_Copy"], t: str, arrow: pa.Schema, visible: set[str]) -> None:
        """Under event-time ordering: narrow each plan to the keys whose shown version ``t``
        changes, showing only ``t``'s records that win (lakehouse.iceberg.event_time), all file
        groups in one decision."""
        plans = [p for p in plans if p.changed is not None and len(p.changed)]
        if not plans:
            return
        ctx = self.reader.slice_read_context(arrow, set(visible), event_time.NARROW, None, True)
        wholes = [self._whole(p.fs, t) for p in plans]
        decisions = event_time.decide(self.storage, ctx, [event_time.Group(w, p.changed)
                                                          for w, p in zip(wholes, plans)], t)
        for p, whole, d in zip(plans, wholes, decisions):
            p.changed = d.changed
            p.logged = d.logged
            p.shown &= pc.is_in(p.keys, value_set=d.mine).to_numpy(zero_copy_only=False)
            if len(d.older):
                p.older = self._older(whole, d.older, arrow, visible)

    def _older(self, whole: FileSlice, keys: pa.Array, arrow: pa.Schema, visible: set[str]) -> pa.Table:
        """The full rows a read shows for ``keys`` (an older version shown again)."""
        ctx = self.reader.slice_read_context(arrow, set(visible), None, None, True)
        ctx.keys = keys
        return read_file_slice(whole, ctx)

    def _finish(self, p: "_Copy", schema: Schema, name_ids: dict[str, int]) -> "_Emitted":
        """Write a planned copy: the row files, the delete file."""
        out, fs, targets = p.out, p.fs, p.targets
        if p.changed is None:
            return out
        if p.older is not None and p.older.num_rows:
            self._add_rows(out, fs, p.t, p.older, targets, schema, name_ids)
        hits = self._hits(targets, p.changed, p.logged)
        partition = None
        for j, b in enumerate(p.blocks):
            if j not in p.data_blocks:
                continue
            mine_rows = p.at[:, 0] == j
            if not p.shown[mine_rows].any():
                continue  # nothing of it is shown: no copy
            rel = overlay.new_path(out.key, fs.file_id, p.t, overlay.ROWS)
            w = overlay.write_bytes(self.storage, rel, b.content)
            out.written.append(w.rel)
            partition = partition or self._partition(fs, targets, w.footer)
            f = overlay.rows_file(w, partition[1], schema, name_ids)
            key_index.keep(f.path, f.file_size, p.keys.filter(pa.array(mine_rows)))
            out.adds.append((partition[0], f))
            hidden = np.flatnonzero(~p.shown[mine_rows])
            if len(hidden):
                hits[f.path] = hidden
        if hits:
            self._add_deletes(out, fs, p.t, hits, partition or self._partition(fs, targets, None))
        return out

    def _partition(self, fs: FileSlice, targets: list[tuple[int, DataFile]],
                   footer: pq.FileMetaData | None) -> tuple[int, tuple]:
        """(spec id, partition tuple) of the group's files: its data files', or from a new
        file's ``footer`` for a group that had none."""
        if targets:
            return targets[0][0], targets[0][1].partition
        with self._lock:
            return self.partition_of(fs.partition, footer)

    def _event_time_delta(self, fs: FileSlice, t: str, arrow: pa.Schema, visible: set[str]) -> LogChanges:
        """A delta commit's records under event-time ordering, decided on a few columns
        (lakehouse.iceberg.event_time): the keys whose merged record ``t`` changed, with the
        records they have now (``t``'s own, merged among themselves, or an older one again)."""
        own = read_log_changes(fs, self.reader.slice_read_context(arrow, {t}, None, None, True))
        if not len(own.keys):
            return own
        whole = self._whole(fs, t)
        ctx = self.reader.slice_read_context(arrow, set(visible), event_time.NARROW, None, True)
        d = event_time.decide(self.storage, ctx, [event_time.Group(whole, own.keys)], t)[0]
        rows = own.rows.filter(pc.is_in(own.rows.column(RECORD_KEY), value_set=d.mine))
        if len(d.older):
            older = self._older(whole, d.older, arrow, visible)
            rows = pa.concat_tables([rows, older.select(rows.column_names)], promote_options="permissive")
        return LogChanges(rows, d.changed)


def _all_ids(schema: pa.Schema) -> bool:
    """Whether every field of ``schema``, nested ones included, carries a parquet field id."""
    def field_ok(f: pa.Field) -> bool:
        if FIELD_ID not in (f.metadata or {}):
            return False
        t = f.type
        if pa.types.is_struct(t):
            return all(field_ok(t.field(i)) for i in range(t.num_fields))
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            return field_ok(t.value_field)
        if pa.types.is_map(t):
            return field_ok(t.key_field) and field_ok(t.item_field)
        return True
    return all(field_ok(f) for f in schema)


def _log_files(lws: Iterable[LogFileWrite]) -> tuple[LogFile, ...]:
    unique = {lw.path: lw for lw in lws}
    return tuple(sorted((LogFile(lw.partition, lw.name, lw.size) for lw in unique.values()),
                        key=lambda f: (f.name.base_instant, f.name.sort_key)))
