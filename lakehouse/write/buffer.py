"""Write buffers with Hudi Flink's flush rules: a write's memory bounded by bytes.

Records are buffered per file group. A file group's buffer is written out (a flush) once it
holds ``write.batch.size``; whenever all buffers together pass their budget, the largest ones are
flushed until they hold half of it (Flink flushes the largest one; flushing down to half keeps a
budget shared by many file groups from ending in a flush per added chunk). The buffers' budget
is half of ``write.task.max.size`` and flushes run in the background while the next records are
buffered, up to a quarter of it more: the rest is room for the chunk being keyed and the files
being encoded. What is left is flushed at the end, the file groups in parallel. A batch no
larger than ``write.task.max.size`` is taken whole instead (lakehouse.write.prepare): its flushes
all come at the end, so a bulk load within the budget writes base files only.

A flush of a Merge-On-Read file group appends its records to a new log file version, so a file
group flushed several times in one instant has several log files of that instant, read back in
flush order (Flink's writer appends them as blocks instead: the records and their order are the
same). The first flush of a bucket without a file group creates its base file; later flushes of
it append to that new slice. Only writes that can append take this path: Merge-On-Read tables
with the BUCKET index, whose records' file groups are a hash of their keys, known per chunk.
"""

from __future__ import annotations

import functools
import itertools
import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Callable

import pyarrow as pa
import pyarrow.compute as pc

from lakehouse.config import BulkInsertSortMode, MergeMode
from lakehouse.file_group.file_slice import BaseFile, FileSlice, LogFile
from lakehouse.file_group.naming import BaseFileName, LogFileName
from lakehouse.columns import BUCKET, KEY, PARTITION
from lakehouse.timeline.commit_metadata import WriteStat
from lakehouse.io.partition_metafile import ensure_partitions
from lakehouse.write.assign import Taken, materialize, new_target, run_target, split_lazily
from lakehouse.write.memory import release_unused
from lakehouse.write.operation import Operation, TargetKind
from lakehouse.write.prepare import Prepared, combines, precombine

if TYPE_CHECKING:
    from lakehouse.write.context import WriteContext
    from lakehouse.io.handles import HandleContext

Key = tuple[str, int]  # (partition, bucket)


