"""Four writers (threads, then processes) making 20 commits each on one table, on disjoint and on
overlapping keys: every acknowledged write is there exactly once (an oracle replays them),
conflicts come back as CommitConflictError naming the winner, and a reader running alongside
never sees a duplicate or a value of a write that was not acknowledged."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import threading

import pytest

from lakehouse.table import create_table, open_table
from lakehouse.timeline.instant import Action
from tests.concurrency.writers import batch, expected_state, run_writer

WRITERS, COMMITS = 4, 20
# On the S3 test server (moto: one process, every listing scans the whole bucket) a commit costs
# ~70 requests and grows with the table, so the S3 runs make fewer commits each; the protocol
# they check is the same.
COMMITS_ON_S3 = 5


def commits(where: str) -> int:
    return COMMITS_ON_S3 if str(where).startswith("s3://") else COMMITS
REPO = pathlib.Path(__file__).resolve().parents[2]


def make(path, table_type, index, retries):
    # Every poll for the lock is a listing: on the (single-threaded) S3 test server, polling
    # as often as on a local disk would keep it too busy to serve the holder.
    poll_ms = 200 if str(path).startswith("s3://") else 10
    create_table(str(path), name="t", record_key="id", partition_by="p", ordering_field="ts",
                 table_type=table_type, index=index, merge_mode="COMMIT_TIME_ORDERING",
                 options={"hoodie.write.concurrency.mode": "OPTIMISTIC_CONCURRENCY_CONTROL",
                          "hoodie.write.num.retries.on.conflict.failures": str(retries),
                          "hoodie.write.commit.retry.min_wait_ms": "10",
                          "hoodie.write.commit.retry.max_wait_ms": "500",
                          "hoodie.write.lock.wait_time_ms_between_retry": str(poll_ms)})


def check_outcome(path, reports: list[dict], overlap: bool) -> None:
    assert len(reports) == WRITERS * commits(path)
    acked = [r for r in reports if "instant" in r]
    conflicts = [r for r in reports if "conflict" in r]
    table = open_table(str(path))
    completed = {i.time for i in table.timeline.completed()}
    for c in conflicts:  # reported as the typed error, naming the instant that won
        assert c["winner"] in completed and (c["file_groups"] or c["keys"]), c
    assert len({a["instant"] for a in acked}) == len(acked), "two writes share an instant"
    writes = {i.time for i in table.timeline.completed().filter(
        actions=[Action.DELTA_COMMIT, Action.COMMIT])} - set(table.timeline.compaction_times)
    assert writes == {a["instant"] for a in acked}, "a commit landed that nobody acknowledged"
    got: dict[tuple[str, str], str] = {}
    for r in table.read().to_pylist():
        assert (r["p"], r["id"]) not in got, f"{r['id']} is in the table twice"
        got[(r["p"], r["id"])] = r["v"]
    assert got == expected_state(acked, overlap)
    assert not table.timeline.pending().filter(actions=[Action.DELTA_COMMIT, Action.COMMIT]).instants


@pytest.fixture
def where(request, tmp_path):
    """The table's location: a local folder, or a bucket on the local S3 server."""
    return request.getfixturevalue("s3_uri") if request.param == "s3" else str(tmp_path)


@pytest.mark.parametrize("where,overlap,table_type,index", [
    ("local", False, "MERGE_ON_READ", "SIMPLE"),
    ("local", True, "COPY_ON_WRITE", "BLOOM"),
    pytest.param("s3", True, "MERGE_ON_READ", "SIMPLE", marks=pytest.mark.long),
], indirect=["where"])
def test_four_writer_threads(where, overlap, table_type, index):
    tmp_path = where
    make(tmp_path, table_type, index, retries=6 if overlap else 4)
    reports: list[dict] = []
    seen: list[dict] = []
    done = threading.Event()

    def reader():
        table = open_table(str(tmp_path))
        # A pause between reads: on the S3 test server (one process) a reader in a tight loop
        # would starve the writers it is meant to watch.
        while not done.wait(0.5 if str(tmp_path).startswith("s3://") else 0.01):
            rows = table.read().to_pylist()
            keys = [(r["p"], r["id"]) for r in rows]
            seen.append({"dups": len(keys) - len(set(keys)), "values": {r["v"] for r in rows}})

    threads = [threading.Thread(target=run_writer, args=(open_table(str(tmp_path)), w, commits(tmp_path),
                                                         overlap, reports.append))
               for w in range(WRITERS)]
    r = threading.Thread(target=reader)
    r.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    done.set()
    r.join()
    check_outcome(tmp_path, reports, overlap)
    acked_values = {f"w{a['w']}-c{a['i']}" for a in reports if "instant" in a}
    assert seen, "the reader never read"
    for s in seen:
        assert s["dups"] == 0 and s["values"] <= acked_values, s


@pytest.mark.parametrize("where,overlap,table_type,index", [
    ("local", False, "MERGE_ON_READ", "BUCKET"),
    ("local", True, "MERGE_ON_READ", "GLOBAL_SIMPLE"),
    pytest.param("s3", False, "COPY_ON_WRITE", "SIMPLE", marks=pytest.mark.long),
], indirect=["where"])
def test_four_writer_processes(where, overlap, table_type, index):
    tmp_path = where
    make(tmp_path, table_type, index, retries=6)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    procs = [subprocess.Popen([sys.executable, str(REPO / "tests/concurrency/writers.py"),
                               str(tmp_path), str(w), str(commits(tmp_path)), "1" if overlap else "0"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for w in range(WRITERS)]
    reports = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-3000:]
        reports += [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    check_outcome(tmp_path, reports, overlap)


def test_the_workload_overlaps_where_it_should():
    """The scenarios above mean something only if overlapping writers share keys."""
    def keys(w, overlap, commits):
        return {(r["p"], r["id"]) for i in commits for r in batch(w, i, overlap)[1].to_pylist()}
    # Writers running side by side touch the same keys within a few commits of each other.
    for i in range(0, COMMITS, 3):
        window = range(i, i + 3)
        assert all(keys(a, True, window) & keys(b, True, window)
                   for a in range(WRITERS) for b in range(a + 1, WRITERS)), i
    every = range(COMMITS)
    assert not any(keys(a, False, every) & keys(b, False, every)
                   for a in range(WRITERS) for b in range(a + 1, WRITERS))
