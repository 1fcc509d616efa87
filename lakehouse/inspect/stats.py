"""A table's file groups, files and bytes in its latest file slices, overall and per partition
(``lakehouse stats --json`` prints it; the Lakehouse view shows it)."""

from __future__ import annotations

from typing import Any, Sequence

from lakehouse.file_group.file_slice import FileSlice
from lakehouse.table import Table

STAT_KEYS = ("file_groups", "base_files", "base_bytes", "log_files", "log_bytes")


def table_stats(table: Table, slices: Sequence[FileSlice] | None = None) -> dict[str, Any]:
    """``slices``: the latest file slices for write, when already listed (one listing serves a page)."""
    timeline = table.timeline
    if slices is None:
        slices = table.file_system_view().latest_slices_for_write()
    parts: dict[str, dict[str, int]] = {}
    for sl in slices:
        counts = (1, 1 if sl.base_file else 0, sl.base_size, len(sl.log_files), sl.total_log_size)
        p = parts.setdefault(sl.partition, dict.fromkeys(STAT_KEYS, 0))
        for k, n in zip(STAT_KEYS, counts):
            p[k] += n
    total = {k: sum(p[k] for p in parts.values()) for k in STAT_KEYS}
    last = timeline.completed_writes().last
    return {"table": table.name, "path": table.path, "type": str(table.config.table_type),
            **total, "partitions": len(parts), "pending_compactions": len(timeline.pending_compactions()),
            "last_commit": last.time if last else None,
            "by_partition": [{"partition": k, **v} for k, v in sorted(parts.items())]}


__all__ = ["table_stats", "STAT_KEYS"]
