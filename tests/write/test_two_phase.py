"""The two phases of a write: phase 1 exposes nothing, phase 2 may run in another process and
publishes only what the results list. (Crashes at every fault point: tests/reliability.)"""

from __future__ import annotations

import pyarrow as pa
import pytest

import lakehouse
from tests.interop.hudi_oracle import hudi_read


def batch(keys, ts, city="sf"):
    return pa.table({"id": keys, "city": [city] * len(keys), "ts": [ts] * len(keys),
                     "v": [f"{k}@{ts}" for k in keys]})


def rows(table):
    return sorted((r["id"], r["v"]) for r in table.read(columns=["id", "v"]).to_pylist())


def hudi_rows(path):
    t = hudi_read(path)
    return sorted((r["id"], r["v"]) for r in t.select(["id", "v"]).to_pylist()) if t is not None else []


def test_phase_one_then_commit_in_another_process(tmp_path):
    path = tmp_path / "t"
    t = lakehouse.create_table(str(path), name="c", table_type="MERGE_ON_READ", record_key="id",
                               ordering_field="ts")
    t.upsert(batch(["a"], 1))
    instant = t.upsert(batch(["a", "b"], 2), commit=False)
    assert rows(t) == [("a", "a@1")], "phase 1 alone must not expose data"
    assert hudi_rows(path) == [("a", "a@1")]
    lakehouse.open_table(str(path)).commit(instant)
    assert rows(t) == [("a", "a@2"), ("b", "b@2")]
    assert t.timeline.get(instant).is_completed


def test_commit_removes_files_its_results_do_not_list(tmp_path):
    """A retried task's first attempt leaves a file (with a marker) that the results omit: it
    must not become visible with the commit."""
    from lakehouse.io.markers import Markers, MarkerType
    path = tmp_path / "t"
    t = lakehouse.create_table(str(path), name="c", table_type="COPY_ON_WRITE", record_key="id",
                               partition_by="city", ordering_field="ts")
    t.upsert(batch(["a"], 1))
    instant = t.upsert(batch(["b"], 2), commit=False)
    (stat,) = [s for s in t.active.commit_metadata(t.timeline.get(instant)).write_stats()]
    stray = stat.path.replace(stat.file_id, "00000000-dead-beef-0000-000000000000-0")
    (path / stray).write_bytes((path / stat.path).read_bytes())
    Markers(t.storage, instant).create(stat.partition_path, stray.rsplit("/", 1)[-1], MarkerType.CREATE)
    t.commit(instant)
    assert not (path / stray).exists()
    assert rows(t) == [("a", "a@1"), ("b", "b@2")] == hudi_rows(path)


def test_a_write_committed_in_process_keeps_its_results_and_markers_in_memory(tmp_path, monkeypatch):
    """Hudi's write client keeps its write statuses in memory until it commits: a write
    committed in the same call does not put its results on the inflight instant, and its commit
    takes the markers its own handles made instead of listing them; a file one of them marked
    that the results omit (a retried attempt's) still goes before the commit."""
    from lakehouse.io import handles
    from lakehouse.io.markers import Markers, MarkerType
    from lakehouse.timeline.instant import State
    from lakehouse.write.commit_phase import RESULTS_KEY
    path = tmp_path / "t"
    t = lakehouse.create_table(str(path), name="c", table_type="MERGE_ON_READ", record_key="id",
                               partition_by="city", ordering_field="ts")
    t.upsert(batch(["a"], 1))
    strays = []
    real_create_log = handles._create_log

    def with_a_stray(ctx, partition, name, bump, data):
        stray = f"{partition}/.stray-{ctx.instant_time}.log.1_0-0-0"
        ctx.markers.create(partition, stray.rsplit("/", 1)[-1], MarkerType.CREATE)
        ctx.storage.write(stray, data)
        strays.append(stray)
        return real_create_log(ctx, partition, name, bump, data)
    monkeypatch.setattr(handles, "_create_log", with_a_stray)
    monkeypatch.setattr(Markers, "all", lambda self: pytest.fail("the markers were listed"))
    instant = t.upsert(batch(["a", "b"], 2))
    monkeypatch.undo()
    assert strays and not any((path / s).exists() for s in strays)
    inflight = t.timeline.get(instant).with_state(State.INFLIGHT)
    assert RESULTS_KEY.encode() not in (path / ".hoodie" / inflight.file_name).read_bytes()
    assert rows(t) == [("a", "a@2"), ("b", "b@2")] == hudi_rows(path)
