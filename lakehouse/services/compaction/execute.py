"""Executing a compaction plan: each operation merges a file slice's base file and log files into
a new base file at the compaction instant, through the engine.

The plan and its instant are the only inputs, so this runs in any process on any machine. A
compaction left inflight by a crashed executor is undone (its partial files deleted, the plan
back to requested) and executed again from the start.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from lakehouse.config import TableConfig, WriteConfig, merged_options
from lakehouse.engine import Engine, default_engine
from lakehouse.errors import CorruptFileError, TimelineError
from lakehouse.faults import InjectedFault, fault_point
from lakehouse.file_group.file_slice import FileSlice, slice_of_files
from lakehouse.file_group.naming import BaseFileName, join
from lakehouse.read.file_slice_reader import SliceReadContext, read_file_slice
from lakehouse.merge import MergeSpec
import pyarrow as pa

from lakehouse.columns import META_FIELDS
from lakehouse.schema import arrow_to_avro_schema
from lakehouse.services.compaction.plan import read_plan
from lakehouse.services.results import delete_results, results_path, write_results
from lakehouse.storage.base import Storage
from lakehouse.timeline.avro_files import CompactionOperation
from lakehouse.timeline.commit_metadata import WriteStat
from lakehouse.timeline.instant import Action, Instant, State
from lakehouse import field_ids
from lakehouse.io.handles import HandleContext, schema_json, write_compacted_base_file, writes_bloom
from lakehouse.io.markers import Markers
from lakehouse.commit import exclusive, start

if TYPE_CHECKING:
    from lakehouse.meta_client import TableMetaClient


@dataclass(frozen=True)
class ExecuteResult:
    instant: str | None
    operations: int = 0
    failed: int = 0
    rows: int = 0
    bytes_written: int = 0
    redone: bool = False
    reason: str = ""

    def to_json(self) -> dict:
        return {"action": "compaction", "step": "execute", "instant": self.instant,
                "operations": self.operations, "failed": self.failed, "rows": self.rows,
                "bytes": self.bytes_written, "redone": self.redone, "reason": self.reason}


@dataclass(frozen=True)
class _Task:
    """One operation, self-contained so that an engine can ship it to another process."""

    # The storage itself, not its URI: reopening by URI would drop the options it was made with
    # (s3.* endpoint and credentials). Storages pickle for engines that ship tasks elsewhere.
    storage: Storage
    instant_time: str
    index: int
    op: CompactionOperation
    committed: frozenset[str]
    # Read once by the driver: every task writes the same schema, and 160 tasks each parsing the
    # commit metadata for it cost more than merging their slices.
    config: TableConfig
    schema: pa.Schema
    # Instants before the first active one were archived after completing: their log blocks are
    # committed too (as the snapshot reader counts them).
    archived_before: str | None = None
    # hoodie.memory.merge.max.size of the process that runs the compaction.
    merge_max_bytes: int | None = None
    # Bytes the committed write stats record for this operation's log files: a log file found
    # shorter lost committed blocks, maybe cut at a block boundary (which reads cannot tell).
    committed_log_sizes: tuple[tuple[str, int], ...] = ()
    # The Iceberg field id of each column path (lakehouse.field_ids).
    field_ids: tuple[tuple[tuple[str, ...], int], ...] = ()

    def is_visible(self, instant: str) -> bool:
        if instant >= self.instant_time:
            return False
        return instant in self.committed or (self.archived_before is not None
                                             and instant < self.archived_before)


def _slice(storage: Storage, op: CompactionOperation) -> FileSlice:
    return slice_of_files(storage, op.partition_path, op.file_id, op.base_instant_time,
                          op.data_file_path, op.delta_file_paths)


def compact_operation(task: _Task) -> WriteStat:
    t = task.instant_time
    config, schema, storage = task.config, task.schema, task.storage
    ctx = SliceReadContext(storage=storage, schema=schema,
                           spec=MergeSpec(config.merge_mode, config.ordering_field),
                           is_visible=task.is_visible,
                           merge_max_bytes=task.merge_max_bytes,
                           duplicate_base_keys="each")
    fs = _slice(storage, task.op)
    on_disk = {lf.path: lf.size for lf in fs.log_files}
    for path, size in task.committed_log_sizes:
        if path in on_disk and on_disk[path] < size:
            raise CorruptFileError(storage.uri(path), f"{on_disk[path]} bytes, but committed writes "
                                   f"recorded {size}: committed log blocks are missing")
    merged = read_file_slice(fs, ctx)
    wc = WriteConfig.from_options(merged_options(config.extra, None, "compaction"))
    data_schema = pa.schema([f for f in schema if f.name not in META_FIELDS])
    avro = arrow_to_avro_schema(data_schema, config.name, with_meta_fields=True)
    hctx = HandleContext(storage=storage, markers=Markers(storage, t), instant_time=t,
                         schema=schema, avro_schema=avro, avro_schema_json=schema_json(avro),
                         config=wc, spec=ctx.spec, bloom=writes_bloom(wc, config.index_type),
                         key_fields=config.record_key_fields, field_ids=dict(task.field_ids))
    stat = write_compacted_base_file(hctx, partition=fs.partition, file_id=fs.file_id, table=merged,
                                     task=task.index, prev_commit=fs.base_instant)
    if task.index == 0:
        fault_point("compaction.mid_execute")
    return WriteStat(**{**stat.__dict__,
                        "total_log_files_compacted": len(fs.log_files),
                        "total_log_size_compacted": fs.total_log_size,
                        "total_log_blocks": ctx.stats["log_blocks"],
                        "total_corrupt_log_block": ctx.stats["corrupt_blocks"]})


def _log_paths(op: CompactionOperation) -> list[str]:
    return [join(op.partition_path, n) for n in op.delta_file_paths]


def _committed_log_sizes(meta: "TableMetaClient", timeline, operations, before: str) -> dict[str, int]:
    """What committed writes before ``before`` recorded as the size of each planned log file."""
    wanted = {p for op in operations for p in _log_paths(op)}
    if not wanted:
        return {}
    sizes = meta.active.committed_file_sizes(i for i in timeline.completed_writes() if i.time < before)
    return {p: n for p, n in sizes.items() if p in wanted}


def run_operation(task: _Task) -> WriteStat | dict:
    """An operation's result, or its failure: one bad slice fails its operation, not the plan."""
    try:
        return compact_operation(task)
    except InjectedFault:
        raise
    except Exception as e:
        return {"fileId": task.op.file_id, "partitionPath": task.op.partition_path,
                "error": f"{type(e).__name__}: {e}"}


