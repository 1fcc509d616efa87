"""Committing a clustering: every group's result present and its files in place, then
``<t>.replacecommit`` (operationType CLUSTER, ``partitionToReplaceFileIds`` naming every input
file group) in one atomic step. Otherwise the execution is undone so the plan can run again.

As Hudi's default conflict strategy (SimpleConcurrentFileWritesConflictResolutionStrategy, whose
``isPreCommitRequired`` is false) the clustering commit checks nothing against writers: a writer
that touched a file group of a pending or completed clustering is the one that fails, at its own
commit (lakehouse.concurrency.conflict.check_clustering).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping

from lakehouse import field_ids
from lakehouse.commit import complete, exclusive
from lakehouse.errors import TimelineError
from lakehouse.faults import fault_point
from lakehouse.io.markers import Markers
from lakehouse.consistent_hashing import write_rings
from lakehouse.services.clustering.bucket_resize import rings_after
from lakehouse.services.clustering.execute import SERVICE, undo_execution
from lakehouse.services.results import delete_results, files_not_as_recorded, read_results
from lakehouse.timeline.carried import carry_forward
from lakehouse.timeline.commit_metadata import CommitMetadata, WriteStat
from lakehouse.timeline.instant import Action, Instant
from lakehouse.timeline.schema_resolver import arrow_schema_of, table_avro_schema

if TYPE_CHECKING:
    from lakehouse.meta_client import TableMetaClient


@dataclass(frozen=True)
class CommitResult:
    instant: str | None
    committed: bool
    file_groups_replaced: int = 0
    files_written: int = 0
    rows: int = 0
    reason: str = ""

    def to_json(self) -> dict:
        return {"action": "clustering", "step": "commit", "instant": self.instant,
                "committed": self.committed, "file_groups_replaced": self.file_groups_replaced,
                "files_written": self.files_written, "rows": self.rows, "reason": self.reason}


def _problems(meta: "TableMetaClient", t: str, stats: list[WriteStat], failures: list[dict]) -> list[str]:
    return [f"{f['partitionPath']}/{f['fileId']}: {f['error']}" for f in failures] + \
        files_not_as_recorded(meta.storage, stats)


def commit_clustering(meta: "TableMetaClient", instant_time: str | None = None, *,
                      extra_metadata: Mapping[str, str] | None = None) -> CommitResult:
    found = _inflight(meta, meta.active.load(), instant_time)
    if isinstance(found, CommitResult):
        return found
    t = found.time
    res = read_results(meta.storage, t, SERVICE)
    problems = ["the execution recorded no results"] if res is None else _problems(meta, t, *res)
    if problems:
        if not undo_execution(meta, t):
            return CommitResult(t, True, reason="already committed")
        return CommitResult(t, False, reason="rolled back to requested: " + "; ".join(problems[:5]))
    with exclusive(meta):
        inst = _inflight(meta, meta.active.load(), t)
        if isinstance(inst, CommitResult):
            return inst
        if read_results(meta.storage, t, SERVICE) != res:
            return CommitResult(t, False, reason="the execution was undone or run again while this "
                                "step checked its files; run the commit step again")
        return _publish(meta, inst, res[0], extra_metadata)


def _inflight(meta: "TableMetaClient", timeline, instant_time: str | None) -> Instant | CommitResult:
    if instant_time is None:
        inflight = [i for i in timeline.pending_clusterings() if i.is_inflight]
        if not inflight:
            return CommitResult(None, False, reason="no clustering is inflight (execute it first)")
        return inflight[0]
    inst = timeline.get(str(instant_time))
    if inst is not None and inst.is_completed and inst.action is Action.REPLACE_COMMIT \
            and meta.active.commit_metadata(inst).operation_type == "CLUSTER":
        return CommitResult(inst.time, True, reason="already committed")
    if inst is None or not timeline.is_clustering(inst.time) or not inst.is_inflight:
        raise TimelineError(f"{instant_time} is not an inflight clustering",
                            help="execute the clustering before committing it")
    return inst


def _publish(meta: "TableMetaClient", inst: Instant, stats: list[WriteStat],
             extra_metadata: Mapping[str, str] | None) -> CommitResult:
    t = inst.time
    plan = meta.active.clustering_plan(t)
    written = {(s.partition_path, s.file_id) for s in stats}
    replaced: dict[str, list[str]] = {}
    for p, f in sorted(plan.file_groups - written):
        replaced.setdefault(p, []).append(f)
    by_partition: dict[str, list[WriteStat]] = {}
    for s in stats:
        by_partition.setdefault(s.partition_path, []).append(s)
    timeline = meta.timeline
    schema = table_avro_schema(meta.active, meta.config, timeline)
    ids = field_ids.assign(field_ids.known(meta, timeline), arrow_schema_of(schema)).extra_metadata() \
        if schema else {}
    done = CommitMetadata(partition_to_write_stats={p: tuple(v) for p, v in by_partition.items()},
                          operation_type="CLUSTER", compacted=False,
                          extra_metadata={**(extra_metadata or {}), **({"schema": schema} if schema else {}),
                                          **ids},
                          partition_to_replace_file_ids={p: tuple(v) for p, v in replaced.items()})
    done = dataclasses.replace(done, extra_metadata=carry_forward(
        meta.active, timeline, done.extra_metadata, in_order=not meta.concurrency.multi_writer))
    if any(g.resizes_buckets for g in plan.input_groups):
        # The partitions' next rings, in force once the replacecommit completes (a crash before
        # that leaves a ring file of a pending instant, which no reader or writer takes).
        write_rings(meta.storage, rings_after(meta.storage, plan, timeline, t))
    fault_point("clustering.before_commit")
    complete(meta, inst, done.to_bytes())
    Markers(meta.storage, t).delete_all()
    delete_results(meta.storage, t, SERVICE)
    return CommitResult(t, True, sum(len(v) for v in replaced.values()), len(stats),
                        sum(s.num_writes for s in stats))
