"""File groups a read can skip before it decodes anything, from its filters.

A bucket-index table keeps every version of a key in the file group of the key's bucket, in the
key's partition: the writers route each record there by the same hash (Hudi's BucketIdentifier,
:mod:`lakehouse.bucket_identifier`, for the SIMPLE engine; the partition's hash ring,
:mod:`lakehouse.consistent_hashing`, for CONSISTENT_HASHING). So a read whose filters pin every record-key field to
values (``=`` / ``in``, in the AND of the filter list) reads only those buckets' file groups.
The filters themselves are still applied to the merged rows: pruning only skips file groups that
cannot hold a matching row.

Within the file groups read, the pinned keys are handed to the slice reader (``keys``): it drops
every version of another key as it reads (the merge is per key), and does not read a base file
whose footer (key range, bloom filter) rules them all out, on any index.
"""

from __future__ import annotations

import itertools
from typing import Any, Callable, Sequence

import pyarrow as pa

from lakehouse.bucket_identifier import record_buckets
from lakehouse.config import BucketEngine, IndexType, KeyGeneratorType, TableConfig
from lakehouse.consistent_hashing import HashingMetadata, record_hashes
from lakehouse.errors import LakehouseError
from lakehouse.file_group.file_slice import FileSlice
from lakehouse.file_group.naming import bucket_of_file_id
from lakehouse.keygen import KeyGenerator

# Key combinations past this (an IN on each of several key fields) are not worth hashing.
MAX_PINNED_KEYS = 100_000
# Pinned partition-value combinations past this are listed as the whole table, then pruned.
MAX_PINNED_PARTITIONS = 1000


def pinned_values(filters: Sequence[tuple[str, str, Any]], field: str, *, keep_none: bool = False) -> list | None:
    """The values the AND of ``filters`` pins ``field`` to (None: not pinned); a None among them
    only with ``keep_none`` (an ``in`` naming it matches nulls)."""
    pinned: set | None = None
    for col, op, value in filters:
        if col != field or op.lower() not in ("=", "==", "in"):
            continue
        values = {value} if op.lower() in ("=", "==") else set(value)
        pinned = values if pinned is None else pinned & values
    return None if pinned is None else [v for v in pinned if keep_none or v is not None]


def pinned_rows(filters: Sequence[tuple[str, str, Any]] | None, fields: Sequence[str], schema: pa.Schema,
                limit: int, *, keep_none: bool = False) -> pa.Table | None:
    """Every combination of the values ``filters`` pin ``fields`` to (``=``, ``in``), one row
    each, typed as ``schema`` says (nulls too, with ``keep_none``); None when they do not pin
    them all, past ``limit`` combinations, or when a value cannot be of its field's type (the
    filter's own check says)."""
    if not isinstance(filters, (list, tuple)) or not filters:
        return None  # none, or an expression: what it pins is not read here
    try:
        values = [pinned_values(filters, f, keep_none=keep_none) for f in fields]
    except (TypeError, ValueError, AttributeError):  # not (column, op, value), or unhashable
        return None
    if any(v is None for v in values) or any(f not in schema.names for f in fields):
        return None
    combos = 1
    for v in values:
        combos *= len(v)
    if combos > limit:
        return None
    rows = list(zip(*itertools.product(*values))) if combos else [[] for _ in fields]
    try:
        return pa.table({f: pa.array(list(col), schema.field(f).type) for f, col in zip(fields, rows)})
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OverflowError, TypeError,
            ValueError):
        return None


def pinned_keys(config: TableConfig, schema: pa.Schema,
                filters: Sequence[tuple[str, str, Any]] | None) -> tuple[pa.Table, pa.Array] | None:
    """The record-key columns and the record keys (as stored) that ``filters`` pin every
    record-key field to; None when they do not pin all of them."""
    batch = pinned_rows(filters, config.record_key_fields, schema, MAX_PINNED_KEYS)
    if batch is None:
        return None
    try:
        keys = KeyGenerator(config).record_keys(batch) if batch.num_rows else pa.chunked_array([], pa.string())
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, LakehouseError):
        return None  # a value no row can hold as a key: leave it to the filter
    return batch, keys.combine_chunks()


