"""Writes from an Arrow stream (issue 40, point 6, first part): ``Table.write`` takes a
``RecordBatchReader`` or anything with ``__arrow_c_stream__``; the stream is spooled to a local
file a batch at a time and read from there (twice when the write is taken in chunks: to check
every row, then to write), so a Merge-On-Read write with the bucket index never holds it whole.
Judges: the same rows written as one table, and hudi-rs."""

from __future__ import annotations

import glob
import os
import tempfile

import numpy as np
import pyarrow as pa
import pytest

import lakehouse
from lakehouse.errors import RecordKeyError
from tests.interop.hudi_oracle import canonical, hudi_read

SMALL = {"write.task.max.size": 0.25, "write.batch.size": 0.0625}  # MB: a 1 MB batch is 4x


def rows(n, start=0, ts=1):
    ids = np.arange(start, start + n)
    return pa.table({"id": [f"k{i:07d}" for i in ids], "city": [["sf", "la", "ny"][i % 3] for i in ids],
                     "ts": pa.array(np.full(n, ts), pa.int64()), "pad": [f"{'x' * 60}{i}" for i in ids]})


class Stream:
    """Only the Arrow C stream protocol (as Polars, DuckDB and nanoarrow objects offer it)."""

    def __init__(self, table: pa.Table, batch_rows: int) -> None:
        self.table, self.batch_rows = table, batch_rows

    def __arrow_c_stream__(self, requested_schema=None):
        reader = pa.RecordBatchReader.from_batches(self.table.schema, self.table.to_batches(self.batch_rows))
        return reader.__arrow_c_stream__(requested_schema)


def make(path, table_type):
    return lakehouse.create_table(str(path), name="s", table_type=table_type, record_key="id",
                                  partition_by="city", ordering_field="ts")


def spooled() -> set[str]:
    return set(glob.glob(os.path.join(tempfile.gettempdir(), f"lakehouse-write-{os.getpid()}-*.parquet")))


@pytest.mark.parametrize("table_type", ["MERGE_ON_READ", "COPY_ON_WRITE"])
@pytest.mark.parametrize("kind", ["reader", "c-stream"])
def test_a_stream_writes_the_table_a_whole_batch_writes(tmp_path, table_type, kind):
    first, second = rows(6000), pa.concat_tables([rows(3000, 3000, ts=2), rows(2000, 9000, ts=2)])
    assert second.nbytes > (1 << 20) // 4  # larger than write.task.max.size: taken in chunks
    before = spooled()
    streamed, whole = make(tmp_path / "s", table_type), make(tmp_path / "w", table_type)
    for t, data in ((streamed, first), (whole, first)):
        t.upsert(data, options=SMALL)
    stream = (pa.RecordBatchReader.from_batches(second.schema, second.to_batches(700))
              if kind == "reader" else Stream(second, 700))
    streamed.upsert(stream, options=SMALL)
    whole.upsert(second, options=SMALL)
    cols = ["id", "city", "ts", "pad"]
    assert canonical(streamed.read(), cols) == canonical(whole.read(), cols)
    assert streamed.read().num_rows == 8000
    assert canonical(hudi_read(streamed.path), cols) == canonical(streamed.read(), cols)
    # (other processes may spool meanwhile: only a leftover of this one counts)
    assert not spooled() - before, "the spooled copy of the stream outlived the write"


def test_a_bad_row_late_in_a_stream_fails_before_any_file(tmp_path):
    t = make(tmp_path / "t", "MERGE_ON_READ")
    t.upsert(rows(100))
    good = rows(8000, 100)
    bad = rows(10, 9000).set_column(0, "id", pa.array([None] * 10, pa.string()))
    data = pa.concat_tables([good, bad])
    files = sorted(glob.glob(str(tmp_path / "t" / "**" / "*"), recursive=True))
    with pytest.raises(RecordKeyError, match="null"):
        t.upsert(pa.RecordBatchReader.from_batches(data.schema, data.to_batches(500)), options=SMALL)
    assert sorted(glob.glob(str(tmp_path / "t" / "**" / "*"), recursive=True)) == files
    assert t.read().num_rows == 100
