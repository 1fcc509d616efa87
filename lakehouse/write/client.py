"""The write client: one operation on a batch, as one instant, in two phases.

Phase 1 validates the batch (before any file exists), rolls back failed writes, puts the instant
on the timeline, looks records up in the index, assigns them to file groups and writes data files
(each after its marker), then records the write results on the inflight instant. Phase 2
(:meth:`WriteClient.commit`) checks those results and completes the instant atomically.
"""

from __future__ import annotations

import dataclasses
import os
import typing
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Mapping

import pyarrow as pa
import pyarrow.compute as pc

from lakehouse.config import (SERVICE_CONFIGS, TABLE_OPTION_KEYS, BulkInsertSortMode, ConcurrencyConfig, IndexType,
                              TableConfig, WriteConfig, option_keys)
from lakehouse.faults import InjectedFault, fault_point
from lakehouse.engine import foreground
from lakehouse.concurrency.conflict import START_KEY, start_marker
from lakehouse.commit import exclusive, request, start
from lakehouse.concurrency.retry import retry_policy
from lakehouse.errors import (ClusteringUpdateError, CommitConflictError, CommitOutcomeUnknownError, ConfigError, CorruptFileError,
                              LockError,
                              LockTimeoutError, RecordKeyError, SchemaError, TimelineError,
                              UnsupportedTableError, WriteError)
from lakehouse.file_group.file_slice import BaseFile, FileSlice
from lakehouse.file_group.view import FileSystemView
from lakehouse.properties import read_table_config
from lakehouse.columns import DELETE, PARTITION
from lakehouse.meta_client import TableMetaClient, meta_client_of
from lakehouse.timeline.schema_resolver import recorded_schema, with_meta_fields
from lakehouse.schema import arrow_to_avro_schema
from lakehouse.services.rollback import rollback_expired_writes, rollback_failed_writes
from lakehouse.timeline.active import Timeline
from lakehouse.timeline.avro_files import RequestedReplaceMetadata
from lakehouse.timeline.commit_metadata import CommitMetadata, WriteStat
from lakehouse.timeline.instant import Action, State
from lakehouse.write import assign, bucket_sizing, buffer, commit_phase, datetime_partitioning, memory, rings, spill
from lakehouse.write.source import BatchSource, as_source
from lakehouse.write.commit_phase import BUCKETS_KEY, RESULTS_KEY, Recorded, phase_one_problem, rollback_own
from lakehouse.write.context import WriteContext
from lakehouse.write.view import write_view
from lakehouse.write.assign import Target
from lakehouse.io.handles import HandleContext, schema_json
from lakehouse.io.partition_metafile import ensure_partitions
from lakehouse import field_ids
from lakehouse.field_ids import FieldIds
from lakehouse.write.index import tag_location
from lakehouse.write.index.lookup import LOC_FILE_ID, LOC_PARTITION
from lakehouse.keygen import KeyGenerator
from lakehouse.merge import MergeSpec
from lakehouse import layout
from lakehouse.io.markers import Marker, Markers, delete_stale_markers
from lakehouse.write.operation import Operation, TargetKind
from lakehouse.write.prepare import Prepared, prepare
from lakehouse.write.validate import check_table_options


CONCURRENCY_OPTION_KEYS = option_keys(ConcurrencyConfig)
# A write's extra commit metadata, or what makes it once the batch has passed its checks (ingest
# writes its manifest then: a refused batch leaves no file behind).
ExtraMetadata = Mapping[str, str] | Callable[[], Mapping[str, str]]
# Writes the data files of phase 1: (the write's context with its instant's column ids, instant
# time, timeline) -> (write stats, replaced file ids per partition for a replacecommit).
FileWriter = Callable[[WriteContext, str, Timeline], "tuple[list[WriteStat], dict[str, tuple[str, ...]] | None]"]
__all__ = ["ExtraMetadata", "Operation", "PARTITION", "Prepared", "RESULTS_KEY", "WriteClient", "phase_one_problem"]


