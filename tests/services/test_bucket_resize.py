"""Consistent-hashing buckets written and resized by clustering (Hudi's
BaseConsistentHashingBucketClusteringPlanStrategy, SparkConsistentBucketClusteringExecutionStrategy,
HoodieSparkConsistentBucketIndex and ConsistentBucketIdentifier), against the model and hudi-rs."""

from __future__ import annotations

import json
import os

import numpy as np
import pyarrow as pa
import pytest

import lakehouse
from lakehouse import layout
from lakehouse.consistent_hashing import (HASH_MASK, HashingMetadata, NodeTag, committed_ring, parse_child_nodes,
                                          record_hashes, ring_committed)
from lakehouse.errors import ClusteringUpdateError, ConfigError
from lakehouse.iceberg import background
from lakehouse.services.clustering import commit_clustering, execute_clustering
from lakehouse.timeline.clustering_plan import (CONSISTENT_BUCKET_STRATEGY, GROUP_CHILD_NODE_KEY,
                                                GROUP_PARTITION_KEY, GROUP_SEQUENCE_NO_KEY)
from lakehouse.timeline.instant import State
from tests.model.oracle import Oracle
from tests.services.test_clustering import Fixture as ClusteringFixture, killed_while_clustering

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLS = ["id", "city", "ts", "s"]
MAX_FILE = 128 * 1024
CH = {"hoodie.index.bucket.engine": "CONSISTENT_HASHING", "hoodie.parquet.max.file.size": MAX_FILE,
      "hoodie.parquet.small.file.limit": 0}


class Fixture(ClusteringFixture):
    """A partitioned Merge-On-Read table with consistent-hashing buckets and 128 KiB files."""

    cols = COLS

    def __init__(self, path, **options):
        self.path = path
        self.table = lakehouse.create_table(str(path), name="ch", table_type="MERGE_ON_READ", record_key="id",
                                            partition_by="city", ordering_field="ts",
                                            options={**CH, **options})
        self.oracle = Oracle("EVENT_TIME_ORDERING", "id", "ts")
        self.ts = 0

    def rows(self, ids, city=None):
        self.ts += 1
        rng = np.random.default_rng(self.ts)
        ids = list(ids)
        payload = rng.integers(0, 2**62, (len(ids), 3)).tolist()
        return [{"id": f"k{i:07d}", "city": city or ("sf" if i % 2 == 0 else "la"), "ts": self.ts,
                 "s": "".join(f"{v:016x}" for v in vs)} for i, vs in zip(ids, payload)]

    def upsert(self, ids, city=None):
        rows = self.rows(ids, city)
        t = self.table.upsert(pa.Table.from_pylist(rows))
        self.oracle.upsert(rows, t)
        return t

    def delete(self, ids):
        keys = [f"k{i:07d}" for i in ids]
        t = self.table.delete(pa.table({"id": keys, "city": ["sf" if i % 2 == 0 else "la" for i in ids]}))
        self.oracle.delete(keys, t)
        return t

    def ring(self, partition):
        tl = self.table.meta_client.active.load()
        return committed_ring(self.table.meta_client.storage, partition, ring_committed(tl))

    def grow(self, n=24_000):
        """One row, then ``n`` more: the first write fixes one bucket per partition."""
        self.upsert([0])
        self.upsert(range(n))
        self.delete(range(0, 200, 7))
        assert self.table.compact(force=True).committed


@pytest.fixture
def fx(tmp_path):
    return Fixture(tmp_path / "t")


def latest(table):
    background.wait_all()
    return lakehouse.open_table(table.path).file_system_view().latest_slices()


def assert_records_follow_the_rings(fx):
    """Every record is in the file group its key hashes to on its partition's ring (what Hudi's
    ConsistentBucketIdentifier.getBucket finds), computed from the key alone."""
    rows = lakehouse.open_table(str(fx.path)).read(columns=["_hoodie_record_key", "_hoodie_partition_path",
                                                             "_hoodie_file_name"])
    for p in set(rows.column("_hoodie_partition_path").to_pylist()):
        part = rows.filter(pa.compute.equal(rows.column("_hoodie_partition_path"), p))
        ring = fx.ring(p)
        nodes = ring.locate(record_hashes(part.column("_hoodie_record_key"), ("id",), ("id",)))
        want = [ring.nodes[i].file_id for i in nodes.tolist()]
        got = [n.split("_")[0].lstrip(".") for n in part.column("_hoodie_file_name").to_pylist()]
        assert got == want


