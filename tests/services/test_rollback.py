"""Rollback on request: newest first, never under a pending instant, crash-safe."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pyarrow as pa
import pytest

import lakehouse
from lakehouse.errors import TimelineError
from lakehouse.faults import ENV
from tests.interop.hudi_oracle import hudi_read

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def rows(t):
    return sorted((r["id"], r["v"]) for r in t.read(columns=["id", "v"]).to_pylist())


def hrows(p):
    h = hudi_read(p)
    return sorted((r["id"], r["v"]) for r in h.select(["id", "v"]).to_pylist()) if h else []


def make(tmp_path, table_type, **kw):
    return lakehouse.create_table(str(tmp_path / "t"), name="r", table_type=table_type, record_key="id",
                                  partition_by="city", ordering_field="ts", **kw)


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
@pytest.mark.parametrize("point", ["rollback.mid_delete", "rollback.before_complete"])
def test_rollback_of_a_completed_write_killed_midway_never_shows_half_a_commit(tmp_path, table_type, point):
    t = make(tmp_path, table_type)
    t.upsert(pa.table({"id": ["a", "b"], "city": ["sf", "la"], "ts": [1, 1], "v": [1, 2]}))
    t.upsert(pa.table({"id": ["a", "b"], "city": ["sf", "la"], "ts": [2, 2], "v": [10, 20]}))
    code = textwrap.dedent(f"""
        import lakehouse
        lakehouse.open_table({str(tmp_path / "t")!r}).rollback()
    """)
    env = dict(os.environ, **{ENV: f"{point}:kill"}, PYTHONPATH=REPO)
    assert subprocess.run([sys.executable, "-c", code], env=env, timeout=120).returncode == -9
    t = lakehouse.open_table(str(tmp_path / "t"))
    assert rows(t) == [("a", 1), ("b", 2)] == hrows(tmp_path / "t")
    t.upsert(pa.table({"id": ["c"], "city": ["sf"], "ts": [3], "v": [3]}))  # finishes the rollback
    assert rows(t) == [("a", 1), ("b", 2), ("c", 3)] == hrows(tmp_path / "t")
    assert not t.timeline.pending()


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_no_rollback_under_a_pending_write(tmp_path, table_type):
    t = make(tmp_path, table_type)
    t.upsert(pa.table({"id": ["a"], "city": ["sf"], "ts": [1], "v": [1]}))
    done = t.upsert(pa.table({"id": ["b"], "city": ["sf"], "ts": [1], "v": [2]}))
    t.upsert(pa.table({"id": ["a"], "city": ["sf"], "ts": [2], "v": [3]}), commit=False)
    with pytest.raises(TimelineError, match="pending"):
        t.rollback(done)
    with pytest.raises(TimelineError, match="latest"):
        t.rollback(t.timeline.completed_writes().first.time)


def test_rolling_back_a_compaction_removes_its_plan(tmp_path):
    t = make(tmp_path, "MERGE_ON_READ", index="BUCKET", options={"hoodie.bucket.index.num.buckets": 1})
    t.upsert(pa.table({"id": ["a", "b"], "city": ["sf", "sf"], "ts": [1, 1], "v": [1, 2]}))
    t.upsert(pa.table({"id": ["a"], "city": ["sf"], "ts": [2], "v": [10]}))
    res = t.compact(force=True)
    t.rollback()
    assert t.timeline.get(res.instant) is None, "the compaction is gone, plan included"
    assert rows(t) == [("a", 10), ("b", 2)] == hrows(tmp_path / "t")
    t.upsert(pa.table({"id": ["b"], "city": ["sf"], "ts": [3], "v": [20]}))
    assert rows(t) == [("a", 10), ("b", 20)] == hrows(tmp_path / "t")
