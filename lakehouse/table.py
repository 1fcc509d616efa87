"""The Table API: create or open a table, write batches, read it back."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ContextManager, Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from lakehouse import commit
from lakehouse.concurrency.heartbeat import Heartbeats
from lakehouse.concurrency.transaction import TransactionManager
from lakehouse.config import (ArchivalConfig, CleanConfig, CompactionConfig, ConcurrencyConfig, MemoryConfig, TableConfig, option_keys)
from lakehouse.errors import (InstantNotFoundError, TimelineError)
from lakehouse.file_group.view import FileSystemView
from lakehouse.meta_client import TableMetaClient, split_storage_options
from lakehouse.read.reader import Filter, TableReader
from lakehouse.read.scan import TableScan
from lakehouse.services.archive import archive
from lakehouse.services.auto_clean import cleaning_with_write
from lakehouse.services.clean import clean, plan_clean
from lakehouse.services.clustering import commit_clustering, execute_clustering, schedule_clustering
from lakehouse.services.compaction import commit_compaction, execute_compaction, schedule_compaction
from lakehouse.services.restore import restore
from lakehouse.services.rollback import rollback_instant
from lakehouse.services.savepoint import Savepoint, create_savepoint, delete_savepoint, list_savepoints
from lakehouse.storage import Storage, get_storage
from lakehouse.table_builder import TableBuilder
from lakehouse.timeline.active import ActiveTimeline, Timeline
from lakehouse.timeline.instant import Action
from lakehouse.write.client import ExtraMetadata, WriteClient, phase_one_problem

CLEAN_OPTION_KEYS = option_keys(CleanConfig)


@dataclass(frozen=True)
class TableStats:
    file_groups: int
    base_files: int
    base_bytes: int
    log_files: int
    log_bytes: int
    partitions: int
    pending_compactions: int
    last_commit: str | None


class Table:
    """A table: writes, reads and services in one place, over its :class:`TableMetaClient`
    (which the writer and the services take)."""

    def __init__(self, storage: Storage, config: TableConfig,
                 options: Mapping[str, Any] | None = None) -> None:
        """``options``: this process's concurrency and memory settings over the table's stored ones."""
        self.meta_client = TableMetaClient(storage, config, options)

    @classmethod
    def of(cls, meta: TableMetaClient) -> "Table":
        """The facade over an open meta client."""
        table = cls.__new__(cls)
        table.meta_client = meta
        return table

    # The meta client's state, for users of the facade (tests, notebooks, the CLI).
    @property
    def storage(self) -> Storage:
        return self.meta_client.storage

    @property
    def config(self) -> TableConfig:
        return self.meta_client.config

    @config.setter
    def config(self, config: TableConfig) -> None:
        self.meta_client.adopt(config)

    @property
    def active(self) -> ActiveTimeline:
        return self.meta_client.active

    @property
    def concurrency(self) -> ConcurrencyConfig:
        return self.meta_client.concurrency

    @property
    def memory(self) -> MemoryConfig:
        return self.meta_client.memory

    @property
    def transactions(self) -> TransactionManager:
        return self.meta_client.transactions

    @property
    def heartbeats(self) -> Heartbeats:
        return self.meta_client.heartbeats

    def exclusive(self) -> ContextManager[Any]:
        return commit.exclusive(self.meta_client)

    def check_lock(self) -> None:
        self.meta_client.check_lock()

    def options(self, given: Mapping[str, Any] | None, where: str) -> dict[str, str]:
        return self.meta_client.options(given, where)

    @property
    def path(self) -> str:
        return self.meta_client.path

    @property
    def name(self) -> str:
        return self.meta_client.name

    @property
    def timeline(self) -> Timeline:
        return self.meta_client.timeline

    def _reader(self) -> TableReader:
        return TableReader(self.storage, self.config, self.active, memory=self.memory)

    def schema(self, as_of: str | None = None, timeline: Timeline | None = None) -> pa.Schema:
        """The table's schema at ``as_of`` (TableMetaClient.schema)."""
        return self.meta_client.schema(as_of, timeline)

    # --- writes ----------------------------------------------------------------------------

    def _client(self, options: Mapping[str, Any] | None) -> WriteClient:
        return WriteClient(self.meta_client, options)

    def _cleaning(self, options: Mapping[str, Any] | None, commits: bool) -> ContextManager[None]:
        """hoodie.clean.automatic / hoodie.clean.async around one write call (the write's options
        over the table's, as the clean would read them)."""
        cfg = CleanConfig.from_options(
            {k: v for k, v in self.options(options, "write").items() if k in CLEAN_OPTION_KEYS})
        return cleaning_with_write(self.meta_client, cfg, commits=commits)

    def write(self, batch: "pa.Table | pa.RecordBatchReader | Any", operation: str = "upsert", *,
              commit: bool = True, options: Mapping[str, Any] | None = None,
              extra_metadata: ExtraMetadata | None = None) -> str:
        """``batch``: a ``pyarrow.Table``, or an Arrow stream (a ``RecordBatchReader``, or anything
        with ``__arrow_c_stream__``: Polars, DuckDB), spooled to a local file. A batch larger than
        ``write.task.max.size`` is taken in chunks and never held whole: appended chunk by chunk
        on Merge-On-Read with the bucket index (lakehouse.write.buffer), spilled by file group on
        every other path (lakehouse.write.spill)."""
        with self._cleaning(options, commit):
            return self._client(options).write(batch, operation, commit=commit, extra_metadata=extra_metadata)

    def insert(self, batch: pa.Table, **kw: Any) -> str:
        return self.write(batch, "insert", **kw)

    def upsert(self, batch: pa.Table, **kw: Any) -> str:
        return self.write(batch, "upsert", **kw)

    def bulk_insert(self, batch: pa.Table, **kw: Any) -> str:
        return self.write(batch, "bulk_insert", **kw)

    def insert_overwrite(self, batch: pa.Table, **kw: Any) -> str:
        return self.write(batch, "insert_overwrite", **kw)

    def delete(self, keys: pa.Table, **kw: Any) -> str:
        return self.write(keys, "delete", **kw)

    def insert_overwrite_table(self, batch: pa.Table, **kw: Any) -> str:
        """The table becomes ``batch``: every file group of every partition is replaced."""
        return self.write(batch, "insert_overwrite_table", **kw)

    def delete_partitions(self, partitions: Sequence[str], *, commit: bool = True,
                          options: Mapping[str, Any] | None = None,
                          extra_metadata: Mapping[str, str] | None = None) -> str:
        """Drop whole partitions, named by path (as ``stats()`` lists them)."""
        with self._cleaning(options, commit):
            return self._client(options).delete_partitions(list(partitions), commit=commit,
                                                           extra_metadata=extra_metadata)

    def commit(self, instant_time: str, *, extra_metadata: Mapping[str, str] | None = None,
               options: Mapping[str, Any] | None = None):
        """Phase 2 of a write whose phase 1 ran with ``commit=False`` (``options``: the
        hoodie.clean.* switches of this writer, over the table's)."""
        with self._cleaning(options, True):
            return self._client(None).commit(instant_time, extra_metadata=extra_metadata)

    def rollback(self, instant_time: str | None = None):
        """Roll back a pending write, or the latest completed one (the default)."""
        # Other writers decide what to do from the timeline under the lock: a rollback between
        # their look and their commit is what conflict detection then sees.
        with commit.exclusive(self.meta_client):
            return self._rollback(instant_time)

    def _rollback(self, instant_time: str | None):
        timeline = self.timeline
        if instant_time is None:
            writes = timeline.completed_writes()
            # A pending clustering is a table service's, not a failed write.
            pend = timeline.pending_writes([Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT])
            if self.concurrency.multi_writer:
                # Other writers' writes in progress are theirs, not failed ones.
                pend = [i for i in pend if self.heartbeats.is_expired(i.time)]
            cands = list(pend) or list(writes)
            if not cands:
                raise InstantNotFoundError("the table has no write to roll back",
                                           help="nothing to do")
            inst = cands[-1]
        else:
            inst = timeline.get(str(instant_time))
            if inst is None:
                raise InstantNotFoundError(f"instant {instant_time} is not on the timeline",
                                           help="`lakehouse timeline` lists the instants")
            if (self.concurrency.multi_writer and not inst.is_completed
                    and not self.heartbeats.is_expired(inst.time)):
                raise TimelineError(f"instant {inst.time} is being written: its writer's "
                                    "heartbeat is alive",
                                    help="stop that writer (its instant is rolled back once its "
                                         "heartbeat expires), or let it finish")
        result = rollback_instant(self.meta_client, inst, timeline)
        if self.concurrency.multi_writer and not inst.is_completed:
            self.heartbeats.stop(inst.time)
        return result

    # --- table services --------------------------------------------------------------------

    def schedule_compaction(self, *, force: bool = False, options: Mapping[str, Any] | None = None,
                            extra_metadata: Mapping[str, str] | None = None):
        cfg = CompactionConfig.from_options(self.options(options, "schedule_compaction"))
        return schedule_compaction(self.meta_client, cfg, force=force, extra_metadata=extra_metadata)

    def run_compaction(self, instant_time: str | None = None, **kw: Any):
        return execute_compaction(self.meta_client, instant_time, **kw)

    def commit_compaction(self, instant_time: str | None = None):
        return commit_compaction(self.meta_client, instant_time)

    def compact(self, *, force: bool = False, options: Mapping[str, Any] | None = None):
        """Schedule, execute and commit in one call; returns the commit result (or the schedule
        result saying why nothing was scheduled)."""
        scheduled = self.schedule_compaction(force=force, options=options)
        if not scheduled.scheduled:
            return scheduled
        self.run_compaction(scheduled.instant)
        return self.commit_compaction(scheduled.instant)

    def schedule_clustering(self, *, force: bool = False, options: Mapping[str, Any] | None = None,
                            extra_metadata: Mapping[str, str] | None = None):
        """Plan a clustering (``<t>.replacecommit.requested``) if its trigger fires (or ``force``);
        ``options``: ``hoodie.clustering.*`` and ``hoodie.layout.optimize.*`` for this plan."""
        return schedule_clustering(self.meta_client, force=force, options=options,
                                   extra_metadata=extra_metadata)

    def run_clustering(self, instant_time: str | None = None, **kw: Any):
        return execute_clustering(self.meta_client, instant_time, **kw)

    def commit_clustering(self, instant_time: str | None = None):
        return commit_clustering(self.meta_client, instant_time)

    def cluster(self, *, force: bool = False, options: Mapping[str, Any] | None = None):
        """Schedule, execute and commit a clustering in one call; returns the commit result (or
        the schedule result saying why nothing was scheduled)."""
        scheduled = self.schedule_clustering(force=force, options=options)
        if not scheduled.scheduled:
            return scheduled
        self.run_clustering(scheduled.instant)
        return self.commit_clustering(scheduled.instant)

    def clean(self, *, options: Mapping[str, Any] | None = None, dry_run: bool = False,
              engine=None, extra_metadata: Mapping[str, str] | None = None):
        """Finish pending cleans, then plan and run one (``dry_run``: only the plan, nothing
        written)."""
        cfg = CleanConfig.from_options(self.options(options, "clean"))
        if dry_run:
            return plan_clean(self.meta_client, cfg, dry_run=True, extra_metadata=extra_metadata)
        return clean(self.meta_client, cfg, engine=engine, extra_metadata=extra_metadata)

    def write_ready(self, instant_time: str) -> str:
        """Why an inflight write cannot be committed yet ('' when phase 1 recorded complete
        results and :meth:`commit` may run)."""
        return phase_one_problem(self.meta_client, instant_time)

    def create_savepoint(self, instant_time: str | None = None, *, user: str = "", comments: str = ""):
        return create_savepoint(self.meta_client, instant_time, user=user, comments=comments)

    def list_savepoints(self):
        return list_savepoints(self.meta_client)

    def delete_savepoint(self, savepoint: "str | Savepoint") -> None:
        """Delete a savepoint, given by its instant time or as :meth:`create_savepoint` or
        :meth:`list_savepoints` return it."""
        delete_savepoint(self.meta_client, _savepoint_time(savepoint))

    def restore(self, savepoint: "str | Savepoint"):
        """Roll back every write after a savepoint (its instant time, or the savepoint as
        :meth:`create_savepoint` returns it), newest first."""
        with commit.exclusive(self.meta_client):
            return restore(self.meta_client, _savepoint_time(savepoint))

    def archive(self, options: Mapping[str, Any] | None = None):
        return archive(self.meta_client, ArchivalConfig.from_options(self.options(options, "archive")))

    # --- reads -----------------------------------------------------------------------------

    def scan(self, *, columns: Sequence[str] | None = None,
             filters: "Sequence[Filter] | pc.Expression | None" = None, as_of: str | None = None,
             read_optimized: bool = False) -> TableScan:
        """A lazy read (lakehouse.read.scan): ``to_arrow()``, ``to_arrow_batch_reader()``,
        ``to_pandas()``, ``to_polars()``, ``to_duckdb(name)``, ``plan_files()``, and an Arrow
        stream DuckDB and Polars take as it is."""
        return TableScan(self._reader, columns=columns, filters=filters, as_of=as_of,
                         read_optimized=read_optimized)

    def read(self, as_of: str | None = None, columns: Sequence[str] | None = None,
             filters: "Sequence[Filter] | pc.Expression | None" = None,
             read_optimized: bool = False) -> pa.Table:
        return self.scan(columns=columns, filters=filters, as_of=as_of,
                         read_optimized=read_optimized).to_arrow()

    def read_changes(self, start: str | None, end: str | None = None,
                     columns: Sequence[str] | None = None,
                     filters: Sequence[Filter] | None = None) -> pa.Table:
        return self._reader().changes(start, end, columns=columns, filters=filters)

    def file_system_view(self) -> FileSystemView:
        return FileSystemView.load(self.storage, self.timeline, self.active)

    def stats(self) -> TableStats:
        timeline = self.timeline
        view = FileSystemView.load(self.storage, timeline, self.active)
        slices = view.latest_slices_for_write()
        last = timeline.completed_writes().last
        return TableStats(
            file_groups=len(slices),
            base_files=sum(1 for s in slices if s.base_file),
            base_bytes=sum(s.base_size for s in slices),
            log_files=sum(len(s.log_files) for s in slices),
            log_bytes=sum(s.total_log_size for s in slices),
            partitions=len({s.partition for s in slices}),
            pending_compactions=len(timeline.pending_compactions()),
            last_commit=last.time if last else None)


