"""Hudi's ``HoodieIndex.tagLocation`` for the SIMPLE and BLOOM indexes: the file group each
incoming record's key lives in, from the stored keys of the table's file slices."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from lakehouse.columns import KEY, PARTITION, RECORD_KEY
from lakehouse.config import IndexType
from lakehouse.file_group.file_slice import BaseFile
from lakehouse.read.file_slice_reader import read_file_slice
from lakehouse.read.reader import TableReader
from lakehouse.write.index.lookup import ROW, KeySource, base_file_keys, bloom_lookup, located, simple_lookup

if TYPE_CHECKING:
    from lakehouse.meta_client import TableMetaClient
    from lakehouse.write.context import WriteContext


def tag_location(meta: "TableMetaClient", context: "WriteContext", rows: pa.Table, base_files: dict, timeline, read_slices: dict,
                 per_read: int = 2) -> tuple[pa.Table, pa.Table]:
    """Where the SIMPLE or BLOOM index finds each record's key: (rows, one per location found,
    and their locations, aligned); stored keys read ``per_read`` files at a time."""
    cfg = context.config
    index = cfg.index_type
    files = list(base_files.values())
    ordering = cfg.ordering_field if index.is_global and context.spec.uses_ordering else None
    if cfg.is_mor:
        # A key deleted in a log is gone, although its base file still holds it. Java Hudi's
        # SIMPLE/BLOOM look at base files only, so after delete, insert (a new file group) and
        # upsert the key lands in both groups; merged keys avoid that duplicate.
        source = merged_keys(meta, context, timeline, read_slices, ordering)
    else:
        source = base_file_keys(meta.storage, ordering)
    keys = rows.column(KEY).combine_chunks()
    partitions = rows.column(PARTITION).combine_chunks()
    if index in (IndexType.BLOOM, IndexType.GLOBAL_BLOOM):
        loc = bloom_lookup(source, meta.storage, files, keys, partitions, global_=index.is_global,
                           per_read=per_read)
    else:
        loc = simple_lookup(source, files, keys, partitions, global_=index.is_global, per_read=per_read)
    if loc.num_rows != rows.num_rows:
        rows = rows.take(loc.column(ROW))
    return rows, loc.drop_columns([ROW])


def merged_keys(meta: "TableMetaClient", context: "WriteContext", timeline, read_slices: dict,
                ordering: str | None) -> KeySource:
    """Stored keys (and ordering values) of Merge-On-Read file slices, logs merged."""
    reader = TableReader(meta.storage, context.config, meta.active, timeline, memory=meta.memory)
    cols = [RECORD_KEY] + ([ordering] if ordering else [])
    ctx = reader.slice_read_context(meta.schema(timeline=timeline), set(timeline.completed_write_times), cols, None,
                                    read_logs=True)

    def read(files: list[BaseFile], wanted: pa.Array | None = None) -> pa.Table:
        parts = []
        for bf in files:
            s = read_slices.get((bf.partition, bf.file_id))
            if s is None:
                continue
            t = read_file_slice(s, ctx)
            if wanted is not None:
                t = t.filter(pc.is_in(t.column(0), value_set=wanted))
            parts.append(located(t.column(0), s.partition, s.file_id, t.column(1) if ordering else None))
        return pa.concat_tables(parts) if parts else base_file_keys(meta.storage, ordering)([])
    return read
