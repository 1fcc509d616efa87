"""Phase 2 of a write: the results phase 1 recorded on the inflight instant are checked against
the files, and the instant is completed in one atomic step (under the table lock, after the
conflict checks, with several writers). It may run in another process than phase 1: the
Airflow commit task, a Spark driver."""

from __future__ import annotations

import dataclasses

from typing import TYPE_CHECKING, Mapping, NamedTuple

from lakehouse.commit import complete, exclusive, hooks_deferred
from lakehouse.concurrency.conflict import START_KEY, check_clustering, check_conflicts
from lakehouse.errors import CommitConflictError, TimelineError, WriteError
from lakehouse import field_ids
from lakehouse.field_ids import FieldIds
from lakehouse.io.markers import Marker, Markers
from lakehouse.config import IndexType
from lakehouse.faults import fault_point
from lakehouse.properties import read_table_config
from lakehouse.services.rollback import pending_rollback_plan, rollback_instant
from lakehouse.timeline.carried import carry_forward
from lakehouse.timeline.active import Listing
from lakehouse.timeline.commit_metadata import CommitMetadata
from lakehouse.timeline.instant import Action, Instant, State

if TYPE_CHECKING:
    from lakehouse.meta_client import TableMetaClient
    from lakehouse.write.context import WriteContext

# Extra metadata phase 1 records on the inflight instant: its results are complete; the bucket
# count it hashed keys with. Phase 2 removes both from the completed instant.
RESULTS_KEY = "lakehouse.write.results"
BUCKETS_KEY = "lakehouse.bucket.index.num.buckets"


class Recorded(NamedTuple):
    """What phase 1 of this process left for its phase 2: the inflight instant, the results and,
    where every file was written here, every marker of the instant."""
    instant: Instant
    metadata: CommitMetadata
    markers: "list[Marker] | None" = None


def phase_one_problem(meta: "TableMetaClient", instant_time: str) -> str:
    """Why ``instant_time`` cannot be committed ('' if its phase 1 recorded complete results)."""
    inst = meta.timeline.get(instant_time)
    if inst is None:
        return f"{instant_time} is not on the timeline"
    if not inst.is_inflight:
        return f"{instant_time} is {inst.state.name.lower()}, not inflight"
    recorded = CommitMetadata.from_bytes(meta.active.read(inst), meta.active.path(inst))
    if recorded.extra_metadata.get(RESULTS_KEY) != "complete":
        return ("phase 1 has not recorded complete results (still writing, or crashed: the next "
                "write rolls it back)")
    return ""


def commit(meta: "TableMetaClient", context: "WriteContext", instant_time: str,
           extra_metadata: Mapping[str, str] | None = None, *,
           recorded: Recorded | None = None) -> CommitMetadata:
    """Complete ``instant_time`` (already completed: its metadata, nothing done). ``recorded``:
    what this process's phase 1 just recorded (then the results and the files they name are not
    read back, nor the markers it knows listed: the lock-held check that the instant is still
    pending still runs)."""
    if not meta.concurrency.multi_writer:
        return _commit(meta, context, instant_time, extra_metadata, recorded)
    # The commit may run in another process than phase 1 (the Airflow commit step): it shows
    # life again, so that nobody takes the waiting write for a dead one meanwhile.
    beats = meta.heartbeats
    beats.start(instant_time)
    done = False
    try:
        final = _commit(meta, context, instant_time, extra_metadata, recorded)
        done = True
        return final
    finally:
        gone = not done and meta.active.load().get(instant_time) is None
        beats.stop(instant_time, delete=done or gone)


def _commit(meta: "TableMetaClient", context: "WriteContext", instant_time: str,
            extra_metadata: Mapping[str, str] | None,
            mine: Recorded | None = None) -> CommitMetadata:
    storage = meta.storage
    known = None
    if mine is not None:
        inst, recorded, known = mine
    else:
        inst, recorded = _recorded_results(meta, instant_time)
        if inst.is_completed:
            return recorded
    # Files this instant created that its results do not list (a retried task's first attempt,
    # say) would become visible with the commit: remove them while still invisible.
    listed = {s.path for s in recorded.write_stats()}
    markers = known if known is not None else Markers(storage, instant_time).all()
    for m in markers:
        if m.data_path not in listed:
            storage.delete(m.data_path)
    extra = {k: v for k, v in recorded.extra_metadata.items() if k not in (RESULTS_KEY, START_KEY, BUCKETS_KEY)}
    extra.update(extra_metadata or {})
    final = CommitMetadata(recorded.partition_to_write_stats, recorded.operation_type, recorded.compacted,
                           extra, recorded.partition_to_replace_file_ids)
    fault_point("commit.before_complete")
    # The post-commit hooks (Iceberg) run at the end, outside the table lock.
    with hooks_deferred(meta):
        return _complete(meta, context, inst, recorded, final, markers)