class WriteBuffers:
    """Per-file-group buffers of rows (tables, or groups still to be taken) and the flush rules.

    ``flush(key, parts)`` writes one buffer out, on ``parallelism`` threads while the caller
    goes on buffering (one flush of a file group at a time, in order). Buffers being flushed
    count until their flush ends: the caller waits once they pass half the budget. Use it as a
    context manager: leaving it waits for every flush, so none runs on after a failure.
    """

    def __init__(self, batch_bytes: int, task_max_bytes: int,
                 flush: Callable[[Key, list[Any]], None], parallelism: int = 1) -> None:
        self.batch_bytes = batch_bytes
        self.task_max_bytes = task_max_bytes
        self._flush = flush
        self.parts: dict[Key, list[Any]] = {}
        self.sizes: dict[Key, int] = {}
        self.total = 0  # bytes buffered
        self.in_flight = 0  # bytes being flushed
        self.flushes = 0
        self._pool = ThreadPoolExecutor(max_workers=parallelism) if parallelism > 1 else None
        self._running: dict[Key, Future] = {}
        self._cond = threading.Condition()
        self._finished: list[tuple[Key, Future]] = []  # flushes done since the last wait

    def __enter__(self) -> "WriteBuffers":
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)

    def add(self, key: Key, rows: pa.Table | Taken) -> None:
        n = rows.nbytes
        self.parts.setdefault(key, []).append(rows)
        self.sizes[key] = self.sizes.get(key, 0) + n
        self.total += n
        if self.sizes[key] >= self.batch_bytes:
            self._flush_one(key)
        if self.total > self.task_max_bytes:
            for k in sorted(self.sizes, key=self.sizes.__getitem__, reverse=True):
                if self.total <= self.task_max_bytes // 2:
                    break
                self._flush_one(k)
        self._wait(self.task_max_bytes // 2)

    def _flush_one(self, key: Key) -> None:
        parts = self.parts.pop(key)
        size = self.sizes.pop(key)
        self.total -= size
        self.flushes += 1
        if self._pool is None:
            self._flush(key, parts)
            del parts
            release_unused()
            return
        earlier = self._running.pop(key, None)
        if earlier is not None:
            earlier.result()
        with self._cond:
            self.in_flight += size
        future = self._pool.submit(self._run, key, parts, size)
        self._running[key] = future
        future.add_done_callback(functools.partial(self._done, key))

    def _run(self, key: Key, parts: list[Any], size: int) -> None:
        try:
            self._flush(key, parts)
            del parts
            release_unused()
        finally:
            with self._cond:
                self.in_flight -= size

    def _done(self, key: Key, future: Future) -> None:
        with self._cond:
            self._finished.append((key, future))
            self._cond.notify_all()

    def _wait(self, limit: int) -> None:
        """Until at most ``limit`` bytes are being flushed, with ``limit`` 0 until every flush is
        done; a failed flush raises here. Finished flushes are handed over by their callbacks: a
        wait costs what finished since the last one, not a look at every flush still running
        (which made a write to many file groups quadratic: a 5k-row upsert into 1,280 of them
        spent ~3 s polling futures)."""
        if limit <= 0:
            # Every flush's own outcome: in_flight reaches 0 when the last flush's bytes are
            # released, which is before its future says whether it failed.
            while self._running:
                self._running.popitem()[1].result()
            with self._cond:
                self._finished.clear()
            return
        while True:
            with self._cond:
                while not self._finished and self.in_flight > limit:
                    self._cond.wait()
                finished, self._finished = self._finished, []
            for key, future in finished:
                if self._running.get(key) is future:
                    del self._running[key]
                future.result()
            if self.in_flight <= limit:
                return

    def flush_all(self) -> None:
        """Flush what is left, one file group per task, in parallel, and wait for every flush.
        Largest first: the tasks then end together instead of one big one running on alone."""
        for key in sorted(self.parts, key=self.sizes.__getitem__, reverse=True):
            self._flush_one(key)
        self._wait(0)


class FlushedOrdering:
    """The batch's own versions of a key reduce by the ordering field under commit-time ordering
    too (``OverwriteWithLatestAvroPayload.preCombine``: the greater value, a tie to the later
    record), while readers take a file group's later log file over an earlier one. So a version
    flushed in a later chunk that loses to one an earlier flush of the same instant wrote is
    dropped, and the result is that of the batch written whole, whatever the chunking. Kept per
    file group: each key flushed so far and its greatest ordering value (keys only, no rows).
    Flushes of one file group run one at a time, in order, so each group's record needs no lock."""

    def __init__(self, field: str) -> None:
        self.field = field
        self.seen: dict[Key, pa.Table] = {}

    @classmethod
    def of(cls, context: "WriteContext", prepared: Prepared) -> "FlushedOrdering | None":
        spec = context.spec
        if (prepared.rows is not None or not combines(context, prepared.operation)
                or spec.mode is not MergeMode.COMMIT_TIME_ORDERING or not spec.ordering_field):
            return None  # taken whole (one flush per group), or the readers' order is the rule
        return cls(spec.ordering_field)

    def reconcile(self, key: Key, rows: pa.Table) -> pa.Table:
        if self.field not in rows.column_names:
            return rows
        prev = self.seen.get(key)
        if prev is not None:
            at = pc.index_in(rows.column(KEY), value_set=prev.column(KEY).combine_chunks())
            earlier = prev.column(self.field).combine_chunks().take(at)
            loses = pc.fill_null(pc.less(rows.column(self.field), earlier), False)
            if pc.any(loses).as_py():
                rows = rows.filter(pc.invert(loses))
        mine = rows.select([KEY, self.field])
        both = mine if prev is None else pa.concat_tables([prev, mine.cast(prev.schema)])
        agg = both.group_by(KEY).aggregate([(self.field, "max")])
        self.seen[key] = agg.select([KEY, f"{self.field}_max"]).rename_columns([KEY, self.field])
        return rows


def after_create(partition: str, file_id: str, stat: WriteStat) -> FileSlice:
    """The slice a flush's new base file starts (later flushes append to it)."""
    name = BaseFileName.parse(stat.path.rsplit("/", 1)[-1])
    assert name is not None, stat.path
    return FileSlice(partition, file_id, name.instant_time,
                     BaseFile(partition, name, stat.file_size_in_bytes))


def after_append(fs: FileSlice | None, partition: str, file_id: str, base_instant: str,
                 stats: list[WriteStat]) -> FileSlice:
    """``fs`` with the log files a flush appended (so the next flush takes the next version)."""
    logs = []
    for s in stats:
        name = LogFileName.parse(s.path.rsplit("/", 1)[-1])
        assert name is not None, s.path
        logs.append(LogFile(partition, name, s.file_size_in_bytes))
    if fs is None or fs.base_instant != base_instant:
        fs = FileSlice(partition, file_id, base_instant, None, (), fs.previous if fs else None)
    return fs.with_logs(fs.log_files + tuple(logs))


def default_parallelism() -> int:
    return min(os.cpu_count() or 1, 8)


def write_buffered(context: "WriteContext", prepared: Prepared, ctx: "HandleContext",
                   latest: dict[tuple[str, str], FileSlice], pending: dict) -> list[WriteStat]:
    """Write ``prepared`` (whole or chunk by chunk) through per-bucket buffers; returns the
    write results of every flush."""
    wc = context.write_config
    existing = context.buckets.existing(list(latest.values()))
    current: dict[Key, FileSlice] = {}  # slices this instant's flushes wrote to
    stats: list[WriteStat] = []
    partitions_made: set[str] = set()
    lock = threading.Lock()
    tasks = itertools.count()
    sort_keys = (prepared.operation is Operation.BULK_INSERT
                 and wc.bulk_insert_sort_mode is not BulkInsertSortMode.NONE)

    across = FlushedOrdering.of(context, prepared)

    def flush(key: Key, parts: list[Any]) -> None:
        partition, bucket = key
        rows = materialize(parts)
        if len(parts) > 1:
            # Parts of several chunks: each chunk reduced its own duplicate keys (prepare), these
            # reduce across them, as Flink's writer deduplicates a bucket's buffer when it flushes.
            # Else a key in two chunks lands twice in one base file, or a delete block written
            # after the data blocks undoes a later re-insert. Versions in different flushes go to
            # successive log files, which readers apply in order.
            if combines(context, prepared.operation):
                rows = precombine(context, rows)
            if sort_keys:
                rows = rows.sort_by(KEY)
        if across is not None:
            rows = across.reconcile(key, rows)
        with lock:
            task = next(tasks)
            if partition not in partitions_made:
                ensure_partitions(ctx.storage, {partition}, ctx.instant_time, ctx.partitions_with_metafile)
                partitions_made.add(partition)
        fs = current.get(key)
        if fs is None and key in existing:
            fs = existing[key]
            base_instant = pending.get((partition, fs.file_id), fs.base_instant)
        else:
            base_instant = fs.base_instant if fs is not None else None
        if fs is None:
            tg = new_target(partition, context.buckets.new_file_id(partition, bucket), None, None, TargetKind.CREATE)
        else:
            tg = new_target(partition, fs.file_id, fs, base_instant, TargetKind.APPEND)
        out = run_target(ctx, tg, rows, task)
        if not out:  # a new bucket given deletes only: nothing to write
            return
        with lock:
            stats.extend(out)
        if tg.kind is TargetKind.CREATE:
            current[key] = after_create(partition, tg.file_id, out[0])
        else:
            current[key] = after_append(fs, partition, tg.file_id, base_instant, out)

    # The buffers get half the budget and the flushes under way up to a quarter more: the rest is
    # room for the chunk being keyed and the files being encoded, so the write as a whole stays
    # near write.task.max.size.
    budget = wc.task_max_bytes // 2
    with WriteBuffers(min(wc.batch_bytes, budget), budget, flush, default_parallelism()) as buffers:
        whole = prepared.rows is not None
        for rows in prepared.iter_rows():
            if rows.num_rows == 0:
                continue
            rows = rows.append_column(BUCKET, pa.array(context.record_buckets(rows)))
            # The whole batch in one go: each file group's rows are gathered by its flush, in
            # parallel. In chunks: gathered now, each group into buffers of its own (a slice of
            # one gathered chunk would keep the whole chunk alive until its last group is flushed).
            for (partition, bucket), part in split_lazily(rows, [PARTITION, BUCKET],
                                                         then=[KEY] if sort_keys else []):
                part = part.drop_columns([BUCKET])
                buffers.add((partition, bucket), part if whole else part.materialize())
        buffers.flush_all()
    return stats
