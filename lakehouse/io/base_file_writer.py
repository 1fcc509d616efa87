"""A base file written as its rows come, a row group at a time, with Hudi's footer.

Every handle that makes a base file (create, merge, compaction) writes through here, so a file
never has to be held whole: neither its rows nor its encoded bytes. Rows are gathered up to a row
group (``hoodie.parquet.block.size``, and no more than an eighth of ``write.task.max.size``, so a
write taken in pieces stays within its budget) and then encoded straight to the storage's output
stream. The footer's key bloom filter and key range (Hudi's ``org.apache.hudi.bloomfilter``,
``hoodie_min_record_key``, ``hoodie_max_record_key``) grow with every piece and are added last.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakehouse.bloom_filter import BloomFilter
from lakehouse.columns import RECORD_KEY
from lakehouse.faults import fault_point
from lakehouse.file_group.naming import BaseFileName, join
from lakehouse.field_schema import with_field_ids
from lakehouse.io.markers import MarkerType

__all__ = ["BaseFileWriter", "row_group_bytes"]


def row_group_bytes(config) -> int:
    """In-memory bytes of one row group: hoodie.parquet.block.size, within the write's budget."""
    return max(1 << 16, min(config.parquet_row_group_size, config.task_max_bytes // 8))


class BaseFileWriter:
    """One base file of ``ctx``'s instant: its marker first, then rows by :meth:`write` (in the
    table schema with meta columns), then :meth:`close`, which returns the file's size."""

    def __init__(self, ctx, partition: str, file_id: str, task: int, marker: MarkerType) -> None:
        self.ctx = ctx
        self.name = BaseFileName(file_id, ctx.token(task), ctx.instant_time)
        self.path = join(partition, str(self.name))
        ctx.markers.create(partition, str(self.name), marker)
        self.num_rows = 0
        self._group_bytes = row_group_bytes(ctx.config)
        self._pending: list[pa.Table] = []
        self._pending_bytes = 0
        self._bloom = (BloomFilter.create(num_entries=ctx.config.bloom_num_entries, fpp=ctx.config.bloom_fpp,
                                          filter_type=ctx.config.bloom_filter_type,
                                          max_entries=ctx.config.bloom_max_entries,
                                          packed=ctx.packed_bloom)
                       if ctx.bloom else None)
        self._min: str | None = None
        self._max: str | None = None
        self._out = None
        self._writer: pq.ParquetWriter | None = None
        self._groups = 0
        self._schema: pa.Schema | None = None
        self._pending_schema: pa.Schema | None = None

    def write(self, table: pa.Table) -> None:
        if table.num_rows == 0:
            return
        keys = table.column(RECORD_KEY).combine_chunks()  # the filter hashes an array at a time
        if self._bloom is not None:
            self._bloom.add_keys(keys)
        mm = pc.min_max(keys)
        lo, hi = mm["min"].as_py(), mm["max"].as_py()
        self._min = lo if self._min is None or lo < self._min else self._min
        self._max = hi if self._max is None or hi > self._max else self._max
        self.num_rows += table.num_rows
        # Pieces may differ in how a column is held (a per-file constant as a dictionary or
        # plain): all take the first one's types.
        if self._pending_schema is None:
            self._pending_schema = table.schema
        elif table.schema != self._pending_schema:
            table = table.cast(self._pending_schema)
        self._pending.append(table)
        self._pending_bytes += table.nbytes
        if self._pending_bytes >= self._group_bytes:
            self._flush()

    def _flush(self) -> None:
        if not self._pending:
            return
        ctx = self.ctx
        table = pa.concat_tables(self._pending) if len(self._pending) > 1 else self._pending[0]
        self._pending, self._pending_bytes = [], 0
        table = table.replace_schema_metadata(None)
        if ctx.field_ids:
            table = with_field_ids(table, ctx.field_ids)
        if self._writer is None:
            self._out = ctx.storage.open_output(self.path)
            self._out.__enter__()  # left by close (synced, published) or abort (discarded)
            # The footer gets Hudi's key/values directly, and no Arrow schema copy: that copy
            # would carry the (large) bloom filter a second time. Page CRCs: a flipped bit is
            # then an error on read, not a wrong value.
            self._writer = pq.ParquetWriter(self._out, table.schema, compression=ctx.config.parquet_codec,
                                            use_dictionary=ctx.dictionary_columns(table),
                                            write_statistics=ctx.statistics_columns(table.schema),
                                            store_schema=False, write_page_checksum=True)
            self._schema = table.schema
        elif table.schema != self._schema:
            table = table.cast(self._schema)
        per_row = table.nbytes / max(1, table.num_rows)
        self._writer.write_table(table, row_group_size=max(1, int(self._group_bytes // max(1.0, per_row))))
        self._groups += 1
        if self._groups == 1:
            self._out.flush()
            fault_point("write.mid_data_file")

    def close(self) -> int:
        """Ends the file (an empty one too: a compaction's empty result must exist); returns
        its size in bytes."""
        if self._writer is None and not self._pending:
            self._pending.append(self.ctx.schema.empty_table())
        self._flush()
        meta = {b"parquet.avro.schema": self.ctx.avro_schema_json.encode(), b"writer.model.name": b"avro"}
        if self.num_rows and self._bloom is not None:
            meta.update({
                b"org.apache.hudi.bloomfilter": self._bloom.serialize().encode(),
                b"hoodie_bloom_filter_type_code": self._bloom.type_code.encode(),
                b"hoodie_min_record_key": self._min.encode(),
                b"hoodie_max_record_key": self._max.encode(),
            })
        self._writer.add_key_value_metadata(meta)
        self._writer.close()
        size = self._out.tell()
        out, self._out, self._writer = self._out, None, None
        out.__exit__(None, None, None)
        return size

    def abort(self, error: BaseException) -> None:
        """Stops writing after ``error`` (a partial file left behind is the rollback's to
        delete, as its marker says)."""
        out, writer, self._out, self._writer = self._out, self._writer, None, None
        if out is not None:
            try:
                out.__exit__(type(error), error, error.__traceback__)
            except Exception:  # noqa: BLE001 - the first failure is the one to report
                pass
        if writer is not None:
            try:  # its sink is closed: no footer makes the partial file look whole
                writer.close()
            except Exception:  # noqa: BLE001
                pass
