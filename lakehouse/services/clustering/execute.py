"""Executing a clustering plan: each group's file slices are read (base file and committed log
records merged, as a snapshot read sees them), put in the plan's order (its sort columns, by
its layout), cut into ``numOutputFileGroups`` runs of rows, and written as the base files of
new file groups at the clustering instant (Hudi's SparkSortAndSizeExecutionStrategy).

Records keep their commit time and sequence number (``preserveHoodieMetadata``, always true in
Hudi 0.14/0.15 plans): incremental reads do not see a clustering as new data. Only
``_hoodie_file_name`` points at the new file.

The plan and its instant are the only inputs, so this runs in any process on any machine. A
clustering left inflight by a crashed executor is undone (its files deleted, the instant back to
requested, as Hudi's rollbackInflightClustering reverts it) and executed again from the start.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa

from lakehouse import field_ids
from lakehouse.columns import META_FIELDS
from lakehouse.commit import exclusive, start
from lakehouse.config import CurveBuildMethod, LayoutStrategy, TableConfig, WriteConfig, merged_options
from lakehouse.engine import Engine, default_engine
from lakehouse.consistent_hashing import HashingMetadata
from lakehouse.errors import TimelineError
from lakehouse.faults import InjectedFault, fault_point
from lakehouse.file_group.file_slice import slice_of_files
from lakehouse.file_group.naming import BaseFileName, LogFileName, new_file_id
from lakehouse.io.handles import HandleContext, schema_json, write_compacted_base_file, writes_bloom
from lakehouse.io.markers import Markers
from lakehouse.merge import MergeSpec
from lakehouse.read.file_slice_reader import SliceReadContext, read_file_slice
from lakehouse.schema import arrow_to_avro_schema
from lakehouse.services.clustering.bucket_resize import rings_after, route_rows
from lakehouse.services.clustering.plan import CURVE_PARAM, LAYOUT_PARAM
from lakehouse.services.clustering.space_curve import row_order
from lakehouse.services.results import delete_results, results_path, write_results
from lakehouse.storage.base import Storage
from lakehouse.timeline.clustering_plan import ClusteringGroup, ClusteringPlan
from lakehouse.timeline.commit_metadata import WriteStat
from lakehouse.timeline.instant import Action, Instant, State

if TYPE_CHECKING:
    from lakehouse.meta_client import TableMetaClient

SERVICE = "clustering"


@dataclass(frozen=True)
class ExecuteResult:
    instant: str | None
    groups: int = 0
    failed: int = 0
    rows: int = 0
    files: int = 0
    bytes_written: int = 0
    redone: bool = False
    reason: str = ""

    def to_json(self) -> dict:
        return {"action": "clustering", "step": "execute", "instant": self.instant,
                "groups": self.groups, "failed": self.failed, "rows": self.rows,
                "files": self.files, "bytes": self.bytes_written, "redone": self.redone,
                "reason": self.reason}


@dataclass(frozen=True)
class _Task:
    """One group, self-contained so that an engine can ship it to another process."""

    storage: Storage
    instant_time: str
    index: int
    group: ClusteringGroup
    # The task number (in the write tokens) of the group's first file: the files before it in
    # the plan's groups, so no two files of one clustering share a token.
    first_task: int
    committed: frozenset[str]
    config: TableConfig
    schema: pa.Schema
    sort_columns: tuple[str, ...]
    layout: LayoutStrategy
    curve: CurveBuildMethod
    archived_before: str | None = None
    merge_max_bytes: int | None = None
    field_ids: tuple[tuple[tuple[str, ...], int], ...] = ()
    # A resize group's partition's ring after the clustering: each record goes to its node's
    # file group (lakehouse.services.clustering.bucket_resize).
    ring: HashingMetadata | None = None

    def is_visible(self, instant: str) -> bool:
        return instant in self.committed or (self.archived_before is not None
                                             and instant < self.archived_before)


def cluster_group(task: _Task) -> list[WriteStat]:
    """The new base files of one group."""
    config, storage, t = task.config, task.storage, task.instant_time
    ctx = SliceReadContext(storage=storage, schema=task.schema,
                           spec=MergeSpec(config.merge_mode, config.ordering_field),
                           is_visible=task.is_visible, merge_max_bytes=task.merge_max_bytes,
                           duplicate_base_keys="each")
    parts = []
    for s in task.group.slices:
        base = BaseFileName.parse(s.base_file_name) if s.base_file_name else None
        # A slice of logs only: its base instant is in its log files' names.
        base_instant = base.instant_time if base else _log_base_instant(s.log_file_names)
        fs = slice_of_files(storage, s.partition_path, s.file_id, base_instant, s.base_file_name,
                            s.log_file_names)
        parts.append(read_file_slice(fs, ctx))
    rows = pa.concat_tables(parts) if parts else task.schema.empty_table()
    if task.sort_columns and rows.num_rows > 1:
        rows = rows.take(row_order(rows, task.sort_columns, task.layout, task.curve))
    wc = WriteConfig.from_options(merged_options(config.extra, None, SERVICE))
    data_schema = pa.schema([f for f in task.schema if f.name not in META_FIELDS])
    avro = arrow_to_avro_schema(data_schema, config.name, with_meta_fields=True)
    hctx = HandleContext(storage=storage, markers=Markers(storage, t), instant_time=t,
                         schema=task.schema, avro_schema=avro, avro_schema_json=schema_json(avro),
                         config=wc, spec=ctx.spec, bloom=writes_bloom(wc, config.index_type),
                         key_fields=config.record_key_fields, field_ids=dict(task.field_ids))
    if task.ring is not None:
        pieces = route_rows(rows, task.group, task.ring, config)
    else:
        n = max(1, task.group.num_output_file_groups)
        per_file = max(1, math.ceil(rows.num_rows / n))
        pieces = [(new_file_id(), rows.slice(off, per_file)) for off in range(0, rows.num_rows, per_file)]
    stats = []
    for j, (file_id, piece) in enumerate(pieces):
        stat = write_compacted_base_file(hctx, partition=task.group.partition, file_id=file_id,
                                         table=piece, task=task.first_task + j,
                                         prev_commit="null")
        # What Hudi's bulk-insert create handle records: every record a write, an insert.
        stats.append(WriteStat(**{**stat.__dict__, "num_inserts": stat.num_writes}))
        if task.index == 0 and j == 0:
            fault_point("clustering.mid_execute")
    return stats


def _log_base_instant(log_names: tuple[str, ...]) -> str:
    for n in log_names:
        ln = LogFileName.parse(n)
        if ln is not None:
            return ln.base_instant
    raise TimelineError("a clustering plan's slice names neither a base file nor a log file",
                        help="roll the clustering back (`lakehouse rollback <table> <instant>`) and schedule again")


def run_group(task: _Task) -> list[WriteStat] | dict:
    """A group's results, or its failure (the commit step then undoes the execution)."""
    try:
        return cluster_group(task)
    except InjectedFault:
        raise
    except Exception as e:  # noqa: BLE001 - reported as the group's failure
        return {"partitionPath": task.group.partition, "fileId": ",".join(s.file_id for s in task.group.slices),
                "error": f"{type(e).__name__}: {e}"}


