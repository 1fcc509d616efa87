"""Data skipping: the base files a filtered read need not open, from their columns' statistics.

Every base file's parquet footer holds each column's least and greatest value per row group. A
read whose filters (the AND of ``(column, op, value)``) no row of a file can pass skips that file
(Hudi's data skipping over its column-stats index reads the same numbers, gathered in the
metadata table). After a sorted or Z-order clustering each file covers a narrow range of its
sort columns, so a range filter on them opens few files.

Only file slices made of a base file alone are skipped: a log record may update a row of the
base file into the filter's range, or lose to it by ordering value, so a slice with logs is
always read (as is a pending compaction's). The filters still run on the rows read; skipping
only leaves out files that cannot hold a matching row. Statistics missing or of a type the
filter value does not compare with keep the file.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Sequence


from lakehouse.file_group.file_slice import BaseFile, FileSlice
from lakehouse.storage.base import Storage
from lakehouse.storage.parquet import read_metadata

Range = tuple[Any, Any] | None  # (least, greatest) of a column's non-null values; None: unknown
_EMPTY = ("empty",)  # a column whose every value is null: no comparison passes

_RANGES: "OrderedDict[str, dict[str, Any]]" = OrderedDict()
_LOCK = threading.Lock()
_CACHE_SIZE = 16384
_SKIPPABLE_OPS = ("=", "==", "<", "<=", ">", ">=", "in")


def column_ranges(storage: Storage, bf: BaseFile) -> dict[str, Any]:
    """Each top-level column's value range in base file ``bf`` (cached: a base file is never
    rewritten under its name)."""
    uri = storage.uri(bf.path)
    with _LOCK:
        hit = _RANGES.get(uri)
        if hit is not None:
            _RANGES.move_to_end(uri)
            return hit
    md = read_metadata(storage, bf.path)
    out: dict[str, Any] = {}
    top = {md.schema.column(j).path: j for j in range(md.num_columns)}
    for name, j in top.items():
        if "." in name:
            continue  # nested columns are not skipped on
        lo = hi = None
        known = True
        for i in range(md.num_row_groups):
            col = md.row_group(i).column(j)
            st = col.statistics
            if st is None:
                known = False
                break
            if st.has_min_max:
                try:
                    lo = st.min if lo is None or st.min < lo else lo
                    hi = st.max if hi is None or st.max > hi else hi
                except TypeError:
                    known = False
                    break
            elif not (st.has_null_count and st.null_count == col.num_values):
                known = False
                break
        out[name] = ((lo, hi) if lo is not None else _EMPTY) if known else None
    with _LOCK:
        _RANGES[uri] = out
        while len(_RANGES) > _CACHE_SIZE:
            _RANGES.popitem(last=False)
    return out


def _may_match(rng: Any, op: str, value: Any) -> bool:
    if rng is None:
        return True
    if rng is _EMPTY or rng == _EMPTY:
        return False  # only nulls: no comparison is true of a null
    lo, hi = rng
    try:
        if op in ("=", "=="):
            return lo <= value <= hi
        if op == "in":
            return any(v is not None and lo <= v <= hi for v in value)
        if op == "<":
            return lo < value
        if op == "<=":
            return lo <= value
        if op == ">":
            return hi > value
        if op == ">=":
            return hi >= value
    except TypeError:
        return True  # a value of another kind than the statistics (a date against a string)
    return True


def skip_by_stats(storage: Storage, slices: list[FileSlice], filters: Sequence[tuple[str, str, Any]] | None,
                  *, ignore_logs: bool = False) -> list[FileSlice]:
    """``slices`` without those whose base file no row of could pass ``filters`` (already
    checked and fitted to the columns' types by the reader). ``ignore_logs``: a read-optimized
    read, which reads base files only."""
    wanted = [(c, op.lower(), v) for c, op, v in (filters or ()) if op.lower() in _SKIPPABLE_OPS]
    if not wanted:
        return slices
    candidates = [i for i, s in enumerate(slices) if s.base_file is not None and s.previous is None
                  and (ignore_logs or not s.log_files)]
    if not candidates:
        return slices

    def keep(i: int) -> bool:
        ranges = column_ranges(storage, slices[i].base_file)
        return all(_may_match(ranges.get(c), op, v) for c, op, v in wanted)

    workers = min(len(candidates), 8)
    if workers <= 1:
        kept = [keep(i) for i in candidates]
    else:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            kept = list(pool.map(keep, candidates))
    dropped = {i for i, k in zip(candidates, kept) if not k}
    return [s for i, s in enumerate(slices) if i not in dropped]
