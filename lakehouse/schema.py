"""Arrow <-> Avro schemas and values, shaped the way Hudi's Spark writer shapes them.

Hudi keeps the table schema as Avro JSON (commit metadata, log block headers, parquet footers),
produced from Spark's StructType. Java readers resolve their own schema against these strings, so
names matter: the root record is ``<table>_record`` in namespace ``hoodie.<table>``; a nested record
is named after its field, in the namespace of its parent extended by the parent's name; a decimal is
a ``fixed`` named ``fixed`` in the namespace ``<parent namespace>.<parent name>.<field>`` with
Spark's minimal byte size. Nullable types are ``["null", T]`` with ``"default": null`` (the commit
metadata style); ``hoodie.table.create.schema`` uses ``[T, "null"]`` without defaults, which
:func:`avro_to_arrow_schema` reads too.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any

import pyarrow as pa

from lakehouse.columns import META_FIELDS
from lakehouse.errors import SchemaError

_AVRO_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_UTC = "UTC"
# Avro logical types that fastavro would turn into datetime objects; lakehouse passes their
# integers straight through (Arrow casts them vectorised) and so strips these before parsing.
_TEMPORAL_LOGICAL_TYPES = frozenset({
    "date", "time-millis", "time-micros", "timestamp-millis", "timestamp-micros",
    "local-timestamp-millis", "local-timestamp-micros",
})


def _meta_field(name: str) -> dict[str, Any]:
    # Hudi's addMetadataFields gives each meta field an empty doc; keeping it makes our SCHEMA
    # headers byte-identical to Hudi's.
    return {"name": name, "type": ["null", "string"], "doc": "", "default": None}


def _check_name(name: str, what: str) -> None:
    if not _AVRO_NAME.match(name):
        raise SchemaError(
            f"{what} {name!r} is not a valid Avro name",
            help="Hudi stores the schema as Avro: use letters, digits and '_' only, not starting "
                 "with a digit (rename the column, e.g. with Table.rename_columns)")


def _decimal_fixed_size(precision: int) -> int:
    # Spark's minBytesForPrecision: the fewest bytes whose signed range holds 10**precision - 1.
    size = 1
    while 2 ** (8 * size - 1) < 10 ** precision:
        size += 1
    return size


def _nullable(avro_type: Any, nullable: bool) -> Any:
    return ["null", avro_type] if nullable else avro_type


def _avro_type(t: pa.DataType, name: str, namespace: str) -> Any:
    """The Avro type of one Arrow type; ``name``/``namespace`` name any record or fixed it needs."""
    if pa.types.is_dictionary(t):
        return _avro_type(t.value_type, name, namespace)
    if isinstance(t, pa.ExtensionType):
        return _avro_type(t.storage_type, name, namespace)
    if pa.types.is_null(t):
        return "null"
    if pa.types.is_boolean(t):
        return "boolean"
    if t in (pa.int8(), pa.int16(), pa.int32(), pa.uint8(), pa.uint16()):
        return "int"
    if t in (pa.int64(), pa.uint32(), pa.uint64()):
        return "long"
    if t in (pa.float16(), pa.float32()):
        return "float"
    if t == pa.float64():
        return "double"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string"
    if (pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t)
            or pa.types.is_fixed_size_binary(t)):
        return "bytes"
    if pa.types.is_decimal(t):
        if t.precision > 38:
            raise SchemaError(f"decimal({t.precision},{t.scale}) exceeds Spark's precision of 38")
        return {"type": "fixed", "name": "fixed", "namespace": f"{namespace}.{name}",
                "size": _decimal_fixed_size(t.precision), "logicalType": "decimal",
                "precision": t.precision, "scale": t.scale}
    if pa.types.is_date(t):
        return {"type": "int", "logicalType": "date"}
    if pa.types.is_timestamp(t):
        # Spark has micros only; Hudi keeps millis when the Avro source had them.
        logical = "timestamp-millis" if t.unit == "ms" else "timestamp-micros"
        return {"type": "long", "logicalType": logical}
    if pa.types.is_time32(t):
        return {"type": "int", "logicalType": "time-millis"}
    if pa.types.is_time64(t):
        return {"type": "long", "logicalType": "time-micros"}
    if (pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)
            or pa.types.is_list_view(t) or pa.types.is_large_list_view(t)):
        item = t.value_field
        return {"type": "array",
                "items": _nullable(_avro_type(item.type, name, namespace), item.nullable)}
    if pa.types.is_map(t):
        if not (pa.types.is_string(t.key_type) or pa.types.is_large_string(t.key_type)):
            raise SchemaError(f"map key type {t.key_type} is not supported",
                              help="Avro (and so Hudi) maps need string keys")
        item = t.item_field
        return {"type": "map",
                "values": _nullable(_avro_type(item.type, name, namespace), item.nullable)}
    if pa.types.is_struct(t):
        return _record(list(t), name, namespace)
    raise SchemaError(f"Arrow type {t} of {name!r} has no Hudi/Avro equivalent",
                      help="cast the column to a supported type before writing")


def _record(fields: list[pa.Field], name: str, namespace: str,
            prefix: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    _check_name(name, "record name")
    child_namespace = f"{namespace}.{name}" if namespace else name
    out_fields = list(prefix or [])
    for f in fields:
        _check_name(f.name, "column")
        entry: dict[str, Any] = {"name": f.name,
                                 "type": _nullable(_avro_type(f.type, f.name, child_namespace),
                                                   f.nullable)}
        if f.nullable:
            entry["default"] = None
        out_fields.append(entry)
    record: dict[str, Any] = {"type": "record", "name": name}
    if namespace:
        record["namespace"] = namespace
    record["fields"] = out_fields
    return record


def arrow_to_avro_schema(schema: pa.Schema, table_name: str, *,
                         with_meta_fields: bool) -> dict[str, Any]:
    """The Avro schema Hudi writes for ``schema``.

    Meta columns already in ``schema`` are dropped; with ``with_meta_fields`` the five meta fields
    are put at the front, as in log block headers and base file footers.
    """
    fields = [f for f in schema if f.name not in META_FIELDS]
    prefix = [_meta_field(n) for n in META_FIELDS] if with_meta_fields else None
    return _record(fields, f"{table_name}_record", f"hoodie.{table_name}", prefix)


# ---------------------------------------------------------------------------------------------
# Avro -> Arrow

def _full_name(name: str, namespace: str | None) -> str:
    return name if "." in name or not namespace else f"{namespace}.{name}"


class _AvroToArrow:
    """One walk over an Avro schema; remembers named types for later references by name."""

    def __init__(self) -> None:
        self.named: dict[str, tuple[pa.DataType, bool]] = {}

    def type_of(self, s: Any, namespace: str) -> tuple[pa.DataType, bool]:
        """(Arrow type, nullable) of an Avro type."""
        if isinstance(s, list):
            branches = [b for b in s if b != "null"]
            if len(branches) > 1:
                raise SchemaError(f"Avro union {json.dumps(s)[:200]} has several non-null "
                                  "branches, which Arrow tables (and Spark) cannot hold")
            if not branches:
                return pa.null(), True
            t, _ = self.type_of(branches[0], namespace)
            return t, len(branches) < len(s)
        if isinstance(s, str):
            t = self._primitive_or_named(s, namespace)
            return t, pa.types.is_null(t)  # Arrow only allows a null-typed field to be nullable
        if not isinstance(s, dict):
            raise SchemaError(f"not an Avro schema: {s!r}")
        kind = s.get("type")
        logical = s.get("logicalType")
        if kind == "record" or kind == "error":
            if "." in s["name"]:
                ns = s["name"].rsplit(".", 1)[0]
            else:
                ns = s.get("namespace", namespace)
            full = _full_name(s["name"], ns)
            fields = []
            for f in s["fields"]:
                ft, nullable = self.type_of(f["type"], ns)
                fields.append(pa.field(f["name"], ft, nullable=nullable))
            t = pa.struct(fields)
            self.named[full] = (t, False)
            return t, False
        if kind == "enum":
            self.named[_full_name(s["name"], s.get("namespace", namespace))] = (pa.string(), False)
            return pa.string(), False
        if kind == "fixed":
            if logical == "decimal":
                t = _decimal_type(s["precision"], s.get("scale", 0))
            else:
                t = pa.binary(s["size"])
            self.named[_full_name(s["name"], s.get("namespace", namespace))] = (t, False)
            return t, False
        if kind == "array":
            it, nullable = self.type_of(s["items"], namespace)
            return pa.list_(pa.field("element", it, nullable=nullable)), False
        if kind == "map":
            vt, nullable = self.type_of(s["values"], namespace)
            return pa.map_(pa.string(), pa.field("value", vt, nullable=nullable)), False
        if kind == "bytes" and logical == "decimal":
            return _decimal_type(s["precision"], s.get("scale", 0)), False
        if kind in ("int", "long") and logical in _LOGICAL_TEMPORAL:
            return _LOGICAL_TEMPORAL[logical], False
        return self.type_of(kind, namespace)

    def _primitive_or_named(self, s: str, namespace: str) -> pa.DataType:
        if s in _PRIMITIVES:
            return _PRIMITIVES[s]
        for candidate in (_full_name(s, namespace), s):
            if candidate in self.named:
                return self.named[candidate][0]
        raise SchemaError(f"Avro schema refers to unknown type {s!r}")


_PRIMITIVES = {
    "null": pa.null(), "boolean": pa.bool_(), "int": pa.int32(), "long": pa.int64(),
    "float": pa.float32(), "double": pa.float64(), "bytes": pa.binary(), "string": pa.string(),
}
_LOGICAL_TEMPORAL = {
    "date": pa.date32(),
    "time-millis": pa.time32("ms"),
    "time-micros": pa.time64("us"),
    "timestamp-millis": pa.timestamp("ms", tz=_UTC),
    "timestamp-micros": pa.timestamp("us", tz=_UTC),
    "local-timestamp-millis": pa.timestamp("ms"),
    "local-timestamp-micros": pa.timestamp("us"),
}


def _decimal_type(precision: int, scale: int) -> pa.DataType:
    return pa.decimal128(precision, scale) if precision <= 38 else pa.decimal256(precision, scale)


def avro_to_arrow_schema(avro: dict[str, Any] | str) -> pa.Schema:
    """The Arrow schema of an Avro record schema (a union with null makes a field nullable)."""
    if isinstance(avro, str):
        return _arrow_schema_of_json(avro)
    return _avro_to_arrow_schema(avro)


@functools.lru_cache(maxsize=64)
def _arrow_schema_of_json(avro_json: str) -> pa.Schema:
    # Every block of a log file repeats the same schema string: convert it once.
    try:
        parsed = json.loads(avro_json)
    except ValueError as e:
        raise SchemaError(f"the schema is not JSON: {e}") from e
    return _avro_to_arrow_schema(parsed)


def _avro_to_arrow_schema(parsed: Any) -> pa.Schema:
    if not isinstance(parsed, dict) or parsed.get("type") != "record":
        raise SchemaError("the table schema must be an Avro record")
    struct, _ = _AvroToArrow().type_of(parsed, parsed.get("namespace", ""))
    return pa.schema(list(struct))


def strip_converted_logical_types(avro: Any) -> Any:
    """The schema without the logical types whose values fastavro would turn into Python objects
    Arrow does not take back: date/time/timestamp on ints and longs (values travel as integers)
    and uuid on strings (as the strings). The binary encoding is the same."""
    if isinstance(avro, list):
        return [strip_converted_logical_types(b) for b in avro]
    if not isinstance(avro, dict):
        return avro
    if avro.get("logicalType") in _TEMPORAL_LOGICAL_TYPES and avro.get("type") in ("int", "long"):
        return avro["type"]
    if avro.get("logicalType") == "uuid" and avro.get("type") == "string":
        return "string"
    return {k: strip_converted_logical_types(v) if k in ("type", "items", "values", "fields")
            else v for k, v in avro.items()}


# ---------------------------------------------------------------------------------------------
# Values

def _physical_type(t: pa.DataType) -> pa.DataType:
    """``t`` with temporal types replaced by the integers Avro stores for them."""
    if pa.types.is_timestamp(t) or pa.types.is_time64(t):
        return pa.int64()
    if pa.types.is_date32(t) or pa.types.is_time32(t):
        return pa.int32()
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(_physical_type(f.type)) for f in t])
    if pa.types.is_list(t):
        return pa.list_(t.value_field.with_type(_physical_type(t.value_type)))
    if pa.types.is_map(t):
        return pa.map_(t.key_field, t.item_field.with_type(_physical_type(t.item_type)))
    return t


def _check_required(f: pa.Field, col: pa.ChunkedArray) -> None:
    if col.null_count:
        raise SchemaError(f"column {f.name!r} is required but holds {col.null_count} nulls")


def conform_table(table: pa.Table, schema: pa.Schema, *, extra: str = "error") -> pa.Table:
    """``table`` with exactly ``schema``'s columns, in order and cast.

    Missing nullable columns become nulls (as Hudi fills defaults); missing non-nullable ones and,
    with ``extra="error"``, columns the schema lacks raise :class:`SchemaError`.
    """
    if table.schema.equals(schema):
        # Already in shape (every decoded block and base file of a table's current schema): only
        # the required columns' nulls to check, and the schema's metadata to take. ~8x faster
        # than column by column (~50 us saved per call, paid per log block and base file).
        for f in schema:
            if not f.nullable:
                _check_required(f, table.column(f.name))
        if table.schema.equals(schema, check_metadata=True):
            return table
        return pa.Table.from_arrays(table.columns, schema=schema)
    names = set(table.column_names)
    if extra == "error":
        unknown = [n for n in table.column_names if schema.get_field_index(n) < 0]
        if unknown:
            raise SchemaError(f"columns {unknown} are not in the table schema",
                              help="drop them, or evolve the table schema first")
    columns = []
    for f in schema:
        if f.name in names:
            col = table.column(f.name)
            if col.type != f.type:
                try:
                    col = col.cast(f.type)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                    raise SchemaError(f"column {f.name!r} of type {col.type} does not fit the "
                                      f"schema type {f.type}: {e}") from e
            if not f.nullable:
                _check_required(f, col)
            columns.append(col)
        elif f.nullable:
            columns.append(pa.nulls(table.num_rows, f.type))
        else:
            raise SchemaError(f"required column {f.name!r} is missing")
    return pa.Table.from_arrays(columns, schema=schema)


def arrow_table_to_avro_records(table: pa.Table,
                                avro_schema: dict[str, Any] | str | None = None) -> list[dict]:
    """Python records ready for fastavro's writer.

    Temporal values come out as the integers Avro stores (Arrow casts them vectorised; fastavro
    passes integers through unchanged), decimals as :class:`decimal.Decimal` (fastavro encodes them
    against the writer schema's precision and size), maps as dicts. With ``avro_schema`` the table
    is first conformed to it, so the integers always use the schema's units.
    """
    return physical_avro_records(avro_physical_table(table, avro_schema))


def physical_avro_records(physical: pa.Table) -> list[dict]:
    """The rows of an :func:`avro_physical_table` as Python records for fastavro's writer."""
    try:
        return physical.to_pylist(maps_as_pydicts="strict")
    except (KeyError, ValueError, pa.ArrowInvalid) as e:  # duplicate map keys, nested nulls
        raise SchemaError(f"rows cannot be written as Avro: {e}") from e


def avro_physical_table(table: pa.Table, avro_schema: dict[str, Any] | str | None = None) -> pa.Table:
    """``table`` conformed to the Avro schema (or to its own columns as one) with temporal values
    as the integers Avro stores: what an Avro encoder writes field by field."""
    if avro_schema is None:
        target = avro_to_arrow_schema(_record(list(table.schema), "record", ""))
    else:
        target = avro_to_arrow_schema(avro_schema)
    table = conform_table(table, target)
    physical = pa.schema([f.with_type(_physical_type(f.type)) for f in target])
    try:
        return table.cast(physical)
    except (KeyError, ValueError, pa.ArrowInvalid) as e:
        raise SchemaError(f"rows cannot be written as Avro: {e}") from e


def avro_records_to_arrow(records: list[dict], schema: pa.Schema) -> pa.Table:
    """An Arrow table from decoded Avro records (integers or Python objects for temporal values)."""
    try:
        return pa.Table.from_pylist(records, schema=schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError) as e:
        raise SchemaError(f"records do not fit the schema: {e}") from e
