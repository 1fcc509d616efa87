"""The Avro schemas of Hudi's Avro timeline files (Hudi 0.14/0.15, table version 6), in one place.

Java Hudi resolves the writer schema embedded in a file against its generated classes, matching
records by full name and fields by name; hudi-rs does the same. So record names, field names and
order, types, union branch order and defaults here follow what Hudi 0.15.0 writes, including its
oddities (a ``default`` written on some array and map types, ``RollbackRequests`` with a capital
R, unions with ``int`` first where the default is a number). Hudi's ``avro.java.string``
annotations and ``doc`` texts are left out: readers do not use them.

The clean plan and clean metadata carry 0.15.0's trailing ``extraMetadata``; Avro resolution
lets 0.14 readers skip it and fills in null when we read 0.14 files, so one variant serves both.
"""

from __future__ import annotations

import copy
import enum
from collections.abc import Iterator
from typing import Any

import fastavro

NAMESPACE = "org.apache.hudi.avro.model"


class AvroKind(enum.StrEnum):
    """The kinds of Avro timeline file, each holding one record of one top-level schema."""

    COMPACTION_PLAN = "compaction_plan"
    CLEANER_PLAN = "cleaner_plan"
    CLEAN_METADATA = "clean_metadata"
    ROLLBACK_PLAN = "rollback_plan"
    ROLLBACK_METADATA = "rollback_metadata"
    REQUESTED_REPLACE_METADATA = "requested_replace_metadata"
    SAVEPOINT_METADATA = "savepoint_metadata"
    ARCHIVED_META_ENTRY = "archived_meta_entry"

    @property
    def record_name(self) -> str:
        """The short record name (what ``NAMESPACE`` is prefixed to)."""
        return _ROOTS[self]["name"]

    @property
    def full_name(self) -> str:
        return f"{NAMESPACE}.{self.record_name}"


# --- building blocks -------------------------------------------------------------------------

_REQUIRED = object()  # marks a field without a default (None is a legitimate default)


def _f(name: str, type_: Any, default: Any = _REQUIRED) -> dict[str, Any]:
    field = {"name": name, "type": type_}
    if default is not _REQUIRED:
        field["default"] = default
    return field


def _rec(name: str, *fields: dict[str, Any]) -> dict[str, Any]:
    return {"type": "record", "name": name, "fields": list(fields)}


def _opt(type_: Any) -> list[Any]:
    return ["null", type_]


def _arr(items: Any, **extra: Any) -> dict[str, Any]:
    return {"type": "array", "items": items, **extra}


def _map(values: Any, **extra: Any) -> dict[str, Any]:
    return {"type": "map", "values": values, **extra}


def _opt_str(name: str) -> dict[str, Any]:
    return _f(name, _opt("string"), None)


def _opt_long(name: str) -> dict[str, Any]:
    return _f(name, _opt("long"), None)


def _version() -> dict[str, Any]:
    # Every Hudi record versions itself this way: int first so the default can be 1.
    return _f("version", ["int", "null"], 1)


def _str_map_field(name: str, **extra: Any) -> dict[str, Any]:
    return _f(name, _opt(_map("string", **extra)), None)


# --- compaction --------------------------------------------------------------------------------

_COMPACTION_OPERATION = _rec(
    "HoodieCompactionOperation",
    _f("baseInstantTime", _opt("string")),
    _f("deltaFilePaths", _opt(_arr("string")), None),
    _opt_str("dataFilePath"),
    _f("fileId", _opt("string")),
    _opt_str("partitionPath"),
    _f("metrics", _opt(_map("double")), None),
    _opt_str("bootstrapFilePath"),
)

_COMPACTION_STRATEGY = _rec(
    "HoodieCompactionStrategy",
    _opt_str("compactorClassName"),
    _str_map_field("strategyParams"),
    _version(),
)

_COMPACTION_PLAN = _rec(
    "HoodieCompactionPlan",
    _f("operations", _opt(_arr(_COMPACTION_OPERATION)), None),
    _str_map_field("extraMetadata"),
    _version(),
    _f("strategy", _opt(_COMPACTION_STRATEGY), None),
    _f("preserveHoodieMetadata", ["boolean", "null"], False),
)

# --- clean -------------------------------------------------------------------------------------

