"""What a write takes its rows from: an in-memory table, parquet files, or an Arrow stream.

A write checks every row before it writes a file, and a write larger than ``write.task.max.size``
on a path that can take it in chunks (lakehouse.write.buffer) reads its rows twice: once to check
them, once to write them, a chunk at a time. So a source must be readable more than once without
being held whole: a table in memory is sliced; parquet files (the Spark data source's staged
rows) are read a row group at a time; a stream (a ``pyarrow.RecordBatchReader``, or anything
with ``__arrow_c_stream__``: Polars, DuckDB, pandas via pyarrow) can be read once only, so it is
first spooled to a local parquet file, a batch at a time, and read from there.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any, Callable, Iterator, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from lakehouse.errors import SchemaError
from lakehouse.schema import conform_table


class BatchSource:
    """Rows readable several times, in chunks."""

    schema: pa.Schema
    nbytes: int  # in memory (for parquet: the row groups' uncompressed size)
    num_rows: int

    def chunks(self, chunk_bytes: int) -> Iterator[pa.Table]:
        raise NotImplementedError

    def whole(self) -> pa.Table:
        """Every row at once (the write paths that are not taken in chunks)."""
        return pa.concat_tables(list(self.chunks(max(1, self.nbytes))) or [self.schema.empty_table()])

    def close(self) -> None:
        """Frees what the source made for itself (a spooled stream's file)."""


class TableSource(BatchSource):
    def __init__(self, table: pa.Table) -> None:
        self.table = table
        self.schema = table.schema
        self.nbytes = table.nbytes
        self.num_rows = table.num_rows

    def chunks(self, chunk_bytes: int) -> Iterator[pa.Table]:
        n = self.num_rows
        if n == 0 or self.nbytes <= chunk_bytes:
            yield self.table
            return
        per = max(1, int(n * chunk_bytes // max(1, self.nbytes)))
        for off in range(0, n, per):
            yield self.table.slice(off, per)  # zero-copy

    def whole(self) -> pa.Table:
        return self.table


class ParquetSource(BatchSource):
    """Parquet files, read a row group (or less) at a time; ``open_file(path)`` opens one.
    ``schema`` None: the files' own schemas unified (permissively: files of one source may differ
    in columns, as ``pa.concat_tables(promote_options="permissive")`` allows)."""

    def __init__(self, paths: Sequence[str], open_file: Callable[[str], Any], schema: pa.Schema | None,
                 *, nbytes: int | None = None, remove: Callable[[], None] | None = None) -> None:
        self.paths = list(paths)
        self.open_file = open_file
        self._remove = remove
        self.num_rows = 0
        sample = None
        schemas = []
        for p in self.paths:
            f = pq.ParquetFile(open_file(p))
            self.num_rows += f.metadata.num_rows
            schemas.append(f.schema_arrow)
            if sample is None and f.metadata.num_rows:
                sample = f.read_row_group(0)
        if schema is None:
            schema = (pa.unify_schemas(schemas, promote_options="permissive") if schemas
                      else pa.schema([])).remove_metadata()
        self.schema = schema
        # In memory, not on disk (encodings and dictionaries make parquet's own sizes several
        # times smaller): the caller's count, or one row group's in-memory bytes per row.
        if nbytes is None:
            nbytes = int(sample.nbytes / max(1, sample.num_rows) * self.num_rows) if sample is not None else 0
        self.nbytes = nbytes

    def chunks(self, chunk_bytes: int) -> Iterator[pa.Table]:
        rows_hint = max(1, int(self.num_rows * chunk_bytes // max(1, self.nbytes))) if self.nbytes else 65536
        for p in self.paths:
            f = pq.ParquetFile(self.open_file(p))
            # A row group at a time: over all of them pyarrow pre-buffers the whole file.
            for rg in range(f.metadata.num_row_groups):
                for batch in f.iter_batches(batch_size=min(rows_hint, 1 << 20), row_groups=[rg]):
                    yield conform_table(pa.Table.from_batches([batch]), self.schema)

    def close(self) -> None:
        if self._remove is not None:
            self._remove()
            self._remove = None


def spool(stream: pa.RecordBatchReader) -> ParquetSource:
    """A stream's batches written to a temporary local parquet file, one at a time."""
    # The process id in the name: whose spool a leftover is, where several writers share /tmp.
    fd, path = tempfile.mkstemp(prefix=f"lakehouse-write-{os.getpid()}-", suffix=".parquet")
    os.close(fd)
    nbytes = 0
    try:
        with pq.ParquetWriter(path, stream.schema, compression="lz4") as w:
            for batch in stream:
                if batch.num_rows:
                    w.write_batch(batch)
                    nbytes += batch.nbytes
    except BaseException:
        os.unlink(path)
        raise
    return ParquetSource([path], lambda p: p, stream.schema, nbytes=nbytes, remove=lambda: os.unlink(path))


def as_source(batch: Any) -> BatchSource:
    """A write's input as a source: a ``pyarrow.Table`` or ``RecordBatch``, a source already, or
    an Arrow stream."""
    if isinstance(batch, BatchSource):
        return batch
    if isinstance(batch, pa.Table):
        return TableSource(batch)
    if isinstance(batch, pa.RecordBatch):
        return TableSource(pa.Table.from_batches([batch]))
    if isinstance(batch, pa.RecordBatchReader):
        return spool(batch)
    if hasattr(batch, "__arrow_c_stream__"):
        return spool(pa.RecordBatchReader.from_stream(batch))
    raise SchemaError(f"expected a pyarrow.Table, a RecordBatchReader or an Arrow stream, got "
                      f"{type(batch).__name__}",
                      help="convert with pyarrow.Table.from_pandas / from_pylist, or pass a "
                           "RecordBatchReader (or any object with __arrow_c_stream__)")
