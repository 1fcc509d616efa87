"""The crash harness: every fault point in a multi-step operation, SIGKILLed there in a
subprocess, then recovered by the next operation and checked against a model.

For each scenario: a table with committed history (the model follows every acknowledged write),
a subprocess that runs one operation with ``LAKEHOUSE_FAULTS=<point>:kill`` and dies at the
point, then the checks:

* right after the crash, lakehouse and hudi-rs read exactly the committed records (the crashed
  operation's effect only where the point comes after its commit completed);
* the next operation recovers (the next write rolls a failed write back, the next compaction
  run redoes an interrupted one, the next clean finishes a pending plan, ...) and afterwards
  nothing is pending, no data file exists that no completed instant accounts for, no marker is
  left, the Iceberg metadata (when published) equals the read-optimized read;
* a further write succeeds and every committed record is present exactly once.

``spark.write_task.after_files`` is exercised by the Spark ingest tests (tests/spark), which
record it in the same ledger.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from typing import Callable

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lakehouse
from lakehouse.config import IcebergConfig, IcebergView
from lakehouse.faults import ENV
from lakehouse.iceberg import background
from tests.interop.hudi_oracle import hudi_read

REPO = pathlib.Path(__file__).resolve().parents[2]

Model = dict[str, str]


def batch(keys, ts, city="sf") -> pa.Table:
    return pa.table({"id": list(keys), "city": [city] * len(keys), "ts": [ts] * len(keys),
                     "v": [f"{k}@{ts}" for k in keys]})


def apply(model: Model, table: pa.Table) -> None:
    for k, v in zip(table.column("id").to_pylist(), table.column("v").to_pylist()):
        model[k] = v


def rows(t) -> list[tuple[str, str]]:
    return sorted((r["id"], r["v"]) for r in t.read(columns=["id", "v"]).to_pylist())


def hudi_rows(path) -> list[tuple[str, str]]:
    h = hudi_read(path)
    return sorted((r["id"], r["v"]) for r in h.select(["id", "v"]).to_pylist()) if h is not None else []


def expect(model: Model) -> list[tuple[str, str]]:
    return sorted(model.items())


def data_files(path: pathlib.Path) -> set[str]:
    out = set()
    for root, dirs, files in os.walk(path):
        dirs[:] = [d for d in dirs if d != ".hoodie"]
        for f in files:
            if f.endswith(".parquet") or ".log." in f:
                out.add(os.path.relpath(os.path.join(root, f), path))
    return out


def unaccounted_files(t, path: pathlib.Path) -> set[str]:
    """Data files that no completed instant on the active timeline wrote, other than files of
    instants archived since (older than the first active instant)."""
    from lakehouse.file_group.naming import BaseFileName, LogFileName
    timeline = t.timeline
    referenced: set[str] = set()
    for inst in timeline.completed_writes():
        referenced |= {s.path for s in t.active.commit_metadata(inst).write_stats()}
    first = min((i.time for i in timeline.instants), default="")
    out = set()
    for f in data_files(path) - referenced:
        name = os.path.basename(f)
        parsed = BaseFileName.parse(name) or LogFileName.parse(name)
        born = parsed.instant_time if isinstance(parsed, BaseFileName) else parsed.base_instant
        if born >= first:
            out.add(f)
    return out


def iceberg_rows(path: pathlib.Path) -> list[tuple[str, str]] | None:
    meta = path / ".hoodie" / "iceberg" / "metadata"
    hint = meta / "version-hint.text"
    if not hint.exists():
        return None
    from pyiceberg.table import StaticTable
    loc = meta / f"v{hint.read_text().strip()}.metadata.json"
    ice = StaticTable.from_metadata(str(loc)).scan(selected_fields=("id", "v")).to_arrow()
    return sorted(zip(ice.column("id").to_pylist(), ice.column("v").to_pylist()))


def run_killed(path: pathlib.Path, code: str, point: str) -> int:
    script = "import pyarrow.parquet as pq, lakehouse\n" \
             f"t = lakehouse.open_table({str(path)!r})\n" + textwrap.dedent(code)
    env = dict(os.environ, **{ENV: f"{point}:kill"}, PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, timeout=180)
    assert proc.returncode == -9, (f"the process should have been killed at {point}: exit "
                                   f"{proc.returncode}\n{proc.stderr.decode()[-3000:]}")
    return proc.returncode


# --- scenarios ------------------------------------------------------------------------------

SERVICE_OPTIONS = {"hoodie.cleaner.commits.retained": 1, "hoodie.keep.min.commits": 2,
                   "hoodie.keep.max.commits": 3}


@dataclass(frozen=True)
class Scenario:
    """``crash``: code run in the subprocess (``t`` is the opened table, ``data`` a parquet file
    of the batch it writes); ``lands``: the crashed write is complete at this point;
    ``recover``: the next operation(s), in-process."""

    name: str
    point: str
    table_type: str
    crash: str
    lands: bool = False
    recover: Callable | None = None
    history: int = 2  # committed upserts before the crash
    compact_first: bool = False  # MOR: compact the history, so a clean has old slices to delete
    detail: str = ""
    index: str | None = None  # the table's index (default: BUCKET for MOR, SIMPLE for COW)


def _next_write(t, model, tmp):
    b = batch(["r1"], 50, "la")
    t.upsert(b)
    apply(model, b)


def _finish_compaction(t, model, tmp):
    pending = t.timeline.pending_compactions()
    assert pending.instants, "the interrupted compaction should still be pending"
    inst = pending.instants[0].time
    t.run_compaction(inst)
    t.commit_compaction(inst)
    _next_write(t, model, tmp)


def _finish_clustering(t, model, tmp):
    pending = t.timeline.pending_clusterings()
    assert pending.instants, "the interrupted clustering should still be pending"
    inst = pending.instants[0].time
    if not t.commit_clustering(inst).committed:  # its results are missing: undone, run again
        t.run_clustering(inst)
        assert t.commit_clustering(inst).committed
    _next_write(t, model, tmp)


def _commit_compaction(t, model, tmp):
    t.commit_compaction(t.timeline.pending_compactions().instants[0].time)
    _next_write(t, model, tmp)


def _clean_again(t, model, tmp):
    t.clean(options=SERVICE_OPTIONS)
    _next_write(t, model, tmp)


def _archive_again(t, model, tmp):
    t.archive(options=SERVICE_OPTIONS)
    _next_write(t, model, tmp)


WRITE = "t.upsert(pq.read_table(data))"
# Points after which the crashed operation has left data files that nothing committed.
LEAVES_FILES = {"write.mid_data_file", "write.after_data_files", "write.after_results",
                "commit.before_complete", "compaction.mid_execute", "compaction.after_execute",
                "compaction.before_commit", "clustering.mid_execute", "clustering.after_execute",
                "clustering.before_commit"}
WRITE_POINTS = [("write.after_requested", False), ("write.after_first_marker", False),
                ("write.mid_data_file", False), ("write.after_data_files", False),
                ("write.after_results", False), ("commit.before_complete", False),
                ("commit.after_complete", True)]


def scenarios() -> list[Scenario]:
    out = []
    for tt in ("MERGE_ON_READ", "COPY_ON_WRITE"):
        short = "MOR" if tt == "MERGE_ON_READ" else "COW"
        for point, lands in WRITE_POINTS:
            out.append(Scenario(f"upsert killed ({short})", point, tt, WRITE, lands, _next_write,
                                detail="completed before the kill: kept" if lands else
                                "invisible; rolled back by the next write"))
        out.append(Scenario(f"upsert killed after its commit, before Iceberg ({short})",
                            "iceberg.before_publish", tt, WRITE, True, _next_write,
                            detail="commit kept; Iceberg caught up by the next commit"))
        out.append(Scenario(f"upsert killed mid Iceberg publish ({short})", "iceberg.mid_publish",
                            tt, WRITE, True, _next_write,
                            detail="commit kept; Iceberg caught up by the next commit"))
        for point in ("rollback.after_plan", "rollback.mid_delete", "rollback.before_complete"):
            out.append(Scenario(f"rollback of a failed upsert killed, finished by the next writer "
                                f"({short})", point, tt, "t.rollback()", False, _next_write,
                                detail="the failed write stays invisible; rollback finished"))
        for point in ("clean.after_plan", "clean.mid_delete", "clean.before_complete"):
            out.append(Scenario(f"clean killed, finished by the next clean ({short})", point, tt,
                                f"t.clean(options={SERVICE_OPTIONS!r})", False, _clean_again, history=4,
                                compact_first=True, detail="rows unchanged; plan finished"))
        out.append(Scenario(f"archive killed, redone by the next archive ({short})",
                            "archive.after_write", tt, f"t.archive(options={SERVICE_OPTIONS!r})",
                            False, _archive_again, history=6, compact_first=True,
                            detail="rows unchanged; archival redone"))
    for point, recover in (("compaction.mid_execute", _finish_compaction),
                           ("compaction.after_execute", _finish_compaction),
                           ("compaction.before_commit", _commit_compaction)):
        out.append(Scenario("compaction killed, redone by the next run (MOR)", point,
                            "MERGE_ON_READ", "t.compact(force=True)", False, recover,
                            detail="rows unchanged; partial base files removed, compaction redone"))
    sort = {"hoodie.clustering.plan.strategy.sort.columns": "v"}
    for tt in ("MERGE_ON_READ", "COPY_ON_WRITE"):
        short = "MOR" if tt == "MERGE_ON_READ" else "COW"
        for point in ("clustering.mid_execute", "clustering.after_execute", "clustering.before_commit"):
            out.append(Scenario(f"clustering killed, redone or committed by the next run ({short})", point,
                                tt, f"t.cluster(force=True, options={sort!r})", False, _finish_clustering,
                                history=3, index="SIMPLE",
                                detail="rows unchanged; partial files removed, clustering redone"))
    return out


SCENARIOS = scenarios()


@pytest.mark.parametrize("sc", SCENARIOS, ids=[f"{s.point}-{s.table_type}" for s in SCENARIOS])
def test_killed_at_fault_point_then_recovered(tmp_path, sc: Scenario, reliability):
    case = reliability.case("crash", sc.name, sc.point)
    path = tmp_path / "t"
    # MOR with the bucket index, so updates go to log files (with SIMPLE, small file groups
    # take them through a merge); COW with Hudi's default index.
    mor = sc.table_type == "MERGE_ON_READ"
    index = sc.index or ("BUCKET" if mor else "SIMPLE")
    t = lakehouse.create_table(str(path), name="c", table_type=sc.table_type, record_key="id",
                               partition_by="city", ordering_field="ts", index=index,
                               options={"hoodie.bucket.index.num.buckets": 2} if index == "BUCKET" else {})
    model: Model = {}
    for i in range(sc.history):
        # Updates and inserts, two partitions: log appends, merges and new file groups.
        b = pa.concat_tables([batch(["a", "b", f"n{i}"], i + 1), batch([f"m{i}"], i + 1, "la")])
        t.upsert(b)
        apply(model, b)
        if sc.compact_first and mor and i == sc.history // 2:
            assert t.compact(force=True).instant
    pending_write = None
    if sc.point.startswith("rollback."):
        # A failed write for the rollback to undo: phase 1 only, never committed.
        pending_write = t.upsert(batch(["a", "zz"], 40), commit=False)
    data = tmp_path / "batch.parquet"
    crashed = pa.concat_tables([batch(["a", "x"], 30), batch(["y"], 30, "la")])
    pq.write_table(crashed, data)
    run_killed(path, f"data = {str(data)!r}\n{sc.crash}", sc.point)
    if sc.lands:
        apply(model, crashed)

    t = lakehouse.open_table(str(path))
    assert rows(t) == expect(model), "after the crash: exactly the committed records"
    assert hudi_rows(path) == expect(model), "hudi-rs after the crash"
    left = unaccounted_files(t, path)
    if sc.point in LEAVES_FILES:
        assert left, "the crash should have left uncommitted files (else the orphan check proves nothing)"

    sc.recover(t, model, tmp_path)
    background.wait_all()  # the recovering write's Iceberg publishing (in the background)
    t = lakehouse.open_table(str(path))
    got = rows(t)
    assert got == expect(model), "after recovery"
    assert hudi_rows(path) == expect(model), "hudi-rs after recovery"
    assert not t.timeline.pending().instants, f"left pending: {t.timeline.pending().instants}"
    if pending_write is not None:
        assert t.timeline.get(pending_write) is None, "the failed write was rolled back"
    assert not unaccounted_files(t, path), "orphan data files after recovery"
    temp = path / ".hoodie" / ".temp"
    assert not temp.exists() or not any(temp.iterdir()), "markers left behind"
    ice = iceberg_rows(path)
    if ice is not None:
        view = IcebergConfig.from_options(t.meta_client.options(None, "iceberg")).view
        shown = t.read(columns=["id", "v"], read_optimized=t.config.is_mor and view is IcebergView.READ_OPTIMIZED)
        assert ice == sorted((r["id"], r["v"]) for r in shown.to_pylist()), \
            f"Iceberg metadata after recovery equals the read of the view it shows ({view})"

    b = batch(["a", "z"], 99)
    t.upsert(b)
    apply(model, b)
    assert rows(t) == expect(model) == hudi_rows(path), "the next write"
    case.records_checked = len(model)
    case.detail = sc.detail
