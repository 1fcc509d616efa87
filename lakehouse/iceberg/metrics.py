"""Column metrics of a data file for its manifest entry, from the parquet footer already written.

Iceberg engines skip a data file by value with its entry's ``lower_bounds`` / ``upper_bounds``
(and its null and value counts): pyiceberg's ``_InclusiveMetricsEvaluator``, DuckDB's file
pruner and Daft (through pyiceberg's planning) prune a file only when the bounds of the filtered
column are there. The metrics follow Iceberg's defaults (``write.metadata.metrics.default`` =
``truncate(16)``): counts and bounds for every top-level primitive column, strings and binary
cut to 16 characters / bytes (an upper bound cut short is rounded up, as Java's
``UnicodeUtil.truncateStringMax`` does).

A wrong bound makes a reader skip a file holding matching rows, so a column gets no bounds for
the whole file when any row group holding values has none (a parquet writer drops min/max above
a size limit: Arrow at 4 KiB), when a bound is NaN, when the file's unit or type cannot be
converted exactly, and for the columns lakehouse writes without statistics
(``_hoodie_commit_seqno``, ``_hoodie_file_name``). Nested columns get no metrics (as pyiceberg
gives them counts only, and bounds on them prune nothing a top-level filter would).
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import pyarrow as pa
import pyarrow.parquet as pq

from lakehouse.field_schema import IcebergType, Schema
from lakehouse.iceberg.partition import to_bytes, unscaled_bytes

# Java's and pyiceberg's default metrics mode: truncate(16).
TRUNCATE_LENGTH = 16
_PARQUET_FIELD_ID = b"PARQUET:field_id"
_SURROGATES = range(0xD800, 0xE000)


@dataclass(frozen=True)
class Metrics:
    """A data file's column metrics keyed by Iceberg field id (pairs sorted by id)."""

    column_sizes: tuple[tuple[int, int], ...] = ()
    value_counts: tuple[tuple[int, int], ...] = ()
    null_value_counts: tuple[tuple[int, int], ...] = ()
    lower_bounds: tuple[tuple[int, bytes], ...] = ()
    upper_bounds: tuple[tuple[int, bytes], ...] = ()

    @staticmethod
    def of(column_sizes: Mapping[int, int] | None = None, value_counts: Mapping[int, int] | None = None,
           null_value_counts: Mapping[int, int] | None = None,
           lower_bounds: Mapping[int, bytes] | None = None,
           upper_bounds: Mapping[int, bytes] | None = None) -> "Metrics":
        def pairs(m: Mapping[int, Any] | None) -> tuple[tuple[int, Any], ...]:
            return tuple(sorted((int(k), v) for k, v in (m or {}).items()))

        return Metrics(pairs(column_sizes), pairs(value_counts), pairs(null_value_counts),
                       pairs(lower_bounds), pairs(upper_bounds))


# --- truncation ----------------------------------------------------------------------------------

def truncate_lower(v: Any, t: str, length: int = TRUNCATE_LENGTH) -> Any:
    """A prefix is never above the value: plain truncation (strings by code point)."""
    return v[:length] if t in ("string", "binary") else v


def truncate_upper(v: Any, t: str, length: int = TRUNCATE_LENGTH) -> Any | None:
    """The shortest bound ≥ ``v`` of at most ``length`` characters (bytes for binary): the
    prefix with its last increasable unit incremented; None when there is none."""
    if t not in ("string", "binary") or len(v) <= length:
        return v
    if t == "binary":
        out = bytearray(v[:length])
        for i in range(len(out) - 1, -1, -1):
            if out[i] < 0xFF:
                out[i] += 1
                return bytes(out[:i + 1])
        return None
    chars = list(v[:length])
    for i in range(len(chars) - 1, -1, -1):
        cp = ord(chars[i]) + 1
        if cp in _SURROGATES:
            cp = _SURROGATES.stop
        if cp <= 0x10FFFF:
            return "".join(chars[:i]) + chr(cp)
    return None


# --- footer values -> Iceberg values -------------------------------------------------------------

class _NoBound(Exception):
    """The column's statistics cannot be turned into an exact Iceberg bound."""


def _unscaled(raw: Any) -> int:
    if isinstance(raw, (bytes, bytearray)):
        return int.from_bytes(raw, "big", signed=True)
    return int(raw)


_UNITS = {"milliseconds": (1000, 1), "microseconds": (1, 1), "nanoseconds": (1, 1000)}


