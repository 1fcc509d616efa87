"""Stored-key reads of the SIMPLE and BLOOM index lookups (lakehouse.write.index.lookup)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakehouse.columns import RECORD_KEY
from lakehouse.file_group.file_slice import BaseFile
from lakehouse.file_group.naming import BaseFileName
from lakehouse.storage.local import LocalStorage
from lakehouse.write.index.lookup import base_file_keys, stored_keys


def _files(root, n_files: int, rows: int, row_group: int) -> list[BaseFile]:
    out = []
    for i in range(n_files):
        fid = f"0000000{i}-0000-0000-0000-000000000000-0"
        name = f"{fid}_0-1-0_20240101000000000.parquet"
        (root / "p").mkdir(exist_ok=True)
        keys = [f"k{i}-{j:06d}" for j in range(rows)]
        pq.write_table(pa.table({RECORD_KEY: keys, "ts": list(range(rows))}), root / "p" / name,
                       row_group_size=row_group)
        out.append(BaseFile("p", BaseFileName.parse(name), 1))
    return out


def test_keys_read_a_file_at_a_time_are_those_read_together(tmp_path):
    """A bounded write looks each chunk up with one file's keys at a time, filtered as they are
    decoded (every row group, every batch): the same locations as the whole read, filtered."""
    files = _files(tmp_path, 3, 70_000, 30_000)  # batches across row group boundaries
    source = base_file_keys(LocalStorage(str(tmp_path)), "ts")
    wanted = pa.array([f"k{i}-{j:06d}" for i in range(3) for j in (0, 29_999, 30_000, 65_536, 69_999)]
                      + ["k9-000000"])
    whole = stored_keys(source, files, wanted, per_read=2)
    one = stored_keys(source, files, wanted, per_read=1)
    key = lambda t: sorted(zip(t.column("k").to_pylist(), pc.cast(t.column("__lh_loc_file_id"), pa.string()).to_pylist(),
                               t.column("__lh_loc_ordering").to_pylist()))
    assert key(one) == key(whole) and len(key(one)) == 15
    assert (29_999, 30_000) == tuple(sorted(o for k, _, o in key(one) if k in ("k1-029999", "k1-030000")))
    assert stored_keys(source, [], wanted, per_read=1).num_rows == 0