_ACTION_INSTANT = _rec(
    "HoodieActionInstant",
    _f("timestamp", "string"),
    _f("action", "string"),
    _f("state", "string"),
)

_CLEAN_FILE_INFO = _rec(
    "HoodieCleanFileInfo",
    _opt_str("filePath"),
    _f("isBootstrapBaseFile", _opt("boolean"), None),
)

_CLEANER_PLAN = _rec(
    "HoodieCleanerPlan",
    _f("earliestInstantToRetain", _opt(_ACTION_INSTANT), None),
    _f("lastCompletedCommitTimestamp", "string", ""),
    _f("policy", "string"),
    # Version 1 plans listed file names here; version 2 uses filePathsToBeDeletedPerPartition.
    _f("filesToBeDeletedPerPartition", _opt(_map(_arr("string"))), None),
    _version(),
    _f("filePathsToBeDeletedPerPartition", _opt(_map(_arr(_CLEAN_FILE_INFO))), None),
    _f("partitionsToBeDeleted", _opt(_arr("string")), None),
    _str_map_field("extraMetadata", default=None),
)

_CLEAN_PARTITION_METADATA = _rec(
    "HoodieCleanPartitionMetadata",
    _f("partitionPath", "string"),
    _f("policy", "string"),
    _f("deletePathPatterns", _arr("string")),
    _f("successDeleteFiles", _arr("string")),
    _f("failedDeleteFiles", _arr("string")),
    _f("isPartitionDeleted", _opt("boolean"), None),
)

_CLEAN_METADATA = _rec(
    "HoodieCleanMetadata",
    _f("startCleanTime", "string"),
    _f("timeTakenInMillis", "long"),
    _f("totalFilesDeleted", "int"),
    _f("earliestCommitToRetain", "string"),
    _f("lastCompletedCommitTimestamp", "string", ""),
    _f("partitionMetadata", _map(_CLEAN_PARTITION_METADATA)),
    _version(),
    _f("bootstrapPartitionMetadata", _opt(_map(_CLEAN_PARTITION_METADATA, default=None)), None),
    _str_map_field("extraMetadata", default=None),
)

# --- rollback ----------------------------------------------------------------------------------

_INSTANT_INFO = _rec(
    "HoodieInstantInfo",
    _f("commitTime", "string"),
    _f("action", "string"),
)

_ROLLBACK_REQUEST = _rec(
    "HoodieRollbackRequest",
    _f("partitionPath", "string"),
    _opt_str("fileId"),
    _opt_str("latestBaseInstant"),
    _f("filesToBeDeleted", _arr("string", default=[]), []),
    _f("logBlocksToBeDeleted", _opt(_map("long")), None),
)

_ROLLBACK_PLAN = _rec(
    "HoodieRollbackPlan",
    _f("instantToRollback", _opt(_INSTANT_INFO), None),
    _f("RollbackRequests", _opt(_arr(_ROLLBACK_REQUEST)), None),
    _version(),
)

_ROLLBACK_PARTITION_METADATA = _rec(
    "HoodieRollbackPartitionMetadata",
    _f("partitionPath", "string"),
    _f("successDeleteFiles", _arr("string")),
    _f("failedDeleteFiles", _arr("string")),
    _f("rollbackLogFiles", _opt(_map("long")), None),
    _f("logFilesFromFailedCommit", _opt(_map("long")), None),
)

_ROLLBACK_METADATA = _rec(
    "HoodieRollbackMetadata",
    _f("startRollbackTime", "string"),
    _f("timeTakenInMillis", "long"),
    _f("totalFilesDeleted", "int"),
    _f("commitsRollback", _arr("string")),
    _f("partitionMetadata", _map(_ROLLBACK_PARTITION_METADATA)),
    _version(),
    _f("instantsRollback", _arr(_INSTANT_INFO, default=[]), []),
)

# --- replace / clustering ----------------------------------------------------------------------

_SLICE_INFO = _rec(
    "HoodieSliceInfo",
    _opt_str("dataFilePath"),
    _f("deltaFilePaths", _opt(_arr("string")), None),
    _f("fileId", _opt("string")),
    _opt_str("partitionPath"),
    _opt_str("bootstrapFilePath"),
    _version(),
)

