"""A table scan in pyiceberg's shape: planned once, read whole or as a stream of batches.

``Table.scan(columns=, filters=, as_of=, read_optimized=)`` returns a :class:`TableScan`; nothing
is listed or decoded until it is asked for rows. :meth:`TableScan.to_arrow` reads the whole
result (what ``Table.read`` returns). :meth:`TableScan.to_arrow_batch_reader` hands the rows out
as file slices are merged, a few at a time, so a drained reader holds about one group of slices
(bounded by ``hoodie.memory.merge.max.size``) rather than the table. The scan is also an Arrow
stream (``__arrow_c_stream__``, the PyCapsule interface): DuckDB (``duckdb.sql("... FROM s")``),
Polars (``polars.from_arrow``) and pyarrow take it without a copy first.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from lakehouse.file_group.file_slice import FileSlice

if TYPE_CHECKING:
    from lakehouse.read.reader import Filter, ReadPlan, TableReader


class TableScan:
    """One read of a table: its plan is made on first use and then kept (a scan reads the table
    as it was then, however often its rows are asked for)."""

    def __init__(self, reader: Callable[[], "TableReader"], *, columns: Sequence[str] | None = None,
                 filters: "Sequence[Filter] | pc.Expression | None" = None, as_of: Any = None,
                 read_optimized: bool = False) -> None:
        self._new_reader = reader
        self.columns = None if columns is None else tuple(columns)
        self.filters = filters
        self.as_of = as_of
        self.read_optimized = read_optimized

    @functools.cached_property
    def _planned(self) -> "tuple[TableReader, ReadPlan]":
        reader = self._new_reader()
        plan = reader.plan_snapshot(as_of=self.as_of, columns=self.columns, filters=self.filters,
                                    read_optimized=self.read_optimized)
        return reader, plan

    @property
    def schema(self) -> pa.Schema:
        """The schema of the rows the scan returns."""
        return self._planned[1].output_schema

    def plan_files(self) -> list[FileSlice]:
        """The file slices the scan reads (after pruning by partition, key and column statistics:
        lakehouse.read.data_skipping), each with its
        base file and log files and their sizes: what an engine distributing the read plans."""
        return list(self._planned[1].slices)

    def to_arrow(self) -> pa.Table:
        reader, plan = self._planned
        return reader.execute(plan)

    def to_batches(self) -> Iterator[pa.RecordBatch]:
        """The rows, merged a group of file slices at a time."""
        reader, plan = self._planned
        schema = plan.output_schema
        for table in reader.stream(plan):
            yield from table.cast(schema).to_batches() if table.schema != schema else table.to_batches()

    def to_arrow_batch_reader(self) -> pa.RecordBatchReader:
        return pa.RecordBatchReader.from_batches(self.schema, self.to_batches())

    def __arrow_c_stream__(self, requested_schema: object = None) -> object:
        return self.to_arrow_batch_reader().__arrow_c_stream__(requested_schema)

    def to_pandas(self, **kwargs: Any):
        return self.to_arrow().to_pandas(**kwargs)

    def to_polars(self):
        import polars as pl  # noqa: PLC0415 - optional: polars

        return pl.from_arrow(self.to_arrow())

    def to_duckdb(self, table_name: str, connection=None):
        """A DuckDB connection (a new in-memory one by default) where ``table_name`` is the scan's
        result, as pyiceberg's ``DataScan.to_duckdb``."""
        import duckdb  # noqa: PLC0415 - optional: duckdb

        con = connection if connection is not None else duckdb.connect(database=":memory:")
        con.register(table_name, self.to_arrow())
        return con

    def __repr__(self) -> str:
        args = [f"{k}={v!r}" for k, v in (("columns", self.columns), ("filters", self.filters),
                                          ("as_of", self.as_of)) if v is not None]
        if self.read_optimized:
            args.append("read_optimized=True")
        return f"TableScan({', '.join(args)})"
