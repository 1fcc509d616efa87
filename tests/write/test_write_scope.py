"""A write lists the partitions its records go to, not the table (issue 43: requests that follow
the work). Hudi's non-global indexes (HoodieSimpleIndex, HoodieBucketIndex, HoodieBloomIndex)
look a key up in its record's partition only; a global index (HoodieGlobalSimpleIndex) and
insert_overwrite_table (SparkInsertOverwriteTableCommitActionExecutor) need every partition."""

from __future__ import annotations

import collections

import pyarrow as pa
import pytest

import lakehouse
from lakehouse.storage.local import LocalStorage

NO_ICEBERG = {"hoodie.meta.sync.iceberg.enabled": "false"}


def _table(tmp_path, partitions: int, **options):
    t = lakehouse.create_table(str(tmp_path / f"t{partitions}"), name="t", record_key="id", partition_by="p",
                               ordering_field="ts", table_type=options.pop("table_type", "MERGE_ON_READ"),
                               options={**NO_ICEBERG, **options})
    n = partitions * 5
    t.upsert(pa.table({"id": [f"k{i}" for i in range(n)], "p": [f"p{i % partitions}" for i in range(n)],
                       "ts": [1] * n, "v": ["a"] * n}))
    return t


@pytest.fixture()
def listed(monkeypatch):
    """The folders outside .hoodie that storage listings were asked for, counted."""
    seen: collections.Counter = collections.Counter()
    real = LocalStorage.list

    def spy(self, path="", *, recursive=False):
        if not path.startswith(".hoodie"):
            seen[(path, recursive)] += 1
        return real(self, path, recursive=recursive)

    monkeypatch.setattr(LocalStorage, "list", spy)
    return seen


@pytest.mark.parametrize("table_type,index", [("MERGE_ON_READ", None), ("COPY_ON_WRITE", None),
                                              ("MERGE_ON_READ", "SIMPLE"), ("COPY_ON_WRITE", "BLOOM")])
def test_an_upsert_into_one_partition_lists_that_partition_whatever_the_partition_count(
        tmp_path, listed, table_type, index):
    opts = {"table_type": table_type, **({"hoodie.index.type": index} if index else {})}
    counts = []
    for p in (4, 32):
        t = _table(tmp_path, p, **opts)
        listed.clear()
        t.upsert(pa.table({"id": ["k0", "new"], "p": ["p0", "p0"], "ts": [2, 2], "v": ["b", "b"]}))
        assert {path for path, _ in listed} == {"p0"}, listed
        counts.append(sum(listed.values()))
        got = {r["id"]: r["v"] for r in t.read().to_pylist()}
        assert got["k0"] == got["new"] == "b" and len(got) == p * 5 + 1
    assert counts[0] == counts[1]


def test_a_delete_and_an_insert_overwrite_list_their_partitions_only(tmp_path, listed):
    t = _table(tmp_path, 8)
    listed.clear()
    t.delete(pa.table({"id": ["k1", "k2"], "p": ["p1", "p2"]}))
    assert {path for path, _ in listed} == {"p1", "p2"}
    listed.clear()
    t.insert_overwrite(pa.table({"id": ["x"], "p": ["p3"], "ts": [5], "v": ["z"]}))
    assert {path for path, _ in listed} == {"p3"}
    rows = {r["id"]: r["p"] for r in t.read().to_pylist()}
    assert "k1" not in rows and "k2" not in rows and rows["x"] == "p3"
    assert not any(p == "p3" and k != "x" for k, p in rows.items())  # p3 overwritten
    assert sum(1 for p in rows.values() if p == "p4") == 5  # the others untouched


def test_a_global_index_and_insert_overwrite_table_list_the_whole_table(tmp_path, listed):
    t = _table(tmp_path, 4, **{"hoodie.index.type": "GLOBAL_SIMPLE"})
    listed.clear()
    # A key moving partition: its old record is found in p1 (a global index looks everywhere).
    t.upsert(pa.table({"id": ["k1"], "p": ["p0"], "ts": [2], "v": ["moved"]}))
    assert ("", False) in listed or any(r for _, r in listed)  # the table's top, not one folder
    assert [r["p"] for r in t.read().to_pylist() if r["id"] == "k1"] == ["p0"]

    u = _table(tmp_path / "u", 4)
    listed.clear()
    u.insert_overwrite_table(pa.table({"id": ["only"], "p": ["p0"], "ts": [1], "v": ["x"]}))
    assert ("", False) in listed
    assert [r["id"] for r in u.read().to_pylist()] == ["only"]
