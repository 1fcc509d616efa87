"""The file-system view: which file slices make up the table at an instant.

Only files of completed instants count; a slice whose base instant is a pending compaction holds
the logs written since the compaction was scheduled, and readers merge it over the slice before.
File groups replaced by a completed replace commit disappear from that commit on.

The listing is what the view is built from, and the commits are what it is checked against
(:meth:`FileSystemView.verify`, on every snapshot read and every write): a file that a completed
commit names but that is not listed would otherwise drop out of the view without a trace, and a
read would return fewer (or older) rows than were acknowledged. A file named by a completed
instant T (the ``path`` of one of T's write stats: a base file, or one log file of a delta
commit, each of several log files having its own stat) must exist when all of these hold:

1. T is completed on the timeline the view was built on: a rolled-back or restored instant has
   left it (its files with it), and an archived one is off it (nothing the view can read names
   its files any more; a file older than the active timeline counts as committed);
2. the file's group is not replaced by a completed replace commit on that timeline
   (insert_overwrite, insert_overwrite_table, delete_partition, clustering): the cleaner deletes
   replaced groups whole, whatever their age;
3. the file's slice is not older than the group's latest *committed base slice*. The slice of a
   base file is its instant time, that of a log file its base instant (from its name). The
   latest committed base slice is the newest base file time that a completed instant names
   (a write, or a compaction: ``commit`` on a Merge-On-Read table) or that is listed with a
   committed (or archived) time. The cleaners, lakehouse's and Hudi's, delete only slices older
   than that one (by any policy: the latest slice, a pending compaction's input and the slices
   newer than it are always kept), so an older slice may be gone and a newer one may not. A
   pending compaction's new slice is newer than its input, so the logs written under it are
   required; a pending compaction's input is required because nothing newer is committed.

A write stat with an empty path (Hudi writes some), a path that is no base or log file name,
or one outside the table's folder is not checked (no slice to place it in). Java Hudi's delta
stats also list the slice's earlier log files (``logFiles``), some of them a failed write's that
its rollback deleted: only ``path`` is checked. The listing must have been taken after the
timeline was loaded; a file missing from it is checked again against a newer timeline before it
is called lost, since a commit and a clean (or a rollback) may have run in between: then the
view is stale, not the table damaged, and the caller lists again with the newer timeline.

A COPY_ON_WRITE table whose latest slices hold log files had its ``hoodie.table.type`` changed
outside create_table: a Copy-On-Write writer rewrites base files without the logged records.
Only the latest slices count: Hudi's CLI turns a Merge-On-Read table into a Copy-On-Write one
once everything is compacted, leaving delta commits (and older slices with logs) behind.
"""

from __future__ import annotations

import weakref
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from lakehouse.errors import CorruptFileError, InstantNotFoundError
from lakehouse.file_group.file_slice import BaseFile, FileGroup, FileSlice, LogFile
from lakehouse.file_group.naming import BaseFileName, LogFileName
from lakehouse.storage.base import FileInfo, Storage
from lakehouse.timeline.active import ActiveTimeline, Timeline
from lakehouse.timeline.commit_metadata import CommitMetadata
from lakehouse.timeline.instant import Action, Instant
from lakehouse import layout


def list_data_files(storage: Storage, partitions: list[str] | None = None) -> list[FileInfo]:
    """Every file of the table outside ``.hoodie``; the listing is the source of truth."""
    if partitions is not None:
        out: list[FileInfo] = []
        for p in partitions:
            out.extend(i for i in storage.list(p) if not i.is_dir)
        return out
    out = []
    for top in storage.list(""):
        if top.is_dir:
            if top.name == layout.METAFOLDER:
                continue
            out.extend(i for i in storage.list(top.path, recursive=True) if not i.is_dir)
        else:
            out.append(top)
    return out


@dataclass
class _Group:
    bases: dict[str, BaseFile]
    logs: dict[str, list[LogFile]]


@dataclass(frozen=True, slots=True)
class _Named:
    """A file a commit names, placed in its file group and slice."""

    path: str
    group: tuple[str, str]  # (partition, file id)
    slice_time: str  # a base file's instant time, a log file's base instant
    is_base: bool