def undo_execution(meta: "TableMetaClient", instant_time: str) -> bool:
    """Remove what an execution wrote and put the plan back to requested (idempotent); False
    when the compaction was committed meanwhile (nothing is undone then).

    The inflight file goes first, under the table lock: the commit step publishes only an
    inflight compaction, under that lock, so an executor started again (an Airflow retry of a
    task that was still running) can no longer delete the files of a compaction committed in
    between. The files go after, outside the lock (many requests for a big plan); what a crash
    leaves of them, the next execution sweeps (:func:`_sweep`)."""
    with exclusive(meta):
        timeline = meta.active.load()
        if timeline.is_completed(instant_time) and timeline.is_compaction(instant_time):
            return False
        meta.check_lock()  # "not committed" holds only while the lock does
        meta.storage.delete(meta.active.path(Instant(instant_time, Action.COMPACTION, State.INFLIGHT)))
    _sweep(meta, instant_time)
    return True


def _sweep(meta: "TableMetaClient", instant_time: str) -> None:
    """Delete an undone execution's files, results and markers."""
    storage = meta.storage
    markers = Markers(storage, instant_time)
    for m in markers.all():
        storage.delete(m.data_path)
    # Files written before their marker cannot exist, but a crash can leave data files whose
    # marker folder was already removed by a failed commit: sweep the plan's file groups too.
    plan = read_plan(meta, instant_time)
    ids = {(op.partition_path, op.file_id) for op in plan.operations}
    for partition in sorted({p for p, _ in ids}):
        for info in storage.list(partition):
            bn = BaseFileName.parse(info.name)
            if bn and (partition, bn.file_id) in ids and bn.instant_time == instant_time:
                storage.delete(info.path)
    delete_results(storage, instant_time)
    markers.delete_all()


def _leftovers(storage: Storage, instant_time: str) -> bool:
    """Whether an undo that crashed after giving the plan back left files to sweep (it deletes
    the markers last, the results before them)."""
    return storage.exists(results_path(instant_time)) or bool(Markers(storage, instant_time).all())


def execute_compaction(meta: "TableMetaClient", instant_time: str | None = None, *,
                       engine: Engine | None = None, parallelism: int | None = None) -> ExecuteResult:
    while True:
        timeline = meta.timeline
        pending = timeline.pending_compactions()
        if instant_time is None:
            if not pending.instants:
                return ExecuteResult(None, reason="no compaction is pending")
            inst = pending.instants[0]
        else:
            inst = timeline.get(str(instant_time))
            if inst is None or inst.action is not Action.COMPACTION:
                if inst is not None and timeline.is_compaction(inst.time) and inst.is_completed:
                    return ExecuteResult(inst.time, reason="already committed")
                raise TimelineError(f"{instant_time} is not a pending compaction",
                                    help="`lakehouse compaction show` lists the compactions")
        t = inst.time
        redone = inst.is_inflight
        if not redone or undo_execution(meta, t):
            break
        if instant_time is not None:
            return ExecuteResult(t, reason="already committed")
        # The oldest was committed since the look: the next pending one is the one to run.
    if not redone and _leftovers(meta.storage, t):
        _sweep(meta, t)
    plan = read_plan(meta, t)
    start(meta, Instant(t, Action.COMPACTION, State.REQUESTED))
    timeline = meta.timeline
    committed = frozenset(timeline.completed_write_times)
    schema = meta.schema(timeline=timeline)
    first = timeline.first
    sizes = _committed_log_sizes(meta, timeline, plan.operations, t)
    ids = tuple(field_ids.assign(field_ids.known(meta, timeline), schema).paths.items())
    tasks = [_Task(meta.storage, t, i, op, committed, meta.config, schema,
                   first.time if first else None, meta.memory.merge_max_size,
                   tuple((p, sizes[p]) for p in _log_paths(op) if p in sizes), ids)
             for i, op in enumerate(plan.operations)]
    stats: list[WriteStat] = []
    failures: list[dict] = []
    for r in (engine or default_engine()).map(run_operation, tasks, parallelism):
        (stats if isinstance(r, WriteStat) else failures).append(r)
    fault_point("compaction.after_execute")
    write_results(meta.storage, t, stats, failures)
    return ExecuteResult(t, len(plan.operations), len(failures), sum(s.num_writes for s in stats),
                         sum(s.file_size_in_bytes for s in stats), redone)
