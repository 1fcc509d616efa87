"""The Avro schema of a delete block's content and the ordering-value wrappers in it.

Hudi 0.14/0.15 serialise the deleted keys as one schemaless ``HoodieDeleteRecordList`` record. The
ordering value is a union of null and single-field wrapper records, because an Avro union cannot
hold two branches of the same primitive type (and Java needs the class back to compare values).
Only the binary encoding matters to readers, so docs and Java string hints are left out here.
The union order below is the on-disk branch index and must never change.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

NAMESPACE = "org.apache.hudi.avro.model"

# (wrapper record name, Avro type of its "value", Arrow type lakehouse decodes it to)
WRAPPERS: list[tuple[str, Any, pa.DataType]] = [
    ("BooleanWrapper", "boolean", pa.bool_()),
    ("IntWrapper", "int", pa.int32()),
    ("LongWrapper", "long", pa.int64()),
    ("FloatWrapper", "float", pa.float32()),
    ("DoubleWrapper", "double", pa.float64()),
    ("BytesWrapper", "bytes", pa.binary()),
    ("StringWrapper", "string", pa.string()),
    # Hudi comments out the logical type of DateWrapper and TimestampMicrosWrapper: the values
    # are plain days / microseconds since the epoch.
    ("DateWrapper", "int", pa.date32()),
    ("DecimalWrapper", {"type": "bytes", "logicalType": "decimal", "precision": 30, "scale": 15},
     pa.decimal128(30, 15)),
    ("TimeMicrosWrapper", {"type": "long", "logicalType": "time-micros"}, pa.time64("us")),
    ("TimestampMicrosWrapper", "long", pa.timestamp("us", tz="UTC")),
]
WRAPPER_ARROW_TYPES = {f"{NAMESPACE}.{name}": arrow for name, _, arrow in WRAPPERS}

# Hudi's merge treats an Integer 0 as "no ordering value": the delete wins unconditionally.
UNCONDITIONAL = (f"{NAMESPACE}.IntWrapper", {"value": 0})


def _nullable_string() -> list[str]:
    return ["null", "string"]


DELETE_RECORD_LIST_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "HoodieDeleteRecordList",
    "namespace": NAMESPACE,
    "fields": [{
        "name": "deleteRecordList",
        "type": {"type": "array", "items": {
            "type": "record",
            "name": "HoodieDeleteRecord",
            "fields": [
                {"name": "recordKey", "type": _nullable_string(), "default": None},
                {"name": "partitionPath", "type": _nullable_string(), "default": None},
                {"name": "orderingVal",
                 "type": ["null"] + [{"type": "record", "name": name,
                                      "fields": [{"name": "value", "type": value}]}
                                     for name, value, _ in WRAPPERS],
                 "default": None},
            ],
        }},
    }],
}


def wrapper_for(t: pa.DataType) -> tuple[str, pa.DataType, pa.DataType]:
    """(wrapper full name, Arrow type to cast to first, Arrow type whose Python values fastavro
    takes) for ordering values of Arrow type ``t``; Java picks the wrapper from the value's class,
    which follows the column type the same way."""
    if pa.types.is_dictionary(t):
        t = t.value_type
    if pa.types.is_boolean(t):
        name, cast, physical = "BooleanWrapper", pa.bool_(), pa.bool_()
    elif t in (pa.int8(), pa.int16(), pa.int32(), pa.uint8(), pa.uint16()):
        name, cast, physical = "IntWrapper", pa.int32(), pa.int32()
    elif pa.types.is_integer(t):
        name, cast, physical = "LongWrapper", pa.int64(), pa.int64()
    elif t in (pa.float16(), pa.float32()):
        name, cast, physical = "FloatWrapper", pa.float32(), pa.float32()
    elif pa.types.is_floating(t):
        name, cast, physical = "DoubleWrapper", pa.float64(), pa.float64()
    elif pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        name, cast, physical = "StringWrapper", pa.string(), pa.string()
    elif (pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t)
          or pa.types.is_fixed_size_binary(t)):
        name, cast, physical = "BytesWrapper", pa.binary(), pa.binary()
    elif pa.types.is_date(t):
        name, cast, physical = "DateWrapper", pa.date32(), pa.int32()
    elif pa.types.is_decimal(t):
        name, cast, physical = "DecimalWrapper", t, t
    elif pa.types.is_time(t):
        name, cast, physical = "TimeMicrosWrapper", pa.time64("us"), pa.int64()
    elif pa.types.is_timestamp(t):
        name, cast, physical = ("TimestampMicrosWrapper", pa.timestamp("us", tz=t.tz),
                                pa.int64())
    else:
        raise TypeError(f"ordering values of type {t} have no Hudi wrapper")
    return f"{NAMESPACE}.{name}", cast, physical
