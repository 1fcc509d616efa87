"""The Iceberg files of a Merge-On-Read table's snapshot view: what its logs add over base files.

Iceberg readers cannot read Hudi's log files, so for each file group whose logs hold records the
snapshot view publishes them as Iceberg v2 files of its own (the "overlay"):

- **row files** (``-l-``): parquet with the table's columns and field ids, holding the records a
  delta commit wrote (its parquet log blocks as they are, or its records merged and written
  again);
- **position delete files** (``-d-``): the rows those keys replace or delete, as (file_path, pos)
  in the group's data files (its base file and earlier row files), one file per instant and
  group; ``referenced_data_file`` names the target when there is one.

They live under ``.hoodie/iceberg/data/<partition hash>/<file id>/`` (no Hudi reader lists the
meta folder; a partition path is user data, so the folder takes its hash, as the manifests'
names do) and are named ``<instant>-<kind>-<nonce>.parquet``: the instant that wrote them, and
a nonce so that racing publishers never write one name twice.
"""

from __future__ import annotations

import io
import re
import secrets
import struct
from dataclasses import dataclass
from typing import Mapping

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lakehouse import layout
from lakehouse.errors import IcebergSyncError
from lakehouse.field_schema import FIELD_ID, Schema, path_ids, with_field_ids
from lakehouse.iceberg.manifest import CONTENT_POSITION_DELETES, DataFile
from lakehouse.iceberg.metrics import Metrics, from_footer
from lakehouse.storage.base import Storage

# Iceberg's reserved field ids of a position delete file's columns (spec, "Reserved Field IDs").
FILE_PATH_ID = 2147483546
POS_ID = 2147483545
DELETE_SCHEMA = pa.schema([
    pa.field("file_path", pa.string(), nullable=False, metadata={FIELD_ID: str(FILE_PATH_ID).encode()}),
    pa.field("pos", pa.int64(), nullable=False, metadata={FIELD_ID: str(POS_ID).encode()}),
])
ROWS, DELETES = "l", "d"

_NAME = re.compile(r"^(?P<instant>\d{8,})-(?P<kind>[ld])-(?P<nonce>[0-9a-f]{12})\.parquet$")
_SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_CODEC = "zstd"


@dataclass(frozen=True)
class OverlayName:
    partition_key: str
    file_id: str
    instant: str
    kind: str  # ROWS or DELETES

    @property
    def group(self) -> tuple[str, str]:
        return self.partition_key, self.file_id


def group_folder(partition_key: str, file_id: str) -> str:
    if not _SAFE_ID.fullmatch(file_id) or ".." in file_id:
        raise IcebergSyncError(f"file id {file_id!r} cannot name a folder of the Iceberg snapshot view",
                               help="the table's file ids are not Hudi's: publish its read-optimized "
                                    "view (hoodie.meta.sync.iceberg.view=read_optimized)")
    return f"{layout.ICEBERG_DATA}/{partition_key}/{file_id}"


def parse(uri: str) -> OverlayName | None:
    """The overlay file ``uri`` names (a table-relative path or a URI), or None."""
    parts = uri.rsplit("/", 3)
    if len(parts) != 4 or not parts[0].endswith(layout.ICEBERG_DATA):
        return None
    _, pkey, file_id, name = parts
    m = _NAME.fullmatch(name)
    if m is None:
        return None
    return OverlayName(pkey, file_id, m.group("instant"), m.group("kind"))


def new_path(partition_key: str, file_id: str, instant: str, kind: str) -> str:
    return f"{group_folder(partition_key, file_id)}/{instant}-{kind}-{secrets.token_hex(6)}.parquet"


@dataclass(frozen=True)
class Written:
    """A file just written: where, and what a manifest entry needs of it."""

    rel: str
    uri: str
    size: int
    rows: int
    footer: pq.FileMetaData


def _write(storage: Storage, rel: str, table: pa.Table) -> Written:
    buf = io.BytesIO()
    pq.write_table(table, buf, compression=_CODEC)
    return write_bytes(storage, rel, buf.getvalue())


def write_bytes(storage: Storage, rel: str, data: bytes) -> Written:
    """A parquet file of ``data`` as it is (a parquet log block's content, say)."""
    storage.create(rel, data)
    footer = pq.read_metadata(io.BytesIO(data))
    return Written(rel, storage.uri(rel), len(data), footer.num_rows, footer)


def write_rows(storage: Storage, partition_key: str, file_id: str, instant: str, rows: pa.Table,
               schema: Schema) -> Written:
    """A row file: ``rows`` with the field ids of ``schema`` (columns it lacks left out)."""
    ids = path_ids(schema)
    keep = [n for n in rows.column_names if (n,) in ids]
    return _write(storage, new_path(partition_key, file_id, instant, ROWS), with_field_ids(rows.select(keep), ids))


def write_deletes(storage: Storage, partition_key: str, file_id: str, instant: str,
                  positions: Mapping[str, np.ndarray]) -> Written:
    """A position delete file of ``positions`` (target data file URI -> row positions), sorted by
    path and position as the spec requires."""
    paths, pos = [], []
    for target in sorted(positions):
        p = np.unique(positions[target].astype(np.int64, copy=False))
        paths.append(pa.repeat(pa.scalar(target, pa.string()), len(p)))
        pos.append(p)
    table = pa.Table.from_arrays([pa.concat_arrays(paths), pa.array(np.concatenate(pos))], schema=DELETE_SCHEMA)
    return _write(storage, new_path(partition_key, file_id, instant, DELETES), table)


def rows_file(w: Written, partition: tuple, schema: Schema, name_ids: Mapping[str, int]) -> DataFile:
    return DataFile(w.uri, partition, w.rows, w.size, from_footer(w.footer, schema, name_ids))


def deletes_file(w: Written, partition: tuple, positions: Mapping[str, np.ndarray]) -> DataFile:
    """The entry of a position delete file: bounds of its ``file_path`` (the first and last
    target: with one target, readers index the file by it, as by ``referenced_data_file``,
    which pyiceberg's v2 reader does not read) and ``pos`` columns; no counts (as Java's
    ``PositionDeleteWriter``)."""
    targets = sorted(positions)
    lo_pos = min(int(p.min()) for p in positions.values())
    hi_pos = max(int(p.max()) for p in positions.values())
    metrics = Metrics.of(lower_bounds={FILE_PATH_ID: targets[0].encode(), POS_ID: struct.pack("<q", lo_pos)},
                         upper_bounds={FILE_PATH_ID: targets[-1].encode(), POS_ID: struct.pack("<q", hi_pos)})
    return DataFile(w.uri, partition, w.rows, w.size, metrics, CONTENT_POSITION_DELETES,
                    targets[0] if len(targets) == 1 else None)
