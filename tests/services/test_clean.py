"""Cleaning: each policy deletes exactly what Hudi's planner would, and every read as of a retained
instant is unchanged, with lakehouse and with hudi-rs. The expected deletions are computed here
from the file names on disk and the timeline file names, sharing no code with the planner."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import textwrap
from collections import defaultdict
from datetime import timedelta

import fastavro
import pyarrow as pa
import pytest

import lakehouse
from lakehouse import faults
from lakehouse.config import CleanConfig
from lakehouse.engine import LocalEngine
from lakehouse.errors import LockTimeoutError
from lakehouse.faults import ENV, InjectedFault
from lakehouse.services.clean import clean, execute_clean, plan_clean
from lakehouse.table import Table
from lakehouse.timeline.avro_files import CompactionOperation, CompactionPlan
from lakehouse.timeline.instant import Action
from lakehouse.timeline.instant_time import parse_instant_time
from tests.conftest import HUDI_AVRO_SCHEMAS, require_shared
from tests.interop.hudi_oracle import hudi_read

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BASE_RE = re.compile(r"^(?P<fid>[^_.][^_]*)_\d+-\d+-\d+_(?P<t>\d{17})\.parquet$")
LOG_RE = re.compile(r"^\.(?P<fid>[^_]+)_(?P<t>\d{17})\.log\.\d+(_\d+-\d+-\d+)?$")


# --- helpers (shared with test_savepoint) --------------------------------------------------------


def cfg(**options) -> CleanConfig:
    return CleanConfig.from_options({f"hoodie.{k}": v for k, v in options.items()})


def batch(keys, ts, city="sf"):
    return pa.table({"id": keys, "city": [city] * len(keys), "ts": [ts] * len(keys),
                     "v": [f"{k}@{ts}" for k in keys]})


def new_table(path, table_type="COPY_ON_WRITE", **options) -> Table:
    return lakehouse.create_table(str(path), name="c", table_type=table_type, record_key="id",
                                  partition_by="city", ordering_field="ts", options=options)


def compact(t: Table) -> None:
    if not hasattr(t, "compact"):
        pytest.skip("compaction is not available")
    t.compact(force=True)


def history(t: Table) -> None:
    """Updates and inserts in two partitions, so file groups get several slices (MOR: compacted
    slices with logs, small-file merges making new base files)."""
    mor = t.config.is_mor
    t.upsert(pa.concat_tables([batch(["a", "b", "c"], 1), batch(["x", "y"], 1, "la")]))
    t.upsert(batch(["d"], 2))
    t.upsert(batch(["a"], 3))
    t.upsert(batch(["x"], 4, "la"))
    if mor:
        compact(t)
    t.upsert(batch(["b"], 5))
    t.upsert(batch(["e"], 6))
    t.upsert(pa.concat_tables([batch(["y"], 7, "la"), batch(["c"], 7)]))
    if mor:
        compact(t)
    t.upsert(batch(["a", "d"], 8))
    t.upsert(batch(["x"], 9, "la"))


def completed_writes(path) -> list[str]:
    names = os.listdir(os.path.join(path, ".hoodie"))
    return sorted(n.split(".")[0] for n in names
                  if re.fullmatch(r"\d{17}\.(commit|deltacommit|replacecommit)", n))


def data_files(path) -> dict[str, int]:
    out = {}
    for root, dirs, files in os.walk(path):
        dirs[:] = [d for d in dirs if d != ".hoodie"]
        for f in files:
            if f.endswith(".parquet") or ".log." in f:
                out[os.path.relpath(os.path.join(root, f), path)] = os.path.getsize(os.path.join(root, f))
    return out


def groups_on_disk(path) -> dict[tuple[str, str], dict[str, list[str]]]:
    """(partition, file id) -> base instant -> files, from file names alone."""
    out: dict = defaultdict(lambda: defaultdict(list))
    for rel in data_files(path):
        part, _, name = rel.rpartition("/")
        m = BASE_RE.match(name) or LOG_RE.match(name)
        out[(part, m["fid"])][m["t"]].append(rel)
    return out


def expected_by_commits(path, earliest: str) -> set[str]:
    doomed = set()
    for slices in groups_on_disk(path).values():
        bases = sorted(slices)
        keep = {bases[-1]} | {b for b in bases if b >= earliest}
        keep |= {max((b for b in bases if b < earliest), default=None)}
        doomed |= {f for b in bases if b not in keep for f in slices[b]}
    return doomed


def expected_by_versions(path, versions: int) -> set[str]:
    return {f for slices in groups_on_disk(path).values()
            for b in sorted(slices)[:-versions] for f in slices[b]}


def rows(table):
    return sorted((r["id"], r["v"]) for r in table.to_pylist()) if table is not None else []


def snapshot_reads(path, instants, *, hudi=True) -> dict:
    """Every read as of each instant: lakehouse and hudi-rs, snapshot and read-optimized."""
    t = lakehouse.open_table(str(path))
    out = {}
    for i in instants:
        for ro in (False, True):
            out[("ours", i, ro)] = rows(t.read(as_of=i, columns=["id", "v"], read_optimized=ro))
            if hudi:
                h = hudi_read(path, as_of=i, read_optimized=ro)
                out[("hudi", i, ro)] = rows(h.select(["id", "v"]) if h is not None else None)
    return out


def read_avro(path, schema_file):
    schema = fastavro.parse_schema(json.loads(schema_file.read_text()))
    with open(path, "rb") as f:
        recs = list(fastavro.reader(io.BytesIO(f.read()), reader_schema=schema))
    assert len(recs) == 1
    return recs[0]


# --- policies ----------------------------------------------------------------------------------


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
@pytest.mark.parametrize("policy", ["KEEP_LATEST_COMMITS", "KEEP_LATEST_BY_HOURS",
                                    "KEEP_LATEST_FILE_VERSIONS"])
def test_policy_deletes_exactly_what_it_should(tmp_path, table_type, policy):
    """Hudi's CleanPlanner.getFilesToCleanKeepingLatestCommits as of 0.14.1 and 0.15 (HUDI-7223):
    for KEEP_LATEST_COMMITS and KEEP_LATEST_BY_HOURS alike, each file group keeps its latest
    slice and the last slice before the earliest instant to retain (the one a read as of that
    instant needs; 0.14.0 kept it for KEEP_LATEST_COMMITS only, and hours-based cleaning broke
    time travel to the window's start). For hours, the earliest instant to retain is the first
    completed commit at or after now - hoodie.cleaner.hours.retained (CleanerUtils)."""
    path = tmp_path / "t"
    t = new_table(path, table_type)
    history(t)
    writes = completed_writes(path)
    now = None
    if policy == "KEEP_LATEST_COMMITS":
        c, earliest = cfg(**{"cleaner.policy": policy, "cleaner.commits.retained": 3}), writes[-3]
        expected = expected_by_commits(path, earliest)
    elif policy == "KEEP_LATEST_BY_HOURS":
        # Hudi measures the window back from the wall clock: "now" is an hour after writes[-4].
        now = parse_instant_time(writes[-4]) + timedelta(hours=1)
        c, earliest = cfg(**{"cleaner.policy": policy, "cleaner.hours.retained": 1}), writes[-4]
        expected = expected_by_commits(path, earliest)
    else:
        c, earliest = cfg(**{"cleaner.policy": policy, "cleaner.fileversions.retained": 2}), ""
        expected = expected_by_versions(path, 2)
    assert expected, "the scenario should leave something to clean"
    before_files = data_files(path)
    retained = [w for w in writes if w >= earliest] if earliest else writes[-1:]
    before = snapshot_reads(path, retained)

    planned = plan_clean(t, c, now=now)
    assert set(planned.files) == expected
    assert planned.bytes == sum(before_files[f] for f in expected)
    p = planned.plan
    assert p.policy == policy
    assert (p.earliest_instant_to_retain.timestamp if p.earliest_instant_to_retain else "") == earliest
    result = execute_clean(t, planned.instant)

    after_files = data_files(path)
    assert set(after_files) == set(before_files) - expected
    assert result.files_deleted == len(expected) and not result.failed_files
    assert result.bytes_freed == sum(before_files.values()) - sum(after_files.values())
    assert result.earliest_retained == earliest
    assert snapshot_reads(path, retained) == before
    for i in retained:  # and both readers agree
        assert before[("ours", i, False)] == before[("hudi", i, False)]
    tl = lakehouse.open_table(str(path)).timeline
    assert tl.get(planned.instant).is_completed
    # Nothing new was written: the trigger says so.
    again = plan_clean(t, c, now=now)
    assert again.instant is None and again.reason.startswith("0 of 1 commits since the last clean")


def test_clean_plan_and_metadata_read_with_hudi_schemas(tmp_path, hudi_avro_schemas):
    path = tmp_path / "t"
    t = new_table(path, "MERGE_ON_READ")
    history(t)
    planned = plan_clean(t, cfg(**{"cleaner.commits.retained": 2}))
    assert planned.instant is not None
    hoodie = path / ".hoodie"
    for schemas in (hudi_avro_schemas, require_shared(HUDI_AVRO_SCHEMAS / "hudi-0.14")):
        plan = read_avro(hoodie / f"{planned.instant}.clean.requested", schemas / "HoodieCleanerPlan.avsc")
        assert plan["version"] == 2 and plan["policy"] == "KEEP_LATEST_COMMITS"
        assert plan["earliestInstantToRetain"] == {"timestamp": completed_writes(path)[-2],
                                                   "action": "deltacommit", "state": "COMPLETED"}
        assert plan["lastCompletedCommitTimestamp"] == completed_writes(path)[-1]
        infos = [i for v in plan["filePathsToBeDeletedPerPartition"].values() for i in v]
        assert sorted(i["filePath"] for i in infos) == sorted(t.storage.uri(f) for f in planned.files)
        assert all(i["isBootstrapBaseFile"] is False for i in infos)
        assert plan["partitionsToBeDeleted"] == []
    execute_clean(t)
    files = {f.rsplit("/", 1)[-1] for f in planned.files}
    for schemas in (hudi_avro_schemas, HUDI_AVRO_SCHEMAS / "hudi-0.14"):
        inflight = read_avro(hoodie / f"{planned.instant}.clean.inflight", schemas / "HoodieCleanerPlan.avsc")
        assert inflight["policy"] == "KEEP_LATEST_COMMITS"
        meta = read_avro(hoodie / f"{planned.instant}.clean", schemas / "HoodieCleanMetadata.avsc")
        assert meta["startCleanTime"] == planned.instant and meta["version"] == 2
        assert meta["totalFilesDeleted"] == len(files) and meta["timeTakenInMillis"] >= 0
        assert meta["earliestCommitToRetain"] == completed_writes(path)[-2]
        parts = meta["partitionMetadata"]
        assert {n for m in parts.values() for n in m["successDeleteFiles"]} == files
        assert {n for m in parts.values() for n in m["deletePathPatterns"]} == files
        assert all(m["policy"] == "KEEP_LATEST_COMMITS" and m["failedDeleteFiles"] == []
                   and m["isPartitionDeleted"] is False and m["partitionPath"] == p
                   for p, m in parts.items())


def test_nothing_to_do_says_why_and_dry_run_writes_nothing(tmp_path):
    path = tmp_path / "t"
    t = new_table(path)
    res = plan_clean(t)
    assert res.instant is None and res.reason == "0 of 1 commits since the table was created (hoodie.clean.max.commits)"
    t.upsert(batch(["a"], 1))
    t.upsert(batch(["a"], 2))
    res = plan_clean(t)
    assert res.instant is None and "2 completed commits" in res.reason and "commits.retained" in res.reason
    res = plan_clean(t, cfg(**{"clean.max.commits": 3}))
    assert res.reason == "2 of 3 commits since the table was created (hoodie.clean.max.commits)"
    t.upsert(batch(["b"], 3, "la"))  # a new file group: nothing older to delete there
    from lakehouse.iceberg import background
    background.wait_all()  # the Iceberg publisher writes under .hoodie after the commit
    hoodie = sorted(os.listdir(path / ".hoodie"))
    files = data_files(path)
    dry = plan_clean(t, cfg(**{"cleaner.commits.retained": 1}), dry_run=True)
    assert dry.dry_run and dry.instant is None and dry.planned and len(dry.files) == 1
    assert sorted(os.listdir(path / ".hoodie")) == hoodie and data_files(path) == files
    assert json.loads(json.dumps(dry.to_json()))["files"] == 1
    hours = plan_clean(t, cfg(**{"cleaner.policy": "KEEP_LATEST_BY_HOURS"}),
                       now=parse_instant_time(completed_writes(path)[-1]) + timedelta(hours=25))
    assert hours.instant is None and "no completed commit since" in hours.reason
    assert execute_clean(t).reason == "no clean is pending"
    assert "3 completed commits" in clean(t).to_json()["reason"]


def test_non_partitioned_table(tmp_path):
    path = tmp_path / "t"
    t = lakehouse.create_table(str(path), name="c", table_type="COPY_ON_WRITE", record_key="id",
                               ordering_field="ts")
    for ts in (1, 2, 3):
        t.upsert(batch(["a", "b"][: ts % 2 + 1], ts))
    expected = expected_by_commits(path, completed_writes(path)[-1])
    before = snapshot_reads(path, completed_writes(path)[-1:])
    planned = plan_clean(t, cfg(**{"cleaner.commits.retained": 1}))
    assert set(planned.plan.file_paths_to_be_deleted_per_partition) == {""}
    assert set(planned.files) == expected and len(expected) == 1
    res = execute_clean(t)
    assert res.files_deleted == 1 and set(data_files(path)).isdisjoint(expected)
    assert snapshot_reads(path, completed_writes(path)[-1:]) == before
    assert (path / ".hoodie_partition_metadata").exists()


def test_hours_window_in_a_local_timeline_timezone():
    from datetime import datetime, timezone
    from lakehouse.services.clean import _cutoff
    now = datetime(2024, 5, 1, 12, 0, 0, 123000, tzinfo=timezone.utc)
    assert _cutoff(now, 2, "UTC") == "20240501100000123"
    local = (now - timedelta(hours=2)).astimezone()
    assert _cutoff(now, 2, "LOCAL") == local.strftime("%Y%m%d%H%M%S") + "123"


# --- what is never deleted -------------------------------------------------------------------


def test_pending_compaction_input_slice_is_never_deleted(tmp_path):
    path = tmp_path / "t"
    t = new_table(path, "MERGE_ON_READ", **{"hoodie.index.type": "SIMPLE"})
    t.upsert(batch(["a", "b"], 1))
    t.upsert(batch(["c"], 2))          # small-file merge: a second base file
    t.upsert(batch(["a"], 3))          # a log on it
    (key, slices), = groups_on_disk(path).items()
    first, base = sorted(slices)
    needed = set(slices[base])
    op = CompactionOperation(file_id=key[1], partition_path=key[0], base_instant_time=base,
                             data_file_path=next(f for f in needed if f.endswith(".parquet")).split("/")[-1],
                             delta_file_paths=tuple(f.split("/")[-1] for f in needed if ".log." in f))
    c = t.active.create_requested(Action.COMPACTION, CompactionPlan(operations=(op,)).to_bytes()).time
    t.upsert(batch(["b"], 4))          # logs under the pending compaction's new slice
    t.upsert(batch(["a"], 5))
    later = [w for w in completed_writes(path) if w > c]
    before = snapshot_reads(path, later)
    # One version kept, and that is the compaction's new slice: Hudi keeps its input as well.
    res = clean(t, cfg(**{"cleaner.policy": "KEEP_LATEST_FILE_VERSIONS",
                          "cleaner.fileversions.retained": 1}))
    assert set(data_files(path)) == set(groups_on_disk(path)[key][c]) | needed
    assert res.files_deleted == len(slices[first]) == 1
    assert snapshot_reads(path, later) == before
    # The hours policy may retain from past the pending compaction: the input is still kept.
    t.upsert(batch(["b"], 6))
    later = [w for w in completed_writes(path) if w > c]
    before = snapshot_reads(path, later)
    now = parse_instant_time(c) + timedelta(hours=1, milliseconds=1)
    planned = plan_clean(t, cfg(**{"cleaner.policy": "KEEP_LATEST_BY_HOURS",
                                   "cleaner.hours.retained": 1}), now=now, dry_run=True)
    assert planned.plan is None and "still needed" in planned.reason
    assert needed <= set(data_files(path))
    assert snapshot_reads(path, later) == before


def test_replaced_file_groups_are_deleted_once_older_than_the_earliest_retained(tmp_path):
    path = tmp_path / "t"
    t = new_table(path)
    t.upsert(pa.concat_tables([batch(["a", "b"], 1), batch(["x"], 1, "la")]))
    t.upsert(batch(["a"], 2))
    old = {f for k, sl in groups_on_disk(path).items() if k[0] == "sf" for fs in sl.values() for f in fs}
    r = t.insert_overwrite(batch(["n"], 3))
    t.upsert(batch(["x"], 4, "la"))
    # The replace commit is the earliest retained instant: Hudi waits until it is older.
    res = plan_clean(t, cfg(**{"cleaner.commits.retained": 2}), dry_run=True)
    assert res.plan is None and res.reason.startswith("nothing to clean")
    t.upsert(batch(["n"], 5))
    retained = completed_writes(path)[-2:]
    assert r < retained[0]
    before = snapshot_reads(path, retained)
    res = clean(t, cfg(**{"cleaner.commits.retained": 2}))
    assert res.files_deleted == len(old) and not old & set(data_files(path))
    assert snapshot_reads(path, retained) == before
    assert rows(lakehouse.open_table(str(path)).read(columns=["id", "v"])) == [("n", "n@5"), ("x", "x@4")]


def _empty_partition_planned(path):
    """A table with an empty partition "nyc" (what a rolled-back write into a new partition
    leaves behind) and a clean planned to delete it."""
    t = new_table(path)
    t.upsert(batch(["a"], 1))
    t.upsert(batch(["a"], 2))
    (path / "nyc").mkdir()
    (path / "nyc" / ".hoodie_partition_metadata").write_text("commitTime=1\npartitionDepth=1\n")
    planned = plan_clean(t, cfg(**{"cleaner.commits.retained": 1}, **{"cleaner.incremental.mode": False}))
    assert planned.plan.partitions_to_be_deleted == ("nyc",)
    return t, planned


def test_empty_partition_is_deleted(tmp_path):
    path = tmp_path / "t"
    t, planned = _empty_partition_planned(path)
    before = rows(t.read(columns=["id", "v"]))
    res = execute_clean(t, planned.instant)
    assert res.partitions_deleted == ("nyc",) and not (path / "nyc").exists()
    assert (path / "sf" / ".hoodie_partition_metadata").exists()
    assert rows(t.read(columns=["id", "v"])) == before == rows(hudi_read(path).select(["id", "v"]))
    meta = read_avro(path / ".hoodie" / f"{planned.instant}.clean",
                     require_shared(HUDI_AVRO_SCHEMAS) / "HoodieCleanMetadata.avsc")
    assert meta["partitionMetadata"]["nyc"]["isPartitionDeleted"] is True


def test_an_empty_partition_a_write_has_begun_on_is_kept(tmp_path):
    """The clean removes a partition it found empty with a recursive delete. A write that began
    after the plan may put its first file there between the clean's last look and that delete,
    which took the file with it: committed, then gone. The partition now stays while any write
    is pending (the check and the delete under the table lock, where writes begin)."""
    path = tmp_path / "t"
    t, planned = _empty_partition_planned(path)
    t.meta_client.active.create_requested(Action.COMMIT)  # a write begins
    storage = t.meta_client.storage
    real, landed = storage.list, []

    def listing_then_the_write_lands(p="", **kw):
        out = real(p, **kw)
        if p == "nyc" and not landed:
            landed.append(path / "nyc" / "its-first-file.parquet")
            landed[0].write_bytes(b"data")
        return out
    storage.list = listing_then_the_write_lands
    res = execute_clean(t, planned.instant)
    del storage.list
    assert res.partitions_deleted == ()
    assert (path / "nyc" / ".hoodie_partition_metadata").exists()
    assert all(f.exists() for f in landed)


def test_removing_an_empty_partition_waits_for_the_table_lock(tmp_path):
    path = tmp_path / "t"
    t, planned = _empty_partition_planned(path)
    other = lakehouse.open_table(str(path), {"hoodie.write.lock.wait_time_ms": 300})
    with t.exclusive():  # another process's hold (a meta client of its own: a lease of its own)
        with pytest.raises(LockTimeoutError):
            execute_clean(other, planned.instant)
        assert (path / "nyc").exists()
    assert execute_clean(other, planned.instant).partitions_deleted == ("nyc",)


def test_a_partition_kept_for_a_pending_write_is_removed_by_the_next_clean(tmp_path):
    """Incremental cleans look at the partitions of recent writes only: a partition the clean
    kept because a write was pending (to any partition) must be looked at again, or the dropped
    partition's folder stays for good."""
    path = tmp_path / "t"
    t = new_table(path)
    t.upsert(batch(["a"], 1))
    t.upsert(batch(["n"], 1, "nyc"))
    t.clean(options={"hoodie.cleaner.commits.retained": 1})  # later cleans are incremental
    t.delete_partitions(["nyc"])
    t.upsert(batch(["a"], 2))
    planned = plan_clean(t, cfg(**{"cleaner.commits.retained": 1}))
    assert planned.plan.partitions_to_be_deleted == ("nyc",) and planned.plan is not None
    pending = t.upsert(batch(["a"], 3), commit=False)  # an ingest's first task; its commit comes later
    assert execute_clean(t, planned.instant).partitions_deleted == ()
    t.commit(pending)
    t.upsert(batch(["a"], 4))
    res = t.clean(options={"hoodie.cleaner.commits.retained": 1})
    assert res.partitions_deleted == ("nyc",) and not (path / "nyc").exists()
    assert rows(t.read(columns=["id", "v"])) == [("a", "a@4")]

# --- incremental mode --------------------------------------------------------------------------


class CountingStorage:
    """Wraps a storage, counting list() calls by path."""

    def __init__(self, inner):
        self._inner = inner
        self.lists = defaultdict(int)

    def list(self, path="", **kw):
        self.lists[path] += 1
        return self._inner.list(path, **kw)

    def __getattr__(self, name):
        return getattr(self._inner, name)


def test_incremental_mode_scans_only_touched_partitions(tmp_path):
    path = tmp_path / "t"
    t = new_table(path)
    cities = ["p0", "p1", "p2", "p3"]
    t.upsert(pa.concat_tables([batch(["a", "b"], 1, c) for c in cities]))
    t.upsert(batch(["a"], 2, "p0"))
    t.upsert(batch(["a"], 3, "p0"))
    c = cfg(**{"cleaner.commits.retained": 1})
    first = plan_clean(t, c)
    assert not first.incremental and set(first.scanned_partitions) == set(cities)
    execute_clean(t)
    t.upsert(batch(["a"], 4, "p0"))
    t.upsert(batch(["b"], 5, "p1"))
    counting = Table(CountingStorage(t.storage), t.config)
    expected = expected_by_commits(path, completed_writes(path)[-1])
    second = plan_clean(counting, c)
    # Written in [previous earliest retained, new earliest retained): p0 only.
    assert second.incremental and second.scanned_partitions == ("p0",)
    # The timeline, the lock folder (its instant is allocated under the lock) and p0.
    assert set(counting.storage.lists) == {".hoodie", ".hoodie/.locks", "p0"}
    assert set(second.files) == expected and all(f.startswith("p0/") for f in expected)
    execute_clean(t)
    t.upsert(batch(["a"], 6, "p2"))
    full = plan_clean(t, cfg(**{"cleaner.commits.retained": 1, "cleaner.incremental.mode": False}),
                      dry_run=True)
    assert not full.incremental and set(full.scanned_partitions) == set(cities)


class FailingStorage(CountingStorage):
    """Refuses to delete one file."""

    def __init__(self, inner, victim):
        super().__init__(inner)
        self.victim = victim

    def delete(self, path, **kw):
        if path == self.victim:
            raise PermissionError(f"cannot delete {path}")
        return self._inner.delete(path, **kw)


def test_a_failed_delete_is_recorded_and_planned_again(tmp_path):
    path = tmp_path / "t"
    t = new_table(path)
    history(t)
    planned = plan_clean(t, cfg(**{"cleaner.commits.retained": 2}))
    victim = planned.files[0]
    res = execute_clean(Table(FailingStorage(t.storage, victim), t.config), planned.instant)
    assert res.failed_files == (victim,) and res.files_deleted == len(planned.files) - 1
    assert "PermissionError" in res.reason and victim in data_files(path)
    meta = read_avro(path / ".hoodie" / f"{planned.instant}.clean",
                     require_shared(HUDI_AVRO_SCHEMAS) / "HoodieCleanMetadata.avsc")
    part = victim.split("/")[0]
    assert meta["partitionMetadata"][part]["failedDeleteFiles"] == [victim.split("/")[-1]]
    t.upsert(batch(["zz"], 99, "la"))
    again = plan_clean(t, cfg(**{"cleaner.commits.retained": 2, "cleaner.incremental.mode": False}))
    assert victim in again.files


# --- crashes and processes ---------------------------------------------------------------------


def _py(code, path, point=None):
    env = dict(os.environ, PYTHONPATH=REPO)
    env.pop(ENV, None)
    if point:
        env[ENV] = f"{point}:kill"
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                          capture_output=True, text=True, timeout=120)


