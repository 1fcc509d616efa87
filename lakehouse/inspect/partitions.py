"""A table's partitions as the latest file slices make them up: file groups, files and bytes,
the rows in their base files and the records waiting in their logs (both from the write stats of
the commits that wrote those files: no data file is read), and how far each is from the median
size (skew). The Lakehouse view shows it; ``lakehouse stats --json`` gives the sizes alone."""

from __future__ import annotations

import statistics
from typing import Any, Sequence

from lakehouse.file_group.file_slice import FileSlice
from lakehouse.file_group.naming import is_log_file
from lakehouse.inspect.timeline import Fact


def _written(facts: Sequence[Fact]) -> dict[str, int]:
    """Records each data file holds, by its path: a base file's from the one write stat that
    made it, a log file's summed over every append to it."""
    out: dict[str, int] = {}
    for f in facts:
        if f.meta is None or f.row.get("state") != "completed":
            continue
        for s in f.meta.write_stats():
            if is_log_file(s.path):
                out[s.path] = out.get(s.path, 0) + s.num_writes + s.num_deletes
            else:
                out[s.path] = s.num_writes
    return out


def partitions(slices: Sequence[FileSlice], facts: Sequence[Fact]) -> list[dict[str, Any]]:
    """One row per partition, in partition order: ``file_groups``, ``base_files``, ``base_bytes``,
    ``log_files``, ``log_bytes``, ``bytes``; ``base_rows`` (None where a base file's write stat is
    not on the timeline any more); ``log_records`` (records appended to the waiting logs:
    inserts, updates and deletes); ``skew`` (bytes over the median partition's)."""
    written = _written(facts)
    rows: dict[str, dict[str, Any]] = {}
    for sl in slices:
        p = rows.setdefault(sl.partition, {"partition": sl.partition, "file_groups": 0, "base_files": 0,
                                           "base_bytes": 0, "log_files": 0, "log_bytes": 0,
                                           "base_rows": 0, "log_records": 0})
        p["file_groups"] += 1
        if sl.base_file is not None:
            p["base_files"] += 1
            p["base_bytes"] += sl.base_size
            n = written.get(sl.base_file.path)
            p["base_rows"] = None if n is None or p["base_rows"] is None else p["base_rows"] + n
        p["log_files"] += len(sl.log_files)
        p["log_bytes"] += sl.total_log_size
        p["log_records"] += sum(written.get(lf.path, 0) for lf in sl.log_files)
    out = [rows[k] for k in sorted(rows)]
    for p in out:
        p["bytes"] = p["base_bytes"] + p["log_bytes"]
    median = statistics.median([p["bytes"] for p in out]) if out else 0
    for p in out:
        p["skew"] = round(p["bytes"] / median, 2) if median else None
    return out


__all__ = ["partitions"]
