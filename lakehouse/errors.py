"""The one error hierarchy of lakehouse.

Every error says what happened and, on a ``Help:`` line, what to do about it. Errors that mean
"this definitely did not happen" (nothing was written, or what was written is invisible and will be
rolled back) are kept apart from :class:`CommitOutcomeUnknownError`, where the caller must check
the timeline before retrying.
"""

from __future__ import annotations


class LakehouseError(Exception):
    """Root of every error raised by lakehouse."""

    def __init__(self, message: str, *, help: str | None = None) -> None:
        self.message = message
        self.help = help
        super().__init__(message if help is None else f"{message}\nHelp: {help}")


class ConfigError(LakehouseError, ValueError):
    """An option is unknown, ill-typed or out of range."""


class TableNotFoundError(LakehouseError, FileNotFoundError):
    """The path holds no table (no ``.hoodie/hoodie.properties``)."""


class TableExistsError(LakehouseError, FileExistsError):
    """A table already exists where one was to be created."""


class UnsupportedTableError(LakehouseError):
    """The table uses a version or feature that lakehouse does not read or write."""


class SchemaError(LakehouseError, ValueError):
    """A batch does not fit the table schema, or a schema change is incompatible."""


class RecordKeyError(LakehouseError, ValueError):
    """Record keys, ordering values or partition values are missing or null."""


class PartitionPathError(RecordKeyError):
    """A partition value would make a partition path that is unsafe or that readers of the
    table would not find (see :mod:`lakehouse.partition_path`). ``value`` is the offending value,
    ``row`` its first row in the batch (None where the row is not known)."""

    def __init__(self, message: str, *, help: str | None = None, value: str = "",
                 row: int | None = None) -> None:
        self.value = value
        self.row = row
        super().__init__(message, help=help)


class CorruptFileError(LakehouseError):
    """A file of the table cannot be parsed. The message names the file."""

    def __init__(self, path: str, reason: str, *, help: str | None = None) -> None:
        self.path = path
        super().__init__(f"{path}: {reason}", help=help or "restore the file from a backup or "
                         "roll back the instant that wrote it; lakehouse never skips a corrupt "
                         "completed instant silently")


class StorageError(LakehouseError, OSError):
    """The storage layer failed to carry out an operation."""


class UnsafePathError(StorageError, ValueError):
    """A path handed to the storage would leave its root (an absolute path, a ``..`` or ``.``
    segment, an empty segment or a NUL). Nothing was read or written."""


class FileAlreadyExistsError(StorageError, FileExistsError):
    """An atomic create found the file already present."""


class TimelineError(LakehouseError):
    """The timeline is not in a state that allows the requested transition."""


class InstantNotFoundError(TimelineError, LookupError):
    """The named instant is not on the timeline."""


class CheckpointLostError(TimelineError):
    """What a source or a streaming query applied to the table is recorded nowhere any more:
    going on would apply it again."""


class WriteError(LakehouseError):
    """A write failed and nothing of it is visible; it will be rolled back by the next writer."""


class CommitConflictError(WriteError):
    """Another writer committed an overlapping change first. Definitely failed: this write is
    rolled back. ``winner`` names the instant that committed first; ``file_groups`` the
    (partition, file id) pairs both changed, or ``keys`` the record keys both inserted."""

    def __init__(self, message: str, *, help: str | None = None, winner: str = "",
                 file_groups: tuple[tuple[str, str], ...] = (), keys: tuple[str, ...] = ()) -> None:
        self.winner = winner
        self.file_groups = file_groups
        self.keys = keys
        super().__init__(message, help=help)


class ClusteringUpdateError(WriteError):
    """A write would change records in file groups a pending clustering rewrites (Hudi's
    HoodieClusteringUpdateException, under its default SparkRejectUpdateStrategy). Definitely
    failed, before any file was written; ``clustering`` names the pending clustering."""

    def __init__(self, message: str, *, help: str | None = None, clustering: str = "",
                 file_groups: tuple[tuple[str, str], ...] = ()) -> None:
        self.clustering = clustering
        self.file_groups = file_groups
        super().__init__(message, help=help)


class CommitOutcomeUnknownError(LakehouseError):
    """The commit may or may not have landed: check the timeline before retrying."""


class LockError(LakehouseError):
    """A table lock could not be taken or kept."""


class LockTimeoutError(LockError, TimeoutError):
    """Another holder kept the lock longer than we would wait. Definitely failed: nothing was
    done under the lock."""


class LockLostError(LockError):
    """Our lease ran out or was taken over: whatever was about to happen under the lock must not."""


class StorageOutcomeUnknownError(StorageError):
    """A storage request may or may not have taken effect (the answer was lost): check the file
    before acting as if it had or had not."""


class IcebergSyncError(LakehouseError):
    """The table (or its Iceberg metadata) is in a state the Iceberg publisher cannot map to
    Iceberg: a column type changed in a way Iceberg's schema evolution refuses, field ids a commit
    recorded unreadable, metadata naming files outside the table."""