CLEAN_IN_SUBPROCESS = """
    import lakehouse
    from lakehouse.config import CleanConfig
    from lakehouse.services.clean import {fn}
    t = lakehouse.open_table({path!r})
    r = {fn}(t, CleanConfig.from_options({{"hoodie.cleaner.commits.retained": 3}}))
    print(r.instant)
"""


@pytest.mark.parametrize("point", ["clean.after_plan", "clean.mid_delete", "clean.before_complete"])
def test_clean_killed_at_each_point_is_finished_by_the_next(tmp_path, point):
    path = tmp_path / "t"
    t = new_table(path, "MERGE_ON_READ")
    history(t)
    writes = completed_writes(path)
    expected = expected_by_commits(path, writes[-3])
    before_files = data_files(path)
    before = snapshot_reads(path, writes[-3:])
    proc = _py(CLEAN_IN_SUBPROCESS.format(fn="clean", path=str(path)), path, point)
    assert proc.returncode == -9, proc.stderr
    t = lakehouse.open_table(str(path))
    pending = t.timeline.pending().filter(actions=[Action.CLEAN]).instants
    assert len(pending) == 1
    assert set(before_files) - set(data_files(path)) <= expected
    assert snapshot_reads(path, writes[-3:]) == before, "a killed clean lost data"
    assert "still pending" in plan_clean(t).reason
    res = clean(t, cfg(**{"cleaner.commits.retained": 3}))
    assert res.resumed == (pending[0].time,) and res.instant == pending[0].time
    assert set(data_files(path)) == set(before_files) - expected
    assert res.files_deleted == len(expected)
    assert not t.timeline.pending() and t.timeline.get(pending[0].time).is_completed
    assert snapshot_reads(path, writes[-3:]) == before
    assert plan_clean(t).reason.startswith("0 of 1")