def _parse_named(path: str) -> _Named | None:
    if not path or path.startswith("/") or "://" in path:
        return None
    partition, _, name = path.rpartition("/")
    bn = BaseFileName.parse(name)
    if bn is not None:
        return _Named(path, (partition, bn.file_id), bn.instant_time, True)
    ln = LogFileName.parse(name)
    if ln is not None:
        return _Named(path, (partition, ln.file_id), ln.base_instant, False)
    return None


# The files each commit names, parsed once per metadata object rather than on every read (the
# ActiveTimeline keeps the metadata of completed instants). Keyed by id: the weak reference
# proves an entry is that object's and drops the entry when the object goes.
_NAMED: dict[int, tuple[weakref.ref, dict[str, _Named]]] = {}


def _named_files(meta: CommitMetadata) -> dict[str, _Named]:
    key = id(meta)
    hit = _NAMED.get(key)
    if hit is not None and hit[0]() is meta:
        return hit[1]
    named: dict[str, _Named] = {}
    for st in meta.write_stats():
        n = _parse_named(st.path)
        if n is not None:
            named[n.path] = n
    _NAMED[key] = (weakref.ref(meta, lambda _, k=key: _NAMED.pop(k, None)), named)
    return named


# Instant times whose commit metadata each ActiveTimeline has read (and keeps): the others are
# fetched in parallel, as a fresh process reads every completed commit once, one request each
# on an object store.
_FETCHED: weakref.WeakKeyDictionary[ActiveTimeline, set[str]] = weakref.WeakKeyDictionary()
_FETCH_THREADS = 16


def _commit_metadata(active: ActiveTimeline, instants: list[Instant]) -> list[CommitMetadata]:
    fetched = _FETCHED.setdefault(active, set())
    cold = [i for i in instants if i.time not in fetched]
    if len(cold) > 1:
        with ThreadPoolExecutor(min(len(cold), _FETCH_THREADS)) as pool:
            list(pool.map(active.commit_metadata, cold))
    out = [active.commit_metadata(i) for i in instants]
    fetched.update(i.time for i in instants)
    return out


