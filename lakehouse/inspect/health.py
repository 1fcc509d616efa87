"""A table's health over time, replayed from its timeline (active and archived): after each
completed write or compaction, the bytes and rows of its latest file slices, and the log backlog
compaction has yet to drain (files, bytes, records, and the oldest delta commit it waits on); beside it, what each clean freed and what each commit wrote and
took; and the sizes of the files the table holds now.

The replay walks the commits' write stats in instant order, as Hudi's file-system view groups
files into slices by base instant: a base file starts a new slice of its file group (a
compaction, or a copy-on-write rewrite), a log file joins the current one, a replace commit drops
the groups it replaced. Rows are the records of the latest base files, exact; the records and
deletes waiting in logs are counted beside them, not netted in: with the bucket index (or any
index that tags every record of an existing bucket) a log's record is an update or an insert
alike, as in Hudi's HoodieAppendHandle, so only a compaction tells how many rows they make.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Sequence

from lakehouse.config import ClusteringConfig, WriteConfig
from lakehouse.file_group.file_slice import FileSlice
from lakehouse.file_group.naming import is_log_file
from lakehouse.inspect.timeline import Fact, instant_facts
from lakehouse.services.clustering.bucket_resize import slice_size, split_ways
from lakehouse.table import Table
from lakehouse.timeline.commit_metadata import CommitMetadata


@dataclass
class _Log:
    bytes: int
    records: int
    deletes: int
    instant: str  # the delta commit that wrote it first


@dataclass
class _Group:
    base_bytes: int = 0
    base_rows: int = 0
    logs: dict[str, _Log] = field(default_factory=dict)


def _apply(groups: dict[tuple[str, str], _Group], meta: CommitMetadata, instant: str) -> None:
    for key in meta.replaced_file_ids():
        groups.pop(key, None)
    for s in meta.write_stats():
        key = (s.partition_path, s.file_id)
        if is_log_file(s.path):
            g = groups.setdefault(key, _Group())
            log = g.logs.get(s.path)
            if log is None:
                g.logs[s.path] = _Log(s.file_size_in_bytes, s.num_writes, s.num_deletes, instant)
            else:  # appended to: the stat's size is the file's size after the append
                log.bytes = max(log.bytes, s.file_size_in_bytes)
                log.records += s.num_writes
                log.deletes += s.num_deletes
        else:
            groups[key] = _Group(s.file_size_in_bytes, s.num_writes)


def _measure(groups: Mapping[tuple[str, str], _Group]) -> dict[str, Any]:
    logs = [log for g in groups.values() for log in g.logs.values()]
    base_bytes = sum(g.base_bytes for g in groups.values())
    log_bytes = sum(log.bytes for log in logs)
    waiting = sorted({log.instant for log in logs})
    return {"file_groups": len(groups), "base_bytes": base_bytes, "log_files": len(logs),
            "log_bytes": log_bytes, "bytes": base_bytes + log_bytes,
            "rows": sum(g.base_rows for g in groups.values()),
            "log_records": sum(log.records for log in logs), "log_deletes": sum(log.deletes for log in logs),
            "uncompacted_commits": len(waiting), "oldest_uncompacted": waiting[0] if waiting else None}


#: The replay of each table's archived instants, by table path: (their signature, the state
#: after them, what they added to each series). Archived instants change only when an archival
#: adds some, so a page replays only the active ones (~30) instead of every instant (~1,000).
_ARCHIVED_REPLAY: dict[str, tuple[tuple, dict, dict[str, list]]] = {}


def _replay(groups: dict[tuple[str, str], _Group], facts: Sequence[Fact], series: dict[str, list]) -> None:
    for f in facts:
        r = f.row
        if r["state"] != "completed":
            continue
        if f.meta is not None:
            _apply(groups, f.meta, r["time"])
            series["points"].append({"instant": r["time"], "action": r["action"], "end": r["end"], **_measure(groups)})
            series["commits"].append({"instant": r["time"], "action": r["action"], "end": r["end"],
                                      "duration_s": r["duration_s"], "records_written": r.get("records_written"),
                                      "records_inserted": r.get("records_inserted"),
                                      "records_updated": r.get("records_updated"),
                                      "records_appended": r.get("records_appended"),
                                      "records_deleted": r.get("records_deleted")})
            if r["action"] == "compaction":
                series["compactions"].append({"instant": r["time"], "end": r["end"], "operations": r.get("operations"),
                                              "records_written": r.get("records_written")})
        elif r["action"] == "clean":
            series["cleans"].append({"instant": r["time"], "end": r["end"], "files_deleted": r.get("files_deleted"),
                                     "bytes_freed": r.get("bytes_freed")})


def _copy(groups: Mapping[tuple[str, str], _Group]) -> dict[tuple[str, str], _Group]:
    return {k: _Group(g.base_bytes, g.base_rows, {p: replace(log) for p, log in g.logs.items()})
            for k, g in groups.items()}


def history(table: Table, facts: list[Fact] | None = None) -> dict[str, Any]:
    """The series the Lakehouse view charts (``facts``: :func:`instant_facts` with the archived
    instants, when already read)."""
    facts = facts if facts is not None else instant_facts(table, archived=True)
    archived = [f for f in facts if f.row["archived"]]
    # The archived instants lead the list (instant_facts puts them first); a list that does
    # not start with them is replayed whole.
    if archived and all(f.row["archived"] for f in facts[:len(archived)]):
        # Every archived instant's time, action and end: a table deleted and created again at
        # the same path (or one restored from a copy) never reuses another's replay.
        key = (len(archived), hash(tuple((f.row["time"], f.row["action"], f.row["end"]) for f in archived)))
        seen = _ARCHIVED_REPLAY.get(table.path)
        if seen is None or seen[0] != key:
            groups: dict[tuple[str, str], _Group] = {}
            done: dict[str, list] = {"points": [], "commits": [], "cleans": [], "compactions": []}
            _replay(groups, archived, done)
            seen = (key, groups, done)
            _ARCHIVED_REPLAY[table.path] = seen
        groups = _copy(seen[1])
        series = {k: list(v) for k, v in seen[2].items()}
        rest = facts[len(archived):]
    else:
        groups, rest = {}, facts
        series = {"points": [], "commits": [], "cleans": [], "compactions": []}
    _replay(groups, rest, series)
    return series


#: File-size buckets' upper bounds in MiB, besides the table's small-file limit and max size.
_BOUNDS_MIB = (1, 8, 32)


def file_sizes(table: Table, slices: Sequence[FileSlice] | None = None) -> dict[str, Any]:
    """How many base files of the latest slices fall in each size bucket; the bucket edges include
    the table's hoodie.parquet.small.file.limit (a file below it takes inserts) and
    hoodie.parquet.max.file.size (the target)."""
    opts = table.options(None, "the Lakehouse view")
    cfg = WriteConfig.from_options(opts)
    resize = None
    if table.config.consistent_hashing:
        # What the next clustering would do: split the buckets past the threshold.
        split_at = int(ClusteringConfig.from_options(opts).split_threshold * cfg.max_file_size)
        resize = {"split_threshold": split_at, "to_split": 0, "split_into": 0}
    edges = sorted({b * 1024 * 1024 for b in _BOUNDS_MIB} | {cfg.small_file_limit, cfg.max_file_size}
                   | ({resize["split_threshold"]} if resize else set()))
    edges = [e for e in edges if e > 0]
    counts = [0] * (len(edges) + 1)
    if slices is None:
        slices = table.file_system_view().latest_slices_for_write()
    sizes = [s.base_size for s in slices if s.base_file]
    for size in sizes:
        counts[next((n for n, e in enumerate(edges) if size < e), len(edges))] += 1
    buckets = [{"from": lo, "to": hi, "files": c}
               for lo, hi, c in zip([0, *edges], [*edges, None], counts)]
    if resize is not None:
        big = [slice_size(s) for s in slices if slice_size(s) > resize["split_threshold"]]
        resize.update(to_split=len(big), split_into=sum(split_ways(b, cfg.max_file_size) for b in big))
    return {"buckets": buckets, "files": len(sizes), "small_file_limit": cfg.small_file_limit,
            "max_file_size": cfg.max_file_size,
            "small_files": sum(1 for s in sizes if s < cfg.small_file_limit), "resize": resize}


__all__ = ["history", "file_sizes"]
