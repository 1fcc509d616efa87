"""Scheduling a compaction: decide by the trigger strategy, then plan one operation per file
slice with log files, largest log backlog first, bounded by ``hoodie.compaction.target.io``.

Validations as Hudi's (seed 000): no write may be pending at an earlier instant (its logs would
be missed), and no instant may exist at or after the new one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Mapping

from lakehouse.config import CompactionConfig
from lakehouse.services.compaction.partitions import last_compaction, partitions_to_scan, scan_record
from lakehouse.services.pending_files import without_files_of
from lakehouse.services.rollback import rollback_expired_writes
from lakehouse.errors import ConfigError
from lakehouse.file_group.file_slice import FileSlice
from lakehouse.file_group.view import FileSystemView
from lakehouse.timeline.avro_files import CompactionOperation, CompactionPlan
from lakehouse.timeline.instant import Action, Instant, State
from lakehouse.timeline.instant_time import parse_instant_time
from lakehouse.commit import exclusive, request

if TYPE_CHECKING:
    from lakehouse.meta_client import TableMetaClient

MB = 1024 * 1024


@dataclass(frozen=True)
class ScheduleResult:
    instant: str | None
    operations: int = 0
    log_files: int = 0
    log_bytes: int = 0
    reason: str = ""

    @property
    def scheduled(self) -> bool:
        return self.instant is not None

    def to_json(self) -> dict:
        return {"action": "compaction", "step": "schedule", "instant": self.instant,
                "operations": self.operations, "log_files": self.log_files,
                "log_bytes": self.log_bytes, "reason": self.reason}


@dataclass(frozen=True)
class Trigger:
    fire: bool
    reason: str = field(default="")


def trigger(cfg: CompactionConfig, delta_commits: int, seconds: float, log_bytes: int) -> Trigger:
    """Whether ``cfg``'s trigger strategy fires on these counts, and the counts as words."""
    by_num = delta_commits >= cfg.max_delta_commits
    by_time = seconds >= cfg.max_delta_seconds
    by_bytes = log_bytes >= cfg.max_log_bytes
    num = f"{delta_commits} of {cfg.max_delta_commits} delta commits"
    tim = f"{int(seconds)} of {cfg.max_delta_seconds} seconds"
    byt = f"{log_bytes} of {cfg.max_log_bytes} log bytes"
    rules = {
        "NUM_COMMITS": (by_num, num), "TIME_ELAPSED": (by_time, tim),
        "NUM_AND_TIME": (by_num and by_time, f"{num} and {tim}"),
        "NUM_OR_TIME": (by_num or by_time, f"{num}, {tim}"),
        "LOG_BYTES": (by_bytes, byt), "NUM_OR_LOG_BYTES": (by_num or by_bytes, f"{num}, {byt}"),
    }
    fire, reason = rules[cfg.trigger_strategy]
    return Trigger(fire, reason)


def _operation(s: FileSlice) -> CompactionOperation:
    log_bytes = s.total_log_size
    read_mb = (s.base_size + log_bytes) / MB
    write_mb = (s.base_size or log_bytes) / MB
    return CompactionOperation(
        file_id=s.file_id, partition_path=s.partition, base_instant_time=s.base_instant,
        data_file_path=str(s.base_file.name) if s.base_file else None,
        delta_file_paths=tuple(str(lf.name) for lf in s.log_files),
        metrics={"TOTAL_LOG_FILES": float(len(s.log_files)), "TOTAL_LOG_FILES_SIZE": float(log_bytes),
                 "TOTAL_IO_READ_MB": read_mb, "TOTAL_IO_WRITE_MB": write_mb,
                 "TOTAL_IO_MB": read_mb + write_mb})


def plan_operations(slices: list[FileSlice], cfg: CompactionConfig) -> list[CompactionOperation]:
    """LogFileSizeBasedCompactionStrategy: biggest log backlog first, up to the I/O budget."""
    eligible = [s for s in slices if s.log_files and s.total_log_size >= cfg.log_size_threshold]
    eligible.sort(key=lambda s: (-s.total_log_size, s.partition, s.file_id))
    ops: list[CompactionOperation] = []
    io = 0.0
    for s in eligible:
        op = _operation(s)
        if ops and io + op.metrics["TOTAL_IO_MB"] > cfg.target_io_mb:
            break
        ops.append(op)
        io += op.metrics["TOTAL_IO_MB"]
    return ops


def schedule_compaction(meta: "TableMetaClient", config: CompactionConfig | None = None, *,
                        now: datetime | None = None, force: bool = False,
                        extra_metadata: Mapping[str, str] | None = None) -> ScheduleResult:
    """Write ``<t>.compaction.requested`` if the trigger fires (or ``force``); else say why not.
    ``extra_metadata`` (who asked, say) goes into the plan's extraMetadata."""
    require_mor(meta)
    cfg = config or CompactionConfig.from_options(meta.options(None, "compaction"))
    if not cfg.services_enabled:
        return ScheduleResult(None, reason="table services are off (hoodie.table.services.enabled=false)")
    if meta.concurrency.lazy_rollback:
        # A write whose writer died would hold the plan back until the next write rolled it
        # back (an earlier pending write's logs would be missed); roll it back now, as a clean
        # does under Hudi's LAZY failed-writes policy. Live writers' writes still hold it back.
        rollback_expired_writes(meta)
    # The check "no earlier write pending" and the plan's instant must be one step, or a writer
    # could take its instant in between, miss the plan and write logs the plan misses (one
    # writer too: the writer and the planner are different processes).
    with exclusive(meta):
        return _schedule(meta, cfg, now, force, extra_metadata)


