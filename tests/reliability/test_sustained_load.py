"""Sustained load: many small commits with compaction, cleaning and archival running between
them keep the active timeline, the log backlog and the files on disk bounded, and read latency
flat.

``make test`` runs 120 commits; ``make reliability`` runs 500 (``LAKEHOUSE_SUSTAINED_COMMITS``).
Latency is reported (the curve goes to ``reliability-out/sustained.json`` and the report), never
asserted: shared machines are noisy. What is asserted is what makes a read cost what it costs:
instants on the active timeline, log files a snapshot merges, files kept on disk, all bounded by
the service settings, and every committed record present exactly once at every checkpoint.
"""

from __future__ import annotations

import json
import os
import statistics
import time

import numpy as np
import pyarrow as pa

import lakehouse
from tests.reliability.ledger import output_dir

COMMITS = int(os.environ.get("LAKEHOUSE_SUSTAINED_COMMITS", "120"))
INITIAL = 20_000      # loaded first, so the table's size stays nearly constant
ROWS = 200            # per commit, nine in ten of them updates
MAX_DELTAS = 4        # compaction trigger: delta commits since the last compaction
RETAINED = 3          # clean: commits retained
KEEP = (5, 8)         # archival: min and max commits kept on the active timeline

OPTIONS = {"hoodie.bucket.index.num.buckets": 2,
           "hoodie.compact.inline.max.delta.commits": MAX_DELTAS,
           "hoodie.cleaner.commits.retained": RETAINED,
           "hoodie.keep.min.commits": KEEP[0], "hoodie.keep.max.commits": KEEP[1]}


def _batch(rng: np.random.Generator, i: int, next_id: int) -> tuple[pa.Table, int]:
    n_upd = ROWS * 9 // 10 if next_id else 0
    upd = rng.choice(next_id, n_upd, replace=False) if n_upd else np.zeros(0, np.int64)
    new = np.arange(next_id, next_id + (ROWS - n_upd if next_id else INITIAL))
    ids = np.concatenate([upd, new])
    keys = [f"k{j:07d}" for j in ids]
    table = pa.table({"id": keys, "city": [("sf", "la", "nyc")[j % 3] for j in ids],
                      "ts": pa.array(np.full(len(ids), i), pa.int64()),
                      "v": [f"{k}@{i}" for k in keys]})
    return table, next_id + len(new)


def test_many_small_commits_with_services_stay_bounded(tmp_path, reliability):
    case = reliability.case("load", f"{COMMITS} small commits (MOR, {ROWS} rows each, 90% updates, "
                                    f"on {INITIAL:,} rows) with compaction, clean and archival "
                                    "between them")
    t = lakehouse.create_table(str(tmp_path / "t"), name="load", table_type="MERGE_ON_READ",
                               record_key="id", partition_by="city", ordering_field="ts",
                               index="BUCKET", options=OPTIONS)
    rng = np.random.default_rng(11)
    model: dict[str, str] = {}
    b, next_id = _batch(rng, 0, 0)
    t.bulk_insert(b)
    model.update(zip(b.column("id").to_pylist(), b.column("v").to_pylist()))
    curve = []
    compactions: set[str] = set()
    for i in range(1, COMMITS + 1):
        b, next_id = _batch(rng, i, next_id)
        t.upsert(b)
        model.update(zip(b.column("id").to_pylist(), b.column("v").to_pylist()))
        t.compact()  # schedules only when the trigger says so
        t.clean()
        t.archive()

        timeline = t.timeline
        compactions |= {x.time for x in timeline.instants if x.is_completed and timeline.is_compaction(x.time)}
        slices = t.file_system_view().latest_slices()
        logs = max((len(s.log_files) for s in slices), default=0)
        files = sum(len(fs) for _, _, fs in os.walk(tmp_path / "t" / "sf"))
        start = time.perf_counter()
        snap = t.read(columns=["id", "v"])
        latency = time.perf_counter() - start
        curve.append({"commit": i, "active_instants": len(timeline.instants), "max_logs_per_slice": logs,
                      "files_in_partition": files, "read_s": round(latency, 4), "rows": snap.num_rows})

        # Bounds the services promise, checked at every commit.
        assert len(timeline.instants) <= 4 * KEEP[1], f"commit {i}: active timeline grew to {len(timeline.instants)}"
        assert logs <= MAX_DELTAS + 1, f"commit {i}: a slice holds {logs} log files"
        if i % 20 == 0 or i == COMMITS:
            got = dict(zip(snap.column("id").to_pylist(), snap.column("v").to_pylist()))
            assert snap.num_rows == len(got) == len(model), f"commit {i}: duplicates or missing records"
            assert got == model, f"commit {i}: snapshot differs from the model"

    # Files on disk bounded by retention, not by history: compare the second half with the first.
    half = COMMITS // 2
    files = [c["files_in_partition"] for c in curve]
    assert max(files[half:]) <= 2 * max(files[:half]) + 10, "files on disk keep growing"
    assert len(compactions) >= COMMITS // (MAX_DELTAS + 1) - 1, f"compactions: {len(compactions)}"

    out = output_dir()
    out.mkdir(parents=True, exist_ok=True)
    (out / "sustained.json").write_text(json.dumps({"commits": COMMITS, "options": OPTIONS,
                                                    "curve": curve}, indent=1))
    tenth = max(1, COMMITS // 10)
    first = statistics.median(c["read_s"] for c in curve[:tenth]) * 1000
    last = statistics.median(c["read_s"] for c in curve[-tenth:]) * 1000
    case.records_checked = len(model)
    case.detail = (f"{len(compactions)} compactions; active instants <= {max(c['active_instants'] for c in curve)}, log files per "
                   f"slice <= {max(c['max_logs_per_slice'] for c in curve)}; snapshot read median "
                   f"{first:.0f} ms over the first {tenth} commits, {last:.0f} ms over the last "
                   f"{tenth} ({len(model)} rows; curve in sustained.json)")
