"""Restore to a savepoint, with compactions and cleans in between."""

from __future__ import annotations

import pyarrow as pa
import pytest

import lakehouse
from lakehouse.errors import InstantNotFoundError, TimelineError
from lakehouse.timeline.instant import Action
from tests.interop.hudi_oracle import hudi_read


def rows(t):
    return sorted((r["id"], r["v"]) for r in t.read(columns=["id", "v"]).to_pylist())


def hrows(p):
    h = hudi_read(p)
    return sorted((r["id"], r["v"]) for r in h.select(["id", "v"]).to_pylist()) if h else []


@pytest.mark.parametrize("table_type", ["MERGE_ON_READ", "COPY_ON_WRITE"])
def test_restore_undoes_every_write_after_the_savepoint(tmp_path, table_type):
    p = tmp_path / "t"
    t = lakehouse.create_table(str(p), name="r", table_type=table_type, record_key="id",
                               ordering_field="ts", index="BUCKET",
                               options={"hoodie.bucket.index.num.buckets": 2})
    t.upsert(pa.table({"id": ["a", "b", "c"], "ts": [1, 1, 1], "v": [1, 2, 3]}))
    t.upsert(pa.table({"id": ["a"], "ts": [2], "v": [10]}))
    saved = rows(t)
    sp = t.create_savepoint()
    t.upsert(pa.table({"id": ["b", "d"], "ts": [3, 3], "v": [20, 40]}))
    if table_type == "MERGE_ON_READ":
        t.compact(force=True)
    t.delete(pa.table({"id": ["c"]}))
    t.upsert(pa.table({"id": ["e"], "ts": [4], "v": [50]}), commit=False)   # pending as well
    t2 = lakehouse.create_table(str(tmp_path / "u"), name="u", record_key="id", ordering_field="ts")
    t2.upsert(pa.table({"id": ["a"], "ts": [1], "v": [1]}))
    t2.create_savepoint()
    with pytest.raises(TimelineError, match="savepoint"):
        t2.rollback()
    with pytest.raises(TimelineError):
        lakehouse.open_table(str(p)).rollback(sp.instant)
    assert [s.instant for s in t.list_savepoints()] == [sp.instant]
    res = t.restore(sp.instant)
    assert len(res.rolled_back) >= 3
    assert rows(t) == saved == hrows(p)
    assert not t.timeline.pending()
    t.upsert(pa.table({"id": ["z"], "ts": [9], "v": [9]}))
    assert rows(t) == sorted(saved + [("z", 9)]) == hrows(p)


def test_restore_needs_a_savepoint(tmp_path):
    t = lakehouse.create_table(str(tmp_path / "t"), name="r", record_key="id", ordering_field="ts")
    i = t.upsert(pa.table({"id": ["a"], "ts": [1], "v": [1]}))
    with pytest.raises(InstantNotFoundError, match="not a savepoint"):
        t.restore(i)


def test_a_restore_past_a_newer_savepoint_is_refused_before_undoing_anything(tmp_path):
    """A restore rolls back every commit after its savepoint, and a savepointed commit must not
    be rolled back (Hudi's BaseRollbackActionExecutor refuses it): the newer savepoint is named
    before anything is undone, not found half-way with the writes after it already gone."""
    t = lakehouse.create_table(str(tmp_path / "t"), name="r", record_key="id", ordering_field="ts")
    old = t.create_savepoint(t.upsert(pa.table({"id": ["a"], "ts": [1], "v": [1]})))
    t.create_savepoint(t.upsert(pa.table({"id": ["a", "b"], "ts": [2, 2], "v": [2, 2]})))
    newest = t.upsert(pa.table({"id": ["c"], "ts": [3], "v": [3]}))
    before = rows(t)
    with pytest.raises(TimelineError, match="newer savepoint") as e:
        t.restore(old)
    assert "delete" in e.value.help
    assert rows(t) == before and newest in t.timeline.completed_write_times
    assert not t.timeline.filter(actions=[Action.ROLLBACK]).instants
    t.delete_savepoint(t.list_savepoints()[-1])
    t.restore(old)
    assert rows(t) == [("a", 1)] == hrows(tmp_path / "t")


def test_savepoints_are_taken_as_create_savepoint_returns_them(tmp_path):
    """create_savepoint returns a Savepoint, not an instant string: restore and delete_savepoint
    take it back as it is."""
    t = lakehouse.create_table(str(tmp_path / "t"), name="r", record_key="id", ordering_field="ts")
    t.upsert(pa.table({"id": ["a"], "ts": [1], "v": [1]}))
    sp = t.create_savepoint()
    t.upsert(pa.table({"id": ["b"], "ts": [1], "v": [2]}))
    t.restore(sp)
    assert sorted(t.read().column("id").to_pylist()) == ["a"]
    t.delete_savepoint(sp)
    assert t.list_savepoints() == []
