"""Event-time merging of a MOR file slice, case by case, against hudi-rs and stated expectations.

Hudi merges log blocks among themselves first, then the result against the base record by
ordering value. One consequence users must know: after an unconditional delete (``delete()``),
re-inserting the key with a *lower* ordering value than the base record's brings the base
record back until that base record is rewritten (cases 6 and 8). lakehouse reads exactly as Java
Hudi and hudi-rs do, so every engine shows the same rows.
"""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

import lakehouse
from tests.interop.hudi_oracle import hudi_read

S = pa.schema([("id", pa.string()), ("ts", pa.int64()), ("v", pa.string()),
               ("_hoodie_is_deleted", pa.bool_())])

# (writes: ("u", ts, soft_delete) or ("d",)), expected surviving (ts, writer index) or None
CASES = {
    "soft delete below base ordering is ignored": ([("u", 39, False), ("u", 28, True)], (39, 0)),
    "lower update loses to base": ([("u", 39, False), ("u", 23, False)], (39, 0)),
    "highest log update wins": ([("u", 39, False), ("u", 50, False), ("u", 45, False)], (50, 1)),
    "tombstone beats a lower re-insert": ([("u", 10, False), ("u", 28, True), ("u", 23, False)], None),
    "delete removes": ([("u", 39, False), ("d",)], None),
    "lower re-insert after delete yields base": ([("u", 39, False), ("d",), ("u", 23, False)], (39, 0)),
    "delete after update removes": ([("u", 39, False), ("u", 23, False), ("d",)], None),
    "base returns over delete and re-insert": (
        [("u", 39, False), ("u", 50, False), ("d",), ("u", 23, False)], (39, 0)),
    "higher update survives lower soft delete": ([("u", 10, False), ("u", 50, False), ("u", 30, True)], (50, 1)),
    "higher update after soft delete": ([("u", 10, False), ("u", 30, True), ("u", 50, False)], (50, 2)),
    "soft delete above base beats lower update": ([("u", 39, False), ("u", 50, True), ("u", 45, False)], None),
    "higher re-insert after delete": ([("u", 39, False), ("d",), ("u", 60, False)], (60, 2)),
}


@pytest.mark.interop
@pytest.mark.parametrize("case", sorted(CASES))
def test_event_time_merge_case(tmp_path, case):
    writes, want = CASES[case]
    t = lakehouse.create_table(str(tmp_path / "t"), name="m", record_key="id", ordering_field="ts",
                               index="BUCKET", table_type="MERGE_ON_READ",
                               options={"hoodie.bucket.index.num.buckets": 1})
    for i, w in enumerate(writes):
        if w[0] == "u":
            t.upsert(pa.Table.from_pylist([{"id": "a", "ts": w[1], "v": f"w{i}", "_hoodie_is_deleted": w[2]}],
                                          schema=S))
        else:
            t.delete(pa.table({"id": ["a"]}))
    ours = [(r["ts"], int(r["v"][1:])) for r in t.read(columns=["ts", "v"]).to_pylist()]
    theirs = hudi_read(tmp_path / "t")
    theirs = [(r["ts"], int(r["v"][1:])) for r in theirs.select(["ts", "v"]).to_pylist()] if theirs else []
    assert ours == ([want] if want else [])
    assert theirs == ours


def test_partition_filters_on_url_encoded_partitions(tmp_path):
    t = lakehouse.create_table(str(tmp_path / "t"), name="u", record_key="id", partition_by="p",
                               ordering_field="ts", hive_style_partitioning=True,
                               options={"hoodie.datasource.write.partitionpath.urlencode": "true"})
    t.upsert(pa.table({"id": ["a", "b"], "p": ["a:b", "c/d"], "ts": [1, 1]}))
    assert t.read(columns=["id"], filters=[("p", "=", "a:b")]).column("id").to_pylist() == ["a"]
    assert t.read(columns=["id"], filters=[("p", "=", "c/d")]).column("id").to_pylist() == ["b"]
    assert sorted(os.listdir(tmp_path / "t")) == [".hoodie", "p=a%3Ab", "p=c%2Fd"]


# A key a base file holds twice: inserted with hoodie.combine.before.insert=false.
_NEWER = {"wins": ("W", 9), "loses": ("L", 1), "ties": ("M", 5), "deleted": (None, None)}


def _merged_copies(copies, newer, mode, how):
    """Hudi's answer for one key: ``how="first"`` merges the newer version into the first copy
    only (HoodieKeyBasedFileGroupRecordBuffer, Spark's RecordMergingFileIterator, hudi-rs);
    ``"each"`` into every copy (HoodieMergeHandle.write: COW upserts, 0.14/0.15 compaction)."""
    v, ts = newer
    out = []
    for i, (cv, cts) in enumerate(copies):
        if how == "first" and i > 0:
            out.append((cv, cts))
        elif v is None:
            continue
        elif mode == "COMMIT_TIME_ORDERING" or ts >= cts:
            out.append((v, ts))
        else:
            out.append((cv, cts))
    return sorted(out)


@pytest.mark.parametrize("case", sorted(_NEWER))
@pytest.mark.parametrize("mode", ["EVENT_TIME_ORDERING", "COMMIT_TIME_ORDERING"])
@pytest.mark.parametrize("table_type", ["MERGE_ON_READ", "COPY_ON_WRITE"])
def test_a_key_a_base_file_holds_twice_merges_as_hudi_does(tmp_path, case, mode, table_type):
    p = tmp_path / "t"
    t = lakehouse.create_table(str(p), name="d", table_type=table_type, record_key="id",
                               ordering_field="ts", merge_mode=mode,
                               options={"hoodie.combine.before.insert": "false"})
    copies = [("A", 5), ("B", 6)]
    t.insert(pa.table({"id": ["k1", "k1", "k2"], "v": ["A", "B", "C"], "ts": [5, 6, 5]}))
    v, ts = _NEWER[case]
    if v is None:
        t.delete(pa.table({"id": ["k1"]}))
    else:
        t.upsert(pa.table({"id": ["k1"], "v": [v], "ts": [ts]}))

    def k1(table):
        return sorted((r["v"], r["ts"]) for r in table.to_pylist() if r["id"] == "k1")
    rs = hudi_read(p)
    if table_type == "MERGE_ON_READ":
        assert k1(t.read(columns=["id", "v", "ts"])) == _merged_copies(copies, _NEWER[case], mode, "first")
        assert k1(rs.select(["id", "v", "ts"])) == k1(t.read(columns=["id", "v", "ts"]))
        assert t.compact(force=True).committed
    after = k1(t.read(columns=["id", "v", "ts"]))
    assert after == _merged_copies(copies, _NEWER[case], mode, "each")
    assert k1(hudi_read(p).select(["id", "v", "ts"])) == after
    assert k1(t.read(columns=["id", "v", "ts"], read_optimized=True)) == after
