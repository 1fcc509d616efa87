"""lakehouse.inspect.partitions: each partition's rows, log records, files and skew from the
write stats alone, checked against what a read of each partition returns."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

import lakehouse
from lakehouse.inspect.partitions import partitions
from lakehouse.inspect.timeline import instant_facts


def _rows(t, part):
    return t.read(filters=[("p", "=", part)]).num_rows


def test_copy_on_write_rows_per_partition_are_the_reads(tmp_path):
    t = lakehouse.create_table(str(tmp_path / "t"), name="t", table_type="COPY_ON_WRITE", record_key="id",
                               partition_by="p", ordering_field="ts")
    n = 6000
    parts = ["big"] * 4000 + ["mid"] * 1500 + ["small"] * 500
    t.upsert(pa.table({"id": list(range(n)), "p": parts, "ts": [1] * n,
                       "v": [f"{k * 7919 % 100003:06d}-{k}" for k in range(n)]}))
    t.upsert(pa.table({"id": list(range(250, 260)) + [9000], "p": ["big"] * 10 + ["small"], "ts": [2] * 11,
                       "v": ["u"] * 11}))
    t.delete(pa.table({"id": [0, 1], "p": ["big", "big"]}))
    got = {p["partition"]: p for p in partitions(t.file_system_view().latest_slices_for_write(),
                                                  instant_facts(t, archived=True))}
    assert set(got) == {"big", "mid", "small"}
    for part, p in got.items():
        assert p["base_rows"] == _rows(t, part), part
        assert p["log_records"] == 0 and p["log_files"] == 0
    # Bytes over the median partition's.
    assert got["big"]["skew"] > got["mid"]["skew"] == 1.0 > got["small"]["skew"]
    stats = t.stats()
    assert sum(p["file_groups"] for p in got.values()) == stats.file_groups


def test_merge_on_read_counts_the_records_waiting_in_logs(tmp_path):
    t = lakehouse.create_table(str(tmp_path / "t"), name="t", table_type="MERGE_ON_READ", record_key="id",
                               partition_by="p", ordering_field="ts", index="BUCKET",
                               options={"hoodie.bucket.index.num.buckets": 2})
    t.upsert(pa.table({"id": list(range(40)), "p": ["a", "b"] * 20, "ts": [1] * 40}))
    t.compact(force=True)
    t.upsert(pa.table({"id": list(range(10)), "p": ["a", "b"] * 5, "ts": [2] * 10}))
    t.delete(pa.table({"id": [0], "p": ["a"]}))
    got = {p["partition"]: p for p in partitions(t.file_system_view().latest_slices_for_write(),
                                                  instant_facts(t, archived=True))}
    # The compacted base files hold all 40 rows; the logs since hold 10 upserts and one delete.
    assert got["a"]["base_rows"] + got["b"]["base_rows"] == 40
    assert got["a"]["log_records"] == 6 and got["b"]["log_records"] == 5
    assert got["a"]["base_rows"] == pc.sum(pc.equal(t.read(read_optimized=True)["p"], "a")).as_py()