def test_a_grown_bucket_splits_so_no_base_file_passes_the_threshold_and_reads_the_same(fx):
    fx.grow()
    before = {s.partition: s for s in latest(fx.table)}
    assert sorted(before) == ["la", "sf"] and all(s.base_size > 2 * MAX_FILE for s in before.values())
    t = fx.table.schedule_clustering(force=True).instant
    plan = fx.table.meta_client.active.clustering_plan(t)
    assert plan.strategy.strategy_class_name == CONSISTENT_BUCKET_STRATEGY
    for g in plan.input_groups:
        old = fx.ring(g.partition)
        assert g.extra_metadata[GROUP_PARTITION_KEY] == g.partition
        assert g.extra_metadata[GROUP_SEQUENCE_NO_KEY] == "0"
        children = parse_child_nodes(g.extra_metadata[GROUP_CHILD_NODE_KEY])
        # One bucket into as many as its size needs, each a new file group, the last keeping
        # the old node's value (its range's end).
        size = before[g.partition].base_size
        assert len(children) == g.num_output_file_groups == -(-size // MAX_FILE)
        assert all(c.tag is NodeTag.REPLACE for c in children)
        assert children[-1].value == old.nodes[0].value == HASH_MASK
    from lakehouse.inspect.explain import explain
    doc = explain(lakehouse.open_table(str(fx.path)), t)["clustering"]
    assert (doc["buckets_split"], doc["buckets_merged"]) == (2, 0)
    assert doc["output_file_groups"] == sum(g.num_output_file_groups for g in plan.input_groups)
    fx.table.run_clustering(t)
    fx.table.commit_clustering(t)
    after = latest(fx.table)
    assert all(s.base_size <= 2 * MAX_FILE and not s.log_files for s in after)
    for p in ("la", "sf"):
        ring = fx.ring(p)
        assert (ring.instant, ring.seq_no, ring.num_buckets) == (t, 1, 1)
        assert sorted(s.file_id for s in after if s.partition == p) == sorted(n.file_id for n in ring.nodes)
    fx.check()
    assert_records_follow_the_rings(fx)
    # Writes go on into the new buckets: updates, inserts and deletes.
    fx.upsert(list(range(0, 4000, 2)) + list(range(30_000, 30_200)))
    fx.delete(range(1, 400, 3))
    files = {s.file_id for s in latest(fx.table)}
    assert files == {s.file_id for s in after}, "no bucket outside the rings"
    fx.check()
    assert_records_follow_the_rings(fx)


def test_the_ring_file_is_hudis_and_the_initial_one_is_deterministic(fx):
    fx.upsert([0, 1])
    for p in ("la", "sf"):
        path = fx.path / ".hoodie" / ".bucket_index" / "consistent_hashing_metadata" / p / "00000000000000.hashing_meta"
        assert path.read_bytes() == HashingMetadata.initial(p, 1).to_bytes()
        d = json.loads(path.read_bytes())
        assert (d["partitionPath"], d["numBuckets"], d["seqNo"]) == (p, 1, 0)
    # The file groups are the nodes' (fileIdPrefix + "-0").
    assert {s.file_id for s in latest(fx.table)} == {HashingMetadata.initial(p, 1).nodes[0].file_id
                                                     for p in ("la", "sf")}


def test_small_neighbouring_buckets_merge_down_to_the_minimum(tmp_path):
    fx = Fixture(tmp_path / "m", **{"hoodie.bucket.index.num.buckets": 8, "hoodie.bucket.index.min.num.buckets": 2})
    fx.upsert(range(400))
    assert len(fx.ring("sf").nodes) == 8
    t = fx.table.schedule_clustering(force=True).instant
    plan = fx.table.meta_client.active.clustering_plan(t)
    for g in plan.input_groups:
        children = parse_child_nodes(g.extra_metadata[GROUP_CHILD_NODE_KEY])
        assert g.num_output_file_groups == 1 and len(g.slices) >= 2
        assert [c.tag for c in children] == [NodeTag.DELETE] * (len(g.slices) - 1) + [NodeTag.REPLACE]
    fx.table.run_clustering(t)
    fx.table.commit_clustering(t)
    for p in ("la", "sf"):
        assert len(fx.ring(p).nodes) == 2, "merged while above hoodie.bucket.index.min.num.buckets"
    fx.check()
    assert_records_follow_the_rings(fx)
    fx.upsert(range(0, 800, 3))
    fx.check()
    assert_records_follow_the_rings(fx)


def test_splits_stop_at_the_bucket_limit(tmp_path):
    fx = Fixture(tmp_path / "l", **{"hoodie.bucket.index.max.num.buckets": 3})
    fx.grow()
    fx.table.cluster(force=True)
    assert {p: len(fx.ring(p).nodes) for p in ("la", "sf")} == {"la": 3, "sf": 3}
    res = fx.table.schedule_clustering(force=True)
    assert not res.scheduled, "full rings, and no bucket small enough to merge"
    fx.check()


def test_a_table_created_with_the_engine_stores_a_bucket_limit_hudi_would_leave_at_the_initial_count(fx):
    props = (fx.path / ".hoodie" / "hoodie.properties").read_text()
    assert "hoodie.bucket.index.max.num.buckets=65536" in props
    assert "hoodie.index.bucket.engine=CONSISTENT_HASHING" in props


def test_copy_on_write_with_consistent_hashing_is_refused_before_anything_is_written(tmp_path):
    with pytest.raises(ConfigError, match="MERGE_ON_READ"):
        lakehouse.create_table(str(tmp_path / "c"), name="c", table_type="COPY_ON_WRITE", record_key="id",
                               options={"hoodie.index.type": "BUCKET", "hoodie.index.bucket.engine": "CONSISTENT_HASHING"})
    assert not (tmp_path / "c").exists() or not os.listdir(tmp_path / "c")


def test_writes_into_buckets_being_resized_are_refused_others_go_on(fx):
    """Hudi's default hoodie.clustering.updates.strategy (SparkRejectUpdateStrategy) for the
    resized buckets; a partition the plan does not touch takes writes."""
    fx.grow()
    fx.upsert([1_000_001], city="ny")
    t = fx.table.schedule_clustering(force=True, options={
        "hoodie.clustering.plan.strategy.partition.selected": "sf"}).instant
    before = sorted(os.listdir(fx.path / "sf"))
    with pytest.raises(ClusteringUpdateError, match=t) as e:
        fx.table.upsert(pa.Table.from_pylist(fx.rows([2, 4])))
    assert e.value.clustering == t
    assert sorted(os.listdir(fx.path / "sf")) == before
    fx.upsert([3, 5])  # la: not in the plan
    fx.upsert([1_000_002], city="ny")
    fx.table.run_clustering(t)
    fx.table.commit_clustering(t)
    fx.upsert([2, 4])
    fx.check()
    assert_records_follow_the_rings(fx)


def test_no_resize_is_planned_while_a_write_is_in_flight(fx):
    fx.grow()
    pending = fx.table.upsert(pa.Table.from_pylist(fx.rows([2])), commit=False)
    res = fx.table.schedule_clustering(force=True)
    assert not res.scheduled and pending in res.reason


def test_a_rolled_back_resize_puts_the_previous_ring_back(fx):
    fx.grow()
    t = fx.table.cluster(force=True).instant
    ring_file = fx.path / ".hoodie" / ".bucket_index" / "consistent_hashing_metadata" / "sf" / f"{t}.hashing_meta"
    assert ring_file.exists()
    fx.table.rollback(t)
    assert not ring_file.exists()
    assert fx.ring("sf").seq_no == 0 and len(fx.ring("sf").nodes) == 1
    fx.upsert(range(0, 100, 3))
    fx.check()
    assert_records_follow_the_rings(fx)


def test_a_ring_file_of_a_pending_or_missing_instant_is_not_in_force(fx):
    """ConsistentBucketIndexUtils.loadMetadata: the newest ring whose instant completed (or the
    initial one); a ring older than the active timeline was archived with its commit."""
    fx.upsert([0])
    storage = fx.table.meta_client.storage
    later = HashingMetadata.initial("sf", 1).with_children(
        HashingMetadata.initial("sf", 1).split_children(0, ("a", "b")), "20990101000000000")
    storage.write(f"{layout.hashing_metadata_folder('sf')}/{later.file_name}", later.to_bytes())
    assert fx.ring("sf").seq_no == 0
    tl = fx.table.meta_client.active.load()
    assert committed_ring(storage, "sf", ring_committed(tl)).instant == "00000000000000"

    class Archived:  # an active timeline that starts after the ring's instant
        first = type("I", (), {"time": "20991231000000000"})()

        @staticmethod
        def is_completed(t):
            return False
    assert committed_ring(storage, "sf", ring_committed(Archived)).instant == later.instant


@pytest.mark.parametrize("fault", ["clustering.mid_execute", "clustering.after_execute",
                                   "clustering.before_commit"])
def test_a_crashed_resize_is_redone_with_nothing_lost(fx, fault):
    fx.grow()
    t = fx.table.schedule_clustering(force=True).instant
    assert t is not None
    killed_while_clustering(fx.path, t, fault)
    fx.check()
    assert fx.ring("sf").seq_no == 0, "the new ring is not in force before the commit"
    table = lakehouse.open_table(str(fx.path))
    if fault != "clustering.before_commit":
        assert commit_clustering(table, t).committed is False
        assert table.timeline.get(t).state is State.REQUESTED
        execute_clustering(table, t)
    assert commit_clustering(table, t).committed
    assert fx.ring("sf").seq_no == 1
    fx.upsert(range(0, 300, 5))
    fx.check()
    assert_records_follow_the_rings(fx)


def test_a_read_of_pinned_keys_reads_only_their_buckets_as_of_any_instant(fx):
    fx.grow()
    before = fx.table.timeline.completed_writes().instants[-1].time
    fx.table.cluster(force=True)
    fx.upsert([2, 3])
    table = lakehouse.open_table(str(fx.path))
    keys = ["k0000002", "k0000004", "k0000003"]
    plan = table.scan(filters=[("id", "=", "k0000002")]).plan_files()
    rows = table.read(filters=[("id", "in", keys)], columns=COLS).to_pylist()
    assert sorted(rows, key=lambda r: r["id"]) == [r for r in fx.oracle.rows(None, COLS) if r["id"] in keys]
    want = set()  # each partition's buckets of every pinned key (a key's partition is not in it)
    for p in ("sf", "la"):
        ring = fx.ring(p)
        want |= {(p, ring.nodes[i].file_id) for i in ring.locate(record_hashes(pa.array(["k0000002"]), ("id",), ("id",))).tolist()}
    # (Footer statistics may rule out one of those buckets' files too.)
    assert ("sf", fx.ring("sf").nodes[fx.ring("sf").locate(record_hashes(pa.array(["k0000002"]), ("id",), ("id",)))[0]].file_id) \
        in {(s.partition, s.file_id) for s in plan}
    assert {(s.partition, s.file_id) for s in plan} <= want and len(want) == 2 < len(latest(fx.table))
    # Time travel to before the resize reads by the ring in force then (the old file groups).
    old = table.read(filters=[("id", "=", "k0000002")], as_of=before, columns=["id", "ts"]).to_pylist()
    assert old == [{"id": "k0000002", "ts": 2}]


def test_insert_overwrite_and_delete_partition_renew_the_ring_so_no_file_group_id_comes_back(fx):
    """The replaced file groups' ids never name a live file group again (a view hides every
    file of a replaced id): the partition's next ring has the same buckets over new file groups,
    in force with the replacecommit."""
    fx.upsert(range(40))
    old = {s.file_id for s in latest(fx.table)}
    batch = fx.rows(range(0, 40, 4), city="sf")
    t = fx.table.insert_overwrite(pa.Table.from_pylist(batch))
    fx.oracle.delete([f"k{i:07d}" for i in range(0, 40, 2)], t)
    fx.oracle.upsert(batch, t)
    ring = fx.ring("sf")
    assert (ring.instant, ring.seq_no) == (t, 1)
    assert {s.file_id for s in latest(fx.table) if s.partition == "sf"} <= {n.file_id for n in ring.nodes}
    assert not old & {n.file_id for n in ring.nodes}
    fx.upsert(range(0, 60, 3))
    fx.check()
    assert_records_follow_the_rings(fx)
    gone = fx.table.delete_partitions(["la"])
    fx.oracle.delete([f"k{i:07d}" for i in range(1, 60, 2)], gone)
    assert fx.ring("la").instant == gone
    fx.upsert([1, 3])
    fx.check()
    assert_records_follow_the_rings(fx)


def test_a_write_reads_the_rings_again_only_once_a_replace_commit_may_have_changed_them(fx, monkeypatch):
    """lakehouse.write.rings: a table handle keeps each partition's ring; only a replace commit
    (a resize, an overwrite's renewal) writes another, so the next write reads the rings again
    only when the replace commits on its timeline changed (on object storage: a listing and a
    read per partition and write saved)."""
    from lakehouse.storage.local import LocalStorage
    looked: list[str] = []
    real = LocalStorage.list

    def spy(self, path="", *, recursive=False):
        if path.startswith(layout.HASHING_METADATA):
            looked.append(path)
        return real(self, path, recursive=recursive)
    monkeypatch.setattr(LocalStorage, "list", spy)
    fx.grow()
    looked.clear()
    fx.upsert(range(10))
    assert looked == []
    t = fx.table.schedule_clustering(force=True).instant
    assert t is not None
    fx.table.run_clustering(t)
    fx.table.commit_clustering(t)
    looked.clear()
    fx.upsert(range(10, 20))
    assert sorted(set(looked)) == sorted({layout.hashing_metadata_folder(p) for p in ("la", "sf")})
    looked.clear()
    fx.upsert(range(20, 30))
    assert looked == []
    fx.check()
    assert_records_follow_the_rings(fx)