class WriteClient:
    def __init__(self, meta: "TableMetaClient", options: Mapping[str, Any] | None = None) -> None:
        self.meta = meta = meta_client_of(meta)
        if not meta.config.populate_meta_fields:
            raise UnsupportedTableError(
                f"{meta.name} has hoodie.populate.meta.fields=false; lakehouse reads such tables "
                "but writes only tables that keep Hudi's meta fields",
                help="write it with Apache Hudi, or copy its rows into a table with meta fields")
        self.storage = meta.storage
        self.active = meta.active
        misplaced = sorted(k for k in (options or {}) if k in CONCURRENCY_OPTION_KEYS)
        if misplaced:
            raise ConfigError(f"{', '.join(misplaced)} cannot change for one write: every writer "
                              "of the table must agree on it",
                              help="store it with the table (create_table options) or pass it to "
                                   "open_table(path, options)")
        # Table-level defaults stored at creation, then this write's own options.
        merged = meta.options(options, "a write")
        check_table_options(meta.config, options or {})
        # Service options travel with a write for the services run with it (the Spark sink's
        # inline compaction): an ill-typed one fails here, before any file is written, as it
        # would at create_table or at the service itself.
        for cls in SERVICE_CONFIGS:
            keys = option_keys(cls)
            if any(k in keys for k in options or {}):
                cls.from_options({k: v for k, v in merged.items() if k in keys})
        self.concurrency = meta.concurrency
        # What preparation, assignment, the buffers and the file handles read (picklable: the
        # Spark writer ships it to its executors).
        self.context = WriteContext(meta.config, WriteConfig.from_options(
            {k: v for k, v in merged.items() if k not in TABLE_OPTION_KEYS}))
        # A key generator chosen in memory by this client's first write, to be stored
        # (lakehouse.write.datetime_partitioning).
        self.keygen_chosen = False
        # Phase 1's results by instant, until phase 2, which then need not read them back from
        # the inflight file: on the table handle's meta client, so that a commit asked again
        # through the handle (a lost answer) finds them.
        self._recorded: dict[str, Recorded] = meta.recorded_writes
        self._marked: dict[str, Markers] = {}  # by instant, while its files are written here

    @property
    def config(self) -> TableConfig:
        return self.context.config

    @property
    def write_config(self) -> WriteConfig:
        return self.context.write_config

    @property
    def spec(self) -> MergeSpec:
        return self.context.spec

    @property
    def keygen(self) -> KeyGenerator:
        return self.context.keygen

    # --- phase 0: validation (lakehouse.write.prepare) ------------------------------------

    def prepare(self, batch: pa.Table, op: Operation, *, choose_keygen: bool = True) -> Prepared:
        """``choose_keygen``: a first write may choose the key generator of a table created
        without a schema (lakehouse.write.datetime_partitioning); not where other processes key
        the rows with the stored one (the distributed Spark writer)."""
        if choose_keygen:
            chosen = datetime_partitioning.choose(self.config, self.active, batch.schema)
            if chosen is not None:
                self.adopt(chosen)
                self.keygen_chosen = True
        budget = self.write_config.task_max_bytes
        # Chunks of a sixteenth of the budget where each is appended as it comes, an eighth
        # where each is looked up in the index and spilled (lakehouse.write.spill).
        return prepare(self.context, self.active, batch, op, budget=budget,
                       chunk_bytes=budget // 16 if self.context.buffered(op) else budget // 8)

    # --- phase 1 ---------------------------------------------------------------------------

    def write(self, batch: "pa.Table | BatchSource | pa.RecordBatchReader", op: Operation | str, *,
              commit: bool = True, extra_metadata: ExtraMetadata | None = None) -> str:
        """``batch``: a table, or a stream (a ``RecordBatchReader``, anything with
        ``__arrow_c_stream__``: spooled to a local file, lakehouse.write.source) or staged files,
        which a write taken in chunks never holds whole."""
        with foreground.running():  # background publishers of this process yield to it
            return self._write_any(batch, Operation(op), commit, extra_metadata)

    def _write_any(self, batch: "pa.Table | BatchSource | pa.RecordBatchReader", op: Operation, commit: bool,
                   extra_metadata: ExtraMetadata | None) -> str:
        in_memory = isinstance(batch, (pa.Table, pa.RecordBatch))
        if in_memory and batch.nbytes <= self.write_config.task_max_bytes:
            return self._write(as_source(batch), op, commit, extra_metadata)
        # Taken in chunks, or a stream (spooled first, whatever its size): an allocator that
        # gives freed memory back meanwhile (lakehouse.write.memory).
        with memory.bounded_allocator():
            source = as_source(batch)
            try:
                return self._write(source, op, commit, extra_metadata)
            finally:
                if source is not batch:
                    source.close()

    def _write(self, batch: pa.Table, op: Operation, commit: bool,
               extra_metadata: ExtraMetadata | None) -> str:
        return self.run(lambda: self.write_prepared(self.prepare(batch, op), extra_metadata=extra_metadata,
                                                    commit_follows=commit),
                        commit=commit)

    def run(self, phase_one: Callable[[], str], *, commit: bool = True) -> str:
        """``phase_one()`` (which returns its instant), then with ``commit`` phase 2. With several
        writers a conflict (or a lock not got) redoes the whole write on the new state, as Iceberg
        re-applies a commit: lookups, routing and files are made again. The Python and the Spark
        writers both write through here."""
        if not (commit and self.concurrency.multi_writer):
            instant = phase_one()
            if commit:
                self.commit(instant)
            return instant

        def attempt() -> str:
            if self.config.index_type is IndexType.BUCKET:
                # Another writer may have just fixed the table's bucket count (its first write).
                self.adopt(read_table_config(self.storage))
            t = phase_one()
            try:
                retry_policy(self.concurrency, (LockError,))(self.commit)(t)
            except (CommitOutcomeUnknownError, CommitConflictError):
                raise  # may have landed: never roll it back / already rolled back
            except Exception:
                # Definitely not committed: roll it back now rather than leave a pending instant
                # that blocks compaction until its heartbeat expires.
                inst = self.active.load().get(t)
                if inst is not None and not inst.is_completed:
                    self.rollback_own(inst)
                raise
            return t
        return retry_policy(self.concurrency, (CommitConflictError, LockTimeoutError))(attempt)()

    def action(self, op: Operation) -> Action:
        """The timeline action of a write of ``op``."""
        if op.replaces:
            return Action.REPLACE_COMMIT
        return Action.DELTA_COMMIT if self.config.is_mor else Action.COMMIT

    def begin(self, action: Action, requested_content: bytes = b""):
        """Start an instant: recover failed writes, allocate the instant (under the table lock,
        its heartbeat first, with several writers), and load the timeline its write works on."""
        # Under the table lock (one writer too): a commit step of the write rolled back here,
        # running in another process, either lands first (and it is not rolled back) or finds
        # the write gone; a compaction is planned either before our instant or not at all.
        with exclusive(self.meta):
            listing = self.active.load_listing()
            timeline = self.rollback_failed_writes(listing.timeline)
            if timeline is not listing.timeline or layout.TEMP.rpartition("/")[2] in listing.folders:
                # Marker folders only exist while some write has markers (an object store has
                # no empty folders): with none, there are no stale ones to look for.
                delete_stale_markers(self.storage, timeline.completed_write_times)
            # request() checks the lease: what recovery found holds only while the lock does.
            instant = request(
                self.meta, action, requested_content,
                before_create=self._heartbeat_starter() if self.concurrency.multi_writer else None,
                timeline=timeline)
        # A compaction planned before our instant must shape this write (its logs go to the
        # slice the compaction creates): every one is on the timeline read under the lock, as
        # plans are made under it too. One planned after our instant leaves our files out
        # (lakehouse.services.pending_files) or yields to us at commit.
        return instant, timeline.with_instant(instant)

    def _heartbeat_starter(self):
        beats = self.meta.heartbeats
        started: list[str] = []

        def start(t: str) -> None:
            for old in started:  # a time lost to a racer: its beat is not ours any more
                beats.stop(old)
            started[:] = [t]
            beats.start(t)
        return start

    def rollback_failed_writes(self, timeline):
        """Roll back failed writes seen on ``timeline``; returns the timeline after that."""
        writes = [i.time for i in timeline.pending_writes()]
        rollbacks = timeline.pending().filter(actions=[Action.ROLLBACK]).instants
        if not writes and not rollbacks:
            return timeline
        if not self.concurrency.lazy_rollback:
            rollback_failed_writes(self.meta, timeline)
            return self.active.load()
        return rollback_expired_writes(self.meta, timeline)

    def assign_field_ids(self, data_schema: pa.Schema, timeline) -> FieldIds:
        """The Iceberg field ids of ``data_schema``'s columns (lakehouse.field_ids)."""
        return field_ids.assign(field_ids.known(self.meta, timeline), with_meta_fields(data_schema))

    def base_metadata(self, prepared: Prepared, timeline,
                      extra_metadata: Mapping[str, str] | None, ids: FieldIds | None = None) -> CommitMetadata:
        avro = arrow_to_avro_schema(prepared.data_schema, self.config.name, with_meta_fields=False)
        extra = {"schema": schema_json(avro)} if prepared.record_schema else {}
        if prepared.record_schema and ids is not None:
            extra.update(ids.extra_metadata())
        if self.config.index_type is IndexType.BUCKET:
            extra[BUCKETS_KEY] = str(self.config.bucket_num)  # what the commit checks under the lock
        if self.concurrency.multi_writer:
            extra[START_KEY] = start_marker(timeline)
        return CommitMetadata(operation_type=prepared.operation.operation_type,
                              extra_metadata={**extra, **(extra_metadata or {})})

    def adopt(self, config: TableConfig) -> None:
        """Work with ``config`` from now on (the table's bucket count just fixed), as the table
        does."""
        self.meta.adopt(config)
        self.context = self.context.adopting(config)

    def write_prepared(self, prepared: Prepared, *, extra_metadata: ExtraMetadata | None = None,
                       files: FileWriter | None = None, commit_follows: bool = False) -> str:
        """Phase 1 of a write of ``prepared``: the bucket count settled, failed writes rolled
        back, the instant requested and inflight, the data files written by ``files(context,
        instant time, timeline)`` (``context``: the write's, with the instant's column ids;
        default: this process writes them), the results recorded. A failure
        rolls the instant back. Returns the instant time; :meth:`commit` is phase 2.
        ``commit_follows``: this client commits the instant next, so the results stay in its
        memory (as Hudi's write client keeps its write statuses) instead of going on the
        inflight instant; a crash before the commit leaves a write the next writer rolls back,
        as it would anyway."""
        op = prepared.operation
        if self.keygen_chosen:
            try:
                datetime_partitioning.persist(self.meta, self.config)
            except datetime_partitioning.ChosenElsewhere as e:
                self.adopt(e.stored)
                raise
            self.keygen_chosen = False
        if not op.keys_only:
            settled = bucket_sizing.settle(self.meta, self.config, self.write_config,
                                           prepared.largest_partition_bytes)
            if settled is not None:
                self.adopt(settled)
        if op in (Operation.INSERT_OVERWRITE_TABLE, Operation.DELETE_PARTITION):
            self._check_no_pending_compaction(prepared)
        if callable(extra_metadata):
            extra_metadata = extra_metadata()
        action = self.action(op)
        requested_content = b""
        if action is Action.REPLACE_COMMIT:
            requested_content = RequestedReplaceMetadata(operation_type=op.operation_type).to_bytes()
        instant, timeline = self.begin(action, requested_content)
        t = instant.time
        fault_point("write.after_requested")
        ids = self.assign_field_ids(prepared.data_schema, timeline)
        base_meta = self.base_metadata(prepared, timeline, extra_metadata, ids)
        inflight = start(self.meta, instant, base_meta.to_bytes())
        write_files = files or (lambda context, t, timeline: self._write_files(prepared, context, t, timeline))
        try:
            stats, replaced = write_files(self.context.for_instant(ids), t, timeline)
            fault_point("write.after_data_files")
        except InjectedFault:
            raise
        except Exception as e:
            self.abort(inflight, e)
        finally:
            marked = self._marked.pop(t, None)
        # The markers this process made are all of them when it wrote every file and commits
        # right away; a commit step that comes later lists them (a task retried meanwhile, say,
        # may have marked more).
        known = marked.made() if marked is not None and files is None and commit_follows else None
        self.record_results(inflight, stats, base_meta,
                            replaced if action is Action.REPLACE_COMMIT else None,
                            durable=not commit_follows, markers=known)
        return t

    def _check_no_pending_compaction(self, prepared: Prepared) -> None:
        """As Hudi's SparkDeletePartitionCommitActionExecutor.checkPreconditions: file groups a
        pending compaction works on are not replaced (the compaction would bring them back)."""
        op = prepared.operation
        parts = None if op is Operation.INSERT_OVERWRITE_TABLE else prepared.batch_partitions()
        busy = sorted(f"{p}/{f}" for (p, f) in self.pending_compaction_fgs(self.active.load())
                      if parts is None or p in parts)
        if busy:
            raise TimelineError(f"{op.value} would replace file groups a pending compaction works on: "
                                f"{', '.join(busy[:5])}",
                                help="commit or roll back the pending compaction first; nothing was written")

    def delete_partitions(self, partitions: list[str], *, commit: bool = True,
                          extra_metadata: Mapping[str, str] | None = None) -> str:
        """Drop whole partitions (Hudi's delete_partition, ``hoodie.datasource.write.partitions.
        to.delete``): one replacecommit replacing every file group in them; the files go at the
        next clean, which also removes the emptied partition folders."""
        timeline = self.active.load()
        known = {s.partition for s in FileSystemView.load(self.storage, timeline, self.active).latest_slices()}
        missing = sorted(set(partitions) - known)
        if not partitions or missing:
            raise ConfigError(f"no partition(s) {', '.join(missing) or '(none given)'} in the table",
                              help="name partitions by their path, as `lakehouse stats` lists them: "
                                   + ", ".join(sorted(known)[:10]))
        # The table's schema goes on the commit, as on Hudi's: readers find the latest schema there.
        recorded = recorded_schema(self.active, self.config, timeline)
        rows = pa.table({PARTITION: pa.array(sorted(set(partitions)), pa.string())})
        prepared = Prepared(Operation.DELETE_PARTITION, rows, recorded if recorded is not None else pa.schema([]),
                            False, record_schema=recorded is not None)
        instant = self.write_prepared(prepared, extra_metadata=extra_metadata)
        if commit:
            self.commit(instant)
        return instant

    def abort(self, inflight, error: Exception) -> "typing.NoReturn":
        """Roll a failed phase 1 back (best effort: else the next writer does) and raise: input
        errors and damaged table files as they are (their message names what to fix), anything
        else as a WriteError (definitely not visible)."""
        self.rollback_own(inflight)
        if isinstance(error, (SchemaError, RecordKeyError, CorruptFileError, ClusteringUpdateError,
                              UnsupportedTableError)):
            raise error
        raise WriteError(f"writing instant {inflight.time} failed: {error}",
                         help="nothing of it is visible; fix the cause and write again") from error

    def rollback_own(self, inflight) -> None:
        """Roll back this client's failed instant (best effort: else the next writer does)."""
        rollback_own(self.meta, inflight)

    def record_results(self, inflight, stats: list[WriteStat], base_meta: CommitMetadata,
                       replaced: dict | None = None, *, durable: bool = True,
                       markers: "list[Marker] | None" = None) -> None:
        """End phase 1: the write results kept for phase 2 and, ``durable``, on the inflight
        instant, where a phase 2 in another process finds them. ``markers``: every marker of
        the instant (phase 2 here then does not list them)."""
        by_partition: dict[str, list[WriteStat]] = {}
        for s in stats:
            by_partition.setdefault(s.partition_path, []).append(s)
        meta = CommitMetadata(
            partition_to_write_stats={p: tuple(v) for p, v in by_partition.items()},
            operation_type=base_meta.operation_type, compacted=False,
            extra_metadata={**base_meta.extra_metadata, RESULTS_KEY: "complete"},
            partition_to_replace_file_ids=replaced)
        if self.concurrency.multi_writer and not self.storage.exists(
                self.active.path(inflight.with_state(State.REQUESTED))):
            raise TimelineError(f"instant {inflight.time} was rolled back while it was written "
                                "(its heartbeat had stopped)",
                                help="nothing of it is visible; write the batch again")
        if durable:
            self.active.overwrite(inflight, meta.to_bytes())
        if len(self._recorded) >= 64:  # phase 2 elsewhere (a two-step write): forget the oldest
            self._recorded.pop(min(self._recorded), None)
        self._recorded[inflight.time] = Recorded(inflight, meta, markers)
        fault_point("write.after_results")

    # --- phase 2 (lakehouse.write.commit_phase) -------------------------------------------

    def commit(self, instant_time: str, *, extra_metadata: Mapping[str, str] | None = None) -> CommitMetadata:
        """Phase 2: the recorded results checked and the instant completed atomically."""
        try:
            final = commit_phase.commit(self.meta, self.context, instant_time, extra_metadata,
                                        recorded=self._recorded.get(instant_time))
        except (LockError, CommitOutcomeUnknownError):
            raise  # to be retried here: the results may be only in memory
        except BaseException:
            self._recorded.pop(instant_time, None)
            raise
        self._recorded.pop(instant_time, None)
        return final

    # --- file writing ----------------------------------------------------------------------

    def pending_compaction_fgs(self, timeline) -> dict[tuple[str, str], str]:
        """(partition, file id) -> the pending compaction working on it, on ``timeline``."""
        return self.active.pending_compaction_file_groups(timeline)

    def pending_clustering_fgs(self, timeline) -> dict[tuple[str, str], str]:
        """(partition, file id) -> the pending clustering rewriting it, on ``timeline``."""
        return self.active.pending_clustering_file_groups(timeline)

    def bucket_context(self, context: WriteContext, partitions: list[str], timeline) -> WriteContext:
        """``context`` with the hash rings of ``partitions`` on a consistent-hashing table (each
        created, as Hudi's loadOrCreateMetadata does, where the partition has none yet)."""
        cfg = context.config
        if not cfg.consistent_hashing:
            return context
        return context.with_rings(rings.rings_for_write(self.meta, cfg.bucket_num, partitions, timeline))

    def renew_rings(self, context: WriteContext, partitions: list[str], t: str, timeline) -> WriteContext:
        """``context`` writing the partitions whose every file group instant ``t`` replaces
        (insert_overwrite, delete_partition) by renewed rings (lakehouse.write.rings)."""
        loaded = context.buckets.rings or {}
        renewed = rings.renew_rings(self.meta, context.config.bucket_num, loaded, partitions, t, timeline)
        return context.with_rings({**loaded, **renewed})

    def write_scope(self, prepared: Prepared) -> list[str] | None:
        """The partitions a write must list (None: the whole table). A write's file groups,
        key lookups and replaced file groups are all in the partitions its records go to, as
        Hudi's non-global indexes look keys up in the record's own partition; a global index
        (a key's older record may be in any partition) and insert_overwrite_table (it replaces
        every partition) list the whole table. An upsert into one partition then lists one
        folder, whatever the table's partition count (on object storage: requests)."""
        if self.config.index_type.is_global or prepared.operation is Operation.INSERT_OVERWRITE_TABLE:
            return None
        return sorted(prepared.batch_partitions())

    def write_view(self, timeline, partitions: list[str] | None = None) -> tuple[FileSystemView, Timeline]:
        """The file-system view a write looks keys up in and routes by (lakehouse.write.view)."""
        return write_view(self.storage, self.active, timeline, partitions, merge_on_read=self.config.is_mor)

    def _write_files(self, prepared: Prepared, context: WriteContext, t: str,
                     timeline) -> tuple[list[WriteStat], dict]:
        op = prepared.operation
        view, timeline = self.write_view(timeline, self.write_scope(prepared))
        pending = self.pending_compaction_fgs(timeline)
        context = self.bucket_context(context.for_clustering(self.pending_clustering_fgs(timeline)),
                                      sorted(prepared.batch_partitions()), timeline)
        groups = view.file_groups()
        latest: dict[tuple[str, str], FileSlice] = {}
        base_files: dict[tuple[str, str], BaseFile] = {}
        for g in groups:
            latest[(g.partition, g.file_id)] = g.slices[-1]
            if g.latest_base_file is not None:
                base_files[(g.partition, g.file_id)] = g.latest_base_file
        ctx = dataclasses.replace(context.handle_context(self.storage, prepared.data_schema, t, op=op),
                                  partitions_with_metafile=view.partitions_with_metafile())
        self._marked[t] = ctx.markers
        replaced: dict[str, tuple[str, ...]] = {}
        if context.buffered(op):
            return buffer.write_buffered(context, prepared, ctx, latest, pending), replaced
        rows = prepared.rows
        if op.replaces:
            # Hudi's SparkInsertOverwrite(Table)CommitActionExecutor and
            # SparkDeletePartitionCommitActionExecutor: every file group of the partitions (of the
            # table, for insert_overwrite_table) is replaced; the batch, if any, goes to new ones.
            parts = ({p for p, _ in latest} if op is Operation.INSERT_OVERWRITE_TABLE
                     else prepared.batch_partitions())
            for (p, fid) in sorted(latest):
                if p in parts:
                    replaced[p] = replaced.get(p, ()) + (fid,)
            busy = sorted((p, f) for p, fids in replaced.items() for f in fids if (p, f) in context.clustering)
            if busy:
                raise ClusteringUpdateError(
                    f"{op.value} would replace file group(s) that clustering "
                    f"{context.clustering[busy[0]]} is rewriting: {', '.join(f'{p}/{f}' for p, f in busy[:5])}",
                    help="nothing was written; write again once the clustering is committed, or "
                         f"roll the clustering back (`lakehouse rollback <table> {context.clustering[busy[0]]}`)",
                    clustering=context.clustering[busy[0]], file_groups=tuple(busy))
            if self.config.consistent_hashing:
                context = self.renew_rings(context, sorted(replaced), t, timeline)
            if op is Operation.DELETE_PARTITION:
                return [], replaced
        if rows is None:  # larger than write.task.max.size: lakehouse.write.spill
            locate = None
            if op in (Operation.UPSERT, Operation.DELETE) and self.config.index_type is not IndexType.BUCKET:
                locate = spill.locator(self.meta, context, base_files, timeline,
                                              {(s.partition, s.file_id): s for s in view.latest_slices()})
            return spill.write_spilled(context, prepared, ctx, latest, pending, self.avg_record_size(timeline),
                                       locate, self.write_config.task_max_bytes), replaced
        if op in (Operation.BULK_INSERT, Operation.INSERT_OVERWRITE, Operation.INSERT_OVERWRITE_TABLE):
            deletes = rows.column(DELETE)
            live = rows.filter(pc.invert(deletes)) if pc.any(deletes).as_py() else rows
            keep = {k: v for k, v in latest.items() if k[0] not in parts} if op.replaces else latest
            if self.config.index_type is IndexType.BUCKET:
                # A bucket's records must land in the bucket's file group, or later lookups
                # (a hash, nothing more) would miss them.
                targets = assign.bucket_targets(context, live, keep, pending, sort_keys=self.write_config
                                                .bulk_insert_sort_mode is not BulkInsertSortMode.NONE)
            else:
                targets = assign.bulk_targets(live, self.avg_record_size(timeline), self.write_config)
        else:
            targets = self._assign(context, rows, op, latest, base_files, pending, timeline,
                                   {(s.partition, s.file_id): s for s in view.latest_slices()})
        return self._run(ctx, targets), replaced

    def avg_record_size(self, timeline) -> int:
        """Bytes per record from the newest commit big enough to tell (as Hudi estimates it)."""
        wc = self.write_config
        threshold = wc.record_size_estimation_threshold * wc.small_file_limit
        for inst in reversed(timeline.completed_writes().instants):
            meta = self.active.commit_metadata(inst)
            stats = [s for s in meta.write_stats() if s.path.endswith(".parquet") and s.num_writes > 0]
            n = sum(s.num_writes for s in stats)
            written = sum(s.total_write_bytes for s in stats)
            if n and written > threshold:
                return max(1, written // n)
        return wc.record_size_estimate

    def _assign(self, context: WriteContext, rows, op, latest, base_files, pending, timeline,
                read_slices) -> list[Target]:
        n = rows.num_rows
        if n == 0:
            return []
        if context.config.index_type is IndexType.BUCKET:
            return assign.bucket_targets(context, rows, latest, pending)
        if op is Operation.INSERT:
            loc = pa.table({LOC_PARTITION: pa.nulls(n, pa.string()), LOC_FILE_ID: pa.nulls(n, pa.string())})
        else:
            rows, loc = tag_location.tag_location(self.meta, context, rows, base_files, timeline, read_slices)
        return assign.assign_targets(context, rows, loc, latest, pending, self.avg_record_size(timeline))

    def _run(self, ctx: HandleContext, targets: list[Target]) -> list[WriteStat]:
        ensure_partitions(self.storage, {tg.partition for tg in targets}, ctx.instant_time,
                          ctx.partitions_with_metafile)
        def run(item: tuple[int, Target]) -> list[WriteStat]:
            task, tg = item
            return assign.run_target(ctx, tg, assign.materialize(tg.rows), task)

        items = list(enumerate(targets))
        workers = min(len(items), os.cpu_count() or 1, 8)
        if workers <= 1:
            results = [run(i) for i in items]
        else:
            # Largest first: the tasks then end together instead of one big one running on
            # alone. Task numbers (in the write tokens) and the results keep the targets' order.
            order = sorted(range(len(items)), key=lambda i: -_task_bytes(targets[i]))
            with ThreadPoolExecutor(max_workers=workers) as pool:
                done = dict(zip(order, pool.map(run, [items[i] for i in order])))
            results = [done[i] for i in range(len(items))]
        return [s for r in results for s in r]


def _task_bytes(tg) -> int:
    """A write task's work, roughly: its records, and a merge's base file (decoded, several
    times its size on disk) too."""
    rows = sum(r.nbytes for r in tg.rows)
    if tg.kind is TargetKind.MERGE and tg.slice is not None and tg.slice.base_file is not None:
        rows += 4 * tg.slice.base_file.size
    return rows
