"""Parquet field ids on the columns of a base file (``PARQUET:field_id`` on Arrow fields).

Iceberg readers find a parquet column by its field id; some (Daft) do not fall back to the name
mapping for files without ids. The ids come from the writer (``lakehouse.field_ids``),
by column path: a list's element is ``element``, a map's entries ``key`` and ``value``.
"""

from __future__ import annotations

from typing import Mapping

import pyarrow as pa

FIELD_ID = b"PARQUET:field_id"

Path = tuple[str, ...]


def _type(t: pa.DataType, path: Path, ids: Mapping[Path, int]) -> pa.DataType:
    if pa.types.is_struct(t):
        return pa.struct([_field(t.field(i), path, ids) for i in range(t.num_fields)])
    if pa.types.is_list(t):
        return pa.list_(_field(t.value_field, path, ids, "element"))
    if pa.types.is_large_list(t):
        return pa.large_list(_field(t.value_field, path, ids, "element"))
    if pa.types.is_map(t):
        return pa.map_(_field(t.key_field, path, ids, "key"), _field(t.item_field, path, ids, "value"),
                       keys_sorted=t.keys_sorted)
    return t


def _field(f: pa.Field, parent: Path, ids: Mapping[Path, int], name: str | None = None) -> pa.Field:
    path = parent + (name or f.name,)
    meta = dict(f.metadata or {})
    fid = ids.get(path)
    if fid is not None:
        meta[FIELD_ID] = str(fid).encode()
    return f.with_type(_type(f.type, path, ids)).with_metadata(meta)


def with_field_ids(table: pa.Table, ids: Mapping[Path, int]) -> pa.Table:
    """``table`` with each column (and nested field) carrying its id from ``ids``."""
    schema = pa.schema([_field(f, (), ids) for f in table.schema], metadata=table.schema.metadata)
    return pa.Table.from_arrays(table.columns, schema=schema)
