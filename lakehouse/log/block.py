"""Log blocks: the framing Hudi appends to a log file, and the content of each block kind.

Framing (big-endian): magic ``#HUDI#``, int64 block length (everything after this field), int32
format version 1, int32 block type, header, int64 content length, content, footer, int64 reverse
pointer = block length + 6 (the bytes written for the block before the pointer itself). Headers
and footers are an int32 count of (int32 key ordinal, int32 length, UTF-8 value) entries.

Java keeps the header in a HashMap keyed by an enum whose hash is the identity hash, so Hudi writes
header entries in an order that differs from run to run (the fixtures show both INSTANT_TIME first
and SCHEMA first). Readers do not care; the encoders below use the orders seen in Hudi's files so
that re-encoding a decoded block reproduces it byte for byte.
"""

from __future__ import annotations

import enum
import functools
import io
import json
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakehouse.errors import CorruptFileError, SchemaError, UnsupportedTableError
from lakehouse.field_schema import with_field_ids
from lakehouse.log import avro_encoder, avro_records, delete_record
from lakehouse.schema import (
    avro_physical_table,
    avro_records_to_arrow,
    avro_to_arrow_schema,
    conform_table,
    physical_avro_records,
    strip_converted_logical_types,
)
from lakehouse.storage.parquet import read_parquet

MAGIC = b"#HUDI#"
LOG_FORMAT_VERSION = 1
# Content versions Hudi 0.14/0.15 write for Avro data and delete blocks.
AVRO_BLOCK_VERSION = 3
DELETE_BLOCK_VERSION = 3

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_I32_PAIR = struct.Struct(">ii")


class BlockType(enum.IntEnum):
    COMMAND = 0
    DELETE = 1
    CORRUPT = 2
    AVRO_DATA = 3
    HFILE = 4
    PARQUET_DATA = 5
    CDC = 6


class HeaderKey(enum.IntEnum):
    INSTANT_TIME = 0
    TARGET_INSTANT_TIME = 1
    SCHEMA = 2
    COMMAND_BLOCK_TYPE = 3
    COMPACTED_BLOCK_TIMES = 4
    RECORD_POSITIONS = 5
    BLOCK_IDENTIFIER = 6


# HoodieCommandBlockTypeEnum has one member; its ordinal is written as a decimal string.
ROLLBACK_COMMAND = "0"


@dataclass(frozen=True, slots=True)
class LogBlock:
    """One block as found in a log file. ``offset`` is where its magic starts, ``size`` the bytes
    it occupies; a CORRUPT block holds the raw bytes up to the next magic (or the end)."""

    block_type: BlockType
    header: Mapping[HeaderKey | int, str]
    footer: Mapping[HeaderKey | int, str] = field(default_factory=dict)
    content: bytes = b""
    offset: int = 0
    size: int = 0
    path: str = ""  # the log file, for error messages
    version: int = LOG_FORMAT_VERSION

    @property
    def instant_time(self) -> str | None:
        return self.header.get(HeaderKey.INSTANT_TIME)

    @property
    def target_instant_time(self) -> str | None:
        return self.header.get(HeaderKey.TARGET_INSTANT_TIME)

    @property
    def schema(self) -> str | None:
        """The writer schema (Avro JSON, with meta fields) of a data or delete block."""
        return self.header.get(HeaderKey.SCHEMA)

    @property
    def is_rollback(self) -> bool:
        return (self.block_type == BlockType.COMMAND
                and self.header.get(HeaderKey.COMMAND_BLOCK_TYPE) == ROLLBACK_COMMAND)

    @property
    def is_data(self) -> bool:
        return self.block_type in (BlockType.AVRO_DATA, BlockType.PARQUET_DATA, BlockType.HFILE)

    def _corrupt(self, reason: str) -> CorruptFileError:
        where = f"{self.path or '<log>'} (block at offset {self.offset})"
        return CorruptFileError(where, reason)


# ---------------------------------------------------------------------------------------------
# Framing

