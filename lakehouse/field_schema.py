"""Iceberg schemas of a lakehouse table: types, field ids that survive evolution, name mapping.

The Iceberg schema is the schema of the table's read-optimized read (the five ``_hoodie_*`` meta
columns first, then the data columns), converted from Arrow. Field ids are given by column path:
a column keeps its id for as long as it stays in the schema with a compatible type, and a new
column (or one that comes back after being dropped) gets a fresh id above ``last-column-id``.

Hudi's parquet files carry no field ids, so Iceberg readers find columns through the
``schema.name-mapping.default`` table property built by :func:`name_mapping`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Union

import pyarrow as pa

from lakehouse.errors import IcebergSyncError
from lakehouse import layout

# Iceberg primitive types are their JSON strings ("long", "decimal(10, 2)", "fixed[16]").
Primitive = str


@dataclass(frozen=True)
class Field:
    id: int
    name: str
    required: bool
    type: "IcebergType"


@dataclass(frozen=True)
class StructType:
    fields: tuple[Field, ...]


@dataclass(frozen=True)
class ListType:
    element_id: int
    element: "IcebergType"
    element_required: bool


@dataclass(frozen=True)
class MapType:
    key_id: int
    key: "IcebergType"
    value_id: int
    value: "IcebergType"
    value_required: bool


IcebergType = Union[Primitive, StructType, ListType, MapType]


@dataclass(frozen=True)
class Schema:
    schema_id: int
    fields: tuple[Field, ...]
    # Iceberg's identifier-field-ids: the columns that identify a row (the record key).
    identifier_field_ids: tuple[int, ...] = ()

    def same_columns(self, other: "Schema") -> bool:
        """Equal apart from the schema id."""
        return self.fields == other.fields and self.identifier_field_ids == other.identifier_field_ids

    def find(self, field_id: int) -> Field | None:
        return next((f for f in walk_fields(self.fields) if f.id == field_id), None)

    def top_level(self, name: str) -> Field | None:
        return next((f for f in self.fields if f.name == name), None)

    @property
    def highest_field_id(self) -> int:
        return max((i for i, _, _ in _ids(self.fields)), default=0)


# --- JSON ----------------------------------------------------------------------------------------

def type_to_json(t: IcebergType) -> Any:
    if isinstance(t, str):
        return t
    if isinstance(t, StructType):
        return {"type": "struct", "fields": [field_to_json(f) for f in t.fields]}
    if isinstance(t, ListType):
        return {"type": "list", "element-id": t.element_id, "element": type_to_json(t.element),
                "element-required": t.element_required}
    return {"type": "map", "key-id": t.key_id, "key": type_to_json(t.key), "value-id": t.value_id,
            "value": type_to_json(t.value), "value-required": t.value_required}


def field_to_json(f: Field) -> dict[str, Any]:
    return {"id": f.id, "name": f.name, "required": f.required, "type": type_to_json(f.type)}


def schema_to_json(s: Schema) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "struct", "schema-id": s.schema_id,
                           "fields": [field_to_json(f) for f in s.fields]}
    if s.identifier_field_ids:
        out["identifier-field-ids"] = list(s.identifier_field_ids)
    return out


def type_from_json(d: Any) -> IcebergType:
    if isinstance(d, str):
        return d
    kind = d["type"]
    if kind == "struct":
        return StructType(tuple(field_from_json(f) for f in d["fields"]))
    if kind == "list":
        return ListType(int(d["element-id"]), type_from_json(d["element"]), bool(d["element-required"]))
    if kind == "map":
        return MapType(int(d["key-id"]), type_from_json(d["key"]), int(d["value-id"]),
                       type_from_json(d["value"]), bool(d["value-required"]))
    raise ValueError(f"unknown Iceberg type {kind!r}")


def field_from_json(d: dict[str, Any]) -> Field:
    return Field(int(d["id"]), str(d["name"]), bool(d["required"]), type_from_json(d["type"]))


def schema_from_json(d: dict[str, Any]) -> Schema:
    return Schema(int(d["schema-id"]), tuple(field_from_json(f) for f in d["fields"]),
                  tuple(int(i) for i in d.get("identifier-field-ids") or ()))


# --- walking -------------------------------------------------------------------------------------

def walk_fields(fields: Iterable[Field]) -> Iterable[Field]:
    for f in fields:
        yield f
        if isinstance(f.type, StructType):
            yield from walk_fields(f.type.fields)


def _ids(fields: Iterable[Field]) -> Iterable[tuple[int, tuple[str, ...], IcebergType]]:
    """(id, path, type) of every field, list element, map key and map value."""
    def of_type(t: IcebergType, path: tuple[str, ...]):
        if isinstance(t, StructType):
            for f in t.fields:
                yield f.id, path + (f.name,), f.type
                yield from of_type(f.type, path + (f.name,))
        elif isinstance(t, ListType):
            yield t.element_id, path + ("element",), t.element
            yield from of_type(t.element, path + ("element",))
        elif isinstance(t, MapType):
            yield t.key_id, path + ("key",), t.key
            yield from of_type(t.key, path + ("key",))
            yield t.value_id, path + ("value",), t.value
            yield from of_type(t.value, path + ("value",))
    yield from of_type(StructType(tuple(fields)), ())


# --- Arrow -> Iceberg ----------------------------------------------------------------------------

_DECIMAL = re.compile(r"decimal\((\d+),\s*(\d+)\)")


def _primitive(t: pa.DataType, where: str) -> Primitive:
    if pa.types.is_boolean(t):
        return "boolean"
    if t in (pa.int8(), pa.int16(), pa.int32(), pa.uint8(), pa.uint16()):
        return "int"
    if t in (pa.int64(), pa.uint32()):
        return "long"
    if t in (pa.float16(), pa.float32()):
        return "float"
    if t == pa.float64():
        return "double"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "string"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return "binary"
    if pa.types.is_fixed_size_binary(t):
        return f"fixed[{t.byte_width}]"
    if pa.types.is_decimal(t) and t.precision <= 38:
        return f"decimal({t.precision}, {t.scale})"
    if pa.types.is_date32(t):
        return "date"
    if pa.types.is_time64(t) and t.unit == "us":
        return "time"
    if pa.types.is_timestamp(t) and t.unit in ("ms", "us"):
        # Readers widen millisecond files to Iceberg's microseconds; nanoseconds need format v3.
        return "timestamptz" if t.tz is not None else "timestamp"
    raise IcebergSyncError(
        f"column {where!r} has the type {t}, which Iceberg format version 2 cannot describe",
        help="Iceberg v2 has no nanosecond timestamps, millisecond times, unsigned 64-bit "
             "integers, null-typed columns or decimals above precision 38: cast the column "
             "(and evolve the table schema) to publish this table as Iceberg")


def _show(t: IcebergType) -> str:
    return t if isinstance(t, str) else type(t).__name__.removesuffix("Type").lower()


def _compatible(old: IcebergType, new: IcebergType) -> bool:
    """Whether a column may keep its field id when its type changes from ``old`` to ``new``."""
    if isinstance(old, str) and isinstance(new, str):
        if old == new or (old, new) in (("int", "long"), ("float", "double")):
            return True
        a, b = _DECIMAL.fullmatch(old), _DECIMAL.fullmatch(new)
        return bool(a and b and a.group(2) == b.group(2) and int(b.group(1)) >= int(a.group(1)))
    return type(old) is type(new) and not isinstance(old, str)


Path = tuple[str, ...]
Known = Mapping[Path, tuple[int, IcebergType]]


def known_ids(schema: Schema) -> dict[Path, tuple[int, IcebergType]]:
    """Path (a list's element is ``element``, a map's ``key``/``value``) -> (id, type)."""
    return {path: (fid, t) for fid, path, t in _ids(schema.fields)}


def path_ids(schema: Schema) -> dict[Path, int]:
    return {path: fid for fid, path, _ in _ids(schema.fields)}


def _type_change(path: Path, old: IcebergType, new: IcebergType) -> IcebergSyncError:
    # Files already published hold the old type under this name; Iceberg readers can only widen
    # int to long, float to double and decimal precision.
    return IcebergSyncError(
        f"column {'.'.join(path)!r} changed type from {_show(old)} to {_show(new)}, "
        "which Iceberg cannot read from the files written before the change",
        help="Iceberg only widens int to long, float to double and decimal precision; "
             "rewrite the table (or drop and re-add the column under a new name) to "
             "publish it as Iceberg")


def check_evolution(previous: Schema | None, new: Schema, where: str) -> None:
    """``new`` (numbered by a writer, ``where``) may follow ``previous``: every column both have
    keeps its id, and its type changes only as Iceberg readers can follow."""
    if previous is None:
        return
    old = known_ids(previous)
    for path, (fid, t) in known_ids(new).items():
        had = old.get(path)
        if had is None:
            continue
        if had[0] != fid:
            raise IcebergSyncError(
                f"column {'.'.join(path)!r} has field id {fid} in the files of {where}, but "
                f"{had[0]} in the published Iceberg schema",
                help="the Iceberg metadata was published with another numbering (published "
                     "before lakehouse numbered columns, from a timeline since archived): delete "
                     f"the table's {layout.ICEBERG} folder to publish it afresh")
        if not _compatible(had[1], t):
            raise _type_change(path, had[1], t)


class _IdAssigner:
    def __init__(self, previous: Schema | None, last_column_id: int, known: Known | None = None,
                 check_types: bool = True) -> None:
        self.last = last_column_id
        self.check_types = check_types
        self.known: dict[Path, tuple[int, IcebergType]] = dict(known or {})
        if previous is not None:
            self.known.update(known_ids(previous))

    def reserve(self, path: tuple[str, ...]) -> int:
        """The id of ``path``: its old one, or the next free one (parents before children)."""
        old = self.known.get(path)
        if old is not None:
            return old[0]
        self.last += 1
        return self.last

    def check(self, path: tuple[str, ...], new_type: IcebergType) -> None:
        old = self.known.get(path)
        if self.check_types and old is not None and not _compatible(old[1], new_type):
            raise _type_change(path, old[1], new_type)

    def nested(self, path: tuple[str, ...], t: pa.DataType) -> tuple[int, IcebergType]:
        fid = self.reserve(path)
        it = self.convert(t, path)
        self.check(path, it)
        return fid, it

    def convert(self, t: pa.DataType, path: tuple[str, ...]) -> IcebergType:
        if pa.types.is_dictionary(t):
            return self.convert(t.value_type, path)
        if pa.types.is_struct(t):
            return StructType(tuple(self.field(f, path) for f in t))
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            eid, etype = self.nested(path + ("element",), t.value_type)
            return ListType(eid, etype, not t.value_field.nullable)
        if pa.types.is_map(t):
            kid, ktype = self.nested(path + ("key",), t.key_type)
            vid, vtype = self.nested(path + ("value",), t.item_type)
            return MapType(kid, ktype, vid, vtype, not t.item_field.nullable)
        return _primitive(t, ".".join(path))

    def field(self, f: pa.Field, parent: tuple[str, ...]) -> Field:
        fid, t = self.nested(parent + (f.name,), f.type)
        return Field(fid, f.name, not f.nullable, t)


def arrow_to_iceberg(arrow: pa.Schema, *, schema_id: int, previous: Schema | None,
                     last_column_id: int, known: Known | None = None,
                     check_types: bool = True) -> tuple[Schema, int]:
    """The Iceberg schema of ``arrow`` with ids carried over from ``previous`` (and, for paths it
    lacks, from ``known``); returns it and the new ``last-column-id``. ``check_types``: refuse
    a type change Iceberg readers cannot follow (the publisher does; writers only number)."""
    assigner = _IdAssigner(previous, last_column_id, known, check_types)
    fields = tuple(assigner.field(f, ()) for f in arrow)
    return Schema(schema_id, fields), assigner.last


# --- name mapping --------------------------------------------------------------------------------

def name_mapping(schemas: Iterable[Schema]) -> str:
    """``schema.name-mapping.default`` for files written without field ids.

    Every schema contributes its names, later schemas winning where a name's id changed, so a
    time-travel read of an older snapshot still finds the columns it had.
    """
    tree: dict[str, Any] = {}

    def add(node: dict[str, Any], name: str, fid: int) -> dict[str, Any]:
        entry = node.setdefault(name, {"id": fid, "children": {}})
        entry["id"] = fid
        return entry["children"]

    def add_type(node: dict[str, Any], t: IcebergType) -> None:
        if isinstance(t, StructType):
            for f in t.fields:
                add_type(add(node, f.name, f.id), f.type)
        elif isinstance(t, ListType):
            add_type(add(node, "element", t.element_id), t.element)
        elif isinstance(t, MapType):
            add_type(add(node, "key", t.key_id), t.key)
            add_type(add(node, "value", t.value_id), t.value)

    for s in schemas:
        add_type(tree, StructType(s.fields))

    def render(node: dict[str, Any]) -> list[dict[str, Any]]:
        out = []
        for name, entry in node.items():
            # A list's element is "element" in files pyarrow writes and "array" in files Hudi
            # 0.14 writes (parquet-avro's old list layout): readers that match names need both.
            names = [name, "array"] if name == "element" else [name]
            item: dict[str, Any] = {"field-id": entry["id"], "names": names}
            if entry["children"]:
                item["fields"] = render(entry["children"])
            out.append(item)
        return out

    return json.dumps(render(tree), separators=(",", ":"))


# --- parquet field ids ---------------------------------------------------------------------------
# Iceberg readers find a parquet column by its field id (``PARQUET:field_id`` on the Arrow field);
# some (Daft) do not fall back to the name mapping for files without ids. Base files and the
# Iceberg snapshot view's row files carry them, by column path (a list's element is
# ``element``, a map's entries ``key`` and ``value``).

FIELD_ID = b"PARQUET:field_id"

def _typed_with_ids(t: pa.DataType, path: Path, ids: Mapping[Path, int]) -> pa.DataType:
    if pa.types.is_struct(t):
        return pa.struct([_field_with_id(t.field(i), path, ids) for i in range(t.num_fields)])
    if pa.types.is_list(t):
        return pa.list_(_field_with_id(t.value_field, path, ids, "element"))
    if pa.types.is_large_list(t):
        return pa.large_list(_field_with_id(t.value_field, path, ids, "element"))
    if pa.types.is_map(t):
        return pa.map_(_field_with_id(t.key_field, path, ids, "key"), _field_with_id(t.item_field, path, ids, "value"),
                       keys_sorted=t.keys_sorted)
    return t


def _field_with_id(f: pa.Field, parent: Path, ids: Mapping[Path, int], name: str | None = None) -> pa.Field:
    path = parent + (name or f.name,)
    meta = dict(f.metadata or {})
    fid = ids.get(path)
    if fid is not None:
        meta[FIELD_ID] = str(fid).encode()
    return f.with_type(_typed_with_ids(f.type, path, ids)).with_metadata(meta)


def with_field_ids(table: pa.Table, ids: Mapping[Path, int]) -> pa.Table:
    """``table`` with each column (and nested field) carrying its id from ``ids``."""
    schema = pa.schema([_field_with_id(f, (), ids) for f in table.schema], metadata=table.schema.metadata)
    return pa.Table.from_arrays(table.columns, schema=schema)
