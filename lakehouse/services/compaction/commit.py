"""Committing a compaction: every operation's result present and its file in place, then
``<t>.commit`` (operationType COMPACT) in one atomic step. Otherwise the execution is undone so
that the plan can run again."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping

from lakehouse.errors import TimelineError
from lakehouse.faults import fault_point
from lakehouse.commit import complete, exclusive
from lakehouse import field_ids
from lakehouse.services.compaction.execute import undo_execution
from lakehouse.services.compaction.plan import read_plan
from lakehouse.services.results import delete_results, files_not_as_recorded, read_results
from lakehouse.timeline.carried import carry_forward
from lakehouse.timeline.commit_metadata import CommitMetadata, WriteStat
from lakehouse.timeline.active import Listing
from lakehouse.timeline.instant import Action, Instant
from lakehouse.timeline.schema_resolver import arrow_schema_of, table_avro_schema
from lakehouse.io.markers import Markers

if TYPE_CHECKING:
    from lakehouse.meta_client import TableMetaClient


@dataclass(frozen=True)
class CommitResult:
    instant: str | None
    committed: bool
    operations: int = 0
    rows: int = 0
    reason: str = ""

    def to_json(self) -> dict:
        return {"action": "compaction", "step": "commit", "instant": self.instant,
                "committed": self.committed, "operations": self.operations, "rows": self.rows,
                "reason": self.reason}


def _problems(meta: "TableMetaClient", t: str, stats: list[WriteStat], failures: list[dict]) -> list[str]:
    plan = read_plan(meta, t)
    out = [f"{f['partitionPath']}/{f['fileId']}: {f['error']}" for f in failures]
    done = {(s.partition_path, s.file_id) for s in stats}
    out += [f"{o.partition_path}/{o.file_id}: no result" for o in plan.operations
            if (o.partition_path, o.file_id) not in done]
    return out + files_not_as_recorded(meta.storage, stats)


def commit_compaction(meta: "TableMetaClient", instant_time: str | None = None, *,
                      extra_metadata: Mapping[str, str] | None = None) -> CommitResult:
    found = _inflight(meta.active.load(), instant_time)
    if isinstance(found, CommitResult):
        return found
    t = found.time
    res = read_results(meta.storage, t)
    # One request per result file: checked before the table lock, which writers wait for.
    problems = ["the execution recorded no results"] if res is None else _problems(meta, t, *res)
    if problems:
        if not undo_execution(meta, t):
            return CommitResult(t, True, reason="already committed")
        return CommitResult(t, False, reason="rolled back to requested: " + "; ".join(problems[:5]))
    # Under the lock, what an undo changes is looked at again: an executor started again (an
    # Airflow retry of a task still running) undoes the execution under the lock, inflight file
    # first, and would otherwise delete the files of the compaction committed here.
    with exclusive(meta):
        listing = meta.active.load_listing()
        inst = _inflight(listing.timeline, t)
        if isinstance(inst, CommitResult):
            return inst
        if read_results(meta.storage, t) != res:
            return CommitResult(t, False, reason="the execution was undone or run again while this "
                                "step checked its files; run the commit step again")
        return _publish(meta, inst, res[0], extra_metadata, listing)


def _inflight(timeline, instant_time: str | None) -> Instant | CommitResult:
    """The inflight compaction to commit, or the answer when there is none to commit."""
    if instant_time is None:
        inflight = [i for i in timeline.pending_compactions() if i.is_inflight]
        if not inflight:
            return CommitResult(None, False, reason="no compaction is inflight (run it first)")
        return inflight[0]
    inst = timeline.get(str(instant_time))
    if inst is not None and inst.is_completed and timeline.is_compaction(inst.time):
        return CommitResult(inst.time, True, reason="already committed")
    if inst is None or inst.action is not Action.COMPACTION or not inst.is_inflight:
        raise TimelineError(f"{instant_time} is not an inflight compaction",
                            help="execute the compaction before committing it")
    return inst


def _publish(meta: "TableMetaClient", inst: Instant, stats: list[WriteStat],
             extra_metadata: Mapping[str, str] | None, listing: Listing) -> CommitResult:
    """Complete ``inst`` (under the table lock, whose ``listing`` of ``.hoodie`` it reads)."""
    t = inst.time
    by_partition: dict[str, list[WriteStat]] = {}
    for s in stats:
        by_partition.setdefault(s.partition_path, []).append(s)
    timeline = listing.timeline
    schema = table_avro_schema(meta.active, meta.config, timeline)
    # Ids for the schema recorded: the columns the execution numbered its files with keep the
    # ids the timeline knows them by (lakehouse.field_ids).
    ids = field_ids.assign(field_ids.known(meta, timeline), arrow_schema_of(schema)).extra_metadata() \
        if schema else {}
    done = CommitMetadata(partition_to_write_stats={p: tuple(v) for p, v in by_partition.items()},
                          operation_type="COMPACT", compacted=True,
                          extra_metadata={**(extra_metadata or {}), **({"schema": schema} if schema else {}),
                                          **ids})
    # Carried like every commit's (lakehouse.timeline.carried): a compaction may be the newest.
    done = dataclasses.replace(done, extra_metadata=carry_forward(
        meta.active, timeline, done.extra_metadata, in_order=not meta.concurrency.multi_writer))
    fault_point("compaction.before_commit")
    # complete() checks the lease: an executor started again may have taken the lock from this
    # step, stalled past its lease, and undone the execution (its files are gone).
    # The results and markers go after the hooks ran; a crash before leaves garbage only.
    complete(meta, inst, done.to_bytes(), folders=listing.folders)
    Markers(meta.storage, t).delete_all()
    delete_results(meta.storage, t)
    return CommitResult(t, True, len(stats), sum(s.num_writes for s in stats))