def undo_execution(meta: "TableMetaClient", instant_time: str) -> bool:
    """Remove what an execution wrote and put the clustering back to requested (idempotent);
    False when it was committed meanwhile. As for compaction (lakehouse.services.compaction
    .execute.undo_execution): the inflight file goes first, under the table lock, the files
    after."""
    with exclusive(meta):
        timeline = meta.active.load()
        if timeline.is_completed(instant_time):
            return False
        meta.check_lock()
        meta.storage.delete(meta.active.path(Instant(instant_time, Action.REPLACE_COMMIT, State.INFLIGHT)))
    sweep(meta, instant_time)
    return True


def sweep(meta: "TableMetaClient", instant_time: str) -> None:
    """Delete an undone execution's files, results and markers. Its files are new file groups
    at its instant in the plan's partitions, so a crash that lost the markers leaves nothing
    behind either."""
    storage = meta.storage
    markers = Markers(storage, instant_time)
    for m in markers.all():
        storage.delete(m.data_path)
    plan = meta.active.clustering_plan(instant_time)
    for partition in sorted({g.partition for g in plan.input_groups}):
        for info in storage.list(partition):
            bn = BaseFileName.parse(info.name)
            if bn and bn.instant_time == instant_time:
                storage.delete(info.path)
    delete_results(storage, instant_time, SERVICE)
    markers.delete_all()


