"""Which partitions a compaction plan lists (lakehouse.services.compaction.partitions, Hudi's
RFC-83 incremental table service): always every partition holding a file slice with log files,
found from the timeline, never the whole table once a plan has been made."""

from __future__ import annotations

import json
import random

import pyarrow as pa
import pytest

import lakehouse
from lakehouse.file_group.view import FileSystemView
from lakehouse.iceberg import background
from lakehouse.services.compaction import read_plan
from lakehouse.services.compaction.partitions import (MISSING_PARTITIONS_KEY, SCAN_AFTER_KEY,
                                                      partitions_to_scan)
from lakehouse.timeline.avro_files import CompactionPlan
from lakehouse.timeline.instant import Action, Instant, State
from tests.model.oracle import Oracle

COLS = ["id", "p", "ts", "v"]


def _table(path, **options):
    return lakehouse.create_table(str(path), name="c", table_type="MERGE_ON_READ", record_key="id",
                                  partition_by="p", ordering_field="ts",
                                  options={"hoodie.index.bucket.engine": "SIMPLE",
                                           "hoodie.bucket.index.num.buckets": 2, **options})


def _rows(keys, ts):
    return [{"id": f"k{k:04d}", "p": f"p{k % 16:02d}", "ts": ts, "v": float(ts * 1000 + k)} for k in keys]


def _with_logs(t) -> set[str]:
    """The oracle: partitions where a full listing finds a latest slice with log files."""
    meta = t.meta_client
    timeline = meta.active.load()
    view = FileSystemView.load(meta.storage, timeline, meta.active)
    return {s.partition for s in view.latest_slices_for_write() if s.log_files}


def test_every_partition_with_logs_is_scanned_whatever_the_history(tmp_path):
    """Random writes into 16 partitions, compactions bounded by a small I/O budget (so plans
    leave slices behind), plans left pending while writes go on: at each schedule, the
    partitions it scans hold every slice with logs a full listing finds, and the table reads
    as the model."""
    rng = random.Random(43)
    t = _table(tmp_path / "t", **{"hoodie.compaction.target.io": "1"})
    oracle = Oracle("EVENT_TIME_ORDERING", "id", "ts")
    t.upsert(pa.Table.from_pylist(_rows(range(400), 1)))
    oracle.upsert(_rows(range(400), 1), None)
    pending: list[str] = []
    scans = []
    for ts in range(2, 40):
        keys = rng.sample(range(400), rng.randint(1, 30)) if rng.random() < 0.7 else \
            [k for k in range(400) if k % 16 == rng.randrange(16)][:10]
        rows = _rows(keys, ts)
        t.upsert(pa.Table.from_pylist(rows))
        oracle.upsert(rows, None)
        if rng.random() < 0.35:
            background.wait_all()
            meta = t.meta_client
            timeline = meta.active.load()
            scanned = partitions_to_scan(meta, timeline)
            assert scanned is None or _with_logs(t) <= set(scanned), ts
            scans.append(scanned)
            res = t.schedule_compaction(force=True)
            if res.scheduled:
                pending.append(res.instant)
        if pending and rng.random() < 0.5:
            plan = pending.pop(0)
            t.run_compaction(plan)
            t.commit_compaction(plan)
    for plan in pending:
        t.run_compaction(plan)
        t.commit_compaction(plan)
    background.wait_all()
    assert sorted(t.read(columns=COLS).to_pylist(), key=lambda r: r["id"]) == oracle.rows(None, COLS)
    assert scans and scans[0] is not None  # the first plan too: nothing was archived
    assert any(s is not None and len(s) < 16 for s in scans)  # not the whole table each time


def test_a_plan_records_what_it_left_and_from_when(tmp_path):
    t = _table(tmp_path / "t")
    t.upsert(pa.Table.from_pylist(_rows(range(1600), 1)))
    # Logs in all 16 partitions, much bigger in p00-p03 than in the others.
    t.upsert(pa.Table.from_pylist(_rows([k for k in range(1600) if k % 16 < 4 or k < 16], 2)))
    res = t.schedule_compaction(force=True, options={"hoodie.compaction.logfile.size.threshold": "3800"})
    plan = read_plan(t.meta_client, res.instant)
    planned = {o.partition_path for o in plan.operations}
    missing = set(json.loads(plan.extra_metadata[MISSING_PARTITIONS_KEY]))
    assert planned and missing and planned | missing == {f"p{i:02d}" for i in range(16)}
    assert plan.extra_metadata[SCAN_AFTER_KEY] < res.instant


def test_a_plan_without_the_record_or_with_archived_history_lists_the_whole_table(tmp_path):
    t = _table(tmp_path / "t")
    t.upsert(pa.Table.from_pylist(_rows(range(32), 1)))
    t.upsert(pa.Table.from_pylist(_rows(range(8), 2)))
    meta = t.meta_client
    assert partitions_to_scan(meta, meta.active.load()) == [f"p{i:02d}" for i in range(8)]
    # A plan another program wrote (Java Hudi's) says nothing of what it left: list everything.
    timeline = meta.active.load()
    inst = Instant(meta.active.new_instant_time(timeline), Action.COMPACTION, State.REQUESTED)
    meta.storage.create(meta.active.path(inst), CompactionPlan(operations=()).to_bytes())
    assert partitions_to_scan(meta, meta.active.load()) is None
    meta.storage.delete(meta.active.path(inst))
    # Archived instants may hold log writes no timeline file names any more.
    meta.storage.create(f"{meta.active.archive_path}/.commits_.archive.1_1-0-1", b"")
    assert partitions_to_scan(meta, meta.active.load()) is None


@pytest.mark.parametrize("partitions", [4, 64])
def test_planning_a_compaction_of_one_partition_lists_it_alone(tmp_path, partitions):
    """Requests follow the work: after the first plan, a plan for an upsert into one partition
    lists that partition, whatever the table's partition count."""
    t = lakehouse.create_table(str(tmp_path / "t"), name="c", table_type="MERGE_ON_READ", record_key="id",
                               partition_by="p", ordering_field="ts")
    rows = [{"id": f"k{i}", "p": f"p{i % partitions:02d}", "ts": 1, "v": 1.0} for i in range(4 * partitions)]
    t.upsert(pa.Table.from_pylist(rows))
    t.upsert(pa.Table.from_pylist([dict(r, ts=2) for r in rows]))
    t.compact(force=True)
    t.upsert(pa.Table.from_pylist([dict(r, ts=3) for r in rows if r["p"] == "p00"]))
    background.wait_all()
    listed: list[str] = []
    storage = t.meta_client.storage
    real = storage.list

    def counted(path="", **kw):
        listed.append(path)
        return real(path, **kw)
    storage.list = counted
    try:
        res = t.schedule_compaction(force=True)
    finally:
        del storage.list
    assert res.scheduled
    data = [p for p in listed if not p.startswith(".hoodie")]
    assert data == ["p00"], listed
