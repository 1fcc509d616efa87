"""Iceberg v2 manifests and manifest lists, written and read with fastavro.

Both are Avro files whose schemas carry Iceberg's ``field-id`` (and ``element-id``) attributes:
readers resolve fields by id, not by name. A manifest's key-value metadata names the table
schema, partition spec and format version it was written with.

A manifest holds data files or position delete files (never both: the spec keeps them apart,
and the manifest list says which, ``content`` 0 or 1). Each data file entry carries its column metrics
(sizes, value and null counts, lower and upper bounds: :mod:`lakehouse.iceberg.metrics`) so
engines skip files by value; entries written before lakehouse wrote metrics have none, which
readers take as "might match".
"""

from __future__ import annotations

import io
import json
import math
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import fastavro

from lakehouse.errors import CorruptFileError
from lakehouse.iceberg.metrics import Metrics
from lakehouse.iceberg.partition import PartitionSpec, avro_type, from_avro_value, to_bytes
from lakehouse.field_schema import IcebergType, Schema, schema_to_json
from lakehouse.storage.base import Storage

EXISTING, ADDED, DELETED = 0, 1, 2
CONTENT_DATA, CONTENT_POSITION_DELETES = 0, 1
_CONTENT_NAMES = {CONTENT_DATA: "data", CONTENT_POSITION_DELETES: "deletes"}


@dataclass(frozen=True)
class DataFile:
    path: str  # absolute URI
    partition: tuple[Any, ...]  # canonical values, in the spec's field order
    record_count: int
    file_size: int
    metrics: Metrics | None = None
    content: int = CONTENT_DATA
    # A position delete file's one target data file (Iceberg's field 143; readers index the
    # delete by it instead of matching it against every data file of its partition).
    referenced_data_file: str | None = None

    @property
    def is_deletes(self) -> bool:
        return self.content == CONTENT_POSITION_DELETES


@dataclass(frozen=True)
class Entry:
    status: int
    snapshot_id: int
    # None only on an ADDED entry not yet committed: it inherits its manifest's number.
    sequence_number: int | None
    file_sequence_number: int | None
    file: DataFile

    @property
    def is_live(self) -> bool:
        return self.status != DELETED


@dataclass(frozen=True)
class FieldSummary:
    contains_null: bool
    contains_nan: bool | None
    lower: bytes | None
    upper: bytes | None


@dataclass(frozen=True)
class ManifestFile:
    path: str  # absolute URI
    length: int
    spec_id: int
    sequence_number: int
    min_sequence_number: int
    added_snapshot_id: int
    added_files: int
    existing_files: int
    deleted_files: int
    added_rows: int
    existing_rows: int
    deleted_rows: int
    partitions: tuple[FieldSummary, ...] | None
    content: int = CONTENT_DATA

    @property
    def live_files(self) -> int:
        return self.added_files + self.existing_files


def _opt(t: Any) -> Any:
    return ["null", t]


def _partition_record(spec: PartitionSpec, schema: Schema) -> dict[str, Any]:
    return {"type": "record", "name": "r102", "fields": [
        {"name": f.name, "type": _opt(avro_type(t, f"fixed_{f.field_id}")), "default": None,
         "field-id": f.field_id}
        for f, t in zip(spec.fields, spec.types(schema))]}


def _int_map(name: str, field_id: int, key_id: int, value_id: int, value: str) -> dict[str, Any]:
    """An Iceberg map with int keys in Avro: an array of key/value records, as Java writes it."""
    record = {"type": "record", "name": f"k{key_id}_v{value_id}", "fields": [
        {"name": "key", "type": "int", "field-id": key_id},
        {"name": "value", "type": value, "field-id": value_id}]}
    return {"name": name, "type": _opt({"type": "array", "logicalType": "map", "items": record}),
            "default": None, "field-id": field_id}


# The metric maps of a data_file struct (Iceberg spec, "Manifests"), in the order Java writes them.
_METRIC_MAPS = (("column_sizes", 108, 117, 118, "long"), ("value_counts", 109, 119, 120, "long"),
                ("null_value_counts", 110, 121, 122, "long"), ("nan_value_counts", 137, 138, 139, "long"),
                ("lower_bounds", 125, 126, 127, "bytes"), ("upper_bounds", 128, 129, 130, "bytes"))


