"""HoodieCommitMetadata and HoodieReplaceCommitMetadata: the JSON of commits and delta commits."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields, replace
from typing import Any, Mapping

from lakehouse.errors import CorruptFileError


@dataclass(frozen=True)
class WriteStat:
    """What one handle wrote into one file group for one instant (Hudi's HoodieWriteStat)."""

    file_id: str
    path: str  # relative to the table root
    partition_path: str
    prev_commit: str = "null"
    num_writes: int = 0
    num_deletes: int = 0
    num_update_writes: int = 0
    num_inserts: int = 0
    total_write_bytes: int = 0
    total_write_errors: int = 0
    file_size_in_bytes: int = 0
    min_event_time: int | None = None
    max_event_time: int | None = None
    total_log_records: int = 0
    total_log_files_compacted: int = 0
    total_log_size_compacted: int = 0
    total_updated_records_compacted: int = 0
    total_log_blocks: int = 0
    total_corrupt_log_block: int = 0
    total_rollback_blocks: int = 0
    # Delta-commit stats only.
    log_version: int | None = None
    log_offset: int | None = None
    base_file: str | None = None
    log_files: tuple[str, ...] | None = None
    runtime_stats: Mapping[str, int] = field(default_factory=dict)

    @property
    def file_name(self) -> str:
        return self.path.rsplit("/", 1)[-1]

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "fileId": self.file_id, "path": self.path, "cdcStats": None,
            "prevCommit": self.prev_commit, "numWrites": self.num_writes,
            "numDeletes": self.num_deletes, "numUpdateWrites": self.num_update_writes,
            "numInserts": self.num_inserts, "totalWriteBytes": self.total_write_bytes,
            "totalWriteErrors": self.total_write_errors, "tempPath": None,
            "partitionPath": self.partition_path,
            "totalLogRecords": self.total_log_records,
            "totalLogFilesCompacted": self.total_log_files_compacted,
            "totalLogSizeCompacted": self.total_log_size_compacted,
            "totalUpdatedRecordsCompacted": self.total_updated_records_compacted,
            "totalLogBlocks": self.total_log_blocks,
            "totalCorruptLogBlock": self.total_corrupt_log_block,
            "totalRollbackBlocks": self.total_rollback_blocks,
            "fileSizeInBytes": self.file_size_in_bytes,
            "minEventTime": self.min_event_time, "maxEventTime": self.max_event_time,
            "runtimeStats": dict(self.runtime_stats) or None,
        }
        if self.log_version is not None:
            d["logVersion"] = self.log_version
            d["logOffset"] = self.log_offset or 0
            d["baseFile"] = self.base_file or ""
            d["logFiles"] = list(self.log_files or ())
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "WriteStat":
        def num(key: str) -> int:
            v = d.get(key)
            return int(v) if v is not None else 0

        return cls(
            file_id=d.get("fileId") or "", path=d.get("path") or "",
            partition_path=d.get("partitionPath") or "",
            prev_commit=str(d.get("prevCommit") or "null"),
            num_writes=num("numWrites"), num_deletes=num("numDeletes"),
            num_update_writes=num("numUpdateWrites"), num_inserts=num("numInserts"),
            total_write_bytes=num("totalWriteBytes"), total_write_errors=num("totalWriteErrors"),
            file_size_in_bytes=num("fileSizeInBytes"),
            min_event_time=d.get("minEventTime"), max_event_time=d.get("maxEventTime"),
            total_log_records=num("totalLogRecords"),
            total_log_files_compacted=num("totalLogFilesCompacted"),
            total_log_size_compacted=num("totalLogSizeCompacted"),
            total_updated_records_compacted=num("totalUpdatedRecordsCompacted"),
            total_log_blocks=num("totalLogBlocks"),
            total_corrupt_log_block=num("totalCorruptLogBlock"),
            total_rollback_blocks=num("totalRollbackBlocks"),
            log_version=d.get("logVersion"), log_offset=d.get("logOffset"),
            base_file=d.get("baseFile"),
            log_files=tuple(d["logFiles"]) if d.get("logFiles") is not None else None,
            runtime_stats={k: v for k, v in (d.get("runtimeStats") or {}).items()},
        )


@dataclass(frozen=True)
class CommitMetadata:
    """A commit's JSON. ``partition_to_replace_file_ids`` is set for replace commits only."""

    partition_to_write_stats: Mapping[str, tuple[WriteStat, ...]] = field(default_factory=dict)
    operation_type: str = "UNKNOWN"
    compacted: bool = False
    extra_metadata: Mapping[str, str] = field(default_factory=dict)
    partition_to_replace_file_ids: Mapping[str, tuple[str, ...]] | None = None

    @property
    def schema(self) -> str | None:
        return self.extra_metadata.get("schema")

    def write_stats(self) -> list[WriteStat]:
        return [s for stats in self.partition_to_write_stats.values() for s in stats]

    def file_ids(self) -> set[tuple[str, str]]:
        """(partition, fileId) of every file group this commit wrote."""
        return {(s.partition_path, s.file_id) for s in self.write_stats()}

    def replaced_file_ids(self) -> set[tuple[str, str]]:
        return {(p, f) for p, ids in (self.partition_to_replace_file_ids or {}).items() for f in ids}

    def total(self, attr: str) -> int:
        return sum(getattr(s, attr) for s in self.write_stats())

    def with_extra(self, **extra: str) -> "CommitMetadata":
        return replace(self, extra_metadata={**self.extra_metadata, **extra})

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "partitionToWriteStats": {
                p: [s.to_json() for s in stats] for p, stats in self.partition_to_write_stats.items()},
            "compacted": self.compacted,
            "extraMetadata": dict(self.extra_metadata),
            "operationType": self.operation_type,
        }
        if self.partition_to_replace_file_ids is not None:
            d["partitionToReplaceFileIds"] = {
                p: list(ids) for p, ids in self.partition_to_replace_file_ids.items()}
        return d

    def to_bytes(self) -> bytes:
        return json.dumps(self.to_json(), indent=2).encode("utf-8")

    @classmethod
    def from_bytes(cls, data: bytes, path: str) -> "CommitMetadata":
        if not data.strip():
            return cls()
        try:
            d = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise CorruptFileError(path, f"not valid commit metadata JSON ({e})") from None
        return cls.from_json(d, path)

    @classmethod
    def from_json(cls, d: Any, path: str) -> "CommitMetadata":
        """From the decoded JSON, or an archived entry's Avro record (the same field names)."""
        if not isinstance(d, dict):
            raise CorruptFileError(path, "commit metadata is not a JSON object")
        try:
            stats = {p: tuple(WriteStat.from_json(s) for s in (lst or []))
                     for p, lst in (d.get("partitionToWriteStats") or {}).items()}
            replaced = d.get("partitionToReplaceFileIds")
            return cls(
                partition_to_write_stats=stats,
                operation_type=d.get("operationType") or "UNKNOWN",
                compacted=bool(d.get("compacted")),
                extra_metadata=dict(d.get("extraMetadata") or {}),
                partition_to_replace_file_ids=(
                    {p: tuple(ids or ()) for p, ids in replaced.items()} if replaced is not None else None),
            )
        except (AttributeError, TypeError, ValueError) as e:
            raise CorruptFileError(path, f"commit metadata has an unexpected shape ({e})") from None


WRITE_STAT_FIELDS = tuple(f.name for f in fields(WriteStat))