def _value(t: str, logical: dict[str, Any], physical: str, raw: Any, upper: bool) -> Any:
    """The Iceberg value of a parquet min/max (``raw``, the physical value; ``logical``, the
    column's parquet logical type as JSON)."""
    kind = logical.get("Type")
    if physical == "INT96":
        raise _NoBound  # legacy timestamps: parquet leaves their order undefined
    if kind == "Int" and not logical.get("isSigned", True) and int(logical.get("bitWidth", 64)) >= 32:
        raise _NoBound  # unsigned: the physical value wraps above the signed range
    if t in ("int", "long"):
        return int(raw)
    if t in ("float", "double"):
        v = float(raw)
        if math.isnan(v):
            raise _NoBound
        return v
    if t == "boolean":
        return bool(raw)
    if t == "date":
        if kind != "Date":
            raise _NoBound
        return int(raw)
    if t in ("timestamp", "timestamptz", "time"):
        unit = _UNITS.get(str(logical.get("timeUnit")))
        if kind not in ("Timestamp", "Time") or unit is None:
            raise _NoBound
        mul, div = unit
        v = int(raw) * mul
        # Nanoseconds to Iceberg's microseconds: the bounds widen, never narrow.
        return -(-v // div) if upper else v // div
    if t == "string":
        return raw.decode("utf-8") if isinstance(raw, (bytes, bytearray)) else str(raw)
    if t == "binary" or t.startswith("fixed["):
        return bytes(raw)
    if t.startswith("decimal("):
        if kind != "Decimal" or f", {logical.get('scale')})" not in t:
            raise _NoBound
        # Iceberg widens a decimal's precision only: the unscaled value is the file's.
        return _unscaled(raw)
    raise _NoBound


def _serialize(t: str, v: Any) -> bytes:
    # Decimals are kept unscaled (exact at any precision, as the file stores them).
    return unscaled_bytes(v) if t.startswith("decimal(") else to_bytes(t, v)


def _bounds(t: str, logical: dict[str, Any], chunks: list[Any]) -> tuple[bytes | None, bytes | None]:
    lows, highs = [], []
    for c in chunks:
        s = c.statistics
        if s is None or not c.is_stats_set:
            raise _NoBound
        if not s.has_min_max:
            if s.has_null_count and s.null_count == c.num_values:
                continue  # only nulls: nothing to bound
            raise _NoBound  # values the statistics left out (too long, or not written)
        lows.append(_value(t, logical, c.physical_type, s.min_raw, upper=False))
        highs.append(_value(t, logical, c.physical_type, s.max_raw, upper=True))
    if not lows:
        return None, None
    lo = truncate_lower(min(lows), t)
    hi = truncate_upper(max(highs), t)
    return _serialize(t, lo), None if hi is None else _serialize(t, hi)


# --- the footer ----------------------------------------------------------------------------------

def _field_id(field: pa.Field) -> int | None:
    raw = (field.metadata or {}).get(_PARQUET_FIELD_ID)
    return int(raw) if raw is not None else None


def from_footer(parquet: pq.FileMetaData, schema: Schema, name_ids: Mapping[str, int]) -> Metrics:
    """The metrics of a parquet file under ``schema`` (the snapshot's Iceberg schema).

    A column is the schema's field of the id the file gives it (``PARQUET:field_id``, as
    lakehouse writes them) or, for files without ids, of its name in ``name_ids`` (the table's
    name mapping, so files written before a rename still resolve)."""
    arrow = parquet.schema.to_arrow_schema()
    leaf = {parquet.schema.column(j).path: j for j in range(parquet.num_columns)}
    types: dict[int, IcebergType] = {f.id: f.type for f in schema.fields}
    chunks: dict[int, list[Any]] = {}
    logical: dict[int, dict[str, Any]] = {}
    for field in arrow:
        fid = _field_id(field)
        if fid is None:
            fid = name_ids.get(field.name)
        j = leaf.get(field.name)
        if fid is None or j is None or not isinstance(types.get(fid), str):
            continue  # not in this schema, or nested: no metrics
        logical[fid] = json.loads(parquet.schema.column(j).logical_type.to_json())
        chunks[fid] = [parquet.row_group(r).column(j) for r in range(parquet.num_row_groups)]
    sizes, values, nulls, lower, upper = {}, {}, {}, {}, {}
    for fid, cs in chunks.items():
        sizes[fid] = sum(c.total_compressed_size for c in cs)
        values[fid] = sum(c.num_values for c in cs)
        if all(c.is_stats_set and c.statistics is not None and c.statistics.has_null_count for c in cs):
            nulls[fid] = sum(c.statistics.null_count for c in cs)
        try:
            lo, hi = _bounds(types[fid], logical[fid], cs)
        except (_NoBound, UnicodeDecodeError, ValueError, OverflowError, struct.error):
            continue
        if lo is not None:
            lower[fid] = lo
        if hi is not None:
            upper[fid] = hi
    return Metrics.of(sizes, values, nulls, lower, upper)


def name_ids(schemas: Iterable[Schema]) -> dict[str, int]:
    """Top-level column name -> field id over the table's schemas, later schemas winning (the
    table's name mapping, for files written without field ids)."""
    out: dict[str, int] = {}
    for s in schemas:
        for f in s.fields:
            out[f.name] = f.id
    return out