def open_table(path: str | Storage, options: Mapping[str, Any] | None = None) -> Table:
    """``options``: the store's settings (``s3.endpoint``, ``s3.region``, credentials, ...) and
    this writer's concurrency settings (``hoodie.write.concurrency.mode``, lock and heartbeat
    keys) over those stored with the table."""
    return Table.of(TableMetaClient.open(path, options))


def create_table(path: str | Storage, *, name: str, record_key: str | Sequence[str],
                 table_type: str = "MERGE_ON_READ", partition_by: str | Sequence[str] | None = None,
                 ordering_field: str | None = None, merge_mode: str | None = None,
                 index: str | None = None, schema: pa.Schema | None = None,
                 hive_style_partitioning: bool = False, database: str = "default",
                 options: Mapping[str, Any] | None = None, **more_options: Any) -> Table:
    """Create an empty table. ``options`` (or keyword arguments) take Hudi's ``hoodie.*`` names,
    and the store's ``s3.*`` settings (used, not stored).

    ``merge_mode`` defaults as Hudi 1.x infers it for tables before version 9
    (``HoodieTableConfig.inferMergingConfigsForPreV9Table``): EVENT_TIME_ORDERING when the table has an
    ordering field (``ordering_field``, or ``hoodie.table.precombine.field`` in the options),
    else COMMIT_TIME_ORDERING (the latest write wins).

    ``index`` defaults by table type: BUCKET for MERGE_ON_READ (every write appends to logs and
    costs what its batch costs; without ``hoodie.bucket.index.num.buckets`` the first write sizes
    the bucket count, see :mod:`lakehouse.write.bucket_sizing`), SIMPLE for COPY_ON_WRITE
    (Hudi's default)."""
    store, opts = split_storage_options({**(options or {}), **more_options})
    builder = TableBuilder(name=name, record_key=record_key, table_type=table_type, partition_by=partition_by,
                           ordering_field=ordering_field, merge_mode=merge_mode, index=index, schema=schema,
                           hive_style_partitioning=hive_style_partitioning, database=database, options=opts)
    config = builder.config()  # every check before the store is touched
    storage = get_storage(path, store or None)
    return Table(storage, builder.init_table(storage, config))


def _savepoint_time(savepoint: "str | Savepoint") -> str:
    return savepoint.instant if isinstance(savepoint, Savepoint) else str(savepoint)