def _same_text_everywhere(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_integer(t)


def pinned_partitions(config: TableConfig, schema: pa.Schema,
                      filters: Sequence[tuple[str, str, Any]] | None) -> list[str] | None:
    """The partition folders, as the writer's key generator names them, of the values
    ``filters`` pin every partition field to (``=``, ``in``): a read of one of P partitions
    lists one folder, not P (on object storage, a request each), as Hudi's file index lists only
    the prefix equality filters give (``hoodie.datasource.read.file.index.listing.partition-
    path-prefix.analysis.enabled``). A pinned None names the default partition, where nulls
    live. None when they do not pin them all, or where another writer may name the folder
    otherwise: only string and integer values, whose text Hudi's writers make alike
    (String.valueOf), and no timestamp-based key generator."""
    fields = config.partition_fields
    if not fields or config.key_generator_type is KeyGeneratorType.TIMESTAMP or not all(
            f in schema.names and _same_text_everywhere(schema.field(f).type) for f in fields):
        return None
    batch = pinned_rows(filters, fields, schema, MAX_PINNED_PARTITIONS, keep_none=True)
    if batch is None:
        return None
    if not batch.num_rows:
        return []
    try:
        paths = KeyGenerator(config).partition_paths(batch, row_offset=None)
    except LakehouseError:
        return None  # a value no row's folder can have: the whole table, then the filter
    return sorted(set(paths.to_pylist()))


def key_buckets(config: TableConfig, schema: pa.Schema,
                filters: Sequence[tuple[str, str, Any]] | None) -> set[int] | None:
    """The buckets that may hold rows passing ``filters`` (None: any bucket)."""
    if config.index_type is not IndexType.BUCKET or config.bucket_engine is not BucketEngine.SIMPLE:
        return None
    pinned = pinned_keys(config, schema, filters)
    if pinned is None:
        return None
    batch, keys = pinned
    if len(keys) == 0:
        return set()
    return set(record_buckets(batch, pa.chunked_array([keys]), config).tolist())


def prune_by_key(slices: list[FileSlice], config: TableConfig, schema: pa.Schema,
                 filters: Sequence[tuple[str, str, Any]] | None,
                 ring_of: Callable[[str], HashingMetadata | None] | None = None) -> list[FileSlice]:
    """``slices`` without the file groups of buckets no pinned key hashes to (a file group whose
    id names no bucket is kept). On a consistent-hashing table ``ring_of(partition)`` gives the
    ring the read's files follow (none given: nothing is pruned)."""
    if config.consistent_hashing:
        return _prune_by_ring(slices, config, schema, filters, ring_of)
    buckets = key_buckets(config, schema, filters)
    if buckets is None:
        return slices
    return [s for s in slices if (b := bucket_of_file_id(s.file_id)) is None or b in buckets]


def _prune_by_ring(slices: list[FileSlice], config: TableConfig, schema: pa.Schema,
                   filters: Sequence[tuple[str, str, Any]] | None,
                   ring_of: Callable[[str], HashingMetadata | None] | None) -> list[FileSlice]:
    pinned = pinned_keys(config, schema, filters) if ring_of is not None and slices else None
    if pinned is None:
        return slices
    hashes = record_hashes(pinned[1], config.bucket_hash_fields, config.record_key_fields)
    keep: dict[str, tuple[set[str], set[str]] | None] = {}
    out = []
    for s in slices:
        if s.partition not in keep:
            ring = ring_of(s.partition)
            keep[s.partition] = None if ring is None else (
                {ring.nodes[i].file_id for i in ring.locate(hashes).tolist()}, {n.file_id for n in ring.nodes})
        k = keep[s.partition]
        if k is None or s.file_id in k[0] or s.file_id not in k[1]:
            out.append(s)
    return out
