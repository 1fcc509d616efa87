"""DuckDB's Iceberg extension as a second outside judge of the published metadata: it finds
columns through the name mapping alone (Hudi's files carry no field ids), so a list's element
must be mapped under Hudi 0.14's name for it (``array``) as well as pyarrow's (``element``)."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pyarrow as pa
import pytest

import lakehouse
from lakehouse.iceberg import sync_iceberg
from tests.iceberg.duckdb_judge import connect
from tests.iceberg.iceberg_oracle import view_read

FIXTURES = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures" / "hudi"


def duckdb_read(metadata_location: str) -> pa.Table:
    """The table's current snapshot as DuckDB's iceberg_scan reads it, extensions loaded from
    their PyPI packages (no download)."""
    con = connect()
    return con.execute(f"SELECT * FROM iceberg_scan('{metadata_location.removeprefix('file://')}')").arrow().read_all()


def _rows(table: pa.Table, columns) -> list[tuple]:
    def plain(v):
        if isinstance(v, list):
            if v and isinstance(v[0], tuple):  # a map, as pyarrow lists it
                return tuple(sorted((k, plain(x)) for k, x in v))
            return tuple(plain(x) for x in v)
        if isinstance(v, dict):
            return tuple(sorted((k, plain(x)) for k, x in v.items()))
        return v
    return sorted(tuple(plain(r[c]) for c in columns) for r in table.select(columns).to_pylist())


def test_duckdb_reads_a_hudi_written_table_with_nested_lists(tmp_path):
    zipped = FIXTURES / "sample_table" / "cow" / "v6_nonpartitioned.zip"
    if not zipped.exists():
        pytest.skip(f"{zipped} is absent (the fixtures live in ../shared beside the repository)")
    with zipfile.ZipFile(zipped) as z:
        z.extractall(tmp_path)
    t = lakehouse.open_table(str(tmp_path / "v6_nonpartitioned"))
    res = sync_iceberg(t.meta_client)
    cols = ["id", "name", "arrayField", "structField"]
    ours = view_read(t)
    theirs = duckdb_read(res.metadata_location)
    assert _rows(theirs, cols) == _rows(ours, cols)
    # Each element is read, not a list of nulls: Hudi names the element "array".
    assert all(e is not None for r in theirs.column("arrayField").to_pylist() for e in r)


def test_duckdb_reads_what_lakehouse_writes_after_each_service(tmp_path):
    t = lakehouse.create_table(str(tmp_path / "t"), name="t", record_key="id", partition_by="city",
                               ordering_field="ts", options={"hoodie.cleaner.commits.retained": 1})

    def batch(ids, ts):
        return pa.table({"id": [f"k{i}" for i in ids], "city": ["sf" if i % 2 else "la" for i in ids],
                         "ts": [ts] * len(ids), "tags": [[f"t{i}", f"u{ts}"] for i in ids],
                         "attrs": pa.array([{"n": i, "s": str(ts)} for i in ids])})
    cols = ["id", "city", "ts", "tags", "attrs"]
    for ts in range(1, 4):
        t.upsert(batch(range(ts * 3, ts * 3 + 6), ts))
    steps = {"writes": lambda: None, "compaction": lambda: t.compact(force=True),
             "clean": lambda: t.clean(), "rollback": lambda: (t.upsert(batch([1, 2], 9)), t.rollback())}
    for what, step in steps.items():
        step()
        res = sync_iceberg(t.meta_client)
        assert _rows(duckdb_read(res.metadata_location), cols) == _rows(view_read(t), cols), what
