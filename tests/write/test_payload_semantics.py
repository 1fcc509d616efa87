"""Which version of a record wins, within a batch and against the stored one, as Hudi's payload
classes decide it (the table records its payload class in hoodie.properties)."""

from __future__ import annotations

import pyarrow as pa
import pytest

import lakehouse
from tests.interop.hudi_oracle import hudi_read
from tests.model.oracle import Oracle

TYPES = ["MERGE_ON_READ", "COPY_ON_WRITE"]


def _rows(t, cols=("id", "ts", "v")):
    return sorted(tuple(r[c] for c in cols) for r in t.read(columns=list(cols)).to_pylist())


def _hudi(path, cols=("id", "ts", "v")):
    got = hudi_read(path)
    return sorted(tuple(r[c] for c in cols) for r in got.select(list(cols)).to_pylist()) if got else []


@pytest.mark.parametrize("table_type", TYPES)
def test_commit_time_ordering_keeps_a_batchs_greatest_ordering_value(tmp_path, table_type):
    """OverwriteWithLatestAvroPayload.preCombine keeps, among one batch's versions of a key, the
    greatest ordering value (a tie: the later record); combineAndGetUpdateValue then puts the
    incoming record over the stored one whatever its ordering value."""
    p = tmp_path / "t"
    t = lakehouse.create_table(str(p), name="c", record_key="id", ordering_field="ts",
                               merge_mode="COMMIT_TIME_ORDERING", table_type=table_type)
    batch = pa.table({"id": ["a", "a", "b", "b", "c"], "ts": [5, 3, 7, 7, 1],
                      "v": ["a5", "a3", "b7-first", "b7-last", "c1"]})
    t.upsert(batch)
    assert _rows(t) == [("a", 5, "a5"), ("b", 7, "b7-last"), ("c", 1, "c1")] == _hudi(p)
    t.upsert(pa.table({"id": ["a"], "ts": [1], "v": ["a1"]}))  # older, but committed later: wins
    assert _rows(t)[0] == ("a", 1, "a1") and _hudi(p) == _rows(t)
    oracle = Oracle("COMMIT_TIME_ORDERING", "id", "ts")
    oracle.upsert(batch.to_pylist(), "1")
    oracle.upsert([{"id": "a", "ts": 1, "v": "a1"}], "2")
    assert [(r["id"], r["ts"], r["v"]) for r in oracle.rows()] == _rows(t)


def test_event_time_ordering_in_a_batch_is_unchanged(tmp_path):
    """DefaultHoodieRecordPayload: the greatest ordering value wins, in a batch and against the
    stored record alike."""
    t = lakehouse.create_table(str(tmp_path / "t"), name="e", record_key="id", ordering_field="ts")
    t.upsert(pa.table({"id": ["a", "a"], "ts": [5, 3], "v": ["a5", "a3"]}))
    t.upsert(pa.table({"id": ["a"], "ts": [4], "v": ["a4"]}))
    assert _rows(t) == [("a", 5, "a5")]


@pytest.mark.parametrize("table_type", TYPES)
def test_a_partial_update_out_of_order_takes_the_arriving_records_commit_metadata(tmp_path, table_type):
    """PartialUpdateAvroPayload.mergeDisorderRecordsWithMetadata: when a record arrives with a
    lower ordering value, the merged record keeps the stored non-null fields, takes the arriving
    record's values for the stored nulls, and carries the arriving record's meta fields (its
    commit time), so an incremental read shows the change."""
    p = tmp_path / "t"
    schema = pa.schema([("id", pa.string()), ("ts", pa.int64()), ("x", pa.int64()), ("y", pa.string())])
    t = lakehouse.create_table(str(p), name="p", record_key="id", ordering_field="ts",
                               merge_mode="PARTIAL_UPDATE", table_type=table_type)
    first = t.upsert(pa.Table.from_pylist([{"id": "a", "ts": 5, "x": 1, "y": None},
                                           {"id": "b", "ts": 5, "x": 2, "y": "b"}], schema=schema))
    late = t.upsert(pa.Table.from_pylist([{"id": "a", "ts": 3, "x": 9, "y": "late"}], schema=schema))
    want = [("a", 5, 1, "late", late), ("b", 5, 2, "b", first)]
    cols = ("id", "ts", "x", "y", "_hoodie_commit_time")
    assert _rows(t, cols) == want
    changed = t.read_changes(first, columns=["id", "x", "y"]).to_pylist()
    assert changed == [{"id": "a", "x": 1, "y": "late"}]
    if table_type == "MERGE_ON_READ":
        t.compact(force=True)  # the compactor merges the same way
        assert _rows(t, cols) == want
    oracle = Oracle("PARTIAL_UPDATE", "id", "ts")
    oracle.upsert([{"id": "a", "ts": 5, "x": 1, "y": None}, {"id": "b", "ts": 5, "x": 2, "y": "b"}], first)
    oracle.upsert([{"id": "a", "ts": 3, "x": 9, "y": "late"}], late)
    assert [(r["id"], r["ts"], r["x"], r["y"], r["_hoodie_commit_time"]) for r in oracle.rows()] == want
