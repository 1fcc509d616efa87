"""Resizing consistent-hashing buckets by clustering (Hudi's
BaseConsistentHashingBucketClusteringPlanStrategy and SparkConsistentBucketClusteringExecutionStrategy).

A partition's buckets are the nodes of its hash ring (:mod:`lakehouse.consistent_hashing`). Per
partition, with S = ``hoodie.parquet.max.file.size`` and a slice's size its base plus log files:

* **split**: a bucket over ``hoodie.bucket.index.split.threshold`` x S (2.0) becomes
  ``ceil(size / S)`` buckets over equal parts of its hash range, while the partition stays within
  ``hoodie.bucket.index.max.num.buckets``;
* **merge**: runs of ring neighbours each at most ``hoodie.bucket.index.merge.threshold`` x S
  (0.2) become one bucket while their sum stays under it, the partition keeping
  ``hoodie.bucket.index.min.num.buckets``;
* **sort**: with sort columns, every other bucket is rewritten sorted into a new file group.

Each group carries Hudi's extra metadata: the partition, the ring's new nodes (child nodes, JSON
as Jackson writes them) and the sequence number of the ring it changes. The execution routes
each record by the new ring into the child node's file group (``prefix-0``); the commit writes
the partition's next ring ``<instant>.hashing_meta``, which takes effect when the replacecommit
completes.

Differences from Hudi, on purpose: Hudi splits a bucket in two per clustering, so a bucket grown
8-fold needs three clusterings (each rewriting it); lakehouse splits it into as many as its size
needs in one. Hudi rewrites every remaining bucket (its sort step) even without sort columns;
lakehouse leaves them alone then. Hudi's merge grows a run forward only when the next bucket is
the current one's predecessor (its forward step never merges in practice); lakehouse merges ring
neighbours in both directions. Hudi leaves ``max.num.buckets`` at ``num.buckets`` when unset, so
no bucket ever splits: lakehouse does the same for tables it did not create, and stores a limit
with the tables it creates (lakehouse.table_builder).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Callable

import numpy as np
import pyarrow as pa

from lakehouse.columns import KEY
from lakehouse.config import ClusteringConfig, TableConfig
from lakehouse.consistent_hashing import (ConsistentHashingNode, HashingMetadata, NodeTag, child_nodes_json,
                                          committed_ring, parse_child_nodes, record_hashes, ring_committed)
from lakehouse.errors import TimelineError
from lakehouse.file_group.file_slice import FileSlice
from lakehouse.file_group.naming import new_file_id_prefix
from lakehouse.timeline.clustering_plan import (GROUP_CHILD_NODE_KEY, GROUP_PARTITION_KEY, GROUP_SEQUENCE_NO_KEY,
                                                ClusteringGroup, ClusteringPlan)

if TYPE_CHECKING:
    from lakehouse.storage.base import Storage

META_RECORD_KEY = "_hoodie_record_key"


def bucket_bounds(config: TableConfig, cfg: ClusteringConfig) -> tuple[int, int]:
    """(min, max) buckets per partition: the options, else ``num.buckets`` (Hudi's
    HoodieIndexConfig validation: a max below it or a min above it is reset to it)."""
    n = config.bucket_num
    hi = max(cfg.max_num_buckets or n, n)
    lo = min(cfg.min_num_buckets or n, n)
    return lo, hi


def slice_size(s: FileSlice) -> int:
    """``FileSlice.getTotalFileSize``: base file and log files."""
    return s.base_size + s.total_log_size


def split_ways(size: int, max_file_size: int) -> int:
    """How many buckets a bucket of ``size`` bytes past the split threshold becomes (before the
    partition's bucket limit): enough that each holds about one max-size file."""
    return max(2, math.ceil(size / max_file_size))


def partition_groups(ring: HashingMetadata, slices: list[FileSlice], config: TableConfig,
                     cfg: ClusteringConfig, max_file_size: int, room: int,
                     group: Callable[[list[FileSlice], tuple[ConsistentHashingNode, ...], int], ClusteringGroup],
                     prefix: Callable[[], str] = new_file_id_prefix) -> list[ClusteringGroup]:
    """One partition's split, merge and sort groups (at most ``room``). ``group(slices, children,
    outputs)`` builds a group; ``slices`` are the partition's candidates (not in a pending
    compaction), each the latest of a bucket of ``ring``."""
    position = {n.file_id: i for i, n in enumerate(ring.nodes)}
    ordered = sorted((s for s in slices if s.file_id in position), key=lambda s: position[s.file_id])
    lo, hi = bucket_bounds(config, cfg)
    groups: list[ClusteringGroup] = []
    # Split, the largest buckets first so the limit goes where it helps most.
    split_at = cfg.split_threshold * max_file_size
    slots = hi - ring.bucket_count
    rest: list[FileSlice] = []
    for s in sorted(ordered, key=lambda s: -slice_size(s)):
        size = slice_size(s)
        if size <= split_at or slots <= 0 or len(groups) >= room:
            rest.append(s)
            continue
        k = min(split_ways(size, max_file_size), slots + 1)
        children = ring.split_children(position[s.file_id], [prefix() for _ in range(k)])
        if children is None:  # a range too narrow to split
            rest.append(s)
            continue
        slots -= k - 1
        groups.append(group([s], children, k))
    # Merge runs of small ring neighbours.
    merge_at = cfg.merge_threshold * max_file_size
    slots = ring.bucket_count - lo + sum(g.num_output_file_groups - 1 for g in groups)
    n = ring.bucket_count
    by_position = {position[s.file_id]: s for s in rest}
    taken: set[int] = set()
    for i in sorted(by_position):
        if i in taken or slice_size(by_position[i]) > merge_at or len(groups) >= room:
            continue
        run, total = [i], slice_size(by_position[i])
        for step in (-1, 1):  # backwards, then forwards
            j = run[0] if step < 0 else run[-1]
            while slots > 0 and len(run) < n:
                nxt = (j + step) % n
                s = by_position.get(nxt)
                if s is None or nxt in taken or nxt in run or total > merge_at or slice_size(s) > merge_at:
                    break
                total += slice_size(s)
                slots -= 1
                j = nxt
                run = [nxt, *run] if step < 0 else [*run, nxt]
        if len(run) < 2:
            continue
        taken.update(run)
        children = ring.merge_children(run, prefix())
        groups.append(group([by_position[k] for k in run], children, 1))
    # Sort what is left, only where the plan sorts.
    if cfg.sort_columns:
        for i in sorted(set(by_position) - taken):
            if len(groups) >= room:
                break
            node = ring.nodes[i]
            groups.append(group([by_position[i]], (ConsistentHashingNode(node.value, prefix(), NodeTag.REPLACE),), 1))
    return groups


def group_metadata(partition: str, children: tuple[ConsistentHashingNode, ...], seq_no: int) -> dict[str, str]:
    return {GROUP_PARTITION_KEY: partition, GROUP_CHILD_NODE_KEY: child_nodes_json(children),
            GROUP_SEQUENCE_NO_KEY: str(seq_no)}


def group_children(group: ClusteringGroup) -> tuple[ConsistentHashingNode, ...]:
    return parse_child_nodes(group.extra_metadata[GROUP_CHILD_NODE_KEY])


def _current_ring(storage: "Storage", partition: str, seq_no: int, timeline, instant_time: str) -> HashingMetadata:
    ring = committed_ring(storage, partition, ring_committed(timeline))
    if ring is None or ring.seq_no != seq_no:
        raise TimelineError(
            f"clustering {instant_time} was planned on version {seq_no} of partition {partition!r}'s "
            f"hash ring, but the ring in force is {'missing' if ring is None else f'version {ring.seq_no}'}",
            help=f"roll the clustering back (`lakehouse rollback <table> {instant_time}`) and schedule again")
    return ring


def rings_after(storage: "Storage", plan: ClusteringPlan, timeline, instant_time: str) -> dict[str, HashingMetadata]:
    """The rings a resize plan leaves, by partition (its groups' child nodes applied to the ring
    each was planned on, as HoodieSparkConsistentBucketIndex.updateLocation builds them)."""
    children: dict[str, list[ConsistentHashingNode]] = {}
    seq: dict[str, int] = {}
    for g in plan.input_groups:
        if not g.resizes_buckets:
            continue
        p = g.extra_metadata.get(GROUP_PARTITION_KEY, g.partition)
        children.setdefault(p, []).extend(group_children(g))
        seq[p] = int(g.extra_metadata.get(GROUP_SEQUENCE_NO_KEY, "0"))
    return {p: _current_ring(storage, p, seq[p], timeline, instant_time).with_children(c, instant_time)
            for p, c in children.items()}


def route_rows(rows: pa.Table, group: ClusteringGroup, ring: HashingMetadata,
               config: TableConfig) -> list[tuple[str, pa.Table]]:
    """A resize group's merged rows by the file group each goes to under the new ``ring``: one
    per child node that receives rows, in ring order."""
    targets = {c.file_id for c in group_children(group) if c.tag is NodeTag.REPLACE}
    if rows.num_rows == 0:
        return []
    hashes = record_hashes(rows.column(META_RECORD_KEY if META_RECORD_KEY in rows.column_names else KEY),
                           config.bucket_hash_fields, config.record_key_fields)
    nodes = ring.locate(hashes)
    out = []
    for i in np.unique(nodes).tolist():
        fid = ring.nodes[i].file_id
        if fid not in targets:
            raise TimelineError(f"a record of clustering group {group.partition}/{group.slices[0].file_id} "
                                f"hashes to bucket {fid}, which is not one of the group's new buckets",
                                help="the plan does not match the table's hash ring; roll the clustering back "
                                     "and schedule again")
        out.append((fid, rows.filter(pa.array(nodes == i))))
    return out