def encode_metadata(entries: Mapping[HeaderKey | int, str] | None) -> bytes:
    """A header or footer: count, then (ordinal, length, UTF-8 value) per entry, in dict order."""
    entries = entries or {}
    out = bytearray(_I32.pack(len(entries)))
    for key, value in entries.items():
        raw = value.encode("utf-8")
        out += _I32_PAIR.pack(int(key), len(raw))
        out += raw
    return bytes(out)


def encode_block(block_type: BlockType, header: Mapping[HeaderKey | int, str], content: bytes,
                 footer: Mapping[HeaderKey | int, str] | None = None) -> bytes:
    """One framed block, ready to append to a log file."""
    header_bytes = encode_metadata(header)
    footer_bytes = encode_metadata(footer)
    block_length = 4 + 4 + len(header_bytes) + 8 + len(content) + len(footer_bytes) + 8
    return b"".join((
        MAGIC,
        _I64.pack(block_length),
        _I32_PAIR.pack(LOG_FORMAT_VERSION, int(block_type)),
        header_bytes,
        _I64.pack(len(content)),
        content,
        footer_bytes,
        _I64.pack(block_length + len(MAGIC)),
    ))


def _schema_json(avro_schema: dict[str, Any] | str) -> str:
    # A string is kept verbatim so a schema read from Hudi goes back out byte for byte; dicts are
    # written compactly without escaping, as Java's Schema.toString() does.
    if isinstance(avro_schema, str):
        return avro_schema
    return json.dumps(avro_schema, separators=(",", ":"), ensure_ascii=False)


@functools.lru_cache(maxsize=64)
def _fastavro_schema(schema_json: str) -> dict[str, Any]:
    """The parsed writer schema without the logical types fastavro converts to objects Arrow
    does not take (temporal values travel as integers, uuids as strings)."""
    return fastavro.parse_schema(strip_converted_logical_types(json.loads(schema_json)))


# ---------------------------------------------------------------------------------------------
# Avro data block

def encode_avro_data_block(table: pa.Table, avro_schema: dict[str, Any] | str,
                           instant_time: str, *, vectorised: bool = True) -> bytes:
    """An AVRO_DATA block of ``table``'s rows, encoded with ``avro_schema`` (with meta fields).

    The table is first conformed to the schema: columns cast, missing nullable ones null.
    ``vectorised=False`` encodes with fastavro only (the reference
    :mod:`lakehouse.log.avro_encoder` is checked against)."""
    schema_json = _schema_json(avro_schema)
    header = {HeaderKey.INSTANT_TIME: instant_time, HeaderKey.SCHEMA: schema_json}
    physical = avro_physical_table(table, schema_json)
    # fastavro's parse checks the schema (enum symbols, names, defaults) for both encoders.
    try:
        parsed = _fastavro_schema(schema_json)
    except (ValueError, fastavro.schema.SchemaParseException) as e:
        raise SchemaError(f"the Avro schema is not valid: {e}",
                          help="fix the schema (Avro's rules for names, enum symbols and defaults)") from e
    if vectorised:
        encoded = avro_encoder.encode_records(physical, json.loads(schema_json))
        if encoded is not None:
            head = _I32_PAIR.pack(AVRO_BLOCK_VERSION, physical.num_rows)
            return encode_block(BlockType.AVRO_DATA, header, head + encoded)
    records = physical_avro_records(physical)
    buf = io.BytesIO()
    ends = []
    try:
        for record in records:
            fastavro.schemaless_writer(buf, parsed, record)
            ends.append(buf.tell())
    except (ValueError, TypeError, AttributeError) as e:
        raise SchemaError(f"a row does not fit the Avro schema: {e}") from e
    encoded = buf.getbuffer()
    out = bytearray(_I32_PAIR.pack(AVRO_BLOCK_VERSION, len(records)))
    start = 0
    for end in ends:
        out += _I32.pack(end - start)
        out += encoded[start:end]
        start = end
    del encoded
    return encode_block(BlockType.AVRO_DATA, header, bytes(out))


