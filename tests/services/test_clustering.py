"""Clustering in three steps (Hudi's SparkSizeBasedClusteringPlanStrategy and
SparkSortAndSizeExecutionStrategy), against the model and hudi-rs, with writers, compaction,
clean, archival and crashes around it."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lakehouse
from lakehouse.config import ClusteringConfig
from lakehouse.errors import ClusteringUpdateError, CommitConflictError, ConfigError
from lakehouse.faults import ENV
from lakehouse.iceberg import background
from lakehouse.services.clustering import commit_clustering, execute_clustering, schedule_clustering
from lakehouse.timeline.clustering_plan import CLUSTER
from lakehouse.timeline.commit_metadata import CommitMetadata
from lakehouse.timeline.instant import Action, Instant, State
from tests.conftest import HUDI_AVRO_SCHEMAS, require_shared
from tests.interop.hudi_oracle import hudi_read
from tests.model.oracle import Oracle

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLS = ["id", "city", "ts", "v"]
SORT = {"hoodie.clustering.plan.strategy.sort.columns": "v"}


class Fixture:
    """A partitioned table with the SIMPLE index (SIMPLE-engine bucket tables do not cluster). With
    ``hoodie.parquet.small.file.limit=0`` a Merge-On-Read table's updates go to log files."""

    cols = COLS

    def __init__(self, path, table_type="MERGE_ON_READ", **options):
        self.path = path
        self.table = lakehouse.create_table(str(path), name="c", table_type=table_type, record_key="id",
                                            partition_by="city", ordering_field="ts", index="SIMPLE",
                                            options={"hoodie.parquet.small.file.limit": 0, **options})
        self.oracle = Oracle("EVENT_TIME_ORDERING", "id", "ts")
        self.ts = 0

    def rows(self, keys):
        self.ts += 1
        return [{"id": k, "city": "sf" if k < "m" else "la", "ts": self.ts, "v": (self.ts * 7919 + i * 104729) % 100_000}
                for i, k in enumerate(keys)]

    def upsert(self, keys, table=None):
        rows = self.rows(keys)
        t = (table or self.table).upsert(pa.Table.from_pylist(rows))
        self.oracle.upsert(rows, t)
        return t

    def delete(self, keys):
        t = self.table.delete(pa.table({"id": keys, "city": ["sf" if k < "m" else "la" for k in keys]}))
        self.oracle.delete(keys, t)
        return t

    def check(self, *, hudi=True):
        background.wait_all()
        table = lakehouse.open_table(str(self.path))
        ours = sorted(table.read(columns=self.cols).to_pylist(), key=lambda r: r["id"])
        assert ours == self.oracle.rows(None, self.cols)
        if hudi:
            h = hudi_read(self.path)
            assert (sorted(h.select(self.cols).to_pylist(), key=lambda r: r["id"]) if h else []) == ours
        return table

    def history(self, n=4):
        keys = [f"{c}{i:03d}" for c in "aqz" for i in range(40)]
        for i in range(n):
            self.upsert(keys[i * 20: i * 20 + 60])
        self.delete(keys[:5])


@pytest.fixture
def fx(tmp_path):
    return Fixture(tmp_path / "t")


def files_of(path, instant=None):
    return sorted(f for root, _, fs in os.walk(path) if ".hoodie" not in root for f in fs
                  if f.endswith(".parquet") and (instant is None or instant in f))


def slices(table):
    return table.file_system_view().latest_slices()


def test_clustering_merges_each_partitions_small_slices_into_one_file_and_reads_the_same(fx):
    fx.history()
    table = fx.check()
    before = {(s.partition, s.file_id) for s in slices(table)}
    assert len(before) > 2 and any(s.log_files for s in slices(table)), "logs to merge"
    res = fx.table.cluster(force=True)
    assert res.committed and res.file_groups_replaced == len(before)
    table = fx.check()
    after = slices(table)
    assert len(after) == 2 and all(not s.log_files for s in after)  # one file per partition
    assert not {(s.partition, s.file_id) for s in after} & before
    meta = table.meta_client.active.commit_metadata(table.timeline.get(res.instant))
    assert meta.operation_type == CLUSTER
    assert meta.replaced_file_ids() == before
    assert all(s.prev_commit == "null" and s.num_inserts == s.num_writes for s in meta.write_stats())