def _leftovers(storage: Storage, instant_time: str) -> bool:
    return storage.exists(results_path(instant_time, SERVICE)) or bool(Markers(storage, instant_time).all())


def _pick(meta: "TableMetaClient", instant_time: str | None) -> Instant | ExecuteResult:
    timeline = meta.timeline
    pending = timeline.pending_clusterings()
    if instant_time is None:
        if not pending.instants:
            return ExecuteResult(None, reason="no clustering is pending")
        return pending.instants[0]
    inst = timeline.get(str(instant_time))
    if inst is not None and inst.action is Action.REPLACE_COMMIT and inst.is_completed:
        if meta.active.commit_metadata(inst).operation_type == "CLUSTER":
            return ExecuteResult(inst.time, reason="already committed")
    if inst is None or inst.time not in pending.clustering_times or inst.is_completed:
        raise TimelineError(f"{instant_time} is not a pending clustering",
                            help="`lakehouse clustering show` lists the clusterings")
    return inst


def execute_clustering(meta: "TableMetaClient", instant_time: str | None = None, *,
                       engine: Engine | None = None, parallelism: int | None = None) -> ExecuteResult:
    while True:
        found = _pick(meta, instant_time)
        if isinstance(found, ExecuteResult):
            return found
        t = found.time
        redone = found.is_inflight
        if not redone or undo_execution(meta, t):
            break
        if instant_time is not None:
            return ExecuteResult(t, reason="already committed")
    if not redone and _leftovers(meta.storage, t):
        sweep(meta, t)
    plan: ClusteringPlan = meta.active.clustering_plan(t)
    # A resize's new rings, checked against the rings in force before anything is written.
    rings = rings_after(meta.storage, plan, meta.active.load(), t) \
        if any(g.resizes_buckets for g in plan.input_groups) else {}
    start(meta, Instant(t, Action.REPLACE_COMMIT, State.REQUESTED))
    timeline = meta.timeline
    committed = frozenset(timeline.completed_write_times)
    schema = meta.schema(timeline=timeline)
    first = timeline.first
    ids = tuple(field_ids.assign(field_ids.known(meta, timeline), schema).paths.items())
    params = plan.strategy.strategy_params
    layout = LayoutStrategy(params.get(LAYOUT_PARAM, LayoutStrategy.LINEAR.value).upper())
    curve = CurveBuildMethod(params.get(CURVE_PARAM, CurveBuildMethod.DIRECT.value).upper())
    firsts = [0]
    for g in plan.input_groups:
        firsts.append(firsts[-1] + max(1, g.num_output_file_groups))
    tasks = [_Task(meta.storage, t, i, g, firsts[i], committed, meta.config, schema, plan.sort_columns,
                   layout, curve, first.time if first else None, meta.memory.merge_max_size, ids,
                   rings.get(g.partition) if g.resizes_buckets else None)
             for i, g in enumerate(plan.input_groups)]
    stats: list[WriteStat] = []
    failures: list[dict] = []
    for r in (engine or default_engine()).map(run_group, tasks, parallelism):
        if isinstance(r, dict):
            failures.append(r)
        else:
            stats.extend(r)
    fault_point("clustering.after_execute")
    write_results(meta.storage, t, stats, failures, SERVICE)
    return ExecuteResult(t, len(plan.input_groups), len(failures), sum(s.num_writes for s in stats),
                         len(stats), sum(s.file_size_in_bytes for s in stats), redone)
