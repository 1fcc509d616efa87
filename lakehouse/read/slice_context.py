"""What reading a file slice needs to know: the table's schema and merge, which instants are
visible, the projection and filters, the memory bound (:class:`SliceReadContext`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import pyarrow as pa
import pyarrow.compute as pc

from lakehouse.columns import IS_DELETED, RECORD_KEY
from lakehouse.merge import MergeSpec
from lakehouse.storage.base import Storage


KeyFunction = Callable[[pa.Table], pa.ChunkedArray]


@dataclass
class SliceReadContext:
    storage: Storage
    schema: pa.Schema  # full output schema, meta fields included
    spec: MergeSpec
    is_visible: Callable[[str], bool]  # is an instant's data visible to this read
    columns: list[str] | None = None
    row_filter: pc.Expression | None = None
    key_of: KeyFunction | None = None  # for tables without meta fields
    read_logs: bool = True
    # Bytes the committed write stats record for a log file (None: unknown). Asked only when a
    # torn block lost its header, so the common read never parses commit metadata for it.
    committed_log_size: Callable[[str], int | None] | None = None
    # Bytes of decoded log records one slice's merge holds before merging them down
    # (``hoodie.memory.merge.max.size``; None: no bound).
    merge_max_bytes: int | None = None
    # A key a base file holds more than once (lakehouse.merge.arrange_duplicate_base_keys):
    # "first" for reads, "each" for compaction, as Hudi 0.14/0.15 do.
    duplicate_base_keys: str = "first"
    # The record keys a read's filters pin (lakehouse.read.pruning.pinned_keys): every version of
    # other keys is dropped as it is read, before the merge (which is per key, so nothing else
    # changes), and a base file whose footer rules them all out is not read at all.
    keys: pa.Array | None = None
    # The data column a simple key generator makes record keys of, one string field as it is
    # (lakehouse.keygen.KeyGenerator, Hudi's SimpleAvroKeyGenerator): ``_hoodie_record_key`` is
    # then filled from it instead of decoded, where a file's statistics show them equal.
    key_field: str | None = None
    stats: dict[str, int] = field(default_factory=lambda: {"log_blocks": 0, "corrupt_blocks": 0,
                                                                 "vanished_logs": 0, "log_folds": 0})

    def needed_columns(self) -> list[str]:
        """Columns a merge must see: the projection plus key, ordering and delete markers."""
        if self.columns is None or self.spec.mode.value == "PARTIAL_UPDATE":
            return self.schema.names
        want = set(self.columns)
        want.add(RECORD_KEY)
        if self.spec.ordering_field:
            want.add(self.spec.ordering_field)
        want.add(IS_DELETED)
        if self.row_filter is not None:
            want |= _expression_fields(self.row_filter, self.schema)
        return [n for n in self.schema.names if n in want]

    def record_keys(self, table: pa.Table) -> pa.ChunkedArray:
        """The record keys of ``table``'s rows (made from other columns without meta fields)."""
        if self.key_of is not None:
            return self.key_of(table)
        return table.column(RECORD_KEY)

    @property
    def copies(self) -> dict[str, str] | None:
        """Columns a decode fills from another (:func:`lakehouse.storage.parquet.read_parquet`)."""
        return {RECORD_KEY: self.key_field} if self.key_field else None


def _expression_fields(expr: pc.Expression, schema: pa.Schema) -> set[str]:
    text = str(expr)
    return {n for n in schema.names if n in text}