def decode_avro_data_block(block: LogBlock, *, vectorised: bool = True) -> pa.Table:
    """The rows of an AVRO_DATA block, typed by its SCHEMA header. ``vectorised=False`` decodes
    with fastavro only (the reference :mod:`lakehouse.log.avro_records` is checked against)."""
    schema_json = _require_schema(block)
    try:
        parsed = _fastavro_schema(schema_json)
        arrow_schema = avro_to_arrow_schema(schema_json)
    except (ValueError, SchemaError, fastavro.schema.SchemaParseException) as e:
        raise block._corrupt(f"unreadable SCHEMA header: {e}") from e
    content = block.content
    if len(content) < 8:
        raise block._corrupt("Avro data block content is shorter than its version and count")
    version, count = _I32_PAIR.unpack_from(content, 0)
    if version != AVRO_BLOCK_VERSION or count < 0:
        # Hudi 0.14/0.15 write version 3 only; older content versions are not read here.
        raise block._corrupt(f"unsupported Avro data block version {version} / count {count}")
    plan = _field_plan(schema_json) if vectorised else None
    if plan is not None:
        fast = avro_records.decode_records(content, count, plan, arrow_schema)
        if fast is not None:
            return fast
    return _decode_avro_records(block, content, count, parsed, arrow_schema)


@functools.lru_cache(maxsize=64)
def _field_plan(schema_json: str):
    return avro_records.field_plan(json.loads(schema_json))


def _decode_avro_records(block: LogBlock, content: bytes, count: int, parsed, arrow_schema: pa.Schema) -> pa.Table:
    """fastavro's decoding of an Avro data block's records: every schema, and the errors that
    say what is corrupt (:mod:`lakehouse.log.avro_records` decodes most schemas faster)."""
    pos = 8
    stream = io.BytesIO(content)
    records = []
    while len(records) < count:
        if pos + 4 > len(content):
            raise block._corrupt(f"record {len(records)} starts past the end of the content")
        (length,) = _I32.unpack_from(content, pos)
        pos += 4
        end = pos + length
        if length < 0 or end > len(content):
            raise block._corrupt(f"record {len(records)} claims {length} bytes, past the end")
        stream.seek(pos)
        try:
            records.append(fastavro.schemaless_reader(stream, parsed, None))
        except Exception as e:  # fastavro raises many types on garbage (EOFError, ValueError...)
            raise block._corrupt(f"record {len(records)} is not valid Avro: {e!r}") from e
        if stream.tell() != end:
            raise block._corrupt(f"record {len(records) - 1} used {stream.tell() - pos} of its "
                                 f"{length} bytes")
        pos = end
    if pos != len(content):
        raise block._corrupt(f"{len(content) - pos} bytes follow the last record")
    try:
        return avro_records_to_arrow(records, arrow_schema)
    except SchemaError as e:
        raise block._corrupt(str(e)) from e


def _require_schema(block: LogBlock) -> str:
    schema = block.schema
    if not schema:
        raise block._corrupt(f"{block.block_type.name} block has no SCHEMA header")
    return schema


# ---------------------------------------------------------------------------------------------
# Parquet data block

# Hudi writes parquet log blocks with hoodie.parquet.compression.codec, whose default in 0.14/0.15
# is gzip (every parquet block in the fixtures is GZIP). Keeping it means any reader that handles
# Hudi's own blocks handles ours. Arrow's gzip defaults to level 9, several times slower than the
# zlib default (6) that Hadoop's codec uses for the same size, so the level is pinned to 6.
# "zstd" or "snappy" write ~5x faster again; hudi-rs 0.5 reads them (tested), Java readers need
# the codec on their classpath (Spark bundles both).
DEFAULT_PARQUET_BLOCK_CODEC = "gzip"
_DEFAULT_LEVELS = {"gzip": 6}


