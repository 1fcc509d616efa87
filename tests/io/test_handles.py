"""Base files and log blocks as the write handles encode them (lakehouse.io.handles)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lakehouse
from tests.write.test_operations import files


def _dictionary_columns(path: str) -> set[str]:
    md = pq.ParquetFile(path).metadata
    rg = md.row_group(0)
    return {rg.column(i).path_in_schema for i in range(rg.num_columns) if rg.column(i).has_dictionary_page}


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_columns_of_distinct_values_are_written_without_a_dictionary(tmp_path, table_type):
    # A dictionary of (nearly) all-distinct values is built up to its page limit and then thrown
    # away; the writer leaves such columns plain and keeps dictionaries where values repeat.
    n = 40_000
    rng = np.random.default_rng(3)
    batch = pa.table({
        "id": [f"k{i:06d}" for i in range(n)],
        "ts": pa.array(rng.integers(0, 1 << 40, n), pa.int64()),
        "lat": rng.uniform(-90, 90, n),
        "city": pa.array(rng.choice(["a", "b", "c"], n)),
        "fare": np.round(rng.gamma(2.0, 12.0, n), 1),  # repeats: ~1,000 distinct values
        "flag": rng.random(n) < 0.5,
        "stops": pa.array([[int(v)] for v in rng.integers(0, 1 << 40, n)], pa.list_(pa.int64())),  # nested: not sampled (no distinct count for lists)
        "p": ["x"] * n,
    })
    table = lakehouse.create_table(str(tmp_path / "t"), name="t", table_type=table_type, record_key="id",
                                   partition_by="p", ordering_field="ts")
    table.bulk_insert(batch)
    [base] = files(tmp_path / "t", lambda name: name.endswith(".parquet"))
    with_dictionary = _dictionary_columns(base)
    assert {"city", "fare", "_hoodie_commit_time", "_hoodie_partition_path"} <= with_dictionary
    assert not with_dictionary & {"ts", "lat", "id", "_hoodie_record_key", "_hoodie_commit_seqno"}
    assert table.read().sort_by("id").select(batch.column_names).equals(batch)


def test_a_small_file_keeps_its_dictionaries(tmp_path):
    # Under twice the sample (16,384 rows) a column is not judged: its dictionary is small anyway.
    n = 1_000
    rng = np.random.default_rng(4)
    batch = pa.table({"id": [f"k{i:04d}" for i in range(n)], "ts": pa.array(rng.integers(0, 1 << 40, n), pa.int64()),
                      "lat": rng.uniform(-90, 90, n), "p": ["x"] * n})
    table = lakehouse.create_table(str(tmp_path / "t"), name="t", table_type="COPY_ON_WRITE", record_key="id",
                                   partition_by="p", ordering_field="ts")
    table.bulk_insert(batch)
    [base] = files(tmp_path / "t", lambda name: name.endswith(".parquet"))
    assert {"ts", "lat"} <= _dictionary_columns(base)