class FileSystemView:
    def __init__(self, files: list[FileInfo], timeline: Timeline, active: ActiveTimeline, *,
                 partitions: list[str] | None = None) -> None:
        """``files``: the listing of the whole table, or of ``partitions`` only."""
        self.timeline = timeline
        self._active = active
        self._files = files
        self._scope = None if partitions is None else set(partitions)
        groups: dict[tuple[str, str], _Group] = defaultdict(lambda: _Group({}, defaultdict(list)))
        for f in files:
            partition, _, name = f.path.rpartition("/")
            if name.endswith(".parquet"):
                bn = BaseFileName.parse(name)
                if bn is not None:
                    groups[(partition, bn.file_id)].bases[bn.instant_time] = BaseFile(partition, bn, f.size)
            elif ".log." in name:
                ln = LogFileName.parse(name)
                if ln is not None:
                    groups[(partition, ln.file_id)].logs[ln.base_instant].append(LogFile(partition, ln, f.size))
        self._groups = dict(groups)

    def partitions_with_metafile(self) -> frozenset[str]:
        """The listed partitions that have their ``.hoodie_partition_metadata``."""
        return frozenset(f.path.rpartition("/")[0] for f in self._files
                         if f.path.rpartition("/")[2] == layout.PARTITION_METAFILE)

    @classmethod
    def load(cls, storage: Storage, timeline: Timeline, active: ActiveTimeline,
             partitions: list[str] | None = None) -> "FileSystemView":
        return cls(list_data_files(storage, partitions), timeline, active, partitions=partitions)

    # --- visibility ----------------------------------------------------------------------

    def _visible_times(self, as_of: str | None) -> tuple[set[str], set[str], str | None]:
        tl = self.timeline if as_of is None else self.timeline.before_or_on(as_of)
        committed = set(tl.completed_write_times)
        pending = {i.time for i in tl.pending_compactions()}
        first = self.timeline.first
        return committed, pending, first.time if first else None

    def replaced_file_groups(self, as_of: str | None = None) -> set[tuple[str, str]]:
        tl = self.timeline if as_of is None else self.timeline.before_or_on(as_of)
        return self._replaced_on(tl)

    def _replaced_on(self, tl: Timeline) -> set[tuple[str, str]]:
        replaced: set[tuple[str, str]] = set()
        for inst in tl.completed().filter(actions=[Action.REPLACE_COMMIT]):
            replaced |= self._active.commit_metadata(inst).replaced_file_ids()
        return replaced

    def pending_compaction_times(self) -> dict[str, str]:
        """Pending compaction instant time by itself (for callers wanting plan lookups)."""
        return {i.time: i.time for i in self.timeline.pending_compactions()}

    def file_groups(self, *, as_of: str | None = None, partitions: set[str] | None = None,
                    include_pending_compaction: bool = True) -> list[FileGroup]:
        committed, pending, first = self._visible_times(as_of)
        if not include_pending_compaction:
            pending = set()
        replaced = self.replaced_file_groups(as_of)

        def is_committed(t: str) -> bool:
            # Files older than the active timeline belong to archived, completed instants (but
            # not to a view as of an even earlier time).
            return t in committed or (first is not None and t < first
                                      and (as_of is None or t <= as_of))

        result: list[FileGroup] = []
        for (partition, fid), g in sorted(self._groups.items()):
            if partitions is not None and partition not in partitions:
                continue
            if (partition, fid) in replaced:
                continue
            slices: list[FileSlice] = []
            for b in sorted(set(g.bases) | set(g.logs)):
                if is_committed(b):
                    base = g.bases.get(b)
                elif b in pending:
                    base = None  # a pending compaction's partial output is never read
                else:
                    continue
                logs = tuple(sorted(g.logs.get(b, ()), key=lambda f: f.name.sort_key))
                if base is None and not logs and b not in pending:
                    continue
                slices.append(FileSlice(partition, fid, b, base, logs))
            if slices:
                result.append(FileGroup(partition, fid, tuple(slices)))
        return result

    def latest_slices(self, *, as_of: str | None = None,
                      partitions: set[str] | None = None) -> list[FileSlice]:
        """The slice a reader merges for each file group, with a pending compaction's previous
        slice attached so nothing written before or after the compaction is missed."""
        out: list[FileSlice] = []
        _, pending, _ = self._visible_times(as_of)
        for g in self.file_groups(as_of=as_of, partitions=partitions):
            latest = g.slices[-1]
            if latest.base_instant in pending and len(g.slices) > 1:
                prev = g.slices[-2]
                latest = FileSlice(latest.partition, latest.file_id, latest.base_instant, None,
                                   latest.log_files, previous=prev)
            elif latest.base_instant in pending and not latest.log_files:
                continue
            out.append(latest)
        return out

    def latest_slices_for_write(self, partitions: set[str] | None = None) -> list[FileSlice]:
        """The slice new data goes to: under a pending compaction, the compaction's new slice."""
        return [g.slices[-1] for g in self.file_groups(partitions=partitions)]

    def all_partitions(self) -> list[str]:
        return sorted({p for p, _ in self._groups})

    # --- integrity: the listing against the commits (the rule is in the module docstring) ----

    def verify(self, *, merge_on_read: bool, as_of: str | None = None) -> Timeline | None:
        """Check the listing against the completed commits (those at or before ``as_of``).

        Returns None when every file they need is listed; raises :class:`CorruptFileError`
        naming the instant and the file when one is not, or when a COPY_ON_WRITE table's latest
        slices hold logs. Returns a newer timeline when the missing files are explained by it (a
        commit and a clean, or a rollback, ran since the view's timeline was loaded): the view
        is stale, and the caller lists again with that timeline."""
        try:
            gone = self._required(self._unlisted(self.timeline, as_of), self.timeline)
            if gone:
                fresh = self._active.load()
                lost = self._required([(i, n) for i, n in gone if fresh.is_completed(i.time)], fresh)
                if lost:
                    raise self._lost(lost)
                return fresh
        except InstantNotFoundError:
            return self._active.load()  # an instant the timeline listed was rolled back since
        if not merge_on_read:
            self._check_no_logs()
        return None

    def _unlisted(self, tl: Timeline, as_of: str | None) -> list[tuple[Instant, _Named]]:
        """Files named by completed writes of ``tl`` that the listing lacks: a set difference per
        commit, all a healthy table costs."""
        listed = {f.path for f in self._files}
        out: list[tuple[Instant, _Named]] = []
        instants = [i for i in tl.completed_writes() if as_of is None or i.time <= as_of]
        for inst, meta in zip(instants, _commit_metadata(self._active, instants)):
            named = _named_files(meta)
            missing = named.keys() - listed
            out.extend((inst, named[p]) for p in sorted(missing)
                       if self._scope is None or named[p].group[0] in self._scope)
        return out

    def _required(self, candidates: list[tuple[Instant, _Named]], tl: Timeline) -> list[tuple[Instant, _Named]]:
        """Those of ``candidates`` that no cleaner may have deleted as of ``tl``."""
        if not candidates:
            return []
        groups = {n.group for _, n in candidates}
        floor: dict[tuple[str, str], str] = {}

        def raise_floor(group: tuple[str, str], t: str) -> None:
            if t > floor.get(group, ""):
                floor[group] = t

        for meta in _commit_metadata(self._active, list(tl.completed_writes())):
            for n in _named_files(meta).values():
                if n.is_base and n.group in groups:
                    raise_floor(n.group, n.slice_time)
        committed = tl.completed_write_times
        first = tl.first.time if tl.first is not None else None
        for group in groups:
            listed = self._groups.get(group)
            for t in listed.bases if listed is not None else ():
                if t in committed or (first is not None and t < first):
                    raise_floor(group, t)
        replaced = self._replaced_on(tl)
        return [(i, n) for i, n in candidates
                if n.group not in replaced and n.slice_time >= floor.get(n.group, "")]

    def _lost(self, lost: list[tuple[Instant, _Named]]) -> CorruptFileError:
        storage = self._active.storage
        by_instant: dict[Instant, list[str]] = defaultdict(list)
        for inst, n in lost:
            by_instant[inst].append(storage.uri(n.path))
        (inst, paths), *others = sorted(by_instant.items())
        more = f" (and {len(paths) - 3} more)" if len(paths) > 3 else ""
        also = (f"; {', '.join(i.time for i, _ in others[:5])}{', ...' if len(others) > 5 else ''} "
                "name missing files too" if others else "")
        return CorruptFileError(
            storage.uri(self._active.path(inst)),
            f"the completed {inst.action} {inst.time} names {', '.join(paths[:3])}{more}, which does "
            f"not exist; no clean, rollback or replace explains it, and a read without it would "
            f"silently miss the records it holds{also}",
            help=f"restore {paths[0]} from a backup or the store's object versions; if it is lost, "
                 f"roll back {inst.time} if it is the latest write (`lakehouse rollback`) or "
                 "restore a savepoint taken before it, then write its records again")

    def _check_no_logs(self) -> None:
        """A COPY_ON_WRITE table's latest slices hold no logs."""
        if not any(g.logs for g in self._groups.values()):
            return
        logged = [lf for s in self.latest_slices() for lf in s.merged_log_files]
        if not logged:
            return
        storage = self._active.storage
        groups = {(lf.partition, lf.file_id) for lf in logged}
        raise CorruptFileError(
            storage.uri(layout.PROPERTIES),
            f"hoodie.table.type is COPY_ON_WRITE, but the latest file slices of {len(groups)} file "
            f"group(s) hold log files ({', '.join(storage.uri(lf.path) for lf in logged[:3])}"
            f"{', ...' if len(logged) > 3 else ''}): only MERGE_ON_READ writes log files, so the table "
            "type was changed outside create_table, and a COPY_ON_WRITE write would rewrite those "
            "base files without the logged records",
            help=f"set hoodie.table.type back to MERGE_ON_READ in {layout.PROPERTIES}; to make "
                 "the table COPY_ON_WRITE, compact it completely first (Table.compact(force=True) "
                 "until no slice has logs), as Hudi's CLI does")