def encode_parquet_data_block(table: pa.Table, avro_schema: dict[str, Any] | str,
                              instant_time: str,
                              compression: str = DEFAULT_PARQUET_BLOCK_CODEC,
                              compression_level: int | None = None,
                              use_dictionary: bool | Sequence[str] = True,
                              field_ids: Mapping[tuple[str, ...], int] | None = None) -> bytes:
    """A PARQUET_DATA block whose content is a whole parquet file of ``table`` (conformed to
    ``avro_schema``). The footer carries ``parquet.avro.schema`` as Hudi's Avro writer does;
    ``field_ids``: the columns' Iceberg field ids, as base files carry them (Hudi's readers
    ignore them; the Iceberg snapshot view publishes such a block's content as it is)."""
    schema_json = _schema_json(avro_schema)
    table = conform_table(table, avro_to_arrow_schema(schema_json))
    table = table.replace_schema_metadata(None)
    if field_ids:
        table = with_field_ids(table, field_ids)
    if compression_level is None:
        compression_level = _DEFAULT_LEVELS.get(compression.lower())
    sink = io.BytesIO()
    # Hudi's key/values in the footer, and no ARROW:schema: that copy would carry the schema a
    # fourth time (it is also in the block header and in parquet.avro.schema), per block.
    with pq.ParquetWriter(sink, table.schema, compression=compression,
                          compression_level=compression_level, store_schema=False,
                          use_dictionary=use_dictionary, write_page_checksum=True) as writer:
        writer.write_table(table)
        writer.add_key_value_metadata({"parquet.avro.schema": schema_json,
                                       "writer.model.name": "avro"})
    header = {HeaderKey.INSTANT_TIME: instant_time, HeaderKey.SCHEMA: schema_json}
    return encode_block(BlockType.PARQUET_DATA, header, sink.getvalue())


def decode_parquet_data_block(block: LogBlock, columns: Sequence[str] | None = None, *,
                              copies: Mapping[str, str] | None = None) -> pa.Table:
    """The rows of a PARQUET_DATA block, conformed to its SCHEMA header when it has one;
    ``columns``: only these (those the block has), for reads that need a few; ``copies``: as
    :func:`~lakehouse.storage.parquet.read_parquet` takes them."""
    try:
        # No dataset machinery for a small in-memory file (twice as fast per block, and a
        # snapshot read decodes one block per file group and delta commit).
        table = read_parquet(pa.BufferReader(block.content), columns, copies=copies)
    except (pa.ArrowInvalid, OSError) as e:
        raise block._corrupt(f"parquet content is unreadable: {e}") from e
    table = table.replace_schema_metadata(None)
    if not block.schema:
        return table
    try:
        schema = avro_to_arrow_schema(block.schema)
        if columns is not None:
            have = set(table.column_names)
            schema = pa.schema([f for f in schema if f.name in have])
        return conform_table(table, schema, extra="drop")
    except SchemaError as e:
        raise block._corrupt(f"parquet content does not match the SCHEMA header: {e}") from e


# ---------------------------------------------------------------------------------------------
# Delete block

_DELETE_SCHEMA = fastavro.parse_schema(delete_record.DELETE_RECORD_LIST_SCHEMA)


