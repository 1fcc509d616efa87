"""Savepoints: Hudi's file format, and the files they pin survive every clean."""

from __future__ import annotations

import time

import pytest

import lakehouse
from lakehouse.errors import InstantNotFoundError, TimelineError
from lakehouse.services.clean import clean, plan_clean
from lakehouse.services.savepoint import create_savepoint, delete_savepoint, list_savepoints
from lakehouse.timeline.active import Timeline
from tests.interop.hudi_oracle import hudi_read
from tests.services.test_clean import (batch, cfg, completed_writes, data_files, expected_by_commits,
                                       groups_on_disk, history, new_table, read_avro, rows,
                                       snapshot_reads)

_T = "20240101000000000"


def test_timeline_keeps_a_commit_beside_its_savepoint(tmp_path):
    # A savepoint's instant time is its commit's. Directory listing order decides which file a
    # timeline sees first: in either order the commit must stay visible.
    for names in ([f"{_T}.commit", f"{_T}.savepoint"], [f"{_T}.savepoint", f"{_T}.commit"]):
        assert Timeline.from_file_names(names).completed_write_times == {_T}
    path = tmp_path / "t"
    t = new_table(path)
    t.upsert(batch(["a"], 1))
    create_savepoint(t)
    assert rows(lakehouse.open_table(str(path)).read(columns=["id", "v"])) == [("a", "a@1")]


def slice_files_as_of(path, instant) -> set[str]:
    """Files of the slice each file group is read from as of ``instant`` (from names alone)."""
    committed = set(completed_writes(path))
    out = set()
    for slices in groups_on_disk(path).values():
        bases = [b for b in slices if b <= instant and b in committed]
        if bases:
            out |= set(slices[max(bases)])
    return out


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_savepointed_files_survive_cleaning_and_reads_as_of_the_savepoint(tmp_path, table_type,
                                                                          hudi_avro_schemas):
    path = tmp_path / "t"
    t = new_table(path, table_type)
    history(t)
    writes = completed_writes(path)
    s = writes[2]
    pinned = slice_files_as_of(path, s)
    before = snapshot_reads(path, [s, writes[-1]])
    sp = create_savepoint(t, s, user="alice", comments="before the cleanup")
    assert {f"{p}/{n}" for p, names in sp.files.items() for n in names} == pinned

    meta = read_avro(path / ".hoodie" / f"{s}.savepoint", hudi_avro_schemas / "HoodieSavepointMetadata.avsc")
    assert meta["savepointedBy"] == "alice" and meta["comments"] == "before the cleanup"
    assert abs(meta["savepointedAt"] - time.time() * 1000) < 60_000, "epoch milliseconds, as Hudi"
    assert meta["version"] == 1
    assert {f"{p}/{n}" for p, m in meta["partitionMetadata"].items()
            for n in m["savepointDataFile"]} == pinned
    assert all(m["partitionPath"] == p for p, m in meta["partitionMetadata"].items())
    assert (path / ".hoodie" / f"{s}.savepoint.inflight").read_bytes() == b""

    expected = expected_by_commits(path, writes[-1])
    doomed = {f for f in expected if not any(
        f in pinned or set(sl[b]) & pinned for sl in groups_on_disk(path).values()
        for b in sl if f in sl[b])}
    assert doomed and doomed != expected, "the scenario should pin something cleaning would delete"
    res = clean(t, cfg(**{"cleaner.commits.retained": 1}))
    assert res.files_deleted == len(doomed)
    assert pinned <= set(data_files(path)) and not doomed & set(data_files(path))
    assert snapshot_reads(path, [s, writes[-1]]) == before
    assert before[("ours", s, False)] == before[("hudi", s, False)]
    assert [p.instant for p in list_savepoints(t)] == [s]


def test_savepoint_refusals(tmp_path):
    path = tmp_path / "t"
    t = new_table(path)
    with pytest.raises(InstantNotFoundError):
        create_savepoint(t)
    for ts in range(1, 5):
        t.upsert(batch(["a"], ts))
    pending = t.upsert(batch(["a"], 9), commit=False)
    with pytest.raises(InstantNotFoundError):
        create_savepoint(t, pending)
    with pytest.raises(InstantNotFoundError):
        create_savepoint(t, "20000101000000000")
    t.commit(pending)
    writes = completed_writes(path)
    sp = create_savepoint(t)
    assert sp.instant == writes[-1]
    with pytest.raises(TimelineError, match="already savepointed"):
        create_savepoint(t, writes[-1])
    clean(t, cfg(**{"cleaner.commits.retained": 2}))
    with pytest.raises(TimelineError, match="cannot savepoint"):
        create_savepoint(t, writes[1])  # before the earliest retained instant
    create_savepoint(t, writes[-2])
    assert [s.instant for s in list_savepoints(t)] == writes[-2:]


def test_savepoint_refused_after_file_versions_cleaning_deleted_its_files(tmp_path):
    """Hudi checks only the retained-commit window, which this policy leaves empty."""
    path = tmp_path / "t"
    t = new_table(path)
    t.upsert(batch(["a", "b"], 1))
    t.upsert(batch(["x"], 1, "la"))
    t.upsert(batch(["a"], 2))
    t.upsert(batch(["a"], 3))
    writes = completed_writes(path)
    clean(t, cfg(**{"cleaner.policy": "KEEP_LATEST_FILE_VERSIONS", "cleaner.fileversions.retained": 1}))
    for w in writes[:3]:  # each needs an sf slice that is gone
        with pytest.raises(TimelineError, match="were cleaned"):
            create_savepoint(t, w)
    assert create_savepoint(t, writes[3]).instant == writes[3]


def test_deleting_a_savepoint_lets_the_next_clean_reclaim_its_files(tmp_path):
    path = tmp_path / "t"
    t = new_table(path)
    t.upsert(batch(["a", "b"], 1))
    s = t.upsert(batch(["a"], 2))
    t.upsert(batch(["a"], 3))
    t.upsert(batch(["x"], 4, "la"))
    create_savepoint(t, s)
    pinned = slice_files_as_of(path, s)
    c = cfg(**{"cleaner.commits.retained": 1})
    assert clean(t, c).files_deleted == 1
    assert pinned <= set(data_files(path))
    delete_savepoint(t, s)
    assert list_savepoints(t) == [] and not list((path / ".hoodie").glob("*.savepoint*"))
    with pytest.raises(InstantNotFoundError):
        delete_savepoint(t, s)
    # Only la was written since the last clean's earliest retained instant: incremental mode
    # alone would not look at sf, where the savepoint's files are.
    t.upsert(batch(["y"], 5, "la"))
    planned = plan_clean(t, c)
    assert not planned.incremental and "sf" in planned.scanned_partitions
    expected = expected_by_commits(path, completed_writes(path)[-1])
    assert set(planned.files) == expected and pinned & expected
    before = rows(t.read(columns=["id", "v"]))
    clean(t, c)
    assert not expected & set(data_files(path))
    assert rows(t.read(columns=["id", "v"])) == before == rows(hudi_read(path).select(["id", "v"]))
