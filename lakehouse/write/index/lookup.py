"""Index lookups for the SIMPLE and BLOOM indexes: where does each incoming key live today?

Both end in the same exact join against the keys stored in candidate base files; the bloom index
first prunes the candidates with each file's key range and bloom filter (footer metadata).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakehouse.columns import RECORD_KEY
from lakehouse.file_group.file_slice import BaseFile
from lakehouse.storage.base import Storage
from lakehouse.file_group.footer import read_footer
from lakehouse.storage.parquet import STREAM_BUFFER, decode_dictionaries

LOC_PARTITION = "__lh_loc_partition"
LOC_FILE_ID = "__lh_loc_file_id"
ROW = "__lh_row"


LOC_ORDERING = "__lh_loc_ordering"
_KEY_BATCH = 32768

class KeySource(Protocol):
    """Where a lookup reads stored keys: base files' key columns, or Merge-On-Read slices with
    their logs merged (lakehouse.write.index.tag_location.merged_keys)."""

    def __call__(self, files: list[BaseFile], wanted: pa.Array | None = None) -> pa.Table:
        """The keys stored in ``files`` (and their locations); given ``wanted``, only those among
        them, filtered as they are read."""


def _empty_existing() -> pa.Table:
    return located(pa.array([], pa.string()), "", "")


def located(keys: pa.ChunkedArray | pa.Array, partition: str, file_id: str,
            ordering: pa.ChunkedArray | pa.Array | None = None) -> pa.Table:
    """Stored keys of one file group, in the shape the joins below expect."""
    n = len(keys)
    # The file's two names as one-value dictionaries: a file's stored keys then cost their
    # own bytes, not ~60 more per key (join_locations makes the few matches plain).
    zeros = pa.array(np.zeros(n, dtype=np.int32))
    out = {"k": keys, LOC_PARTITION: pa.DictionaryArray.from_arrays(zeros, pa.array([partition], pa.string())),
           LOC_FILE_ID: pa.DictionaryArray.from_arrays(zeros, pa.array([file_id], pa.string()))}
    if ordering is not None:
        out[LOC_ORDERING] = ordering
    return pa.table(out)


def base_file_keys(storage: Storage, ordering: str | None = None) -> KeySource:
    """Stored keys (and ordering values) of base files: what Hudi's simple and bloom indexes see."""
    def read(files: list[BaseFile], wanted: pa.Array | None = None) -> pa.Table:
        def one(bf: BaseFile) -> pa.Table:
            with storage.open_input(bf.path) as f:
                pf = (pq.ParquetFile(f) if wanted is None
                      else pq.ParquetFile(f, pre_buffer=False, buffer_size=STREAM_BUFFER))
                cols = [RECORD_KEY]
                if ordering and ordering in pf.schema_arrow.names:
                    cols.append(ordering)
                if wanted is None:
                    t = pf.read(columns=cols)
                else:
                    # Filtered as decoded: a file's keys are never all in memory at once.
                    parts = [b.filter(pc.is_in(b.column(0), value_set=wanted))
                             for rg in range(pf.metadata.num_row_groups)
                             for b in pf.iter_batches(batch_size=_KEY_BATCH, columns=cols, row_groups=[rg])]
                    t = pa.Table.from_batches(parts, schema=pf.schema_arrow.empty_table().select(cols).schema)
            ords = (t.column(1) if len(cols) > 1 else pa.nulls(t.num_rows)) if ordering else None
            return located(t.column(0), bf.partition, bf.file_id, ords)

        if not files:
            return _empty_existing()
        if len(files) == 1:
            return one(files[0])
        with ThreadPoolExecutor(max_workers=min(4, len(files))) as pool:
            return pa.concat_tables(list(pool.map(one, files)), promote_options="permissive")
    return read


def join_locations(keys: pa.Array, partitions: pa.Array, existing: pa.Table, global_: bool) -> pa.Table:
    """Every stored location of each incoming key (a key stored twice, as plain inserts may
    leave it, is tagged twice, so updates and deletes reach every copy, as in Hudi). Rows come
    back ordered by ROW; a key found nowhere gets one row with null locations."""
    n = len(keys)
    batch = pa.table({ROW: pa.array(np.arange(n, dtype=np.int64)), "k": keys, "p": partitions})
    # Most stored keys are not in the batch: drop them with a hash-set probe before joining, so
    # the join's hash table is built over a handful of rows instead of the whole table.
    existing = decode_dictionaries(existing.filter(pc.is_in(existing.column("k"), value_set=keys)))
    if global_:
        joined = batch.join(existing, "k", join_type="left outer")
    else:
        existing = existing.append_column("p", existing.column(LOC_PARTITION))
        joined = batch.join(existing, ["k", "p"], join_type="left outer")
    joined = joined.sort_by(ROW)
    cols = [c for c in (ROW, LOC_PARTITION, LOC_FILE_ID, LOC_ORDERING) if c in joined.column_names]
    return joined.select(cols)


def stored_keys(source: KeySource, files: list[BaseFile], keys: pa.Array, per_read: int = 2) -> pa.Table:
    """The stored keys of ``files`` that are among ``keys``, read ``per_read`` files at a time:
    a lookup holds a few files' keys, not the table's (a write taken in chunks looks up every
    chunk: lakehouse.write.spill; with ``per_read`` 1, a file's keys are filtered as they are
    decoded)."""
    if len(files) <= per_read and per_read > 1:
        return source(files)
    parts = []
    for i in range(0, len(files), per_read):
        t = source(files[i:i + per_read], keys) if per_read == 1 else source(files[i:i + per_read])
        parts.append(t.filter(pc.is_in(t.column("k"), value_set=keys)))
    return pa.concat_tables(parts, promote_options="permissive") if parts else source([])


def simple_lookup(source: KeySource, base_files: list[BaseFile], keys: pa.Array,
                  partitions: pa.Array, *, global_: bool, per_read: int = 2) -> pa.Table:
    if not global_:
        wanted = set(pc.unique(partitions).to_pylist())
        base_files = [b for b in base_files if b.partition in wanted]
    return join_locations(keys, partitions, stored_keys(source, base_files, keys, per_read), global_)


def bloom_lookup(source: KeySource, storage: Storage, base_files: list[BaseFile], keys: pa.Array,
                 partitions: pa.Array, *, global_: bool, per_read: int = 2) -> pa.Table:
    if not global_:
        wanted = set(pc.unique(partitions).to_pylist())
        base_files = [b for b in base_files if b.partition in wanted]
    candidates: list[BaseFile] = []
    for bf in base_files:
        probe = keys if global_ else keys.filter(pc.equal(partitions, bf.partition))
        if len(probe) and read_footer(storage, bf).might_contain(probe).any():
            candidates.append(bf)
    return join_locations(keys, partitions, stored_keys(source, candidates, keys, per_read), global_)