_CLUSTERING_GROUP = _rec(
    "HoodieClusteringGroup",
    _f("slices", _opt(_arr(_SLICE_INFO)), None),
    _f("metrics", _opt(_map("double")), None),
    _f("numOutputFileGroups", ["int", "null"], 1),
    _str_map_field("extraMetadata"),
    _version(),
)

_CLUSTERING_STRATEGY = _rec(
    "HoodieClusteringStrategy",
    _opt_str("strategyClassName"),
    _str_map_field("strategyParams"),
    _version(),
)

_CLUSTERING_PLAN = _rec(
    "HoodieClusteringPlan",
    _f("inputGroups", _opt(_arr(_CLUSTERING_GROUP)), None),
    _f("strategy", _opt(_CLUSTERING_STRATEGY), None),
    _str_map_field("extraMetadata"),
    _version(),
    _f("preserveHoodieMetadata", _opt("boolean"), None),
)

_REQUESTED_REPLACE_METADATA = _rec(
    "HoodieRequestedReplaceMetadata",
    _opt_str("operationType"),
    _f("clusteringPlan", _opt(_CLUSTERING_PLAN), None),
    _str_map_field("extraMetadata"),
    _version(),
)

# --- savepoint ---------------------------------------------------------------------------------

_SAVEPOINT_PARTITION_METADATA = _rec(
    "HoodieSavepointPartitionMetadata",
    _f("partitionPath", "string"),
    _f("savepointDataFile", _arr("string")),
)

_SAVEPOINT_METADATA = _rec(
    "HoodieSavepointMetadata",
    _f("savepointedBy", "string"),
    _f("savepointedAt", "long"),
    _f("comments", "string"),
    _f("partitionMetadata", _map(_SAVEPOINT_PARTITION_METADATA)),
    _version(),
)

# --- archived timeline (only here: the Avro form of commit metadata and friends) ---------------

_WRITE_STAT = _rec(
    "HoodieWriteStat",
    *(_opt_str(n) for n in ("fileId", "path", "prevCommit")),
    *(_opt_long(n) for n in ("numWrites", "numDeletes", "numUpdateWrites", "totalWriteBytes",
                             "totalWriteErrors")),
    _opt_str("partitionPath"),
    *(_opt_long(n) for n in ("totalLogRecords", "totalLogFiles", "totalUpdatedRecordsCompacted",
                             "numInserts", "totalLogBlocks", "totalCorruptLogBlock",
                             "totalRollbackBlocks", "fileSizeInBytes")),
)

_COMMIT_METADATA = _rec(
    "HoodieCommitMetadata",
    _f("partitionToWriteStats", _opt(_map(_arr(_WRITE_STAT))), None),
    _str_map_field("extraMetadata", default=None),
    _version(),
    _opt_str("operationType"),
)

_COMPACTION_WRITE_STAT = _rec(
    "HoodieCompactionWriteStat",
    _opt_str("partitionPath"),
    *(_opt_long(n) for n in ("totalLogRecords", "totalLogFiles", "totalUpdatedRecordsCompacted")),
    _f("hoodieWriteStat", _opt(_WRITE_STAT), None),
)

_COMPACTION_METADATA = _rec(
    "HoodieCompactionMetadata",
    # Hudi gives this field no default.
    _f("partitionToCompactionWriteStats", _opt(_map(_arr(_COMPACTION_WRITE_STAT)))),
)

_REPLACE_COMMIT_METADATA = _rec(
    "HoodieReplaceCommitMetadata",
    _f("partitionToWriteStats", _opt(_map(_arr(_WRITE_STAT))), None),
    _str_map_field("extraMetadata"),
    _version(),
    _opt_str("operationType"),
    _f("partitionToReplaceFileIds", _opt(_map(_arr("string"))), None),
)

_INDEX_PARTITION_INFO = _rec(
    "HoodieIndexPartitionInfo",
    _version(),
    _opt_str("metadataPartitionPath"),
    _opt_str("indexUptoInstant"),
)

_INDEX_COMMIT_METADATA = _rec(
    "HoodieIndexCommitMetadata",
    _version(),
    _opt_str("operationType"),
    _f("indexPartitionInfos", _opt(_arr(_INDEX_PARTITION_INFO)), None),
)

