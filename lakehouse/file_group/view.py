"""The file-system view: which file slices make up the table at an instant.

Only files of completed instants count; a slice whose base instant is a pending compaction holds
the logs written since the compaction was scheduled, and readers merge it over the slice before.
File groups replaced by a completed replace commit disappear from that commit on.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from lakehouse.file_group.file_slice import BaseFile, FileGroup, FileSlice, LogFile
from lakehouse.file_group.naming import BaseFileName, LogFileName
from lakehouse.storage.base import FileInfo, Storage
from lakehouse.timeline.active import METAFOLDER, ActiveTimeline, Timeline
from lakehouse.timeline.instant import Action


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
            if top.name == METAFOLDER:
                continue
            out.extend(i for i in storage.list(top.path, recursive=True) if not i.is_dir)
        else:
            out.append(top)
    return out


@dataclass
class _Group:
    bases: dict[str, BaseFile]
    logs: dict[str, list[LogFile]]


class FileSystemView:
    def __init__(self, files: list[FileInfo], timeline: Timeline, active: ActiveTimeline) -> None:
        self.timeline = timeline
        self._active = active
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

    @classmethod
    def load(cls, storage: Storage, timeline: Timeline, active: ActiveTimeline,
             partitions: list[str] | None = None) -> "FileSystemView":
        return cls(list_data_files(storage, partitions), timeline, active)

    # --- visibility ----------------------------------------------------------------------

    def _visible_times(self, as_of: str | None) -> tuple[set[str], set[str], str | None]:
        tl = self.timeline if as_of is None else self.timeline.before_or_on(as_of)
        committed = set(tl.completed_write_times)
        pending = {i.time for i in tl.pending_compactions()}
        first = self.timeline.first
        return committed, pending, first.time if first else None

    def replaced_file_groups(self, as_of: str | None = None) -> set[tuple[str, str]]:
        tl = self.timeline if as_of is None else self.timeline.before_or_on(as_of)
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
