"""Decoding a parquet file into Arrow, with the string columns of small dictionaries read as
dictionaries.

Arrow's parquet reader turns a dictionary-encoded string column into plain strings value by
value. Reading the column as dictionary indices and then taking the values is ~2.5x faster when
the dictionary is small (100k-row files, 1 to 10k distinct values: 0.35-0.55x the time), about
even at ~20k values and slower past it (Arrow hashes every dictionary value it reads), and
several times slower for a column chunk whose dictionary overflowed, since its plain pages are
hashed value by value into a dictionary. Every Hudi file has such columns:
``_hoodie_file_name`` and ``_hoodie_partition_path`` hold one value per file, as do partition
columns and a bulk insert's commit time.

So a column is read as a dictionary only where every column chunk has a dictionary page of at
most :data:`SMALL_DICTIONARY_PAGE` bytes and at most one byte per eight of its rows (a page's
size bounds its value count from above: a few bytes per compressed value); plain and overflowed
chunks never qualify (no page, or a full one), nor do files of fewer than :data:`MIN_ROWS` rows.

Kept as dictionaries (``keep_dictionaries=True``), a filter moves the columns' 4-byte indices
instead of their strings, and :func:`decode_dictionaries` makes them plain afterwards: a read
that drops rows (a snapshot read dropping the base records that log blocks replace) copies each
kept value once instead of twice.
"""

from __future__ import annotations

from typing import Iterator, Mapping, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from lakehouse.errors import CorruptFileError, LakehouseError, StorageError

SMALL_DICTIONARY_PAGE = 32 << 10
# Below this many rows the footer is not even looked at: reading the few values costs less than
# deciding (~45 us for a 16-column footer; 1,280 file slices of ~160 rows each read 20% slower).
MIN_ROWS = 8192
_ROWS_PER_DICTIONARY_BYTE = 8


def _stringlike(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) \
        or pa.types.is_large_binary(t)


