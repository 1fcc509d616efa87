"""Spark schemas as Arrow schemas and back, as lakehouse's readers and writers need them."""

from __future__ import annotations

import pyarrow as pa


def spark_schema(schema: pa.Schema):
    """The Spark schema of a table's Arrow schema (timestamps without zone stay so)."""
    from pyspark.sql.pandas.types import from_arrow_schema  # noqa: PLC0415
    return from_arrow_schema(schema, prefer_timestamp_ntz=True)



def arrow_schema(schema) -> pa.Schema:
    """The Arrow schema of a Spark schema, with the plain (not large) string/binary/list types
    that a batch built in Python has, so the reconciled table schema is the same."""
    from pyspark.sql.pandas.types import to_arrow_schema  # noqa: PLC0415

    def plain(t: pa.DataType) -> pa.DataType:
        if pa.types.is_large_string(t):
            return pa.string()
        if pa.types.is_large_binary(t):
            return pa.binary()
        if pa.types.is_large_list(t) or pa.types.is_list(t):
            return pa.list_(pa.field(t.value_field.name, plain(t.value_type), t.value_field.nullable))
        if pa.types.is_struct(t):
            return pa.struct([pa.field(f.name, plain(f.type), f.nullable) for f in t])
        if pa.types.is_map(t):
            return pa.map_(plain(t.key_type), plain(t.item_type))
        return t
    s = to_arrow_schema(schema, timezone="UTC")
    return pa.schema([pa.field(f.name, plain(f.type), f.nullable) for f in s])