def _schedule(meta: "TableMetaClient", cfg: CompactionConfig, now: datetime | None, force: bool,
              extra_metadata: Mapping[str, str] | None) -> ScheduleResult:
    timeline = meta.timeline
    # A pending clustering is not a write: its file groups are left out of the plan instead.
    pending_writes = timeline.pending_writes([Action.DELTA_COMMIT, Action.COMMIT, Action.REPLACE_COMMIT])
    if pending_writes.instants and not meta.concurrency.multi_writer:
        # One writer: its commit checks nothing against a plan, so the plan waits for it.
        first = pending_writes.instants[0]
        return ScheduleResult(None, reason=f"write {first.time} is still {first.state.name.lower()}; "
                              "its logs would be missed: commit or roll it back first")
    last = last_compaction(timeline)
    deltas = [i for i in timeline.completed().filter(actions=[Action.DELTA_COMMIT])
              if last is None or i.time > last]
    compacting = set(meta.active.pending_compaction_file_groups(timeline))
    view = FileSystemView.load(meta.storage, timeline, meta.active,
                               partitions_to_scan(meta, timeline, compacting))
    # File groups a pending clustering rewrites are left out too (Hudi's
    # BaseHoodieCompactionPlanGenerator), so no file group is in both plans.
    in_plan = compacting | set(meta.active.pending_clustering_file_groups(timeline))
    with_logs = [s for s in view.latest_slices_for_write() if s.log_files]
    if pending_writes.instants:
        with_logs = without_files_of(meta, with_logs, pending_writes.instants)
    # File groups already in a pending plan wait for it; their new logs go to the next slice.
    slices = [s for s in with_logs if (s.partition, s.file_id) not in in_plan]
    log_bytes = sum(s.total_log_size for s in slices)
    since = last or (deltas[0].time if deltas else None)
    now = now or datetime.now(timezone.utc)
    seconds = (now - parse_instant_time(since)).total_seconds() if since else 0.0
    trig = trigger(cfg, len(deltas), seconds, log_bytes)
    if not trig.fire and not force:
        return ScheduleResult(None, reason=f"not yet: {trig.reason}")
    ops = plan_operations(slices, cfg)
    if not ops:
        return ScheduleResult(None, reason="no file slice has log files to compact")
    # No strategy record, as Hudi's CompactionStrategy.generateCompactionPlan writes none: Hudi's
    # HoodieCompactor reads compactorClassName as the CompactionExecutionHelper to load (log
    # compaction's plans name theirs), so any other class there fails Java's compactor.
    planned = {(o.partition_path, o.file_id) for o in ops}
    plan = CompactionPlan(operations=tuple(ops), strategy=None,
        extra_metadata={**(extra_metadata or {}),
                        "lakehouse.trigger": trig.reason if trig.fire else f"forced ({trig.reason})",
                        **scan_record(timeline, pending_writes.instants, with_logs, planned)},
        preserve_hoodie_metadata=True)
    # request() checks the lease: "no write pending" holds only while the lock does.
    inst = request(meta, Action.COMPACTION, plan.to_bytes(), timeline=timeline)
    # Seed 000's rule: nothing may have completed at or after the compaction instant.
    later = [i for i in meta.timeline.completed() if i.time >= inst.time]
    if later:
        # Lost the lock since the plan: a write that saw the plan pending may have put its
        # logs on the plan's slice and completed; deleting the plan would then hide them.
        meta.check_lock()
        meta.active.storage.delete(meta.active.path(inst))
        return ScheduleResult(None, reason=f"{later[0].time} completed at or after the compaction "
                              "instant while it was being scheduled; try again")
    return ScheduleResult(inst.time, len(ops), sum(len(o.delta_file_paths) for o in ops),
                          int(sum(o.metrics["TOTAL_LOG_FILES_SIZE"] for o in ops)),
                          reason=trig.reason if trig.fire else "forced")


def require_mor(meta: "TableMetaClient") -> "TableMetaClient":
    """``meta``, if its table can compact at all (every compaction entry point checks this first)."""
    if not meta.config.is_mor:
        raise ConfigError(f"{meta.name} is a COPY_ON_WRITE table; only MERGE_ON_READ tables compact",
                          help="copy-on-write tables have no logs to compact")
    return meta


def read_plan(meta: "TableMetaClient", instant_time: str) -> CompactionPlan:
    inst = Instant(instant_time, Action.COMPACTION, State.REQUESTED)
    return CompactionPlan.from_bytes(meta.active.read(inst), meta.storage.uri(meta.active.path(inst)))


