"""Partition specs and partition values: Hudi partition paths read back as typed column values.

Hudi's simple and complex key generators write each partition column's value, as text, into the
path (``sf`` or ``city=sf``, URL-escaped when the table says so). Those values are exactly the
column's values in every row of the partition, so such tables get an identity partition spec and
each path is parsed back into typed values. A value is only trusted when printing it again gives
the path text back; otherwise (and for the default partition when the footer cannot tell a null
from an empty string, which Hudi files together) the file is described under an unpartitioned
spec instead: a reader then simply cannot prune it, but never sees wrong partition values.

Timestamp-based key generators format the value into something else (``2024/01/31``), so their
tables are unpartitioned for Iceberg.
"""

from __future__ import annotations

import datetime as dt
import decimal
import struct
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakehouse.config import KeyGeneratorType, TableConfig
from lakehouse.field_schema import IcebergType, Schema
from lakehouse.keygen import DEFAULT_PARTITION

FIRST_PARTITION_FIELD_ID = 1000
_IDENTITY_TYPES = ("boolean", "int", "long", "float", "double", "string", "date", "timestamp",
                   "timestamptz")


@dataclass(frozen=True)
class PartitionField:
    source_id: int
    field_id: int
    name: str
    transform: str = "identity"


@dataclass(frozen=True)
class PartitionSpec:
    spec_id: int
    fields: tuple[PartitionField, ...] = ()

    @property
    def is_unpartitioned(self) -> bool:
        return not self.fields

    def fields_json(self) -> list[dict[str, Any]]:
        return [{"source-id": f.source_id, "field-id": f.field_id, "name": f.name,
                 "transform": f.transform} for f in self.fields]

    def to_json(self) -> dict[str, Any]:
        return {"spec-id": self.spec_id, "fields": self.fields_json()}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "PartitionSpec":
        return cls(int(d["spec-id"]), tuple(
            PartitionField(int(f["source-id"]), int(f["field-id"]), str(f["name"]), str(f["transform"]))
            for f in d.get("fields") or ()))

    def types(self, schema: Schema) -> list[IcebergType]:
        out = []
        for f in self.fields:
            src = schema.find(f.source_id)
            if src is None:
                raise ValueError(f"partition source field {f.source_id} is not in schema {schema.schema_id}")
            out.append(src.type)
        return out


def choose_spec(config: TableConfig, schema: Schema, spec_id: int = 0) -> PartitionSpec:
    """Identity on the partition columns when the paths hold their plain values, else none."""
    if config.key_generator_type not in (KeyGeneratorType.SIMPLE, KeyGeneratorType.COMPLEX):
        return PartitionSpec(spec_id)
    if not config.partition_fields:
        return PartitionSpec(spec_id)
    fields = []
    for i, name in enumerate(config.partition_fields):
        src = schema.top_level(name)
        if src is None or not _identity_type(src.type):
            return PartitionSpec(spec_id)
        fields.append(PartitionField(src.id, FIRST_PARTITION_FIELD_ID + i, name))
    return PartitionSpec(spec_id, tuple(fields))


def _identity_type(t: IcebergType) -> bool:
    return isinstance(t, str) and (t in _IDENTITY_TYPES or t.startswith("decimal("))


# --- values --------------------------------------------------------------------------------------
# Partition values are kept in one canonical Python form per Iceberg type: bool, int, float, str,
# Decimal, and int days (date) or int microseconds (timestamps).

_UNKNOWN = object()


class PartitionMapper:
    """Typed values of one spec for Hudi partition paths."""

    def __init__(self, config: TableConfig, spec: PartitionSpec, schema: Schema,
                 arrow_schema: pa.Schema) -> None:
        self.config = config
        self.spec = spec
        self.types = spec.types(schema)
        self.arrow_types = []
        for f in spec.fields:
            src = schema.find(f.source_id)
            idx = arrow_schema.get_field_index(src.name) if src is not None else -1
            self.arrow_types.append(arrow_schema.field(idx).type if idx >= 0 else None)

    def values(self, partition_path: str, footer: pq.FileMetaData | None) -> tuple[Any, ...] | None:
        """The partition tuple of a file in ``partition_path``, or None when it cannot be told."""
        if self.spec.is_unpartitioned:
            return ()
        parts = partition_path.split("/") if partition_path else []
        if len(self.spec.fields) == 1 and not self.config.hive_style_partitioning:
            parts = [partition_path]  # a single plain field's value may nest folders (region/city)
        if len(parts) != len(self.spec.fields):
            return None
        out = []
        for field, itype, atype, text in zip(self.spec.fields, self.types, self.arrow_types, parts):
            if self.config.hive_style_partitioning:
                key, sep, text = text.partition("=")
                if not sep or key != field.name:
                    return None
            if self.config.url_encode_partitions:
                text = unquote(text)
            if text == DEFAULT_PARTITION:
                v = _default_partition_value(field.name, itype, footer)
            else:
                v = _parse(text, itype, atype)
            if v is _UNKNOWN:
                return None
            out.append(v)
        return tuple(out)