def test_records_keep_their_commit_times_so_incremental_reads_see_no_new_data(fx):
    fx.history()
    first = fx.oracle.history[0][0]
    changed = sorted(fx.table.read_changes(first, columns=["id"]).column("id").to_pylist())
    t = fx.table.cluster(force=True).instant
    table = fx.check()
    assert sorted(table.read_changes(first, columns=["id"]).column("id").to_pylist()) == changed
    assert table.read_changes(t, columns=["id"]).num_rows == 0


def test_sorted_clustering_writes_files_in_value_order_split_by_the_target_size(fx):
    fx.history()
    # About three files per partition's group.
    target = max(sum(s.base_size for s in slices(fx.table) if s.partition == p) for p in ("sf", "la")) // 3
    opts = {**SORT, "hoodie.clustering.plan.strategy.target.file.max.bytes": target}
    sched = fx.table.schedule_clustering(force=True, options=opts)
    plan = fx.table.meta_client.active.clustering_plan(sched.instant)
    assert plan.sort_columns == ("v",)
    for g in plan.input_groups:  # ceil(bytes of the group / target)
        assert g.num_output_file_groups == -(-round(g.metrics["TOTAL_IO_WRITE_MB"] * 1024 * 1024) // target)
    assert sum(g.num_output_file_groups for g in plan.input_groups) > 2
    fx.table.run_clustering(sched.instant)
    res = fx.table.commit_clustering(sched.instant)
    assert res.files_written == sum(g.num_output_file_groups for g in plan.input_groups)
    table = fx.check()
    for part in ("sf", "la"):
        ranges = []
        for s in slices(table):
            if s.partition != part:
                continue
            v = pq.read_table(str(fx.path / s.base_file.path), columns=["v"]).column("v").to_pylist()
            assert v == sorted(v)
            ranges.append((v[0], v[-1]))
        ranges.sort()
        assert all(a[1] <= b[0] for a, b in zip(ranges, ranges[1:])), "files cover disjoint ranges"


def test_plan_is_hudis_avro_and_names_full_paths(fx):
    schemas = require_shared(HUDI_AVRO_SCHEMAS)
    fx.history(2)
    t = fx.table.schedule_clustering(force=True, options=SORT).instant
    raw = (fx.path / ".hoodie" / f"{t}.replacecommit.requested").read_bytes()
    named: dict = {}
    for name in ("HoodieSliceInfo", "HoodieClusteringGroup", "HoodieClusteringStrategy",
                 "HoodieClusteringPlan", "HoodieRequestedReplaceMetadata"):
        parsed = fastavro.schema.parse_schema(json.loads((schemas / f"{name}.avsc").read_text()),
                                              named_schemas=named)
    rec = next(fastavro.reader(io.BytesIO(raw), reader_schema=parsed))
    assert rec["operationType"] == "CLUSTER"
    plan = rec["clusteringPlan"]
    assert plan["strategy"]["strategyClassName"].endswith("SparkSortAndSizeExecutionStrategy")
    assert plan["strategy"]["strategyParams"]["hoodie.clustering.plan.strategy.sort.columns"] == "v"
    assert plan["preserveHoodieMetadata"] is True
    for g in plan["inputGroups"]:
        assert set(g["metrics"]) == {"TOTAL_IO_READ_MB", "TOTAL_IO_WRITE_MB", "TOTAL_IO_MB",
                                     "TOTAL_LOG_FILES_SIZE", "TOTAL_LOG_FILES"}
        for s in g["slices"]:
            assert s["dataFilePath"].startswith("file:") and s["dataFilePath"].endswith(".parquet")
            assert all(p.startswith("file:") for p in s["deltaFilePaths"])
    assert (fx.path / ".hoodie" / f"{t}.replacecommit.requested").stat().st_size > 0


def test_trigger_and_size_rules_say_why_nothing_was_scheduled(fx):
    fx.upsert(["a", "b", "x"])
    res = fx.table.schedule_clustering()
    assert not res.scheduled and res.reason == "not yet: 1 of 4 commits since the last clustering"
    # One slice per partition, nothing to sort or merge: Hudi would rewrite it as it is.
    res = fx.table.schedule_clustering(force=True)
    assert not res.scheduled and "no file slices to cluster" in res.reason
    for _ in range(3):
        fx.upsert(["a", "x"])
    assert fx.table.schedule_clustering().scheduled  # 4 commits; each partition has logs
    # Base files at or over small.file.limit are left alone.
    fx2 = Fixture(fx.path.parent / "t2")
    fx2.history(2)
    res = fx2.table.schedule_clustering(force=True, options={
        "hoodie.clustering.plan.strategy.small.file.limit": 1})
    assert not res.scheduled


def test_max_num_groups_and_partition_selection(fx):
    fx.history()
    res = fx.table.schedule_clustering(force=True, options={
        "hoodie.clustering.plan.strategy.partition.selected": "la"})
    plan = fx.table.meta_client.active.clustering_plan(res.instant)
    assert {g.partition for g in plan.input_groups} == {"la"}
    fx.table.rollback(res.instant)
    res = fx.table.schedule_clustering(force=True, options={
        "hoodie.clustering.plan.strategy.max.num.groups": 1})
    assert res.groups == 1
    cfg = ClusteringConfig.from_options({"hoodie.clustering.plan.partition.filter.mode": "RECENT_DAYS",
                                         "hoodie.clustering.plan.strategy.daybased.lookback.partitions": 2,
                                         "hoodie.clustering.plan.strategy.daybased.skipfromlatest.partitions": 1})
    assert cfg.partitions(["2024-01-01", "2024-01-03", "2024-01-02", "2024-01-04"]) == ["2024-01-02", "2024-01-03"]
    cfg = ClusteringConfig.from_options({"hoodie.clustering.plan.partition.filter.mode": "SELECTED_PARTITIONS",
                                         "hoodie.clustering.plan.strategy.cluster.begin.partition": "b",
                                         "hoodie.clustering.plan.strategy.cluster.end.partition": "c"})
    assert cfg.partitions(["a", "b", "c", "d"]) == ["b", "c"]


@pytest.mark.parametrize("opts, what", [
    ({"hoodie.clustering.inline": "true"}, "hoodie.clustering.inline=true"),
    ({"hoodie.clustering.schedule.inline": "true"}, "hoodie.clustering.schedule.inline=true"),
    ({"hoodie.layout.optimize.strategy": "hilbert"}, "hilbert is not supported"),
    ({"hoodie.clustering.plan.partition.filter.mode": "DAY_ROLLING"}, "DAY_ROLLING is not supported"),
    ({"hoodie.clustering.plan.strategy.sort.columns": "nope"}, "sort.columns names nope"),
    ({"hoodie.clustering.plan.strategy.partition.regex.pattern": "("}, "not a regular expression"),
])
def test_options_lakehouse_does_not_follow_are_refused_before_anything_is_written(fx, opts, what):
    fx.history(2)
    background.wait_all()
    before = sorted(os.listdir(fx.path / ".hoodie"))
    with pytest.raises(ConfigError, match=what.replace("(", r"\(")):
        fx.table.schedule_clustering(force=True, options=opts)
    assert sorted(os.listdir(fx.path / ".hoodie")) == before


def test_a_simple_bucket_index_table_is_refused(tmp_path):
    t = lakehouse.create_table(str(tmp_path / "b"), name="b", table_type="MERGE_ON_READ", record_key="id",
                               ordering_field="ts", options={"hoodie.index.bucket.engine": "SIMPLE"})
    t.upsert(pa.table({"id": ["a"], "ts": [1]}))
    with pytest.raises(ConfigError, match="SIMPLE engine"):
        t.cluster(force=True)


def test_updates_into_a_pending_clusterings_file_groups_are_refused_inserts_go_elsewhere(fx):
    """Hudi's default SparkRejectUpdateStrategy; inserts keep out of the plan's file groups
    (UpsertPartitioner.filterSmallFilesInClustering)."""
    fx.history(2)
    t = fx.table.schedule_clustering(force=True).instant
    planned = fx.table.meta_client.active.clustering_plan(t).file_groups
    before = sorted(os.listdir(fx.path / ".hoodie"))
    with pytest.raises(ClusteringUpdateError, match=f"clustering {t} is rewriting") as e:
        fx.table.upsert(pa.Table.from_pylist(fx.rows(["a010"])))
    assert e.value.clustering == t and set(e.value.file_groups) <= planned
    # Refused before any data file: only the failed instant's rollback is new on the timeline.
    new = [n for n in os.listdir(fx.path / ".hoodie") if n not in before and "." in n[:18]]
    assert all("rollback" in n for n in new), new
    assert len(files_of(fx.path)) == len(set(files_of(fx.path)))
    new = fx.upsert(["new1", "zzz9"])  # inserts only: new file groups
    meta = fx.table.meta_client.active.commit_metadata(fx.table.timeline.get(new))
    assert not {(s.partition_path, s.file_id) for s in meta.write_stats()} & planned
    fx.table.run_clustering(t)
    assert fx.table.commit_clustering(t).committed
    fx.upsert(["a001", "new1"])  # after the commit, updates go to the new file groups
    fx.check()


def test_a_write_in_flight_when_the_clustering_was_planned_fails_at_its_commit(tmp_path):
    """Several writers: the clustering is planned past a write in flight; the write that
    touched a planned file group is the one that fails (Hudi's OCC rule), nothing of it shows."""
    fx = Fixture(tmp_path / "t", **{"hoodie.write.concurrency.mode": "optimistic_concurrency_control",
})
    fx.history(2)
    t_write = fx.table.upsert(pa.Table.from_pylist(fx.rows(["a010", "q001"])), commit=False)
    t = fx.table.schedule_clustering(force=True).instant
    assert t > t_write
    with pytest.raises(CommitConflictError, match=f"clustering {t} is rewriting"):
        fx.table.commit(t_write)
    assert not fx.table.timeline.is_completed(t_write)
    fx.table.run_clustering(t)
    assert fx.table.commit_clustering(t).committed
    fx.check()


def test_failed_write_recovery_leaves_a_pending_clustering_alone(fx):
    fx.history(2)
    t = fx.table.schedule_clustering(force=True).instant
    fx.table.meta_client.active.transition(Instant(t, Action.REPLACE_COMMIT, State.REQUESTED), State.INFLIGHT)
    fx.upsert(["new1"])  # a write starts: it rolls back failed writes first
    assert fx.table.timeline.get(t).is_inflight
    assert fx.table.timeline.is_clustering(t)
    res = execute_clustering(fx.table, t)
    assert res.redone and commit_clustering(fx.table, t).committed
    fx.check()


def test_compaction_and_clustering_never_plan_the_same_file_group(fx):
    fx.history(3)
    c = fx.table.schedule_clustering(force=True, options={
        "hoodie.clustering.plan.strategy.partition.selected": "la"}).instant
    planned = fx.table.meta_client.active.clustering_plan(c).file_groups
    comp = fx.table.schedule_compaction(force=True)
    from lakehouse.services.compaction import read_plan
    ops = {(o.partition_path, o.file_id) for o in read_plan(fx.table, comp.instant).operations}
    assert ops and not ops & planned
    fx.table.run_clustering(c)
    fx.table.commit_clustering(c)
    fx.table.run_compaction(comp.instant)
    fx.table.commit_compaction(comp.instant)
    fx.check()
    # The file groups the compaction had are free now (sorting makes a lone slice worth it).
    res = fx.table.schedule_clustering(force=True, options=SORT)
    assert ops <= fx.table.meta_client.active.clustering_plan(res.instant).file_groups


def killed_while_clustering(path, t, fault) -> None:
    """Execute and commit clustering ``t`` in another process, killed at ``fault``."""
    env = dict(os.environ, PYTHONPATH=REPO, **{ENV: f"{fault}:kill"})
    code = textwrap.dedent(f"""
        import lakehouse
        from lakehouse.services.clustering import *
        table = lakehouse.open_table({str(path)!r})
        execute_clustering(table, {t!r}); commit_clustering(table, {t!r})
    """)
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == -9, p.stderr


@pytest.mark.parametrize("fault", ["clustering.mid_execute", "clustering.after_execute",
                                   "clustering.before_commit"])
def test_a_crashed_clustering_is_redone_cleanly(fx, fault):
    fx.history()
    t = fx.table.schedule_clustering(force=True, options=SORT).instant
    killed_while_clustering(fx.path, t, fault)
    fx.check()  # nothing of the half-done clustering is visible
    fx.upsert(["new1"])  # inserts go on beside it
    table = lakehouse.open_table(str(fx.path))
    if fault == "clustering.before_commit":
        res = commit_clustering(table, t)
    else:
        assert commit_clustering(table, t).committed is False  # results missing: undone
        assert table.timeline.get(t).state is State.REQUESTED
        execute_clustering(table, t)
        res = commit_clustering(table, t)
    assert res.committed
    fx.check()
    written = files_of(fx.path, t)
    meta = table.meta_client.active.commit_metadata(table.timeline.get(t))
    assert sorted(os.path.basename(s.path) for s in meta.write_stats()) == written, "no leftovers"


def test_a_pending_clustering_rolled_back_leaves_the_table_as_it_was(fx):
    fx.history()
    t = fx.table.schedule_clustering(force=True).instant
    fx.table.run_clustering(t)
    assert files_of(fx.path, t)
    fx.table.rollback(t)
    assert fx.table.timeline.get(t) is None and files_of(fx.path, t) == []
    fx.upsert(["a001"])  # no longer refused
    fx.check()


def test_clean_deletes_replaced_file_groups_after_retention_and_archival_waits_for_it(fx):
    fx.history()
    replaced_files = files_of(fx.path)
    t = fx.table.cluster(force=True).instant
    archive = {"hoodie.keep.min.commits": 2, "hoodie.keep.max.commits": 3}
    for i in range(4):
        fx.upsert([f"zz{i}"])
    # Before any clean the replace commit stays active (Hudi's clustering retention bound).
    fx.table.archive(options=archive)
    assert fx.table.timeline.get(t) is not None
    fx.table.clean(options={"hoodie.cleaner.commits.retained": 2})
    background.wait_all()
    left = files_of(fx.path)
    assert not set(replaced_files) & set(left), "the replaced file groups are gone"
    fx.table.archive(options=archive)
    assert fx.table.timeline.get(t) is None, "archived once cleaned"
    fx.check()


def test_clustering_is_a_commit_for_the_timeline_views(fx):
    fx.history(2)
    t = fx.table.cluster(force=True).instant
    meta = CommitMetadata.from_bytes((fx.path / ".hoodie" / f"{t}.replacecommit").read_bytes(), "x")
    assert meta.partition_to_replace_file_ids and meta.extra_metadata.get("schema")
    assert lakehouse.open_table(str(fx.path)).timeline.get(t).action is Action.REPLACE_COMMIT
    schedule = schedule_clustering(lakehouse.open_table(str(fx.path)))
    assert not schedule.scheduled and schedule.reason.startswith("not yet: 0 of 4")


def test_copy_on_write_tables_cluster_too(tmp_path):
    fx = Fixture(tmp_path / "cow", table_type="COPY_ON_WRITE")
    fx.history()
    assert len(files_of(fx.path)) > 2
    res = fx.table.cluster(force=True, options=SORT)
    assert res.committed
    fx.check()


@pytest.mark.parametrize("table_type", ["MERGE_ON_READ", "COPY_ON_WRITE"])
def test_the_iceberg_metadata_follows_a_clustering(tmp_path, table_type):
    """pyiceberg and Daft read the clustered table as lakehouse does, and every snapshot,
    the clustering's included, reads as its instant."""
    oracle = pytest.importorskip("tests.iceberg.iceberg_oracle")
    fx = Fixture(tmp_path / "t", table_type=table_type)
    fx.history()
    t = fx.table.cluster(force=True, options=SORT).instant
    fx.upsert(["a010", "new1"])
    background.wait_all()
    table = lakehouse.open_table(str(fx.path))
    res = oracle.sync_and_compare(table, "after clustering")
    assert t in oracle.assert_every_snapshot_is_its_instant(table, res)


def test_the_cli_runs_each_step_and_shows_the_plan(fx):
    from click.testing import CliRunner

    from lakehouse import cli

    def run(*args, code=0):
        res = CliRunner().invoke(cli.main, [str(a) for a in args], env={"COLUMNS": "250"})
        assert res.exit_code == code, res.output
        return res

    fx.history()
    out = run("clustering", "schedule", fx.path, "--force", "--option",
              "hoodie.clustering.plan.strategy.sort.columns=v", "--json")
    t = json.loads(out.stdout)["instant"]
    shown = json.loads(run("clustering", "show", fx.path, t, "--json").stdout)
    assert shown["state"] == "requested" and shown["sort_columns"] == ["v"]
    assert sum(len(g["slices"]) for g in shown["groups_planned"]) == shown["file_slices"]
    assert run("clustering", "run", fx.path, t).stdout.strip() == t
    assert run("clustering", "commit", fx.path, t).stdout.strip() == t
    rows = json.loads(run("clustering", "show", fx.path, "--json").stdout)
    assert [(r["instant"], r["state"]) for r in rows] == [(t, "completed")]
    res = run("clustering", "schedule", fx.path, "--option", "hoodie.cleaner.commits.retained=2", code=1)
    assert "not an option of clustering" in res.output
    fx.check()


def test_the_view_explains_a_pending_and_a_completed_clustering(fx):
    from lakehouse.inspect.explain import explain

    fx.history()
    t = fx.table.schedule_clustering(force=True, options=SORT).instant
    doc = explain(lakehouse.open_table(str(fx.path)), t)
    assert doc["clustering"]["sort_columns"] == ["v"] and doc["clustering"]["groups"] >= 1
    assert "failed-write recovery leaves it alone" in doc["note"]
    fx.table.run_clustering(t)
    fx.table.commit_clustering(t)
    doc = explain(lakehouse.open_table(str(fx.path)), t)
    assert doc["clustering"]["file_slices"] == len(
        lakehouse.open_table(str(fx.path)).active.clustering_plan(t).slices)
    assert doc["write"] and "note" not in doc


def test_a_pending_insert_overwrite_is_a_write_and_a_pending_clustering_is_not(fx):
    """ClusteringUtils.getClusteringPlan: a replace commit is a clustering only if its requested
    file holds a CLUSTER plan; insert_overwrite's holds none."""
    fx.history(2)
    over = fx.table.insert_overwrite(pa.Table.from_pylist(fx.rows(["a020"])), commit=False)
    tl = lakehouse.open_table(str(fx.path)).timeline
    assert not tl.is_clustering(over) and [i.time for i in tl.pending_writes()] == [over]
    fx.table.rollback(over)
    t = fx.table.schedule_clustering(force=True).instant
    tl = lakehouse.open_table(str(fx.path)).timeline
    assert tl.is_clustering(t) and [i.time for i in tl.pending_clusterings()] == [t]
    assert tl.pending_writes().instants == ()
    assert tl.filter(actions=[Action.REPLACE_COMMIT]).is_clustering(t)  # kept through filters


def test_a_resize_plan_on_a_table_without_hash_rings_is_refused_not_run_as_a_rewrite(fx):
    import dataclasses

    from lakehouse.errors import TimelineError
    from lakehouse.timeline.clustering_plan import ClusteringPlan

    fx.history(2)
    t = fx.table.schedule_clustering(force=True).instant
    plan = fx.table.meta_client.active.clustering_plan(t)
    groups = tuple(dataclasses.replace(g, extra_metadata={"clustering.group.child.node": "[]"})
                   for g in plan.input_groups)
    resize = ClusteringPlan(groups, plan.strategy)
    (fx.path / ".hoodie" / f"{t}.replacecommit.requested").write_bytes(resize.to_requested_bytes())
    table = lakehouse.open_table(str(fx.path))
    with pytest.raises(TimelineError, match="hash ring"):
        table.run_clustering(t)
    assert table.timeline.get(t).is_requested
