"""Reading and writing Hudi's Avro timeline files, plus typed views of the records we act on.

Each file is an Avro object-container file holding exactly one record. We write it with the null
codec, as Hudi does. We read it with the writer schema embedded in the file resolved against ours,
so a file from another Hudi release (a field more or less, with defaults) reads the same way.

The typed classes mirror Hudi's records field for field, with Python names. Their ``to_avro()``
gives the dict ``serialize`` takes and ``from_avro()`` accepts what ``deserialize`` returns. Reading
turns a null list or map into an empty one and writing gives the empty collection back: Hudi's
writers mostly fill these in (and some of its readers iterate them without a null check), and
callers then need no None checks either.
"""

from __future__ import annotations

import copy
import dataclasses
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

import fastavro

from lakehouse.errors import CorruptFileError, SchemaError
from lakehouse.timeline.avro_schemas import AvroKind, parsed_schema

__all__ = [
    "AvroKind", "AvroModel", "AvroTimelineFile", "serialize", "deserialize",
    "InstantInfo", "ActionInstant",
    "CompactionOperation", "CompactionStrategy", "CompactionPlan",
    "RollbackRequest", "RollbackPlan", "RollbackPartitionMetadata", "RollbackMetadata",
    "CleanFileInfo", "CleanerPlan", "CleanPartitionMetadata", "CleanMetadata",
    "RequestedReplaceMetadata",
]

_MAGIC = b"Obj\x01"


def serialize(kind: AvroKind | str, record: Mapping[str, Any]) -> bytes:
    """One record of ``kind`` as an uncompressed Avro object-container file.

    Fields left out take their schema default; a key the schema does not know is an error, so a
    misspelt field name fails here instead of vanishing from the file.
    """
    kind = AvroKind(kind)
    buf = io.BytesIO()
    try:
        # Tuple notation would read a 2-tuple as (record name, value) inside unions.
        fastavro.writer(buf, parsed_schema(kind), [record], codec="null",
                        strict_allow_default=True, disable_tuple_notation=True)
    except (ValueError, TypeError, KeyError, AttributeError, OverflowError) as e:
        raise SchemaError(f"the record does not fit {kind.full_name}: {e}",
                          help="build it with the typed classes of "
                          "lakehouse.timeline.avro_files, or fix the field named above") from e
    return buf.getvalue()


def deserialize(kind: AvroKind | str, data: bytes, path: str) -> dict[str, Any]:
    """The one record of the Avro timeline file ``path`` whose bytes are ``data``.

    Every field of our schema is present in the result (defaults fill those the writer lacked).
    Raises :class:`CorruptFileError` naming ``path`` when the bytes are not a complete Avro
    container holding exactly one record of ``kind``.
    """
    kind = AvroKind(kind)
    if not data:
        raise CorruptFileError(path, f"the file is empty; expected an Avro {kind.record_name}")
    if not data.startswith(_MAGIC):
        raise CorruptFileError(path, "not an Avro object-container file (no 'Obj\\x01' magic); "
                               f"expected an Avro {kind.record_name}")
    try:
        reader = fastavro.reader(io.BytesIO(data), reader_schema=parsed_schema(kind))
        written = reader.writer_schema
        name = written.get("name") if isinstance(written, dict) else None
        if name != kind.full_name:
            raise CorruptFileError(path, f"holds a {name or written!r} record, "
                                   f"expected {kind.full_name}")
        # Reading every block (not just the first record) checks the sync markers, so a file
        # cut short after its record is still caught, as Java's reader would catch it.
        records = list(reader)
    except CorruptFileError:
        raise
    except Exception as e:  # noqa: BLE001 - whatever a damaged file makes fastavro raise
        raise CorruptFileError(path, f"unreadable Avro {kind.record_name}: "
                               f"{type(e).__name__}: {e}") from e
    if len(records) != 1:
        raise CorruptFileError(path, f"holds {len(records)} records, expected one "
                               f"{kind.record_name}")
    return records[0]


# --- conversion helpers ------------------------------------------------------------------------

def _strs(values: Sequence[str] | None) -> tuple[str, ...]:
    return tuple(values or ())


def _map(values: Mapping[str, Any] | None) -> dict[str, Any]:
    return dict(values or {})


