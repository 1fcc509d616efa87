"""Tables written with the Python API for the Spark tests, and how two tables are compared."""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa

import lakehouse
from lakehouse.table import Table
from tests.interop.hudi_oracle import canonical, hudi_read

COLS = ["id", "city", "ts", "v", "_hoodie_record_key", "_hoodie_partition_path"]
KEYS = [f"k{i:03d}" for i in range(120)]


def _city(key: str) -> str:
    return ("sf", "la", "nyc")[int(key[1:]) % 3]


def batch(keys: list[str], ts: int) -> pa.Table:
    return pa.Table.from_pylist([{"id": k, "city": _city(k), "ts": ts, "v": ts * 1000 + i}
                                 for i, k in enumerate(keys)])


def write_history(path: Path, *, table_type: str = "MERGE_ON_READ", seed: int = 11,
                  index: str = "BUCKET", options: dict | None = None) -> Table:
    """Inserts, updates, deletes and a re-insert over three partitions; the same ``seed`` gives
    the same input, so two tables built alike differ only in their instant times."""
    rnd = random.Random(seed)
    opts = {"hoodie.bucket.index.num.buckets": 2} if index == "BUCKET" else {"hoodie.parquet.small.file.limit": 0}
    opts.update(options or {})
    t = lakehouse.create_table(str(path), name="trips", table_type=table_type, record_key="id",
                               partition_by="city", ordering_field="ts", index=index, options=opts)
    t.bulk_insert(batch(KEYS[:100], 1))
    t.upsert(batch(sorted(rnd.sample(KEYS[:100], 30)) + KEYS[100:110], 2))
    gone = sorted(rnd.sample(KEYS[:100], 8))
    t.delete(pa.table({"id": gone, "city": [_city(k) for k in gone]}))
    t.upsert(batch(sorted(rnd.sample(KEYS, 25)) + gone[:3], 3))
    return t


def late_batch() -> pa.Table:
    return batch(KEYS[5:15] + KEYS[110:], 4)


def rows(table: pa.Table | None) -> list[dict]:
    return canonical(table, COLS)


def assert_same_rows(ours: str | Path, reference: str | Path, *, same_layout: bool = True) -> None:
    """Equal snapshot and read-optimized rows through lakehouse, and hudi-rs reads both alike.

    ``same_layout=False``: records may sit in other file groups than in ``reference`` (an insert
    plan spread by hash, not in input order), so on MOR a read-optimized row may be an older
    version of the record (its update went to a log instead of a merged base file): there the
    read-optimized view must hold the same records, each no newer than in the snapshot."""
    a, b = lakehouse.open_table(str(ours)), lakehouse.open_table(str(reference))
    for ro in (False, True):
        what = "read-optimized" if ro else "snapshot"
        got, want = rows(a.read(read_optimized=ro)), rows(b.read(read_optimized=ro))
        if ro and not same_layout:
            ident = lambda rs: sorted((r["_hoodie_record_key"], r["_hoodie_partition_path"]) for r in rs)  # noqa: E731
            assert ident(got) == ident(want), f"{what} records differ"
            latest = {(r["_hoodie_record_key"], r["_hoodie_partition_path"]): r["ts"] for r in rows(a.read())}
            assert all(r["ts"] <= latest.get((r["_hoodie_record_key"], r["_hoodie_partition_path"]), r["ts"])
                       for r in got), f"{what} row newer than the snapshot's"
        else:
            assert got == want, f"{what} rows differ"
        assert rows(hudi_read(ours, read_optimized=ro)) == got, f"hudi reads another {what} of {ours}"
        assert rows(hudi_read(reference, read_optimized=ro)) == want, f"hudi reads another {what} of {reference}"


def assert_same_tables(ours: str | Path, reference: str | Path) -> None:
    """The same rows (as above) and the same number of file groups, base and log files."""
    assert_same_rows(ours, reference)
    a, b = lakehouse.open_table(str(ours)), lakehouse.open_table(str(reference))
    sa, sb = a.stats(), b.stats()
    assert (sa.file_groups, sa.base_files, sa.log_files, sa.partitions) == \
        (sb.file_groups, sb.base_files, sb.log_files, sb.partitions)