def _ordering_array(values: Sequence[Any] | pa.Array | pa.ChunkedArray, n: int,
                    avro_schema: dict[str, Any] | str, ordering_field: str | None) -> pa.Array:
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if not isinstance(values, pa.Array):
        try:
            values = pa.array(list(values))
        except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
            raise SchemaError(f"ordering values of mixed types: {e}") from e
    if ordering_field is not None:
        target = avro_to_arrow_schema(_schema_json(avro_schema))
        if target.get_field_index(ordering_field) < 0:
            raise SchemaError(f"ordering field {ordering_field!r} is not in the schema")
        try:
            values = values.cast(target.field(ordering_field).type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise SchemaError(f"ordering values do not fit {ordering_field!r}: {e}") from e
    if len(values) != n:
        raise SchemaError(f"{len(values)} ordering values for {n} keys")
    return values


def encode_delete_block(keys: Sequence[str] | pa.Array | pa.ChunkedArray,
                        partition_paths: Sequence[str] | pa.Array | pa.ChunkedArray,
                        ordering_values: Sequence[Any] | pa.Array | pa.ChunkedArray | None,
                        instant_time: str, avro_schema: dict[str, Any] | str, *,
                        ordering_field: str | None = None, vectorised: bool = True) -> bytes:
    """A DELETE block for ``keys`` (one partition path per key).

    ``ordering_values`` None, or a null entry, writes ``IntWrapper(0)``: the delete wins whatever
    the record's ordering value. Otherwise the wrapper follows the values' Arrow type (a Python
    list is inferred: ints become LongWrapper); give ``ordering_field`` to cast them to that
    column's type, so Java compares like with like (it ignores a wrapper of another class).
    ``vectorised=False`` encodes with fastavro only (the same bytes, slower).
    """
    n = len(keys)
    if len(partition_paths) != n:
        raise SchemaError(f"{len(partition_paths)} partition paths for {n} keys")
    payload = None
    if vectorised and (ordering_values is None or n == 0):
        payload = delete_record.encode_unconditional(_string_array(keys), _string_array(partition_paths))
    if payload is not None:
        return _delete_block(payload, instant_time, avro_schema)
    keys, partition_paths = _python_list(keys), _python_list(partition_paths)
    if ordering_values is None or n == 0:
        ordering = [delete_record.UNCONDITIONAL] * n
    else:
        values = _ordering_array(ordering_values, n, avro_schema, ordering_field)
        try:
            name, cast, physical = delete_record.wrapper_for(values.type)
            python = values.cast(cast).cast(physical).to_pylist()
        except (TypeError, pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise SchemaError(f"ordering values cannot be written: {e}") from e
        ordering = [delete_record.UNCONDITIONAL if v is None else (name, {"value": v})
                    for v in python]
    datum = {"deleteRecordList": [
        {"recordKey": k, "partitionPath": p, "orderingVal": o}
        for k, p, o in zip(keys, partition_paths, ordering)]}
    buf = io.BytesIO()
    try:
        fastavro.schemaless_writer(buf, _DELETE_SCHEMA, datum)
    except (ValueError, TypeError) as e:
        raise SchemaError(f"delete records do not fit HoodieDeleteRecordList: {e}") from e
    return _delete_block(buf.getvalue(), instant_time, avro_schema)


def _delete_block(payload: bytes, instant_time: str, avro_schema: dict[str, Any] | str) -> bytes:
    content = _I32_PAIR.pack(DELETE_BLOCK_VERSION, len(payload)) + payload
    header = {HeaderKey.SCHEMA: _schema_json(avro_schema), HeaderKey.INSTANT_TIME: instant_time}
    return encode_block(BlockType.DELETE, header, content)


def _string_array(values: Sequence[str] | pa.Array | pa.ChunkedArray) -> pa.Array:
    """Keys or partition paths as one Arrow string array (all nulls when they are not all
    strings: fastavro's path then says which value does not fit)."""
    try:
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        if isinstance(values, pa.Array):
            return values.cast(pa.string()) if pa.types.is_string(values.type) or \
                pa.types.is_large_string(values.type) else pa.nulls(len(values), pa.string())
        values = pa.array(values)  # inferred: bytes are not taken for strings
        return values if pa.types.is_string(values.type) else pa.nulls(len(values), pa.string())
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):
        return pa.nulls(len(values), pa.string())


def _python_list(values: Sequence[str] | pa.Array | pa.ChunkedArray) -> list:
    return values.to_pylist() if isinstance(values, (pa.Array, pa.ChunkedArray)) else list(values)


DELETE_COLUMNS = ("record_key", "partition_path", "ordering_value", "unconditional")


def decode_delete_block(block: LogBlock, *, vectorised: bool = True) -> pa.Table:
    """The deleted keys: ``record_key``, ``partition_path``, ``ordering_value`` (typed like the
    wrapper's value, null for unconditional deletes) and ``unconditional`` (no ordering value or
    Hudi's ``IntWrapper(0)``: the delete wins whatever the record's ordering value).
    ``vectorised=False`` decodes with fastavro only (the reference of
    :func:`~lakehouse.log.delete_record.decode_records`)."""
    content = block.content
    if len(content) < 8:
        raise block._corrupt("delete block content is shorter than its version and length")
    version, length = _I32_PAIR.unpack_from(content, 0)
    if version != DELETE_BLOCK_VERSION:
        # Versions 1/2 held Java-serialised (Kryo) objects, which only the JVM can read.
        raise block._corrupt(f"unsupported delete block version {version}")
    if length < 0 or 8 + length != len(content):
        raise block._corrupt(f"delete block says {length} bytes of records, has {len(content) - 8}")
    fast = delete_record.decode_records(memoryview(content)[8:]) if vectorised else None
    if fast is None:
        return _decode_delete_records(block)
    keys, parts, unconditional, ordering = fast
    return pa.table({
        "record_key": keys,
        "partition_path": parts,
        "ordering_value": pa.nulls(len(keys), _ordering_type(block, set())) if ordering is None else ordering,
        "unconditional": pa.array(unconditional, pa.bool_()),
    })


def _decode_delete_records(block: LogBlock) -> pa.Table:
    """fastavro's decoding of a delete block's records: every shape, and the errors that say
    what is corrupt (:func:`~lakehouse.log.delete_record.decode_records` answers the common
    shapes faster)."""
    content = block.content
    stream = io.BytesIO(content)
    stream.seek(8)
    try:
        datum = fastavro.schemaless_reader(stream, _DELETE_SCHEMA, None, return_record_name=True)
    except Exception as e:  # fastavro raises many types on garbage
        raise block._corrupt(f"delete records are not valid Avro: {e!r}") from e
    if stream.tell() != len(content):
        raise block._corrupt(f"{len(content) - stream.tell()} bytes follow the delete records")
    records = datum["deleteRecordList"]
    n = len(records)
    ords = [r["orderingVal"] for r in records]
    uncond = delete_record.UNCONDITIONAL
    conditional = [o is not None and o != uncond for o in ords]
    if any(conditional):
        kinds = {o[0] for o, c in zip(ords, conditional) if c}
        ordering = pa.array([o[1]["value"] if c else None for o, c in zip(ords, conditional)],
                            type=_ordering_type(block, kinds))
        unconditional = pc.invert(pa.array(conditional, pa.bool_()))
    else:
        # Most delete blocks: deletes without an ordering value (every record unconditional).
        ordering = pa.nulls(n, _ordering_type(block, set()))
        unconditional = pa.repeat(True, n)
    return pa.table({
        "record_key": pa.array([r["recordKey"] for r in records], pa.string()),
        "partition_path": pa.array([r["partitionPath"] for r in records], pa.string()),
        "ordering_value": ordering,
        "unconditional": unconditional,
    })


def _ordering_type(block: LogBlock, kinds: set[str]) -> pa.DataType:
    types = {delete_record.WRAPPER_ARROW_TYPES[k] for k in kinds}
    if not types:
        return pa.int32()
    if len(types) == 1:
        return types.pop()
    # Hudi writes one column's values per block; a mix can only be numbers widened together.
    if all(pa.types.is_integer(t) for t in types):
        return pa.int64()
    if all(pa.types.is_integer(t) or pa.types.is_floating(t) for t in types):
        return pa.float64()
    raise UnsupportedTableError(
        f"{block.path or '<log>'}: delete block at offset {block.offset} mixes ordering value "
        f"types {sorted(kinds)}", help="compact the file group with Apache Hudi")


# ---------------------------------------------------------------------------------------------
# Command block

def encode_rollback_command_block(instant_time: str, target_instant_time: str) -> bytes:
    """A COMMAND block that rolls back ``target_instant_time``'s blocks earlier in the file."""
    header = {HeaderKey.INSTANT_TIME: instant_time,
              HeaderKey.COMMAND_BLOCK_TYPE: ROLLBACK_COMMAND,
              HeaderKey.TARGET_INSTANT_TIME: target_instant_time}
    return encode_block(BlockType.COMMAND, header, b"")