def small_dictionary_columns(pf: pq.ParquetFile, names: Sequence[str]) -> list[str]:
    """The top-level string columns among ``names`` whose every column chunk is dictionary
    encoded with a small dictionary page."""
    md = pf.metadata
    if md.num_rows < MIN_ROWS:
        return []
    arrow = pf.schema_arrow
    leaf = {md.row_group(0).column(j).path_in_schema: j for j in range(md.num_columns)}
    out = []
    for name in names:
        j = leaf.get(name)
        i = arrow.get_field_index(name)
        if j is None or i < 0 or not _stringlike(arrow.field(i).type):
            continue
        for g in range(md.num_row_groups):
            rg = md.row_group(g)
            c = rg.column(j)
            start, data = c.dictionary_page_offset, c.data_page_offset
            if not c.has_dictionary_page or not start or data is None or data <= start:
                break
            if data - start > min(SMALL_DICTIONARY_PAGE, rg.num_rows // _ROWS_PER_DICTIONARY_BYTE):
                break
        else:
            out.append(name)
    return out


def same_by_statistics(md: pq.FileMetaData, a: str, b: str) -> bool:
    """Whether the footer shows top-level columns ``a`` and ``b`` with the same minimum,
    maximum, null count and value count in every row group (no statistics: False)."""
    leaf = {md.row_group(0).column(j).path_in_schema: j for j in range(md.num_columns)} \
        if md.num_row_groups else {}
    ja, jb = leaf.get(a), leaf.get(b)
    if ja is None or jb is None:
        return False
    for g in range(md.num_row_groups):
        rg = md.row_group(g)
        ca, cb = rg.column(ja), rg.column(jb)
        sa, sb = ca.statistics, cb.statistics
        if sa is None or sb is None or not (sa.has_min_max and sb.has_min_max):
            return False
        if (sa.min, sa.max, sa.null_count, ca.num_values) != (sb.min, sb.max, sb.null_count, cb.num_values):
            return False
    return True


# Bytes read at a time from a file read in bounded memory: otherwise a row group's column
# chunks are read whole, compressed, before the first batch is decoded.
STREAM_BUFFER = 1 << 20


def _open(source, columns: Sequence[str] | None, page_checksum_verification: bool,
          copies: Mapping[str, str] | None = None,
          streaming: bool = False) -> tuple[pq.ParquetFile, list[str] | None, dict[str, str]]:
    stream = {"pre_buffer": False, "buffer_size": STREAM_BUFFER} if streaming else {}
    pf = pq.ParquetFile(source, page_checksum_verification=page_checksum_verification, **stream)
    present = pf.schema_arrow.names
    if columns is not None:
        have = set(present)
        columns = [c for c in columns if c in have]
    filled: dict[str, str] = {}
    if copies:
        wanted = columns if columns is not None else present
        filled = {c: src for c, src in copies.items()
                  if c in wanted and src in present and same_by_statistics(pf.metadata, c, src)}
        if filled:
            columns = list(dict.fromkeys(filled.get(c, c) for c in wanted))
    small = small_dictionary_columns(pf, columns if columns is not None else present)
    if small:
        pf = pq.ParquetFile(source, metadata=pf.metadata, read_dictionary=small,
                            page_checksum_verification=page_checksum_verification, **stream)
    return pf, columns, filled


def _fill(table: pa.Table, filled: dict[str, str]) -> pa.Table:
    for c, src in filled.items():
        table = table.append_column(pa.field(c, table.schema.field(src).type), table.column(src))
    return table


def read_parquet(source, columns: Sequence[str] | None = None, *, keep_dictionaries: bool = False,
                 page_checksum_verification: bool = True, copies: Mapping[str, str] | None = None) -> pa.Table:
    """The rows of a parquet file (``source``: a path, a random-access file or a buffer reader):
    ``columns`` only when given, those the file lacks skipped. Its small-dictionary string columns
    are read as dictionaries and, unless ``keep_dictionaries``, made plain before returning.

    ``copies`` maps a column to another that holds the same values by construction (a Hudi
    record key and the one string field a simple key generator makes it from): the column is
    then not decoded but filled from the other, where the footer's statistics agree for every
    row group (else it is decoded). Filled columns come last."""
    pf, columns, filled = _open(source, columns, page_checksum_verification, copies)
    table = _fill(pf.read(columns=columns), filled)
    return table if keep_dictionaries else decode_dictionaries(table)


def iter_parquet(source, columns: Sequence[str] | None, batch_rows: int | None, *, keep_dictionaries: bool = False,
                 page_checksum_verification: bool = True, copies: Mapping[str, str] | None = None,
                 batch_bytes: int | None = None) -> Iterator[pa.Table]:
    """:func:`read_parquet`'s rows ``batch_rows`` at a time (a row group's compressed pages are
    held while its batches are decoded), or, with ``batch_bytes``, as many as take about that
    much memory decoded (from the footer: a row takes about twice its uncompressed parquet size,
    with offsets, validity and dictionaries expanded; measured on string-heavy rows)."""
    pf, columns, filled = _open(source, columns, page_checksum_verification, copies,
                                streaming=batch_bytes is not None)
    if batch_bytes is not None:
        md = pf.metadata
        in_memory = 2 * sum(md.row_group(i).total_byte_size for i in range(md.num_row_groups))
        batch_rows = max(1, md.num_rows if in_memory <= batch_bytes else batch_bytes * md.num_rows // in_memory)
    # One row group at a time: over all of them, pyarrow pre-buffers every row group's column
    # chunks up front (the whole file in memory while its first batch is decoded).
    for rg in range(pf.metadata.num_row_groups):
        for batch in pf.iter_batches(batch_size=batch_rows, columns=columns, row_groups=[rg]):
            table = _fill(pa.Table.from_batches([batch]), filled)
            yield table if keep_dictionaries else decode_dictionaries(table)


def decode_dictionaries(table: pa.Table) -> pa.Table:
    """``table`` with its dictionary columns made plain (their value type)."""
    if not any(pa.types.is_dictionary(t) for t in table.schema.types):
        return table
    fields, columns = [], []
    for f, col in zip(table.schema, table.columns):
        if pa.types.is_dictionary(f.type):
            f = f.with_type(f.type.value_type)
            col = col.cast(f.type)
        fields.append(f)
        columns.append(col)
    return pa.Table.from_arrays(columns, schema=pa.schema(fields, metadata=table.schema.metadata))


def unreadable(storage, path: str, e: Exception) -> LakehouseError:
    """The error for a parquet file ``storage`` could not read (``e``, not a missing file): a
    StorageError where the storage failed (calling the file corrupt would send the user to
    backups over a network failure), else a CorruptFileError naming it."""
    if isinstance(e, StorageError):
        return e
    if storage.is_io_failure(e):
        return StorageError(f"cannot read {storage.uri(path)}: {e}",
                            help="check the storage settings and the network, then retry; "
                                 "the file itself is not known to be damaged")
    return CorruptFileError(storage.uri(path), f"not a readable parquet file ({e})")


def read_metadata(storage, path: str, size: int | None = None) -> pq.FileMetaData:
    """The footer of parquet file ``path`` (``size``: as listed; a missing file raises
    FileNotFoundError; anything else unreadable, :func:`unreadable`'s error)."""
    try:
        with storage.open_input(path, size) as f:
            return pq.read_metadata(f)
    except (pa.ArrowInvalid, OSError) as e:
        if isinstance(e, FileNotFoundError):
            raise
        error = unreadable(storage, path, e)
        if error is e:
            raise
        raise error from e