class AvroModel:
    """Base of the typed records: freezes sequences into tuples and copies mappings, so that a
    model equals what it reads back as and does not change under a caller's later mutations."""

    __slots__ = ()
    # Fields holding an Avro record as a plain dict: deep-copied, never retyped.
    _RAW: ClassVar[frozenset[str]] = frozenset()

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            if f.name in self._RAW:
                object.__setattr__(self, f.name, copy.deepcopy(value))
            elif isinstance(value, list):
                object.__setattr__(self, f.name, tuple(value))
            elif isinstance(value, Mapping):
                object.__setattr__(self, f.name, {
                    k: tuple(v) if isinstance(v, list) else v for k, v in value.items()})


class AvroTimelineFile(AvroModel):
    """A record that is a whole timeline file on its own."""

    __slots__ = ()
    KIND: ClassVar[AvroKind]

    def to_avro(self) -> dict[str, Any]:
        raise NotImplementedError

    @classmethod
    def from_avro(cls, record: Mapping[str, Any]) -> Self:
        raise NotImplementedError

    def to_bytes(self) -> bytes:
        return serialize(self.KIND, self.to_avro())

    @classmethod
    def from_bytes(cls, data: bytes, path: str) -> Self:
        record = deserialize(cls.KIND, data, path)
        try:
            return cls.from_avro(record)
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            # Schema-valid but meaningless, e.g. a null where Hudi always writes a value.
            raise CorruptFileError(path, f"{cls.KIND.record_name} lacks a value lakehouse "
                                   f"needs: {type(e).__name__}: {e}") from e


# --- instants ----------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class InstantInfo(AvroModel):
    """``HoodieInstantInfo``: an instant named by time and action (rollback plan and metadata)."""

    commit_time: str
    action: str

    def to_avro(self) -> dict[str, Any]:
        return {"commitTime": self.commit_time, "action": self.action}

    @classmethod
    def from_avro(cls, r: Mapping[str, Any]) -> Self:
        return cls(r["commitTime"], r["action"])


@dataclass(frozen=True, slots=True)
class ActionInstant(AvroModel):
    """``HoodieActionInstant``: an instant with its state name, e.g. ``COMPLETED`` (clean plan)."""

    timestamp: str
    action: str
    state: str

    def to_avro(self) -> dict[str, Any]:
        return {"timestamp": self.timestamp, "action": self.action, "state": self.state}

    @classmethod
    def from_avro(cls, r: Mapping[str, Any]) -> Self:
        return cls(r["timestamp"], r["action"], r["state"])


# --- compaction --------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class CompactionOperation(AvroModel):
    """One file slice to compact. File names are relative to the partition (plan version 2)."""

    file_id: str
    partition_path: str
    base_instant_time: str
    data_file_path: str | None = None  # base file name; None for a slice of log files only
    delta_file_paths: tuple[str, ...] = ()
    metrics: Mapping[str, float] = field(default_factory=dict)
    bootstrap_file_path: str | None = None

    def to_avro(self) -> dict[str, Any]:
        return {"baseInstantTime": self.base_instant_time,
                "deltaFilePaths": list(self.delta_file_paths),
                "dataFilePath": self.data_file_path,
                "fileId": self.file_id,
                "partitionPath": self.partition_path,
                "metrics": dict(self.metrics),
                "bootstrapFilePath": self.bootstrap_file_path}

    @classmethod
    def from_avro(cls, r: Mapping[str, Any]) -> Self:
        return cls(file_id=r["fileId"], partition_path=r.get("partitionPath"),
                   base_instant_time=r["baseInstantTime"], data_file_path=r.get("dataFilePath"),
                   delta_file_paths=_strs(r.get("deltaFilePaths")), metrics=_map(r.get("metrics")),
                   bootstrap_file_path=r.get("bootstrapFilePath"))


@dataclass(frozen=True, slots=True)
class CompactionStrategy(AvroModel):
    compactor_class_name: str | None = None
    strategy_params: Mapping[str, str] = field(default_factory=dict)
    version: int = 1

    def to_avro(self) -> dict[str, Any]:
        return {"compactorClassName": self.compactor_class_name,
                "strategyParams": dict(self.strategy_params), "version": self.version}

    @classmethod
    def from_avro(cls, r: Mapping[str, Any]) -> Self:
        return cls(r.get("compactorClassName"), _map(r.get("strategyParams")), r.get("version", 1))


