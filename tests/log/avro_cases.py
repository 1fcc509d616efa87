"""Avro record schemas and records (hypothesis strategies) and fastavro's encoding of them as an
Avro data block's content, shared by the tests of the vectorised Avro decoder
(``test_avro_records``) and encoder (``test_avro_encoder``)."""

from __future__ import annotations

import io
import json
import struct
from decimal import Decimal

import fastavro
from hypothesis import strategies as st

# (Avro type, values) for every type the vectorised decoder reads.
TYPES = {
    "boolean": ("boolean", st.booleans()),
    "int": ("int", st.integers(-2**31, 2**31 - 1)),
    "long": ("long", st.integers(-2**63, 2**63 - 1)),
    "float": ("float", st.floats(width=32, allow_nan=False)),
    "double": ("double", st.floats(allow_nan=False)),
    "string": ("string", st.text(alphabet=st.sampled_from("ab\x00\x02é😀"), max_size=70)),
    "bytes": ("bytes", st.binary(max_size=70)),
    "date": ({"type": "int", "logicalType": "date"}, st.integers(-700_000, 2_900_000)),
    "ts_micros": ({"type": "long", "logicalType": "timestamp-micros"}, st.integers(-2**62, 2**62)),
    "ts_millis": ({"type": "long", "logicalType": "timestamp-millis"}, st.integers(-2**52, 2**52)),
    "local_ts": ({"type": "long", "logicalType": "local-timestamp-micros"}, st.integers(-2**62, 2**62)),
    "time_millis": ({"type": "int", "logicalType": "time-millis"}, st.integers(0, 86_399_999)),
    "time_micros": ({"type": "long", "logicalType": "time-micros"}, st.integers(0, 86_399_999_999)),
    "enum": ({"type": "enum", "name": "E", "symbols": ["A", "B", "C"]}, st.sampled_from(["A", "B", "C"])),
    "fixed": ({"type": "fixed", "name": "F", "size": 3}, st.binary(min_size=3, max_size=3)),
    "uuid": ({"type": "string", "logicalType": "uuid"}, st.uuids().map(str)),
    "decimal": ({"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2},
                st.integers(-10**9 + 1, 10**9 - 1).map(lambda i: Decimal(f"{i}E-2"))),
    "decimal256": ({"type": "bytes", "logicalType": "decimal", "precision": 50, "scale": 5},
                   st.integers(-10**50 + 1, 10**50 - 1).map(lambda i: Decimal(f"{i}E-5"))),
    "decimal_fixed": ({"type": "fixed", "name": "D", "size": 8, "logicalType": "decimal", "precision": 18,
                       "scale": 3}, st.integers(-10**18 + 1, 10**18 - 1).map(lambda i: Decimal(f"{i}E-3"))),
}


def field_type(draw, name: str, depth: int):
    """(Avro type, value strategy) of one field: a type of TYPES or, above the deepest level, a
    nested record of such fields; nullable either way round or not at all."""
    kind = draw(st.sampled_from(sorted(TYPES) + (["record", "array", "map"] if depth < 2 else [])))
    if kind in ("array", "map"):
        item, values = field_type(draw, f"{name}_i", depth + 1)
        if kind == "array":
            avro, strategy = {"type": "array", "items": item}, st.lists(values, max_size=8)
        else:
            avro = {"type": "map", "values": item}
            strategy = st.dictionaries(st.text(alphabet="ké", max_size=3), values, max_size=6)
    elif kind == "record":
        subs = [field_type(draw, f"{name}_{j}", depth + 1) for j in range(draw(st.integers(1, 3)))]
        avro = {"type": "record", "name": f"R{name}",
                "fields": [{"name": f"g{j}", "type": a} for j, (a, _) in enumerate(subs)]}
        strategy = st.fixed_dictionaries({f"g{j}": v for j, (_, v) in enumerate(subs)})
    else:
        avro, strategy = TYPES[kind]
        if isinstance(avro, dict) and "name" in avro:
            avro = {**avro, "name": f"{avro['name']}{name}"}
    nullable = draw(st.sampled_from([None, "first", "last"]))
    if nullable == "first":
        avro, strategy = ["null", avro], st.one_of(st.none(), strategy)
    elif nullable == "last":
        avro, strategy = [avro, "null"], st.one_of(strategy, st.none())
    return avro, strategy


@st.composite
def blocks(draw):
    """(record schema, records)."""
    fields, values = [], []
    for i in range(draw(st.integers(1, 6))):
        avro, strategy = field_type(draw, str(i), 0)
        fields.append({"name": f"f{i}", "type": avro})
        values.append(strategy)
    schema = {"type": "record", "name": "r", "namespace": "hoodie.t", "fields": fields}
    rows = draw(st.lists(st.tuples(*values), max_size=30))
    return schema, [{f"f{i}": v for i, v in enumerate(row)} for row in rows]


def fastavro_content(schema: dict, records: list[dict]) -> bytes:
    """An Avro data block's content (version 3: a count, then each record as a 4-byte length and
    its bytes) as fastavro writes the records."""
    parsed = fastavro.parse_schema(json.loads(json.dumps(schema)))
    out = [struct.pack(">ii", 3, len(records))]
    for r in records:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, r)
        out += [struct.pack(">i", len(buf.getvalue())), buf.getvalue()]
    return b"".join(out)
