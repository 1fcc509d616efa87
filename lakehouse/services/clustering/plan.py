"""Scheduling a clustering: decide by the trigger, then group each partition's small file slices
(Hudi's SparkSizeBasedClusteringPlanStrategy) into a ``<t>.replacecommit.requested`` holding a
``HoodieClusteringPlan``.

Per partition (PartitionAwareClusteringPlanStrategy.buildClusteringGroupsForPartition): the
slices whose base file is under ``small.file.limit`` (a slice of logs only counts as
``hoodie.parquet.max.file.size``), largest first, fill groups of at most ``max.bytes.per.group``;
each group writes ``ceil(bytes / target.file.max.bytes)`` files; at most ``max.num.groups``
groups in all. File groups a pending compaction or clustering works on are left out
(ClusteringPlanStrategy.getFileSlicesEligibleForClustering).

One difference from Hudi, on purpose: a group of one file slice that neither sorts nor merges
logs is left out (Hudi's single-group clustering would rewrite the file as it is).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping

from lakehouse.commit import exclusive, request
from lakehouse.config import ClusteringConfig, IndexType, WriteConfig
from lakehouse.errors import ConfigError
from lakehouse.file_group.file_slice import FileSlice
from lakehouse.file_group.view import FileSystemView
from lakehouse.services.pending_files import without_files_of
from lakehouse.services.rollback import rollback_expired_writes
from lakehouse.consistent_hashing import committed_ring, ring_committed
from lakehouse.services.clustering.bucket_resize import group_metadata, partition_groups
from lakehouse.timeline.clustering_plan import (CONSISTENT_BUCKET_STRATEGY, SORT_AND_SIZE_STRATEGY, SORT_COLUMNS_PARAM,
                                                ClusteringGroup, ClusteringPlan, ClusteringStrategy, SliceInfo)
from lakehouse.timeline.instant import Action

if TYPE_CHECKING:
    from lakehouse.meta_client import TableMetaClient
    from lakehouse.timeline.active import Timeline

MB = 1024 * 1024
# Where a plan records the layout its sort uses (Hudi reads it from the executor's config; a
# plan that carries it runs the same in any process). Java's executor ignores unknown params.
LAYOUT_PARAM = "hoodie.layout.optimize.strategy"
CURVE_PARAM = "hoodie.layout.optimize.curve.build.method"


@dataclass(frozen=True)
class ScheduleResult:
    instant: str | None
    groups: int = 0
    file_slices: int = 0
    input_bytes: int = 0
    output_file_groups: int = 0
    reason: str = ""

    @property
    def scheduled(self) -> bool:
        return self.instant is not None

    def to_json(self) -> dict:
        return {"action": "clustering", "step": "schedule", "instant": self.instant,
                "groups": self.groups, "file_slices": self.file_slices,
                "input_bytes": self.input_bytes, "output_file_groups": self.output_file_groups,
                "reason": self.reason}


def require_clusterable(meta: "TableMetaClient") -> "TableMetaClient":
    """``meta``, if its table can be clustered (every clustering entry point checks this first)."""
    cfg = meta.config
    if cfg.index_type is IndexType.BUCKET and not cfg.consistent_hashing:
        raise ConfigError(
            f"{meta.name} uses the bucket index with the SIMPLE engine: its file groups are a fixed "
            "number of buckets, which a clustering cannot regroup (Hudi refuses it too)",
            help="tables with hoodie.index.bucket.engine=CONSISTENT_HASHING, or hoodie.index.type "
                 "SIMPLE, BLOOM, GLOBAL_SIMPLE or GLOBAL_BLOOM, cluster")
    return meta


def last_clustering(meta: "TableMetaClient", timeline: "Timeline") -> str | None:
    """The newest completed clustering (a replace commit whose operation is CLUSTER)."""
    for inst in reversed(timeline.completed().filter(actions=[Action.REPLACE_COMMIT]).instants):
        if meta.active.commit_metadata(inst).operation_type == "CLUSTER":
            return inst.time
    return None


def schedule_clustering(meta: "TableMetaClient", config: ClusteringConfig | None = None, *,
                        force: bool = False, extra_metadata: Mapping[str, str] | None = None,
                        options: Mapping[str, str] | None = None) -> ScheduleResult:
    """Write ``<t>.replacecommit.requested`` if the trigger fires (or ``force``) and some file
    slices are worth clustering; else say why not."""
    require_clusterable(meta)
    opts = meta.options(options, "clustering")
    cfg = config or ClusteringConfig.from_options(opts)
    if not cfg.services_enabled:
        return ScheduleResult(None, reason="table services are off (hoodie.table.services.enabled=false)")
    missing = [c for c in cfg.sort_columns if c not in meta.schema().names]
    if missing:
        raise ConfigError(f"hoodie.clustering.plan.strategy.sort.columns names {', '.join(missing)}, "
                          f"which {meta.name} does not have",
                          help="name columns of the table's schema (`lakehouse describe` shows it)")
    if meta.concurrency.lazy_rollback:
        rollback_expired_writes(meta)
    max_file_size = WriteConfig.from_options(opts).max_file_size
    # "No write pending" and the plan's instant are one step, as for compaction: a writer that
    # starts after the plan sees it and keeps out of its file groups.
    with exclusive(meta):
        return _schedule(meta, cfg, max_file_size, force, extra_metadata)


def _schedule(meta: "TableMetaClient", cfg: ClusteringConfig, max_file_size: int, force: bool,
              extra_metadata: Mapping[str, str] | None) -> ScheduleResult:
    timeline = meta.timeline
    pending = timeline.pending_writes()
    if pending.instants and (meta.config.consistent_hashing or not meta.concurrency.multi_writer):
        # Consistent hashing: a writer in flight routed its records by the rings this plan
        # changes (BaseConsistentHashingBucketClusteringPlanStrategy.checkPrecondition).
        # One writer: its commit would fail on the plan's file groups; the plan waits for it.
        first = pending.instants[0]
        return ScheduleResult(None, reason=f"write {first.time} is still {first.state.name.lower()}: "
                              "commit or roll it back first")
    last = last_clustering(meta, timeline)
    commits = [i for i in timeline.completed_writes()
               if (last is None or i.time > last) and not timeline.is_compaction(i.time)]
    reason = f"{len(commits)} of {cfg.max_commits} commits since the last clustering"
    if len(commits) < cfg.max_commits and not force:
        return ScheduleResult(None, reason=f"not yet: {reason}")
    view = FileSystemView.load(meta.storage, timeline, meta.active)
    clustering = meta.active.pending_clustering_file_groups(timeline)
    busy = set(clustering) | set(meta.active.pending_compaction_file_groups(timeline))
    candidates = view.latest_slices_for_write()
    if pending.instants:  # several writers: planned past writes in flight, without their files
        candidates = without_files_of(meta, candidates, pending.instants, keep_base_only=True)
    # Consistent hashing resizes whole buckets, whatever their size, and a partition with a
    # clustering pending waits for it (one change of its ring at a time).
    resizing = meta.config.consistent_hashing
    waiting = {p for p, _ in clustering} if resizing else set()
    by_partition: dict[str, list[FileSlice]] = {}
    for s in candidates:
        if (s.partition, s.file_id) in busy or s.partition in waiting:
            continue
        if (not resizing and s.base_size >= cfg.small_file_limit) or (s.base_file is None and not s.log_files):
            continue
        by_partition.setdefault(s.partition, []).append(s)
    groups: list[ClusteringGroup] = []
    for partition in cfg.partitions(list(by_partition)):
        room = cfg.max_num_groups - len(groups)
        if room <= 0:
            break
        if resizing:
            groups += _resize_groups(meta, timeline, partition, by_partition[partition], cfg, max_file_size, room)
        else:
            groups += _groups(by_partition[partition], cfg, max_file_size, room, meta.storage)
    if not groups and resizing:
        return ScheduleResult(None, reason=(
            f"no bucket to resize: none over {_size(cfg.split_threshold * max_file_size)} "
            f"(hoodie.bucket.index.split.threshold x hoodie.parquet.max.file.size) with room to split "
            f"(hoodie.bucket.index.max.num.buckets), no ring neighbours all under "
            f"{_size(cfg.merge_threshold * max_file_size)} to merge"))
    if not groups:
        return ScheduleResult(None, reason="no file slices to cluster (none small enough, or "
                              "each alone in its partition with nothing to sort or merge)")
    params = {}
    if cfg.sort_columns:
        params = {SORT_COLUMNS_PARAM: ",".join(cfg.sort_columns), LAYOUT_PARAM: cfg.layout.value,
                  CURVE_PARAM: cfg.curve_build_method.value}
    strategy = ClusteringStrategy(CONSISTENT_BUCKET_STRATEGY if resizing else SORT_AND_SIZE_STRATEGY, params)
    plan = ClusteringPlan(tuple(groups), strategy)
    trigger = reason if len(commits) >= cfg.max_commits else f"forced ({reason})"
    inst = request(meta, Action.REPLACE_COMMIT, plan.to_requested_bytes(
        {**(extra_metadata or {}), "lakehouse.trigger": trigger}))
    size = sum(int(g.metrics.get("TOTAL_IO_READ_MB", 0) * MB) for g in groups)
    return ScheduleResult(inst.time, len(groups), sum(len(g.slices) for g in groups), size,
                          sum(g.num_output_file_groups for g in groups), reason=trigger)


def _size(n: float) -> str:
    return f"{n / MB:.1f} MiB" if n >= MB else f"{n / 1024:.1f} KiB"


def _resize_groups(meta: "TableMetaClient", timeline: "Timeline", partition: str, slices: list[FileSlice],
                   cfg: ClusteringConfig, max_file_size: int, room: int) -> list[ClusteringGroup]:
    ring = committed_ring(meta.storage, partition, ring_committed(timeline))
    if ring is None:  # file groups without a ring: written by a SIMPLE-engine writer
        return []

    def group(members: list[FileSlice], children, outputs: int) -> ClusteringGroup:
        g = _group(members, cfg, max_file_size, meta.storage)
        return dataclasses.replace(g, num_output_file_groups=outputs,
                                   extra_metadata=group_metadata(partition, children, ring.seq_no))
    return partition_groups(ring, slices, meta.config, cfg, max_file_size, room, group)


def _slice_bytes(s: FileSlice, max_file_size: int) -> int:
    return s.base_file.size if s.base_file is not None else max_file_size


def _groups(slices: list[FileSlice], cfg: ClusteringConfig, max_file_size: int, room: int,
            storage) -> list[ClusteringGroup]:
    ordered = sorted(slices, key=lambda s: (-_slice_bytes(s, max_file_size), s.file_id))
    out: list[list[FileSlice]] = []
    current: list[FileSlice] = []
    size = 0
    for s in ordered:
        b = _slice_bytes(s, max_file_size)
        if current and size + b > cfg.max_bytes_per_group:
            out.append(current)
            current, size = [], 0
            if len(out) >= room:
                break
        current.append(s)
        size += b
    else:
        if current:
            out.append(current)
    keep = []
    for g in out[:room]:
        alone = len(g) == 1
        if alone and not (cfg.single_group_clustering and (cfg.sort_columns or g[0].log_files)):
            continue
        keep.append(_group(g, cfg, max_file_size, storage))
    return keep


def _group(slices: list[FileSlice], cfg: ClusteringConfig, max_file_size: int, storage) -> ClusteringGroup:
    base = sum(s.base_size for s in slices)
    logs = sum(s.total_log_size for s in slices)
    write = sum(_slice_bytes(s, max_file_size) for s in slices)
    metrics = {"TOTAL_IO_READ_MB": (base + logs) / MB, "TOTAL_IO_WRITE_MB": write / MB,
               "TOTAL_IO_MB": (base + logs + write) / MB, "TOTAL_LOG_FILES_SIZE": float(logs),
               "TOTAL_LOG_FILES": float(sum(len(s.log_files) for s in slices))}
    n = max(1, math.ceil(write / cfg.target_file_max_bytes))
    infos = tuple(SliceInfo(s.partition, s.file_id,
                            storage.uri(s.base_file.path) if s.base_file is not None else "",
                            tuple(storage.uri(lf.path) for lf in s.log_files))
                  for s in sorted(slices, key=lambda s: s.file_id))
    return ClusteringGroup(infos, metrics, n)
