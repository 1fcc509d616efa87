"""Iceberg table metadata (format version 2) as immutable values, to and from JSON.

Only the parts lakehouse publishes are modelled; a metadata file this module did not write is
still read as long as it has them. Changes return new objects (``dataclasses.replace``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

from lakehouse.errors import CorruptFileError
from lakehouse.iceberg.partition import FIRST_PARTITION_FIELD_ID, PartitionSpec
from lakehouse.field_schema import Schema, schema_from_json, schema_to_json

FORMAT_VERSION = 2
MAIN_BRANCH = "main"
# The summary key naming the Hudi instant a snapshot stands for.
INSTANT_KEY = "hudi.instant"


def _frozen(m: Mapping[str, str] | None) -> Mapping[str, str]:
    return MappingProxyType(dict(m or {}))


@dataclass(frozen=True)
class Snapshot:
    snapshot_id: int
    parent_id: int | None
    sequence_number: int
    timestamp_ms: int
    manifest_list: str  # absolute URI
    schema_id: int
    summary: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "summary", _frozen(self.summary))

    @property
    def instant(self) -> str | None:
        return self.summary.get(INSTANT_KEY)

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"snapshot-id": self.snapshot_id}
        if self.parent_id is not None:
            d["parent-snapshot-id"] = self.parent_id
        d.update({"sequence-number": self.sequence_number, "timestamp-ms": self.timestamp_ms,
                  "manifest-list": self.manifest_list, "summary": dict(self.summary),
                  "schema-id": self.schema_id})
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Snapshot":
        return cls(int(d["snapshot-id"]),
                   int(d["parent-snapshot-id"]) if d.get("parent-snapshot-id") is not None else None,
                   int(d.get("sequence-number", 0)), int(d["timestamp-ms"]), str(d["manifest-list"]),
                   int(d.get("schema-id", 0)), {str(k): str(v) for k, v in (d.get("summary") or {}).items()})


@dataclass(frozen=True)
class LogEntry:
    """One line of the snapshot log (``value`` a snapshot id) or metadata log (a file URI)."""

    timestamp_ms: int
    value: int | str


@dataclass(frozen=True)
class TableMetadata:
    table_uuid: str
    location: str
    last_sequence_number: int
    last_updated_ms: int
    last_column_id: int
    schemas: tuple[Schema, ...]
    current_schema_id: int
    specs: tuple[PartitionSpec, ...]
    default_spec_id: int
    properties: Mapping[str, str] = field(default_factory=dict)
    current_snapshot_id: int | None = None
    snapshots: tuple[Snapshot, ...] = ()
    snapshot_log: tuple[LogEntry, ...] = ()
    metadata_log: tuple[LogEntry, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "properties", _frozen(self.properties))

    # --- lookups ---------------------------------------------------------------------------

    @property
    def last_partition_id(self) -> int:
        return max((f.field_id for s in self.specs for f in s.fields), default=FIRST_PARTITION_FIELD_ID - 1)

    def schema(self, schema_id: int | None = None) -> Schema:
        sid = self.current_schema_id if schema_id is None else schema_id
        for s in self.schemas:
            if s.schema_id == sid:
                return s
        raise KeyError(f"schema {sid} is not in the metadata")

    def spec(self, spec_id: int) -> PartitionSpec:
        for s in self.specs:
            if s.spec_id == spec_id:
                return s
        raise KeyError(f"partition spec {spec_id} is not in the metadata")

    def snapshot(self, snapshot_id: int) -> Snapshot | None:
        return next((s for s in self.snapshots if s.snapshot_id == snapshot_id), None)

    @property
    def current_snapshot(self) -> Snapshot | None:
        return None if self.current_snapshot_id is None else self.snapshot(self.current_snapshot_id)

    # --- JSON ------------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        current = self.current_snapshot_id
        return {
            "format-version": FORMAT_VERSION,
            "table-uuid": self.table_uuid,
            "location": self.location,
            "last-sequence-number": self.last_sequence_number,
            "last-updated-ms": self.last_updated_ms,
            "last-column-id": self.last_column_id,
            "current-schema-id": self.current_schema_id,
            "schemas": [schema_to_json(s) for s in self.schemas],
            "default-spec-id": self.default_spec_id,
            "partition-specs": [s.to_json() for s in self.specs],
            "last-partition-id": self.last_partition_id,
            "default-sort-order-id": 0,
            "sort-orders": [{"order-id": 0, "fields": []}],
            "properties": dict(self.properties),
            "current-snapshot-id": -1 if current is None else current,
            "refs": {} if current is None else {MAIN_BRANCH: {"snapshot-id": current, "type": "branch"}},
            "snapshots": [s.to_json() for s in self.snapshots],
            "statistics": [],
            "partition-statistics": [],
            "snapshot-log": [{"timestamp-ms": e.timestamp_ms, "snapshot-id": e.value} for e in self.snapshot_log],
            "metadata-log": [{"timestamp-ms": e.timestamp_ms, "metadata-file": e.value} for e in self.metadata_log],
        }

    def to_bytes(self) -> bytes:
        return json.dumps(self.to_json(), indent=2).encode("utf-8")

    @classmethod
    def from_bytes(cls, data: bytes, path: str) -> "TableMetadata":
        try:
            d = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise CorruptFileError(path, f"not valid Iceberg metadata JSON ({e})") from None
        if not isinstance(d, dict):
            raise CorruptFileError(path, "Iceberg metadata is not a JSON object")
        if d.get("format-version") != FORMAT_VERSION:
            raise CorruptFileError(path, f"format-version is {d.get('format-version')!r}, not {FORMAT_VERSION}",
                                   help="lakehouse publishes format version 2; delete the metadata "
                                        "folder to publish the table afresh")
        try:
            current = d.get("current-snapshot-id")
            return cls(
                table_uuid=str(d["table-uuid"]), location=str(d["location"]),
                last_sequence_number=int(d["last-sequence-number"]),
                last_updated_ms=int(d["last-updated-ms"]), last_column_id=int(d["last-column-id"]),
                schemas=tuple(schema_from_json(s) for s in d["schemas"]),
                current_schema_id=int(d["current-schema-id"]),
                specs=tuple(PartitionSpec.from_json(s) for s in d["partition-specs"]),
                default_spec_id=int(d["default-spec-id"]),
                properties={str(k): str(v) for k, v in (d.get("properties") or {}).items()},
                current_snapshot_id=None if current is None or int(current) == -1 else int(current),
                snapshots=tuple(Snapshot.from_json(s) for s in d.get("snapshots") or ()),
                snapshot_log=tuple(LogEntry(int(e["timestamp-ms"]), int(e["snapshot-id"]))
                                   for e in d.get("snapshot-log") or ()),
                metadata_log=tuple(LogEntry(int(e["timestamp-ms"]), str(e["metadata-file"]))
                                   for e in d.get("metadata-log") or ()))
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise CorruptFileError(path, f"Iceberg metadata has an unexpected shape ({e!r})") from None