_ARCHIVED_META_ENTRY = _rec(
    "HoodieArchivedMetaEntry",
    _f("hoodieCommitMetadata", _opt(_COMMIT_METADATA), None),
    _f("hoodieCleanMetadata", _opt(_CLEAN_METADATA), None),
    _f("hoodieCompactionMetadata", _opt(_COMPACTION_METADATA), None),
    _f("hoodieRollbackMetadata", _opt(_ROLLBACK_METADATA), None),
    _f("hoodieSavePointMetadata", _opt(_SAVEPOINT_METADATA), None),
    _opt_str("commitTime"),
    _opt_str("actionType"),
    _version(),
    _f("hoodieCompactionPlan", _opt(_COMPACTION_PLAN), None),
    _f("hoodieCleanerPlan", _opt(_CLEANER_PLAN), None),
    _opt_str("actionState"),
    _f("hoodieReplaceCommitMetadata", _opt(_REPLACE_COMMIT_METADATA), None),
    _f("hoodieRequestedReplaceMetadata", _opt(_REQUESTED_REPLACE_METADATA), None),
    # The capital H is Hudi's; readers match fields by name.
    _f("HoodieInflightReplaceMetadata", _opt(_COMMIT_METADATA), None),
    _f("hoodieIndexCommitMetadata", _opt(_INDEX_COMMIT_METADATA), None),
    _opt_str("stateTransitionTime"),
)

_ROOTS: dict[AvroKind, dict[str, Any]] = {
    AvroKind.COMPACTION_PLAN: _COMPACTION_PLAN,
    AvroKind.CLEANER_PLAN: _CLEANER_PLAN,
    AvroKind.CLEAN_METADATA: _CLEAN_METADATA,
    AvroKind.ROLLBACK_PLAN: _ROLLBACK_PLAN,
    AvroKind.ROLLBACK_METADATA: _ROLLBACK_METADATA,
    AvroKind.REQUESTED_REPLACE_METADATA: _REQUESTED_REPLACE_METADATA,
    AvroKind.SAVEPOINT_METADATA: _SAVEPOINT_METADATA,
    AvroKind.ARCHIVED_META_ENTRY: _ARCHIVED_META_ENTRY,
}


# --- self-contained top-level schemas ----------------------------------------------------------

def _children(node: Any) -> Iterator[tuple[Any, Any]]:
    """(container, key) of every place a nested schema can sit, in document order."""
    if isinstance(node, list):
        yield from ((node, i) for i in range(len(node)))
    elif isinstance(node, dict):
        kind = node.get("type")
        if kind == "record":
            for field in node["fields"]:
                yield field, "type"
        elif kind == "array":
            yield node, "items"
        elif kind == "map":
            yield node, "values"


def _self_contained(root: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``root`` where each named record is written out in full where it first appears
    and referenced by name after that: Avro forbids defining a name twice in one schema, and the
    building blocks above are shared between several roots (and within the archived entry)."""
    out = copy.deepcopy(root)
    out = {"type": "record", "name": out["name"], "namespace": NAMESPACE, "fields": out["fields"]}
    seen = {out["name"]}

    def walk(node: Any) -> None:
        for container, key in _children(node):
            child = container[key]
            if isinstance(child, dict) and child.get("type") == "record":
                if child["name"] in seen:
                    container[key] = child["name"]
                    continue
                seen.add(child["name"])
            walk(child)

    walk(out)
    return out


_SCHEMAS: dict[AvroKind, dict[str, Any]] = {k: _self_contained(r) for k, r in _ROOTS.items()}

# Parsed once: parsing the archived entry schema costs more than encoding a plan. Each root gets
# its own name registry, since several roots define the same records.
_PARSED: dict[AvroKind, Any] = {k: fastavro.parse_schema(s, named_schemas={})
                                for k, s in _SCHEMAS.items()}


def schema(kind: AvroKind | str) -> dict[str, Any]:
    """The self-contained JSON form of ``kind``'s schema (a fresh copy the caller may change)."""
    return copy.deepcopy(_SCHEMAS[AvroKind(kind)])


def parsed_schema(kind: AvroKind | str) -> Any:
    """The fastavro-parsed schema of ``kind``, shared: do not modify it."""
    return _PARSED[AvroKind(kind)]