def test_raised_fault_mid_delete_leaves_an_inflight_clean(tmp_path):
    path = tmp_path / "t"
    t = new_table(path)
    history(t)
    planned = plan_clean(t, cfg(**{"cleaner.commits.retained": 2}))
    faults.activate("clean.mid_delete", "raise")
    try:
        with pytest.raises(InjectedFault):
            execute_clean(t, engine=LocalEngine("threads", 1))
    finally:
        faults.reset()
    assert t.timeline.get(planned.instant).is_inflight
    res = execute_clean(t, planned.instant, engine=LocalEngine("processes", 2))
    assert res.files_deleted == len(planned.files) and not set(planned.files) & set(data_files(path))


def test_plan_in_one_process_execute_in_another(tmp_path):
    path = tmp_path / "t"
    t = new_table(path)
    history(t)
    expected = expected_by_commits(path, completed_writes(path)[-3])
    proc = _py(CLEAN_IN_SUBPROCESS.format(fn="plan_clean", path=str(path)), path)
    assert proc.returncode == 0, proc.stderr
    instant = proc.stdout.strip()
    assert lakehouse.open_table(str(path)).timeline.get(instant).is_requested
    res = execute_clean(lakehouse.open_table(str(path)), instant)
    assert res.instant == instant and res.files_deleted == len(expected)
    assert not expected & set(data_files(path))
