"""Base files, log files, file slices and file groups."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from lakehouse.file_group.naming import BaseFileName, LogFileName, join

if TYPE_CHECKING:
    from lakehouse.storage.base import Storage


@dataclass(frozen=True, slots=True)
class BaseFile:
    partition: str
    name: BaseFileName
    size: int

    @property
    def path(self) -> str:
        return join(self.partition, str(self.name))

    @property
    def file_id(self) -> str:
        return self.name.file_id

    @property
    def commit_time(self) -> str:
        return self.name.instant_time


@dataclass(frozen=True, slots=True)
class LogFile:
    partition: str
    name: LogFileName
    size: int

    @property
    def path(self) -> str:
        return join(self.partition, str(self.name))

    @property
    def file_id(self) -> str:
        return self.name.file_id


@dataclass(frozen=True)
class FileSlice:
    """A base file (maybe none) and the log files written against its base instant."""

    partition: str
    file_id: str
    base_instant: str
    base_file: BaseFile | None = None
    log_files: tuple[LogFile, ...] = ()
    # For a slice whose base instant is a pending compaction: the slice the compaction reads,
    # which a reader must merge under this one.
    previous: "FileSlice | None" = None

    @property
    def has_logs(self) -> bool:
        return bool(self.log_files)

    @property
    def total_log_size(self) -> int:
        return sum(f.size for f in self.log_files)

    @property
    def base_size(self) -> int:
        return self.base_file.size if self.base_file else 0

    @property
    def total_size(self) -> int:
        """Bytes on disk a reader of this slice reads: base, logs, and a pending compaction's
        previous slice."""
        own = self.base_size + self.total_log_size
        return own + (self.previous.total_size if self.previous is not None else 0)

    @property
    def merged_base_file(self) -> BaseFile | None:
        """The base file a reader of this slice merges its logs over: its own, or for a pending
        compaction's slice (no base file yet) the one the compaction reads."""
        return self.base_file or (self.previous.base_file if self.previous else None)

    @property
    def merged_log_files(self) -> tuple[LogFile, ...]:
        """The log files a reader merges, in order: a pending compaction's previous slice's
        first (Hudi's readers read logs under a pending compaction; hudi-rs 0.5 skips them)."""
        return ((self.previous.log_files if self.previous else ()) + self.log_files)

    def with_logs(self, logs: tuple[LogFile, ...]) -> "FileSlice":
        return FileSlice(self.partition, self.file_id, self.base_instant, self.base_file,
                         tuple(sorted(logs, key=lambda f: f.name.sort_key)), self.previous)


@dataclass(frozen=True)
class FileGroup:
    partition: str
    file_id: str
    slices: tuple[FileSlice, ...] = field(default_factory=tuple)  # oldest first

    @property
    def latest(self) -> FileSlice | None:
        return self.slices[-1] if self.slices else None

    @property
    def latest_base_file(self) -> "BaseFile | None":
        """The newest base file (what Hudi's SIMPLE and BLOOM indexes look in): a slice that has
        only logs so far (a pending compaction's) does not hide the one before it."""
        return next((s.base_file for s in reversed(self.slices) if s.base_file is not None), None)


def slice_of_files(storage: "Storage", partition: str, file_id: str, base_instant: str,
                   base_name: str | None, log_names: tuple[str, ...]) -> FileSlice:
    """The file slice a plan names (a compaction's operation, a clustering's slice), with the
    files' sizes as they are now."""
    base = None
    if base_name:
        base = BaseFile(partition, BaseFileName.parse(base_name), storage.size(join(partition, base_name)))
    logs = [LogFile(partition, LogFileName.parse(n), storage.size(join(partition, n))) for n in log_names]
    return FileSlice(partition, file_id, base_instant, base, tuple(sorted(logs, key=lambda f: f.name.sort_key)))
