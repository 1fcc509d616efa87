"""Batch validation and schema evolution, done before any file is written.

Allowed changes follow Avro's schema resolution as Hudi applies it: new nullable columns, widening
numeric promotions (int -> long -> float -> double), string types among themselves. Anything
else, such as a narrower or unrelated type, is refused with :class:`SchemaError`.

A batch narrower than the table is cast up to the table's type. A batch wider than the table
widens the table column itself only where Iceberg can read the files written before (the
Iceberg view is published with every commit): int -> long, float -> double, a decimal's
precision at the same scale, also inside lists, maps and structs.
"""

from __future__ import annotations

import pyarrow as pa

from lakehouse.columns import META_FIELDS
from lakehouse.config import TABLE_OPTION_KEYS, MergeMode, TableConfig
from lakehouse.errors import ConfigError, SchemaError

_INT_RANK = {pa.int8(): 1, pa.int16(): 2, pa.int32(): 3, pa.int64(): 4,
             pa.uint8(): 2, pa.uint16(): 3, pa.uint32(): 4}
_FLOAT_RANK = {pa.float16(): 5, pa.float32(): 5, pa.float64(): 6}


def normalize_type(t: pa.DataType) -> pa.DataType:
    """The type a table column gets for a batch type (what Avro can hold)."""
    if pa.types.is_dictionary(t):
        return normalize_type(t.value_type)
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_large_binary(t) or pa.types.is_binary_view(t) or pa.types.is_fixed_size_binary(t):
        return pa.binary()
    if t in (pa.int8(), pa.int16(), pa.uint8(), pa.uint16()):
        return pa.int32()
    if t == pa.uint32():
        return pa.int64()
    if t == pa.uint64():
        raise SchemaError("uint64 columns have no Avro type that holds every value",
                          help="cast the column to int64 (or decimal(20, 0) for values above 2**63)")
    if t == pa.float16():
        return pa.float32()
    if pa.types.is_null(t):
        return pa.string()
    if pa.types.is_timestamp(t):
        # Avro's timestamp-micros/millis are instants: naive values are taken as UTC (as Spark
        # and Hudi write them), so every file and the schema agree on one type.
        unit = {"ns": "us", "s": "ms"}.get(t.unit, t.unit)
        return pa.timestamp(unit, tz="UTC" if t.tz is None else t.tz)
    if pa.types.is_large_list(t) or pa.types.is_list_view(t) or pa.types.is_fixed_size_list(t):
        return pa.list_(normalize_type(t.value_type))
    if pa.types.is_list(t):
        return pa.list_(normalize_type(t.value_type))
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, normalize_type(f.type)) for f in t])
    if pa.types.is_map(t):
        return pa.map_(pa.string(), normalize_type(t.item_type))
    return t


def _compatible(src: pa.DataType, dst: pa.DataType) -> bool:
    src = normalize_type(src)
    if src == dst or pa.types.is_null(src):
        return True
    if src in _INT_RANK and dst in _INT_RANK:
        return _INT_RANK[src] <= _INT_RANK[dst]
    if src in _INT_RANK and dst in _FLOAT_RANK:
        return True
    if src in _FLOAT_RANK and dst in _FLOAT_RANK:
        return _FLOAT_RANK[src] <= _FLOAT_RANK[dst]
    if pa.types.is_timestamp(src) and pa.types.is_timestamp(dst):
        order = {"s": 0, "ms": 1, "us": 2, "ns": 3}
        return order[src.unit] <= order[dst.unit]
    if pa.types.is_decimal(src) and pa.types.is_decimal(dst):
        return src.scale == dst.scale and src.precision <= dst.precision
    if pa.types.is_list(src) and pa.types.is_list(dst):
        return _compatible(src.value_type, dst.value_type)
    if pa.types.is_map(src) and pa.types.is_map(dst):
        return _compatible(src.item_type, dst.item_type)
    if pa.types.is_struct(src) and pa.types.is_struct(dst):
        dst_fields = {f.name: f.type for f in dst}
        return all(f.name in dst_fields and _compatible(f.type, dst_fields[f.name]) for f in src)
    return False