@dataclass(frozen=True, slots=True)
class CompactionPlan(AvroTimelineFile):
    """``HoodieCompactionPlan``, the content of ``<t>.compaction.requested``."""

    KIND: ClassVar[AvroKind] = AvroKind.COMPACTION_PLAN

    operations: tuple[CompactionOperation, ...] = ()
    extra_metadata: Mapping[str, str] = field(default_factory=dict)
    # 2 = file names relative to the partition; version 1 plans held absolute paths.
    version: int = 2
    strategy: CompactionStrategy | None = None
    preserve_hoodie_metadata: bool = False

    def to_avro(self) -> dict[str, Any]:
        return {"operations": [op.to_avro() for op in self.operations],
                "extraMetadata": dict(self.extra_metadata),
                "version": self.version,
                "strategy": None if self.strategy is None else self.strategy.to_avro(),
                "preserveHoodieMetadata": self.preserve_hoodie_metadata}

    @classmethod
    def from_avro(cls, r: Mapping[str, Any]) -> Self:
        strategy = r.get("strategy")
        return cls(operations=tuple(CompactionOperation.from_avro(o)
                                    for o in r.get("operations") or ()),
                   extra_metadata=_map(r.get("extraMetadata")),
                   version=r.get("version", 1),
                   strategy=None if strategy is None else CompactionStrategy.from_avro(strategy),
                   preserve_hoodie_metadata=bool(r.get("preserveHoodieMetadata")))


# --- rollback ----------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class RollbackRequest(AvroModel):
    """What to undo in one file group (or, with an empty ``file_id``, which files to delete).

    Hudi writes paths here as absolute URIs and uses "" rather than null for a missing file id.
    """

    partition_path: str
    file_id: str | None = None
    latest_base_instant: str | None = None
    files_to_be_deleted: tuple[str, ...] = ()
    log_blocks_to_be_deleted: Mapping[str, int] = field(default_factory=dict)  # path -> size

    def to_avro(self) -> dict[str, Any]:
        return {"partitionPath": self.partition_path, "fileId": self.file_id,
                "latestBaseInstant": self.latest_base_instant,
                "filesToBeDeleted": list(self.files_to_be_deleted),
                "logBlocksToBeDeleted": dict(self.log_blocks_to_be_deleted)}

    @classmethod
    def from_avro(cls, r: Mapping[str, Any]) -> Self:
        return cls(r["partitionPath"], r.get("fileId"), r.get("latestBaseInstant"),
                   _strs(r.get("filesToBeDeleted")), _map(r.get("logBlocksToBeDeleted")))


@dataclass(frozen=True, slots=True)
class RollbackPlan(AvroTimelineFile):
    """``HoodieRollbackPlan``, the content of ``<t>.rollback.requested``."""

    KIND: ClassVar[AvroKind] = AvroKind.ROLLBACK_PLAN

    instant_to_rollback: InstantInfo
    rollback_requests: tuple[RollbackRequest, ...] = ()
    version: int = 1

    def to_avro(self) -> dict[str, Any]:
        return {"instantToRollback": self.instant_to_rollback.to_avro(),
                "RollbackRequests": [q.to_avro() for q in self.rollback_requests],
                "version": self.version}

    @classmethod
    def from_avro(cls, r: Mapping[str, Any]) -> Self:
        return cls(InstantInfo.from_avro(r["instantToRollback"]),
                   tuple(RollbackRequest.from_avro(q) for q in r.get("RollbackRequests") or ()),
                   r.get("version", 1))


@dataclass(frozen=True, slots=True)
class RollbackPartitionMetadata(AvroModel):
    partition_path: str
    success_delete_files: tuple[str, ...] = ()
    failed_delete_files: tuple[str, ...] = ()
    rollback_log_files: Mapping[str, int] = field(default_factory=dict)  # path -> size
    log_files_from_failed_commit: Mapping[str, int] = field(default_factory=dict)

    def to_avro(self) -> dict[str, Any]:
        return {"partitionPath": self.partition_path,
                "successDeleteFiles": list(self.success_delete_files),
                "failedDeleteFiles": list(self.failed_delete_files),
                "rollbackLogFiles": dict(self.rollback_log_files),
                "logFilesFromFailedCommit": dict(self.log_files_from_failed_commit)}

    @classmethod
    def from_avro(cls, r: Mapping[str, Any]) -> Self:
        return cls(r["partitionPath"], _strs(r.get("successDeleteFiles")),
                   _strs(r.get("failedDeleteFiles")), _map(r.get("rollbackLogFiles")),
                   _map(r.get("logFilesFromFailedCommit")))