def _metrics_record(m: Metrics | None) -> dict[str, Any]:
    if m is None:
        return {name: None for name, *_ in _METRIC_MAPS}
    return {
        "column_sizes": [{"key": k, "value": v} for k, v in m.column_sizes],
        "value_counts": [{"key": k, "value": v} for k, v in m.value_counts],
        "null_value_counts": [{"key": k, "value": v} for k, v in m.null_value_counts],
        # Parquet footers do not count NaNs: left unknown rather than claimed to be zero.
        "nan_value_counts": None,
        "lower_bounds": [{"key": k, "value": v} for k, v in m.lower_bounds],
        "upper_bounds": [{"key": k, "value": v} for k, v in m.upper_bounds],
    }


def _metrics_of(df: dict[str, Any]) -> Metrics | None:
    if all(df.get(name) is None for name, *_ in _METRIC_MAPS):
        return None

    def pairs(name: str) -> dict[int, Any]:
        return {int(r["key"]): r["value"] for r in df.get(name) or ()}

    return Metrics.of(pairs("column_sizes"), pairs("value_counts"), pairs("null_value_counts"),
                      pairs("lower_bounds"), pairs("upper_bounds"))


def manifest_entry_schema(spec: PartitionSpec, schema: Schema) -> dict[str, Any]:
    data_file = {"type": "record", "name": "r2", "fields": [
        {"name": "content", "type": "int", "field-id": 134},
        {"name": "file_path", "type": "string", "field-id": 100},
        {"name": "file_format", "type": "string", "field-id": 101},
        {"name": "partition", "type": _partition_record(spec, schema), "field-id": 102},
        {"name": "record_count", "type": "long", "field-id": 103},
        {"name": "file_size_in_bytes", "type": "long", "field-id": 104},
        *(_int_map(*m) for m in _METRIC_MAPS),
        {"name": "referenced_data_file", "type": _opt("string"), "default": None, "field-id": 143},
    ]}
    return {"type": "record", "name": "manifest_entry", "fields": [
        {"name": "status", "type": "int", "field-id": 0},
        {"name": "snapshot_id", "type": _opt("long"), "default": None, "field-id": 1},
        {"name": "sequence_number", "type": _opt("long"), "default": None, "field-id": 3},
        {"name": "file_sequence_number", "type": _opt("long"), "default": None, "field-id": 4},
        {"name": "data_file", "type": data_file, "field-id": 2},
    ]}


_FIELD_SUMMARY = {"type": "record", "name": "r508", "fields": [
    {"name": "contains_null", "type": "boolean", "field-id": 509},
    {"name": "contains_nan", "type": _opt("boolean"), "default": None, "field-id": 518},
    {"name": "lower_bound", "type": _opt("bytes"), "default": None, "field-id": 510},
    {"name": "upper_bound", "type": _opt("bytes"), "default": None, "field-id": 511},
]}

MANIFEST_LIST_SCHEMA = {"type": "record", "name": "manifest_file", "fields": [
    {"name": "manifest_path", "type": "string", "field-id": 500},
    {"name": "manifest_length", "type": "long", "field-id": 501},
    {"name": "partition_spec_id", "type": "int", "field-id": 502},
    {"name": "content", "type": "int", "field-id": 517},
    {"name": "sequence_number", "type": "long", "field-id": 515},
    {"name": "min_sequence_number", "type": "long", "field-id": 516},
    {"name": "added_snapshot_id", "type": "long", "field-id": 503},
    {"name": "added_files_count", "type": "int", "field-id": 504},
    {"name": "existing_files_count", "type": "int", "field-id": 505},
    {"name": "deleted_files_count", "type": "int", "field-id": 506},
    {"name": "added_rows_count", "type": "long", "field-id": 512},
    {"name": "existing_rows_count", "type": "long", "field-id": 513},
    {"name": "deleted_rows_count", "type": "long", "field-id": 514},
    {"name": "partitions", "type": _opt({"type": "array", "items": _FIELD_SUMMARY, "element-id": 508}),
     "default": None, "field-id": 507},
    {"name": "key_metadata", "type": _opt("bytes"), "default": None, "field-id": 519},
]}


