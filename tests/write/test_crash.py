"""A writer killed (SIGKILL) at every fault point leaves the table readable with committed data
only, and the next write rolls the failed instant back, leaving no orphan files."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lakehouse
from lakehouse.faults import ENV
from tests.interop.hudi_oracle import hudi_read

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

WRITE_POINTS = ["write.after_requested", "write.after_first_marker", "write.mid_data_file",
                "write.after_data_files", "write.after_results", "commit.before_complete",
                "commit.after_complete"]


def batch(keys, ts, city="sf"):
    return pa.table({"id": keys, "city": [city] * len(keys), "ts": [ts] * len(keys),
                     "v": [f"{k}@{ts}" for k in keys]})


def run_killed(path, data_file, point, op="upsert"):
    code = textwrap.dedent(f"""
        import pyarrow.parquet as pq, lakehouse
        t = lakehouse.open_table({str(path)!r})
        t.write(pq.read_table({str(data_file)!r}), {op!r})
    """)
    env = dict(os.environ, **{ENV: f"{point}:kill"}, PYTHONPATH=REPO)
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, timeout=120)
    return proc.returncode


def rows(table):
    return sorted((r["id"], r["v"]) for r in table.read(columns=["id", "v"]).to_pylist())


def hudi_rows(path):
    t = hudi_read(path)
    return sorted((r["id"], r["v"]) for r in t.select(["id", "v"]).to_pylist()) if t is not None else []


def referenced_files(table) -> set[str]:
    out = set()
    for inst in table.timeline.completed_writes():
        out |= {s.path for s in table.active.commit_metadata(inst).write_stats()}
    return out


def data_files(path) -> set[str]:
    out = set()
    for root, dirs, files in os.walk(path):
        dirs[:] = [d for d in dirs if d != ".hoodie"]
        for f in files:
            if f.endswith(".parquet") or ".log." in f:
                out.add(os.path.relpath(os.path.join(root, f), path))
    return out


@pytest.mark.parametrize("table_type", ["MERGE_ON_READ", "COPY_ON_WRITE"])
@pytest.mark.parametrize("point", WRITE_POINTS)
def test_writer_killed_at_fault_point(tmp_path, table_type, point):
    path = tmp_path / "t"
    t = lakehouse.create_table(str(path), name="c", table_type=table_type, record_key="id",
                               partition_by="city", ordering_field="ts", index="SIMPLE")
    t.upsert(batch(["a", "b", "c"], 1))
    before = rows(t)
    data = tmp_path / "b.parquet"
    # Updates and inserts, so both log appends/merges and new base files are in flight.
    pq.write_table(pa.concat_tables([batch(["a", "b"], 2), batch(["x", "y"], 2, "la")]), data)
    assert run_killed(path, data, point) == -9, "the writer should have been killed"

    t = lakehouse.open_table(str(path))
    committed = point == "commit.after_complete"
    after_b = sorted(set(before) - {("a", "a@1"), ("b", "b@1")} |
                     {("a", "a@2"), ("b", "b@2"), ("x", "x@2"), ("y", "y@2")})
    expected = after_b if committed else before
    assert rows(t) == expected
    assert hudi_rows(path) == expected

    # The next write recovers: the failed instant is rolled back and its files are gone.
    t.upsert(batch(["c"], 3))
    expected = sorted([r for r in expected if r[0] != "c"] + [("c", "c@3")])
    assert rows(t) == expected
    assert hudi_rows(path) == expected
    assert not t.timeline.pending().filter(actions=[
        lakehouse.timeline.instant.Action.COMMIT, lakehouse.timeline.instant.Action.DELTA_COMMIT])
    assert data_files(path) <= referenced_files(t), "orphan data files after recovery"
    assert not (path / ".hoodie" / ".temp").exists() or not any((path / ".hoodie" / ".temp").iterdir())


@pytest.mark.parametrize("point", ["rollback.after_plan", "rollback.mid_delete", "rollback.before_complete"])
def test_rollback_killed_midway_is_finished_by_the_next_writer(tmp_path, point):
    path = tmp_path / "t"
    t = lakehouse.create_table(str(path), name="c", table_type="MERGE_ON_READ", record_key="id",
                               partition_by="city", ordering_field="ts")
    t.upsert(batch(["a", "b"], 1))
    data = tmp_path / "b.parquet"
    pq.write_table(pa.concat_tables([batch(["a"], 2), batch(["x", "y"], 2, "la")]), data)
    assert run_killed(path, data, "write.after_results") == -9
    # This writer dies while rolling the failed write back.
    pq.write_table(batch(["z"], 5, "nyc"), data)
    assert run_killed(path, data, point) == -9
    t = lakehouse.open_table(str(path))
    assert rows(t) == [("a", "a@1"), ("b", "b@1")]
    t.upsert(batch(["b"], 9))
    assert rows(t) == [("a", "a@1"), ("b", "b@9")]
    assert hudi_rows(path) == rows(t)
    assert data_files(path) <= referenced_files(t)
    assert not t.timeline.pending()


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
    from lakehouse.write.markers import Markers, MarkerType
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
