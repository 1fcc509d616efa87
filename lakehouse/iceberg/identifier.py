"""The record key as the Iceberg schema's ``identifier-field-ids``.

Iceberg lets a schema name the columns that identify a row; they must be required primitive
columns that are not float or double, and pyiceberg, Java (so Spark and Trino) and Daft refuse
to load a table whose identifier field breaks these rules. Apache XTable, which Hudi's meta sync
runs to publish Iceberg metadata, names the record key fields when they are required and none
otherwise (``IcebergSchemaExtractor.toIceberg``). lakehouse names them more often, and stays true:

- a key of one top-level column (Hudi's ``SimpleKeyGenerator``, the default) is that column,
  declared required: Hudi, and lakehouse, refuse to write a record whose key is null, so no data
  file holds a null there whatever the column's declared nullability;
- any other key (several columns, whose parts may be null, or a float or nested column) is
  ``_hoodie_record_key``, which every Hudi writer fills on every row.

As in Hudi, the key identifies a row within its partition unless the index is global; Iceberg
neither guarantees nor requires identifiers to be unique.
"""

from __future__ import annotations

import dataclasses

from lakehouse.config import TableConfig
from lakehouse.field_schema import Field, Schema

RECORD_KEY_META_COLUMN = "_hoodie_record_key"
_NOT_IDENTIFIERS = ("float", "double")


def _usable(f: Field | None) -> bool:
    return f is not None and isinstance(f.type, str) and f.type not in _NOT_IDENTIFIERS


def identified(schema: Schema, config: TableConfig) -> Schema:
    """``schema`` with the record key as its identifier fields (declared required)."""
    keys = config.record_key_fields
    chosen = schema.top_level(keys[0]) if len(keys) == 1 and "." not in keys[0] else None
    if not _usable(chosen):
        chosen = schema.top_level(RECORD_KEY_META_COLUMN)
    if not _usable(chosen):
        return schema
    fields = tuple(dataclasses.replace(f, required=True) if f.id == chosen.id else f for f in schema.fields)
    return Schema(schema.schema_id, fields, (chosen.id,))