def _encode(schema: dict[str, Any], records: Iterable[dict[str, Any]], metadata: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    fastavro.writer(buf, fastavro.parse_schema(schema), records, metadata=metadata, codec="deflate")
    return buf.getvalue()


def _decode(storage: Storage, rel: str, what: str) -> tuple[list[dict[str, Any]], dict[str, str]]:
    try:
        data = storage.read(rel)
    except FileNotFoundError:
        raise CorruptFileError(storage.uri(rel), f"the {what} is missing",
                               help="the Iceberg metadata refers to a file that is gone: delete the "
                                    "metadata folder to publish the table afresh") from None
    try:
        reader = fastavro.reader(io.BytesIO(data))
        return list(reader), dict(reader.metadata)
    except Exception as e:  # noqa: BLE001 - fastavro raises many types on bad input
        raise CorruptFileError(storage.uri(rel), f"not a readable {what} ({type(e).__name__}: {e})") from None


def _summaries(entries: Sequence[Entry], types: list[IcebergType]) -> tuple[FieldSummary, ...]:
    out = []
    for i, t in enumerate(types):
        values = [e.file.partition[i] for e in entries]
        nan = any(isinstance(v, float) and math.isnan(v) for v in values)
        present = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
        lo = to_bytes(t, min(present)) if present else None
        hi = to_bytes(t, max(present)) if present else None
        out.append(FieldSummary(any(v is None for v in values),
                                nan if t in ("float", "double") else None, lo, hi))
    return tuple(out)


def write_manifest(storage: Storage, rel: str, entries: Sequence[Entry], *, spec: PartitionSpec,
                   schema: Schema, snapshot_id: int, sequence_number: int) -> ManifestFile:
    """Write a manifest of the snapshot ``snapshot_id`` (which gets ``sequence_number``).

    ADDED entries are written without sequence numbers, so they inherit the manifest's. The
    entries are all data files or all position delete files."""
    types = spec.types(schema)
    kinds = {e.file.content for e in entries}
    if len(kinds) > 1:
        raise ValueError("a manifest holds data files or delete files, not both")
    content = kinds.pop() if kinds else CONTENT_DATA
    records = []
    for e in entries:
        added = e.status == ADDED
        records.append({
            "status": e.status,
            "snapshot_id": e.snapshot_id,
            "sequence_number": None if added else e.sequence_number,
            "file_sequence_number": None if added else e.file_sequence_number,
            "data_file": {
                "content": e.file.content, "file_path": e.file.path, "file_format": "PARQUET",
                "partition": {f.name: v for f, v in zip(spec.fields, e.file.partition)},
                "record_count": e.file.record_count, "file_size_in_bytes": e.file.file_size,
                **_metrics_record(e.file.metrics),
                "referenced_data_file": e.file.referenced_data_file,
            }})
    data = _encode(manifest_entry_schema(spec, schema), records, {
        "schema": json.dumps(schema_to_json(schema), separators=(",", ":")),
        "schema-id": str(schema.schema_id),
        "partition-spec": json.dumps(spec.fields_json(), separators=(",", ":")),
        "partition-spec-id": str(spec.spec_id),
        "format-version": "2",
        "content": _CONTENT_NAMES[content],
    })
    storage.create(rel, data)

    def count(status: int) -> tuple[int, int]:
        chosen = [e for e in entries if e.status == status]
        return len(chosen), sum(e.file.record_count for e in chosen)

    (af, ar), (ef, er), (df, dr) = count(ADDED), count(EXISTING), count(DELETED)
    live_seqs = [sequence_number if e.status == ADDED else e.sequence_number
                 for e in entries if e.is_live]
    return ManifestFile(
        path=storage.uri(rel), length=len(data), spec_id=spec.spec_id,
        sequence_number=sequence_number,
        min_sequence_number=min((s for s in live_seqs if s is not None), default=sequence_number),
        added_snapshot_id=snapshot_id, added_files=af, existing_files=ef, deleted_files=df,
        added_rows=ar, existing_rows=er, deleted_rows=dr,
        partitions=_summaries(entries, types), content=content)


def read_manifest(storage: Storage, rel: str, manifest: ManifestFile, *, spec: PartitionSpec,
                  schema: Schema) -> list[Entry]:
    """Every entry of a manifest, with snapshot ids and sequence numbers inherited."""
    records, _ = _decode(storage, rel, "manifest")
    types = spec.types(schema)
    out = []
    try:
        for r in records:
            df = r["data_file"]
            status = int(r["status"])
            inherit = status == ADDED
            seq = r.get("sequence_number")
            fseq = r.get("file_sequence_number")
            part = df["partition"] or {}
            out.append(Entry(
                status=status,
                snapshot_id=r["snapshot_id"] if r.get("snapshot_id") is not None else manifest.added_snapshot_id,
                sequence_number=manifest.sequence_number if seq is None and inherit else seq,
                file_sequence_number=manifest.sequence_number if fseq is None and inherit else fseq,
                file=DataFile(df["file_path"],
                              tuple(from_avro_value(t, part.get(f.name)) for f, t in zip(spec.fields, types)),
                              int(df["record_count"]), int(df["file_size_in_bytes"]), _metrics_of(df),
                              int(df.get("content") or CONTENT_DATA), df.get("referenced_data_file"))))
    except (KeyError, TypeError, ValueError) as e:
        raise CorruptFileError(storage.uri(rel), f"manifest entry has an unexpected shape ({e!r})") from None
    return out


def write_manifest_list(storage: Storage, rel: str, manifests: Sequence[ManifestFile], *,
                        snapshot_id: int, parent_id: int | None, sequence_number: int) -> None:
    records = [{
        "manifest_path": m.path, "manifest_length": m.length, "partition_spec_id": m.spec_id,
        "content": m.content, "sequence_number": m.sequence_number,
        "min_sequence_number": m.min_sequence_number, "added_snapshot_id": m.added_snapshot_id,
        "added_files_count": m.added_files, "existing_files_count": m.existing_files,
        "deleted_files_count": m.deleted_files, "added_rows_count": m.added_rows,
        "existing_rows_count": m.existing_rows, "deleted_rows_count": m.deleted_rows,
        "partitions": None if m.partitions is None else [
            {"contains_null": s.contains_null, "contains_nan": s.contains_nan,
             "lower_bound": s.lower, "upper_bound": s.upper} for s in m.partitions],
        "key_metadata": None,
    } for m in manifests]
    storage.create(rel, _encode(MANIFEST_LIST_SCHEMA, records, {
        "snapshot-id": str(snapshot_id),
        "parent-snapshot-id": "null" if parent_id is None else str(parent_id),
        "sequence-number": str(sequence_number),
        "format-version": "2",
    }))


def read_manifest_list(storage: Storage, rel: str) -> list[ManifestFile]:
    records, _ = _decode(storage, rel, "manifest list")
    try:
        return [ManifestFile(
            path=r["manifest_path"], length=int(r["manifest_length"]), spec_id=int(r["partition_spec_id"]),
            sequence_number=int(r["sequence_number"]), min_sequence_number=int(r["min_sequence_number"]),
            added_snapshot_id=int(r["added_snapshot_id"]), added_files=int(r["added_files_count"]),
            existing_files=int(r["existing_files_count"]), deleted_files=int(r["deleted_files_count"]),
            added_rows=int(r["added_rows_count"]), existing_rows=int(r["existing_rows_count"]),
            deleted_rows=int(r["deleted_rows_count"]),
            partitions=None if r.get("partitions") is None else tuple(
                FieldSummary(bool(s["contains_null"]), s.get("contains_nan"), s.get("lower_bound"),
                             s.get("upper_bound")) for s in r["partitions"]),
            content=int(r.get("content") or CONTENT_DATA))
            for r in records]
    except (KeyError, TypeError, ValueError) as e:
        raise CorruptFileError(storage.uri(rel), f"manifest list has an unexpected shape ({e!r})") from None