def _widened(table: pa.DataType, batch: pa.DataType) -> pa.DataType | None:
    """The table type widened to hold ``batch`` (already normalized), or None if that widening
    is not one every reader of the old files (Arrow casts, Iceberg) can follow."""
    if table == batch or _compatible(batch, table):
        return table
    if (table, batch) in ((pa.int32(), pa.int64()), (pa.float32(), pa.float64())):
        return batch
    if pa.types.is_decimal(table) and pa.types.is_decimal(batch):
        ok = batch.scale == table.scale and batch.precision >= table.precision
        return batch if ok else None
    if pa.types.is_list(table) and pa.types.is_list(batch):
        inner = _widened(table.value_type, batch.value_type)
        return None if inner is None else pa.list_(table.value_field.with_type(inner))
    if pa.types.is_map(table) and pa.types.is_map(batch):
        inner = _widened(table.item_type, batch.item_type)
        return None if inner is None else pa.map_(table.key_field, table.item_field.with_type(inner))
    if pa.types.is_struct(table) and pa.types.is_struct(batch):
        # Same fields in the same order: adding or dropping a nested field is not a widening.
        if [f.name for f in table] != [f.name for f in batch]:
            return None
        inner = [_widened(a.type, b.type) for a, b in zip(table, batch)]
        if any(t is None for t in inner):
            return None
        return pa.struct([f.with_type(t) for f, t in zip(table, inner)])
    return None


def data_schema(batch: pa.Schema) -> pa.Schema:
    """The batch schema without meta fields, normalized, every field nullable."""
    return pa.schema([pa.field(f.name, _normalize_column(f), nullable=True)
                      for f in batch if f.name not in META_FIELDS])


def _normalize_column(f: pa.Field) -> pa.DataType:
    try:
        return normalize_type(f.type)
    except SchemaError as e:  # name the column: the type alone does not say which one
        raise SchemaError(f"column {f.name!r}: {e.message}", help=e.help) from None


def reconcile(batch: pa.Schema, table: pa.Schema | None) -> pa.Schema:
    """The table schema after this batch: the old one plus any new nullable columns."""
    incoming = data_schema(batch)
    if table is None or len(table) == 0:
        return incoming
    table = pa.schema([f for f in table if f.name not in META_FIELDS])
    fields = list(table)
    index = {name: i for i, name in enumerate(table.names)}
    for f in batch:
        if f.name in META_FIELDS:
            continue
        if f.name in index:
            dst = fields[index[f.name]].type
            if _compatible(f.type, dst):
                continue
            wider = _widened(dst, normalize_type(f.type))
            if wider is None:
                raise SchemaError(
                    f"column {f.name!r} has type {f.type} in the batch but {dst} in the table",
                    help="cast the column to the table's type; a column may only widen (int to "
                         "long, float to double, decimal precision), any other type change "
                         "needs a new table")
            fields[index[f.name]] = pa.field(f.name, wider, nullable=True)
        else:
            fields.append(pa.field(f.name, normalize_type(f.type), nullable=True))
    return pa.schema(fields)


def conform(batch: pa.Table, schema: pa.Schema) -> pa.Table:
    """``batch`` with the table schema's columns (missing ones null), cast to their types."""
    cols = []
    names = set(batch.column_names)
    for f in schema:
        if f.name in names:
            col = batch.column(f.name)
            if col.type != f.type:
                try:
                    col = col.cast(f.type)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                    raise SchemaError(f"column {f.name!r} cannot be cast to {f.type}: {e}",
                                      help="fix the values or the column type") from None
            cols.append(col)
        else:
            cols.append(pa.nulls(batch.num_rows, f.type))
    return pa.Table.from_arrays(cols, schema=schema)


def check_table_options(config, options) -> None:
    """A table setting given to one write must be valid and equal to the stored one: it cannot
    change for one write, and ignoring it would write something else than asked."""
    asked = {k: str(v) for k, v in options.items() if k in TABLE_OPTION_KEYS}
    if not asked:
        return
    stored = config.to_properties()
    parsed = TableConfig.from_properties({**stored, **asked}).to_properties()
    changed = sorted(k for k in asked if parsed.get(k) != stored.get(k))
    if changed:
        raise ConfigError(f"{', '.join(f'{k}={asked[k]!r}' for k in changed)}: a table setting "
                          "(stored in hoodie.properties) cannot change for one write",
                          help="leave it out of the write's options; table settings are "
                               "chosen when the table is created")


def check_missing_columns(batch: pa.Table, table_schema: pa.Schema | None, write_config, spec) -> None:
    """Hudi 0.14's rule: a batch lacking table columns is refused unless
    hoodie.write.set.null.for.missing.columns is set (partial updates keep what they omit)."""
    if table_schema is None or write_config.set_null_for_missing_columns \
            or spec.mode is MergeMode.PARTIAL_UPDATE:
        return
    have = set(batch.column_names)
    missing = [f.name for f in table_schema if f.name not in have and f.name not in META_FIELDS]
    if missing:
        raise SchemaError(f"the batch lacks table column(s) {', '.join(missing)}: writing it would "
                          "set them to null on every record it writes, updates included",
                          help="add the columns, or set hoodie.write.set.null.for.missing.columns"
                               "=true to write nulls for them")