def _recorded_results(meta: "TableMetaClient", instant_time: str) -> "tuple[Instant, CommitMetadata]":
    """The instant and the results phase 1 recorded on it, checked against the files (a
    completed instant: its commit metadata)."""
    active, storage = meta.active, meta.storage
    inst = active.load().get(instant_time)
    if inst is None:
        raise TimelineError(f"instant {instant_time} is not on the timeline",
                            help="it may have been rolled back; write the batch again")
    if inst.is_completed:
        return inst, active.commit_metadata(inst)
    if not inst.is_inflight or inst.action not in (Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT):
        raise TimelineError(f"{inst} is not an inflight write", help="run phase 1 first")
    recorded = CommitMetadata.from_bytes(active.read(inst), active.path(inst))
    if recorded.extra_metadata.get(RESULTS_KEY) != "complete":
        raise WriteError(f"instant {instant_time} has no complete write results; its writer "
                         "did not finish phase 1",
                         help="roll it back (the next write does so) and write the batch again")
    for s in recorded.write_stats():
        size = storage.info(s.path)
        if size is None or size.size != s.file_size_in_bytes:
            raise WriteError(f"instant {instant_time}: {s.path} is "
                             f"{'missing' if size is None else f'{size.size} bytes, expected {s.file_size_in_bytes}'}",
                             help="roll the instant back and write the batch again")
    return inst, recorded


def _complete(meta: "TableMetaClient", context: "WriteContext", inst, recorded: CommitMetadata,
              final: CommitMetadata, markers: "list | None" = None) -> CommitMetadata:
    instant_time = inst.time
    # Under the table lock (one writer too: the next write's recovery rolls back a write left
    # pending, and a commit step in another process must not publish what it is undoing).
    with exclusive(meta):
        listing = _still_ours(meta, inst)
        now = listing.timeline
        try:
            check_clustering(meta.active, now, instant_time, recorded)
        except CommitConflictError:
            rollback_own(meta, inst)
            raise
        if meta.concurrency.multi_writer:
            try:
                _check_bucket_count(meta, recorded, instant_time)
                _check_field_ids(meta, recorded, instant_time, now)
                check_conflicts(meta.active, now, instant_time, recorded,
                                global_index=context.config.index_type.is_global)
            except CommitConflictError:
                rollback_own(meta, inst)
                raise
        # One writer too: the next write's recovery, in another process, may have taken the
        # lock from a commit step that stalled past its lease and rolled this write back.
        # What sources and streaming queries applied rides on every commit (read under the
        # lock, so no other commit can land between the read and this one).
        final = dataclasses.replace(final, extra_metadata=carry_forward(
            meta.active, now, final.extra_metadata, context.write_config.meta_key_prefixes,
            in_order=not meta.concurrency.multi_writer))
        complete(meta, inst, final.to_bytes(), folders=listing.folders, timeline=now)  # which checks the lease
    fault_point("commit.after_complete")
    Markers(meta.storage, instant_time).delete_all(markers)
    return final


def _check_bucket_count(meta: "TableMetaClient", recorded: CommitMetadata, instant_time: str) -> None:
    """Under the table lock: the write hashed keys with the table's bucket count (a first write
    of another writer may have fixed it meanwhile; lakehouse.write.bucket_sizing)."""
    used = recorded.extra_metadata.get(BUCKETS_KEY)
    if used is None:
        return
    stored = read_table_config(meta.storage)
    if stored.index_type is IndexType.BUCKET and str(stored.bucket_num) != used:
        raise CommitConflictError(
            f"instant {instant_time} hashed its keys into {used} buckets per partition, but "
            f"the table's first write fixed its bucket count at {stored.bucket_num}",
            help="nothing of it is visible; write the batch again (Table.write retries by itself)")


def _check_field_ids(meta: "TableMetaClient", recorded: CommitMetadata, instant_time: str, timeline) -> None:
    """Under the table lock: the field ids this write numbered its new columns with are still
    free (another writer adding a column at the same time may have taken them)."""
    mine = FieldIds.of_commit(recorded, f"instant {instant_time}")
    if mine is None:
        return
    why = field_ids.conflict(field_ids.known(meta, timeline), mine)
    if why is not None:
        raise CommitConflictError(
            f"instant {instant_time}: {why} (two writers added columns at the same time)",
            help="nothing of it is visible; write the batch again (Table.write retries by itself)")


def _still_ours(meta: "TableMetaClient", inst) -> Listing:
    """Under the table lock: the instant is still pending and nobody is rolling it back (writers
    roll back only under the lock, so then its files are all there). Returns the listing of
    ``.hoodie`` that showed it."""
    listing = meta.active.load_listing()
    timeline = listing.timeline
    cur = timeline.get(inst.time)
    requested = inst.with_state(State.REQUESTED).file_name
    if cur is None or not cur.is_inflight or requested not in listing.files:
        why = ("its heartbeat had stopped for longer than hoodie.client.heartbeat.interval_in_ms "
               "x (tolerable.misses + 1)" if meta.concurrency.multi_writer else
               "a new write started first: with one writer, a write left pending is a failed one")
        raise TimelineError(f"instant {inst.time} was rolled back while it waited to be "
                            f"committed ({why})",
                            help="nothing of it is visible; write the batch again (commit a "
                                 "write before the next one starts)")
    for r in timeline.pending().filter(actions=[Action.ROLLBACK]):
        if pending_rollback_plan(meta.active, r).instant_to_rollback.commit_time == inst.time:
            raise TimelineError(f"instant {inst.time} is being rolled back by {r.time}",
                                help="nothing of it is visible; write the batch again")
    return listing


def rollback_own(meta: "TableMetaClient", inflight) -> None:
    """Roll back a writer's own failed instant (best effort: else the next writer does)."""
    try:
        with exclusive(meta):
            rollback_instant(meta, inflight)
    except Exception:  # noqa: BLE001 - the next writer rolls it back
        pass
    if meta.concurrency.multi_writer:
        meta.heartbeats.stop(inflight.time)