@dataclass(frozen=True, slots=True)
class RollbackMetadata(AvroTimelineFile):
    """``HoodieRollbackMetadata``, the content of a completed ``<t>.rollback``."""

    KIND: ClassVar[AvroKind] = AvroKind.ROLLBACK_METADATA

    start_rollback_time: str
    time_taken_in_millis: int
    total_files_deleted: int
    commits_rollback: tuple[str, ...]
    partition_metadata: Mapping[str, RollbackPartitionMetadata]
    version: int = 1
    instants_rollback: tuple[InstantInfo, ...] = ()

    def to_avro(self) -> dict[str, Any]:
        return {"startRollbackTime": self.start_rollback_time,
                "timeTakenInMillis": self.time_taken_in_millis,
                "totalFilesDeleted": self.total_files_deleted,
                "commitsRollback": list(self.commits_rollback),
                "partitionMetadata": {k: v.to_avro() for k, v in self.partition_metadata.items()},
                "version": self.version,
                "instantsRollback": [i.to_avro() for i in self.instants_rollback]}

    @classmethod
    def from_avro(cls, r: Mapping[str, Any]) -> Self:
        return cls(r["startRollbackTime"], r["timeTakenInMillis"], r["totalFilesDeleted"],
                   _strs(r["commitsRollback"]),
                   {k: RollbackPartitionMetadata.from_avro(v)
                    for k, v in r["partitionMetadata"].items()},
                   r.get("version", 1),
                   tuple(InstantInfo.from_avro(i) for i in r.get("instantsRollback") or ()))


# --- clean -------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class CleanFileInfo(AvroModel):
    file_path: str
    is_bootstrap_base_file: bool = False

    def to_avro(self) -> dict[str, Any]:
        return {"filePath": self.file_path, "isBootstrapBaseFile": self.is_bootstrap_base_file}

    @classmethod
    def from_avro(cls, r: Mapping[str, Any]) -> Self:
        return cls(r["filePath"], bool(r.get("isBootstrapBaseFile")))


@dataclass(frozen=True, slots=True)
class CleanerPlan(AvroTimelineFile):
    """``HoodieCleanerPlan``, the content of ``<t>.clean.requested`` (plan version 2)."""

    KIND: ClassVar[AvroKind] = AvroKind.CLEANER_PLAN

    earliest_instant_to_retain: ActionInstant | None
    last_completed_commit_timestamp: str
    policy: str  # HoodieCleaningPolicy name, e.g. KEEP_LATEST_COMMITS
    file_paths_to_be_deleted_per_partition: Mapping[str, tuple[CleanFileInfo, ...]] = field(
        default_factory=dict)
    partitions_to_be_deleted: tuple[str, ...] = ()
    version: int = 2
    extra_metadata: Mapping[str, str] = field(default_factory=dict)
    # Version 1 plans kept bare file names here; kept only so that nothing read is lost.
    files_to_be_deleted_per_partition: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def to_avro(self) -> dict[str, Any]:
        eitr = self.earliest_instant_to_retain
        return {"earliestInstantToRetain": None if eitr is None else eitr.to_avro(),
                "lastCompletedCommitTimestamp": self.last_completed_commit_timestamp,
                "policy": self.policy,
                "filesToBeDeletedPerPartition": {
                    p: list(names) for p, names in self.files_to_be_deleted_per_partition.items()},
                "version": self.version,
                "filePathsToBeDeletedPerPartition": {
                    p: [i.to_avro() for i in infos]
                    for p, infos in self.file_paths_to_be_deleted_per_partition.items()},
                "partitionsToBeDeleted": list(self.partitions_to_be_deleted),
                "extraMetadata": dict(self.extra_metadata)}

    @classmethod
    def from_avro(cls, r: Mapping[str, Any]) -> Self:
        eitr = r.get("earliestInstantToRetain")
        return cls(
            earliest_instant_to_retain=None if eitr is None else ActionInstant.from_avro(eitr),
            last_completed_commit_timestamp=r.get("lastCompletedCommitTimestamp", ""),
            policy=r["policy"],
            file_paths_to_be_deleted_per_partition={
                p: tuple(CleanFileInfo.from_avro(i) for i in infos)
                for p, infos in _map(r.get("filePathsToBeDeletedPerPartition")).items()},
            partitions_to_be_deleted=_strs(r.get("partitionsToBeDeleted")),
            version=r.get("version", 1),
            extra_metadata=_map(r.get("extraMetadata")),
            files_to_be_deleted_per_partition={
                p: _strs(names)
                for p, names in _map(r.get("filesToBeDeletedPerPartition")).items()})


