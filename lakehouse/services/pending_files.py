"""The files of writes still in flight, which a table service's plan must leave out: their
rollback deletes them, and a plan naming them could then not run."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lakehouse.io.markers import Markers
from lakehouse.log.reader import iter_log_blocks

if TYPE_CHECKING:
    from lakehouse.meta_client import TableMetaClient


def without_files_of(meta: "TableMetaClient", slices: list, writes, *, keep_base_only: bool = False) -> list:
    """Several writers: a plan made past writes in flight (a compaction's, as Hudi's
    ScheduleCompactionActionExecutor plans under OCC, or a clustering's) leaves out the log files
    those writes created, which their rollback deletes; a write that logged to a planned file
    group yields at its commit (lakehouse.concurrency.conflict). Markers come before files, and
    they are read after the listing, so every listed file of such a write is found. A slice left
    without logs is dropped (nothing to compact), or kept with its base file (``keep_base_only``:
    a clustering rewrites it still)."""
    marked = {m.data_path: w.time for w in writes for m in Markers(meta.storage, w.time).all()}
    if not marked:
        return slices
    out = []
    for s in slices:
        logs = tuple(lf for lf in s.log_files
                     if lf.path not in marked or not _created_by(meta, lf.path, marked[lf.path]))
        if logs or (keep_base_only and s.base_file is not None):
            out.append(s.with_logs(logs))
    return out


def _created_by(meta: "TableMetaClient", path: str, instant_time: str) -> bool:
    """Whether the write ``instant_time`` created the log file (its first block is the write's,
    or it has none yet), rather than appended to a committed one (whose rollback keeps it)."""
    try:
        head = meta.storage.read_range(path, 0, _HEAD_BYTES)
    except FileNotFoundError:
        return True
    first = next(iter_log_blocks(head, path), None)  # a block cut off by the range keeps its header
    if (first is None or not first.instant_time) and len(head) == _HEAD_BYTES:
        first = next(iter_log_blocks(meta.storage.read(path), path), None)  # a header past the range
    return first is None or not first.instant_time or first.instant_time == instant_time


_HEAD_BYTES = 64 * 1024
