"""lakehouse.inspect.health: the table's history replayed from its write stats, checked against
reads of the table as of each instant (the read-optimized view as of an instant holds exactly the
latest base files then) and against ``lakehouse stats``."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

import lakehouse
from lakehouse.iceberg import background
from lakehouse import faults
from lakehouse.inspect.health import file_sizes, history
from lakehouse.inspect.stats import table_stats
from lakehouse.inspect.timeline import instant_facts, timeline_rows


def _batch(keys, ts):
    return pa.table({"id": keys, "p": [f"p{k % 3}" for k in keys], "ts": [ts] * len(keys),
                     "v": [float(ts)] * len(keys)})


def _table(path, table_type, **options):
    return lakehouse.create_table(str(path), name="t", table_type=table_type, record_key="id",
                                  partition_by="p", ordering_field="ts", options=options or None)


def _churn(t, rounds, seed=3):
    rnd = random.Random(seed)
    for n in range(rounds):
        keys = sorted(rnd.sample(range(400), 60))
        if n % 4 == 3:
            t.delete(pa.table({"id": keys[:10], "p": [f"p{k % 3}" for k in keys[:10]]}))
        else:
            t.upsert(_batch(keys, n + 1))


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_rows_after_every_commit_equal_a_read_optimized_read_as_of_it(tmp_path, table_type):
    t = _table(tmp_path / "t", table_type)
    _churn(t, 8)
    if table_type == "MERGE_ON_READ":
        t.compact(force=True)
        _churn(t, 3, seed=9)
    h = history(t)
    writes = [r for r in timeline_rows(t) if r["state"] == "completed" and r["action"] != "clean"]
    assert [p["instant"] for p in h["points"]] == [r["time"] for r in writes]
    for p in h["points"]:
        assert p["rows"] == t.read(as_of=p["instant"], read_optimized=True).num_rows, p
    last, st = h["points"][-1], table_stats(t)
    for k in ("file_groups", "base_bytes", "log_files", "log_bytes"):
        assert last[k] == st[k], k
    if table_type == "COPY_ON_WRITE":
        assert all(p["log_files"] == 0 and p["uncompacted_commits"] == 0 for p in h["points"])
    else:
        comp = next(n for n, p in enumerate(h["points"]) if p["action"] == "compaction")
        before, after = h["points"][comp - 1], h["points"][comp]
        assert before["uncompacted_commits"] > 0 and after["log_files"] == 0
        assert after["rows"] == t.read(as_of=after["instant"]).num_rows  # compacted: exact
        assert h["compactions"][0]["instant"] == after["instant"]
        # The backlog grows by one delta commit per write and is gone at the compaction.
        assert [p["uncompacted_commits"] for p in h["points"][:comp]] == list(range(0, comp))


def test_archived_commits_stay_in_the_history(tmp_path):
    t = _table(tmp_path / "t", "COPY_ON_WRITE", **{"hoodie.keep.min.commits": 2, "hoodie.keep.max.commits": 3,
                                                    "hoodie.cleaner.commits.retained": 1})
    for n in range(8):
        t.upsert(_batch(list(range(n * 10, n * 10 + 20)), n + 1))
        t.clean()
        t.archive()
    facts = instant_facts(t, archived=True)
    assert any(f.row["archived"] for f in facts), "nothing was archived: the test needs archival"
    h = history(t, facts)
    assert len(h["points"]) == 8 and h["points"][-1]["rows"] == t.read().num_rows == 90
    # What each clean freed (lakehouse.services.clean records the bytes in its extra metadata,
    # which the archive keeps), archived cleans too.
    cleans = {f.row["time"]: f.row for f in facts if f.row["action"] == "clean"}
    assert {r["archived"] for r in cleans.values()} == {True, False}
    assert h["cleans"] and all(c["files_deleted"] > 0 and c["bytes_freed"] > 0 for c in h["cleans"])
    assert {c["instant"] for c in h["cleans"]} == {t for t, r in cleans.items() if r["files_deleted"]}


def test_the_archived_replay_is_kept_and_gives_what_a_whole_replay_gives(tmp_path):
    """history() replays the archived instants once per archival (kept by table): each later
    call, after more writes and another archival, equals a replay from nothing."""
    from lakehouse.inspect import health
    t = _table(tmp_path / "t", "MERGE_ON_READ", **{"hoodie.keep.min.commits": 2, "hoodie.keep.max.commits": 3,
                                                    "hoodie.cleaner.commits.retained": 1})

    def fresh():
        health._ARCHIVED_REPLAY.pop(t.path, None)  # noqa: SLF001 - the oracle: no kept replay
        return history(t)

    for n in range(12):
        t.upsert(_batch(list(range(n * 3, n * 3 + 10)), n + 1))
        if n % 3 == 2:
            t.compact(force=True)
            t.clean()
            t.archive()
        if any(f.row["archived"] for f in instant_facts(t, archived=True)):
            kept = history(t)
            assert kept == fresh()
            assert history(t) == kept  # from the kept replay this time
    assert t.path in health._ARCHIVED_REPLAY  # noqa: SLF001


def test_a_completed_instant_is_read_once_then_remembered(tmp_path, monkeypatch):
    t = _table(tmp_path / "t", "MERGE_ON_READ")
    _churn(t, 3)
    background.wait_all()  # its Iceberg publisher reads instants too: done before counting
    first = timeline_rows(t)
    reads = []
    original = type(t.active).read
    monkeypatch.setattr(type(t.active), "read", lambda self, inst: reads.append(inst) or original(self, inst))
    assert timeline_rows(t) == first and reads == []
    _churn(t, 1, seed=5)  # what this handle completes it knows without reading it back
    assert len(timeline_rows(t)) == len(first) + 1 and reads == []
    other = lakehouse.open_table(str(tmp_path / "t"))
    _churn(other, 1, seed=6)
    background.wait_all()
    reads.clear()
    assert len(timeline_rows(t)) == len(first) + 2 and len(reads) <= 1  # another's: read at most once
    reads.clear()
    assert len(timeline_rows(t)) == len(first) + 2 and reads == []  # then remembered


def test_file_sizes_bucket_the_base_files_around_the_small_file_limit(tmp_path):
    t = _table(tmp_path / "t", "COPY_ON_WRITE", **{"hoodie.parquet.small.file.limit": 2000,
                                                    "hoodie.parquet.max.file.size": 1_000_000,
                                                    "hoodie.bloom.index.filter.type": "SIMPLE",
                                                    "hoodie.index.bloom.num_entries": 100})
    _churn(t, 2)
    fs = file_sizes(t)
    sizes = [s.base_size for s in t.file_system_view().latest_slices_for_write()]
    assert fs["files"] == len(sizes) == sum(b["files"] for b in fs["buckets"])
    assert fs["small_files"] == sum(1 for s in sizes if s < 2000)
    assert {2000, 1_000_000} <= {b["to"] for b in fs["buckets"]}
    for b in fs["buckets"]:
        assert b["files"] == sum(1 for s in sizes if s >= b["from"] and (b["to"] is None or s < b["to"]))


def test_a_write_left_before_its_commit_step_is_shown_pending_with_its_phase_one_results(tmp_path):
    """Phase 1 of a two-step write (the Airflow commit task never ran) records its results on
    the inflight instant; a write committed in the same call keeps them in memory, so one that
    crashed shows pending without them."""
    t = _table(tmp_path / "t", "MERGE_ON_READ")
    _churn(t, 2)
    t.upsert(_batch(list(range(5)), 99), commit=False)
    rows = timeline_rows(lakehouse.open_table(t.path))
    pending = [r for r in rows if r["state"] != "completed"]
    assert len(pending) == 1 and pending[0]["records_written"] == 5
    assert len(history(t)["points"]) == 2  # a pending write changes no file slice
    t.rollback(pending[0]["time"])
    faults.activate("write.after_results", "raise")
    try:
        with pytest.raises(faults.InjectedFault):
            t.upsert(_batch(list(range(5)), 100))
    finally:
        faults.reset()
    pending = [r for r in timeline_rows(lakehouse.open_table(t.path)) if r["state"] != "completed"]
    assert len(pending) == 1 and not pending[0].get("records_written")


def test_file_sizes_say_which_buckets_the_next_clustering_splits(tmp_path):
    """A consistent-hashing table: the split threshold is an edge, and the buckets past it (base
    and logs) are what the next clustering splits, as the planner would."""
    import lakehouse
    from lakehouse.config import ClusteringConfig

    t = lakehouse.create_table(str(tmp_path / "t"), name="g", table_type="MERGE_ON_READ", record_key="id",
                               ordering_field="ts", options={"hoodie.parquet.max.file.size": 4096,
                                                             "hoodie.bucket.index.num.buckets": 2,
                                                             "hoodie.parquet.small.file.limit": 0})
    t.upsert(pa.table({"id": [f"k{i:05d}" for i in range(3000)], "ts": list(range(3000))}))
    fs = file_sizes(lakehouse.open_table(t.path))
    resize = fs["resize"]
    assert resize["split_threshold"] == 8192 and 8192 in {b["to"] for b in fs["buckets"]}
    big = [s for s in t.file_system_view().latest_slices() if s.base_size + s.total_log_size > 8192]
    assert resize["to_split"] == len(big) > 0
    res = t.schedule_clustering(force=True)
    plan = t.meta_client.active.clustering_plan(res.instant)
    assert resize["split_into"] == sum(g.num_output_file_groups for g in plan.input_groups)
    assert ClusteringConfig().split_threshold == 2.0