@dataclass(frozen=True, slots=True)
class CleanPartitionMetadata(AvroModel):
    partition_path: str
    policy: str
    delete_path_patterns: tuple[str, ...] = ()
    success_delete_files: tuple[str, ...] = ()
    failed_delete_files: tuple[str, ...] = ()
    is_partition_deleted: bool = False

    def to_avro(self) -> dict[str, Any]:
        return {"partitionPath": self.partition_path, "policy": self.policy,
                "deletePathPatterns": list(self.delete_path_patterns),
                "successDeleteFiles": list(self.success_delete_files),
                "failedDeleteFiles": list(self.failed_delete_files),
                "isPartitionDeleted": self.is_partition_deleted}

    @classmethod
    def from_avro(cls, r: Mapping[str, Any]) -> Self:
        return cls(r["partitionPath"], r["policy"], _strs(r["deletePathPatterns"]),
                   _strs(r["successDeleteFiles"]), _strs(r["failedDeleteFiles"]),
                   bool(r.get("isPartitionDeleted")))


@dataclass(frozen=True, slots=True)
class CleanMetadata(AvroTimelineFile):
    """``HoodieCleanMetadata``, the content of a completed ``<t>.clean`` (version 2)."""

    KIND: ClassVar[AvroKind] = AvroKind.CLEAN_METADATA

    start_clean_time: str
    time_taken_in_millis: int
    total_files_deleted: int
    earliest_commit_to_retain: str
    last_completed_commit_timestamp: str
    partition_metadata: Mapping[str, CleanPartitionMetadata]
    version: int = 2
    bootstrap_partition_metadata: Mapping[str, CleanPartitionMetadata] = field(
        default_factory=dict)
    extra_metadata: Mapping[str, str] = field(default_factory=dict)

    def to_avro(self) -> dict[str, Any]:
        return {"startCleanTime": self.start_clean_time,
                "timeTakenInMillis": self.time_taken_in_millis,
                "totalFilesDeleted": self.total_files_deleted,
                "earliestCommitToRetain": self.earliest_commit_to_retain,
                "lastCompletedCommitTimestamp": self.last_completed_commit_timestamp,
                "partitionMetadata": {k: v.to_avro() for k, v in self.partition_metadata.items()},
                "version": self.version,
                "bootstrapPartitionMetadata": {
                    k: v.to_avro() for k, v in self.bootstrap_partition_metadata.items()},
                "extraMetadata": dict(self.extra_metadata)}

    @classmethod
    def from_avro(cls, r: Mapping[str, Any]) -> Self:
        return cls(r["startCleanTime"], r["timeTakenInMillis"], r["totalFilesDeleted"],
                   r["earliestCommitToRetain"], r.get("lastCompletedCommitTimestamp", ""),
                   {k: CleanPartitionMetadata.from_avro(v)
                    for k, v in r["partitionMetadata"].items()},
                   r.get("version", 1),
                   {k: CleanPartitionMetadata.from_avro(v)
                    for k, v in _map(r.get("bootstrapPartitionMetadata")).items()},
                   _map(r.get("extraMetadata")))


# --- replace -----------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class RequestedReplaceMetadata(AvroTimelineFile):
    """``HoodieRequestedReplaceMetadata``, the content of ``<t>.replacecommit.requested``.

    INSERT OVERWRITE has Hudi write every field null, ``version`` included; clustering fills in
    ``clustering_plan``, which is kept as its Avro record (a ``HoodieClusteringPlan`` dict).
    """

    KIND: ClassVar[AvroKind] = AvroKind.REQUESTED_REPLACE_METADATA
    _RAW: ClassVar[frozenset[str]] = frozenset({"clustering_plan"})

    operation_type: str | None = None
    clustering_plan: Mapping[str, Any] | None = None
    extra_metadata: Mapping[str, str] = field(default_factory=dict)
    version: int | None = 1

    def to_avro(self) -> dict[str, Any]:
        return {"operationType": self.operation_type,
                "clusteringPlan": copy.deepcopy(self.clustering_plan),
                "extraMetadata": dict(self.extra_metadata),
                "version": self.version}

    @classmethod
    def from_avro(cls, r: Mapping[str, Any]) -> Self:
        return cls(r.get("operationType"), r.get("clusteringPlan"),
                   _map(r.get("extraMetadata")), r.get("version", 1))