def _parse(text: str, itype: IcebergType, atype: pa.DataType | None) -> Any:
    if atype is None:
        return _UNKNOWN
    try:
        arr = pa.array([text], pa.string()).cast(atype)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return _UNKNOWN
    # Printed back the way the key generator printed it, or not trusted.
    printed = pc.if_else(arr, "true", "false") if pa.types.is_boolean(atype) else arr.cast(pa.string())
    if printed[0].as_py() != text:
        return _UNKNOWN
    return _canonical_from_arrow(arr, itype)


def _canonical_from_arrow(arr: pa.Array, itype: IcebergType) -> Any:
    if itype == "date":
        return arr.cast(pa.int32())[0].as_py()
    if itype in ("timestamp", "timestamptz"):
        return arr.cast(pa.timestamp("us", tz=arr.type.tz)).cast(pa.int64())[0].as_py()
    return arr[0].as_py()


def _default_partition_value(column: str, itype: IcebergType, footer: pq.FileMetaData | None) -> Any:
    """Hudi puts nulls and (for strings) empty strings in the default partition: the file's
    column statistics say which one a file holds."""
    if itype != "string":
        return None
    if footer is None:
        return _UNKNOWN
    if footer.num_rows == 0:
        return None
    nulls = 0
    bounds: set[Any] = set()
    for g in range(footer.num_row_groups):
        rg = footer.row_group(g)
        chunk = next((rg.column(j) for j in range(rg.num_columns)
                      if rg.column(j).path_in_schema == column), None)
        stats = chunk.statistics if chunk is not None else None
        if stats is None or not stats.has_null_count:
            return _UNKNOWN
        nulls += stats.null_count
        if stats.has_min_max:
            bounds |= {stats.min, stats.max}
    if nulls == footer.num_rows:
        return None
    if nulls == 0 and bounds and all(b in ("", b"") for b in bounds):
        return ""
    return _UNKNOWN


# --- Avro and binary forms -----------------------------------------------------------------------

def _decimal_parts(t: str) -> tuple[int, int]:
    p, s = t[len("decimal("):-1].split(",")
    return int(p), int(s)


def _decimal_size(precision: int) -> int:
    size = 1
    while 2 ** (8 * size - 1) < 10 ** precision:
        size += 1
    return size


def avro_type(t: IcebergType, name: str) -> Any:
    """The Avro type Iceberg stores a value of primitive type ``t`` as."""
    simple = {"boolean": "boolean", "int": "int", "long": "long", "float": "float",
              "double": "double", "string": "string", "binary": "bytes"}
    if t in simple:
        return simple[t]
    if t == "date":
        return {"type": "int", "logicalType": "date"}
    if t in ("timestamp", "timestamptz"):
        return {"type": "long", "logicalType": "timestamp-micros", "adjust-to-utc": t == "timestamptz"}
    if isinstance(t, str) and t.startswith("decimal("):
        p, s = _decimal_parts(t)
        return {"type": "fixed", "name": name, "size": _decimal_size(p), "logicalType": "decimal",
                "precision": p, "scale": s}
    raise ValueError(f"no partition value encoding for {t!r}")


_EPOCH_DAY = dt.date(1970, 1, 1)
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def from_avro_value(t: IcebergType, v: Any) -> Any:
    """Canonical form of a value fastavro decoded (it turns logical types into objects)."""
    if v is None:
        return None
    if t == "date" and isinstance(v, dt.date):
        return (v - _EPOCH_DAY).days
    if t in ("timestamp", "timestamptz") and isinstance(v, dt.datetime):
        aware = v if v.tzinfo is not None else v.replace(tzinfo=dt.timezone.utc)
        delta = aware - _EPOCH
        return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    return v


def to_bytes(t: IcebergType, v: Any) -> bytes:
    """Iceberg's single-value binary serialization (bounds in manifest-list partition summaries)."""
    if t == "boolean":
        return b"\x01" if v else b"\x00"
    if t in ("int", "date"):
        return struct.pack("<i", v)
    if t in ("long", "timestamp", "timestamptz", "time"):
        return struct.pack("<q", v)
    if t == "float":
        return struct.pack("<f", v)
    if t == "double":
        return struct.pack("<d", v)
    if t == "string":
        return v.encode("utf-8")
    if t == "binary" or t.startswith("fixed["):
        return bytes(v)
    if t.startswith("decimal("):
        _, scale = _decimal_parts(t)
        # Exact at any precision: scaleb rounds to its context's digits (28 by default).
        with decimal.localcontext(decimal.Context(prec=_EXACT_DIGITS)):
            return unscaled_bytes(int(decimal.Decimal(v).scaleb(scale)))
    raise ValueError(f"no binary form for {t!r}")


# Digits a decimal's unscaled value may need here: Iceberg's 38, with room for a scale shift.
_EXACT_DIGITS = 80


def unscaled_bytes(unscaled: int) -> bytes:
    """A decimal's binary form: its unscaled value, two's complement big-endian, in the fewest bytes."""
    return unscaled.to_bytes(max(1, (unscaled.bit_length() + 8) // 8), "big", signed=True)
