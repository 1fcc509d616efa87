"""Reads of base files whose string columns have small dictionaries (decoded through them, and
kept as indices while a snapshot read drops the base records its logs replace): the rows equal
an in-memory model and hudi-rs, in the table's types."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lakehouse
from lakehouse.storage.parquet import MIN_ROWS, small_dictionary_columns
from tests.interop.hudi_oracle import assert_same_rows, hudi_read

N = 6 * MIN_ROWS  # ~2x MIN_ROWS per partition


def rows(ids, ts, rng) -> pa.Table:
    n = len(ids)
    return pa.table({
        "id": [f"id-{i:07d}" for i in ids],
        "ts": pa.array(np.full(n, ts), pa.int64()),
        "city": rng.choice(["sf", "nyc", "la"], n).tolist(),  # the partition: one value per file
        "plan": rng.choice(["basic", "plus", None], n).tolist(),  # few values, with nulls
        "note": [f"note-{ts}-{i}" for i in ids],  # distinct: read plain
    })


@pytest.mark.parametrize("table_type", ["MERGE_ON_READ", "COPY_ON_WRITE"])
def test_reads_of_small_dictionary_columns_equal_the_model_and_hudi_rs(tmp_path, table_type):
    rng = np.random.default_rng(5)
    t = lakehouse.create_table(str(tmp_path / "t"), name="d", table_type=table_type, record_key="id",
                               partition_by="city", ordering_field="ts")
    model: dict[str, dict] = {}

    def apply(batch: pa.Table) -> None:
        for r in batch.to_pylist():
            model[r["id"]] = r

    first = rows(range(N), 1, rng)
    t.bulk_insert(first)
    apply(first)
    # The path under test: base files whose string columns the reader takes as dictionaries.
    base = next(p for p in (tmp_path / "t").rglob("*.parquet"))
    pf = pq.ParquetFile(base)
    assert {"_hoodie_file_name", "_hoodie_partition_path", "plan"} <= set(
        small_dictionary_columns(pf, pf.schema_arrow.names))
    # Updates that move a record's plan and note, new keys, then deletes.
    for ts, (lo, hi) in ((2, (0, N // 50)), (3, (N // 100, N // 100 + 3000))):
        batch = rows(range(lo, hi), ts, np.random.default_rng(ts))
        # A record keeps its partition: the city comes from the model for existing keys.
        cities = [model[k]["city"] if k in model else c
                  for k, c in zip(batch.column("id").to_pylist(), batch.column("city").to_pylist())]
        batch = batch.set_column(2, "city", pa.array(cities))
        t.upsert(batch)
        apply(batch)
    gone = [f"id-{i:07d}" for i in range(5, N, 97)]
    t.delete(pa.table({"id": gone, "city": [model[k]["city"] for k in gone]}))
    for k in gone:
        del model[k]

    got = t.read()
    assert got.schema.field("plan").type == pa.string() and got.schema.field("_hoodie_file_name").type == pa.string()
    assert got.column("id").null_count == 0 and got.num_rows == len(model)
    want = sorted(model.values(), key=lambda r: r["id"])
    assert sorted(got.select(list(want[0])).to_pylist(), key=lambda r: r["id"]) == want
    assert_same_rows(got, hudi_read(tmp_path / "t"), "snapshot")
    ro = t.read(read_optimized=True)
    assert ro.schema == got.schema
    assert_same_rows(ro, hudi_read(tmp_path / "t", read_optimized=True), "read-optimized")
