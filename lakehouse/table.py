"""The Table API: create or open a table, write batches, read it back."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any, ContextManager, Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from lakehouse import commit
from lakehouse.concurrency.heartbeat import Heartbeats
from lakehouse.concurrency.transaction import TransactionManager
from lakehouse.config import (KEY_VALUE_FORMAT, SERVICE_CONFIGS, SERVICE_OPTION_KEYS, TABLE_OPTION_KEYS, WRITE_OPTION_KEYS,
                              ArchivalConfig, CleanConfig, CompactionConfig, ConcurrencyConfig, IndexType,
                              KeyGeneratorType, MemoryConfig, MergeMode, TableConfig, TableType, WriteConfig, option_keys)
from lakehouse.errors import (ConfigError, FileAlreadyExistsError, InstantNotFoundError, TableExistsError,
                              TimelineError)
from lakehouse.file_group.view import FileSystemView
from lakehouse.keygen import KEYGEN_AUTO_KEY, KEYGEN_CHOICE_KEYS, KeyGenerator, datetime_partitioning
from lakehouse.meta_client import TableMetaClient, split_storage_options
from lakehouse.properties import write_table_properties
from lakehouse.read.reader import Filter, TableReader
from lakehouse.read.scan import TableScan
from lakehouse.schema import arrow_to_avro_schema
from lakehouse.services.archive import archive
from lakehouse.services.auto_clean import cleaning_with_write
from lakehouse.services.clean import clean, plan_clean
from lakehouse.services.compaction import commit_compaction, execute_compaction, schedule_compaction
from lakehouse.services.restore import restore
from lakehouse.services.rollback import rollback_instant
from lakehouse.services.savepoint import Savepoint, create_savepoint, delete_savepoint, list_savepoints
from lakehouse.storage import Storage, get_storage
from lakehouse.timeline.active import ActiveTimeline, Timeline
from lakehouse.timeline.instant import Action
from lakehouse.write import bucket_sizing
from lakehouse.write.client import ExtraMetadata, WriteClient, phase_one_problem
from lakehouse.write.validate import data_schema
from lakehouse import layout

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


# Hudi's write-config name of the record key, stored for Hudi's table services (see create_table).
RECORD_KEY_WRITE_KEY = "hoodie.datasource.write.recordkey.field"


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

    def schema(self, as_of: str | None = None) -> pa.Schema:
        return self._reader().schema(as_of)

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
            pend = timeline.pending().filter(actions=[Action.COMMIT, Action.DELTA_COMMIT,
                                                      Action.REPLACE_COMMIT])
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


def default_index(table_type: TableType, option: Any = None) -> IndexType:
    """The index of a table created without one: ``hoodie.index.type`` if given, else BUCKET for
    Merge-On-Read (writes append to logs, no lookup) and SIMPLE (Hudi's default) for
    Copy-On-Write."""
    if option is not None:
        try:
            return IndexType(str(option).strip().upper())
        except ValueError:
            raise ConfigError(f"hoodie.index.type={option!r} is not one of "
                              f"{', '.join(i.value for i in IndexType)}",
                              help="set hoodie.index.type to one of the listed values") from None
    return IndexType.BUCKET if table_type is TableType.MERGE_ON_READ else IndexType.SIMPLE


def _pick_keygen(record_key: tuple[str, ...], partition_by: tuple[str, ...],
                 options: Mapping[str, Any]) -> KeyGeneratorType:
    explicit = options.get("hoodie.table.keygenerator.class") or options.get(
        "hoodie.datasource.write.keygenerator.class")
    if explicit:
        return KeyGeneratorType.from_class(str(explicit))
    if options.get("hoodie.keygen.timebased.output.dateformat"):
        return KeyGeneratorType.TIMESTAMP
    if not partition_by:
        return KeyGeneratorType.NON_PARTITION
    if len(record_key) == 1 and len(partition_by) == 1:
        return KeyGeneratorType.SIMPLE
    return KeyGeneratorType.COMPLEX


def _check_no_conflict(from_args: TableConfig, result: TableConfig, table_opts: Mapping[str, Any],
                       explicit: Mapping[str, bool]) -> None:
    """An argument given explicitly and a ``hoodie.*`` option saying otherwise: which one was
    meant cannot be told, so neither silently wins. (An argument left at its default yields to
    the option: that is how users migrating from Hudi pass everything as options.)"""
    by_key = {f.metadata["key"]: f.name for f in dataclasses.fields(TableConfig) if "key" in f.metadata}
    for key in table_opts:
        field_name = by_key.get(key)
        if field_name and explicit.get(field_name) and \
                getattr(from_args, field_name) != getattr(result, field_name):
            given = getattr(from_args, field_name)
            given = ",".join(given) if isinstance(given, tuple) else str(given)
            raise ConfigError(
                f"{key}={table_opts[key]!r} in the options contradicts the {field_name} argument "
                f"({given!r})",
                help="pass one of them, or make them agree")


def _fields(v: str | Sequence[str] | None, what: str) -> tuple[str, ...]:
    if v is None:
        return ()
    items = [v] if isinstance(v, str) else list(v)
    out = tuple(x.strip() for s in items for x in str(s).split(",") if x.strip())
    if len(set(out)) != len(out):
        raise ConfigError(f"{what} names a column twice: {out}", help="list each column once")
    return out


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
    unknown = [k for k in opts if k not in TABLE_OPTION_KEYS and k not in WRITE_OPTION_KEYS
               and k not in SERVICE_OPTION_KEYS and k != "hoodie.datasource.write.keygenerator.class"]
    if unknown:
        raise ConfigError(f"unknown option(s): {', '.join(sorted(unknown))}",
                          help="options take Hudi's hoodie.* names; `lakehouse options` lists them")
    if not name or not str(name).replace("_", "").isalnum():
        raise ConfigError(f"table name {name!r} must be letters, digits and underscores",
                          help="pick a name like trips or sales_2024")
    # The ordering field is the argument or, as Hudi's own writers take it, the table option.
    ordering = ordering_field or opts.get("hoodie.table.precombine.field")
    try:
        ttype = TableType(str(table_type).upper())
        if merge_mode is None:
            mode = MergeMode.EVENT_TIME_ORDERING if ordering else MergeMode.COMMIT_TIME_ORDERING
        else:
            mode = MergeMode(str(merge_mode).upper())
        itype = IndexType(str(index).upper()) if index is not None else default_index(
            ttype, opts.get("hoodie.index.type"))
    except ValueError as e:
        raise ConfigError(str(e), help="table_type: MERGE_ON_READ or COPY_ON_WRITE; merge_mode: "
                          "EVENT_TIME_ORDERING, COMMIT_TIME_ORDERING or PARTIAL_UPDATE; index: "
                          "BUCKET, BLOOM, SIMPLE, GLOBAL_BLOOM or GLOBAL_SIMPLE") from None
    keys = _fields(record_key, "record_key")
    parts = _fields(partition_by, "partition_by")
    if not keys:
        raise ConfigError("record_key is required", help="name the column(s) that identify a record")
    if mode is not MergeMode.COMMIT_TIME_ORDERING and not ordering:
        raise ConfigError(f"merge mode {mode} needs an ordering field",
                          help="name the column whose highest value wins (ordering_field= in Python, "
                               "--ordering-field in the CLI), or leave the merge mode out: without an "
                               "ordering field the latest write wins (COMMIT_TIME_ORDERING)")
    # A single datetime partition column gets Hudi Flink's timestamp-based key generator (hourly or
    # daily folders), unless the options choose a key generator; its type is known from the
    # schema, or else from the first write (lakehouse.write.datetime_partitioning).
    decide_later = False
    if len(parts) == 1 and len(keys) <= 1 and not any(k in opts for k in KEYGEN_CHOICE_KEYS):
        if schema is not None and parts[0] in schema.names:
            opts = {**opts, **(datetime_partitioning(schema.field(parts[0]).type) or {})}
        decide_later = schema is None
    kg = _pick_keygen(keys, parts, opts)
    storage = get_storage(path, store or None)
    if schema is not None:
        missing = [c for c in (*keys, *parts, *([ordering_field] if ordering_field else []))
                   if c not in schema.names]
        if missing:
            raise ConfigError(f"columns {missing} are not in the given schema",
                              help="fix the column names or the schema")
    table_opts = {k: v for k, v in opts.items() if k in TABLE_OPTION_KEYS}
    if str(table_opts.get("hoodie.populate.meta.fields", "true")).lower() == "false":
        raise ConfigError("hoodie.populate.meta.fields=false is not supported for tables lakehouse writes",
                          help="leave the meta fields on: incremental reads and merging need them")
    write_opts = {k: str(v) for k, v in opts.items() if k in WRITE_OPTION_KEYS or k in SERVICE_OPTION_KEYS}
    # Validate now, not at the first write or service run.
    WriteConfig.from_options(write_opts)
    for cls in SERVICE_CONFIGS:
        cls.from_options(write_opts)
    base = TableConfig(name=name, table_type=ttype, record_key_fields=keys, partition_fields=parts,
                       ordering_field=ordering_field, key_generator_class=kg.java_class,
                       hive_style_partitioning=hive_style_partitioning,
                       payload_class=mode.payload_class, index_type=itype, database_name=database,
                       extra={**write_opts, KEY_VALUE_FORMAT: "hudi",
                              **({KEYGEN_AUTO_KEY: "true"} if decide_later else {})})
    props = base.to_properties()
    props.update({k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in table_opts.items()})
    if schema is not None:
        props["hoodie.table.create.schema"] = json.dumps(
            arrow_to_avro_schema(data_schema(schema), name, with_meta_fields=False), separators=(",", ":"))
    config = TableConfig.from_properties(props)
    if config.merge_mode is not MergeMode.COMMIT_TIME_ORDERING and not config.ordering_field:
        # The options chose the merge (a payload class) but no column for it.
        raise ConfigError(f"merge mode {config.merge_mode} needs an ordering field",
                          help="set hoodie.table.precombine.field too, or leave the payload class out")
    _check_no_conflict(base, config, table_opts, {
        "name": True, "record_key_fields": True, "partition_fields": bool(parts),
        "ordering_field": ordering_field is not None, "table_type": ttype is not TableType.MERGE_ON_READ,
        "payload_class": merge_mode is not None, "index_type": index is not None,
        "hive_style_partitioning": hive_style_partitioning, "database_name": database != "default"})
    if config.index_type is IndexType.BUCKET:
        # Stored explicitly (not left to Hudi's defaults of 256 buckets and "the record key"):
        # Apache Hudi's Spark writers read them from hoodie.properties and then agree on buckets.
        if not config.bucket_hash_fields:
            config = config.replace(bucket_hash_fields=config.record_key_fields)
        # Hudi's table services (CALL run_compaction, 0.14/0.15) build their write config from
        # hoodie.properties, and with the bucket index there HoodieIndexConfig checks the hash
        # field against this write key, which no table config key maps to: without it they fail.
        config = config.replace(extra={**config.extra,
                                       RECORD_KEY_WRITE_KEY: ",".join(config.record_key_fields)})
        if ttype is TableType.MERGE_ON_READ and "hoodie.bucket.index.num.buckets" not in table_opts:
            # Provisional until the first write sizes it (the marker is a key Hudi ignores).
            config = config.replace(bucket_num=bucket_sizing.min_buckets(config),
                                    extra={**config.extra, bucket_sizing.AUTO_KEY: "true"})
    if config.version != 6:
        raise ConfigError(f"hoodie.table.version={config.version}: lakehouse creates version 6 tables",
                          help="leave hoodie.table.version unset")
    if config.key_generator_type is KeyGeneratorType.TIMESTAMP:
        KeyGenerator(config)  # validates the timestamp options
    props = config.to_properties()
    if storage.exists(layout.PROPERTIES):
        raise TableExistsError(f"a table already exists at {storage.uri()}",
                               help="open it with lakehouse.open_table, or pick another path")
    try:
        for d in (*layout.CREATED_FOLDERS, layout.archive_folder(config.archive_folder)):
            storage.mkdirs(d)
    except (NotADirectoryError, FileExistsError):
        # The path, or a folder on the way to it, is a file: nothing could be created.
        raise ConfigError(f"cannot create a table at {storage.uri()}: the path or one of its "
                          "parents is a file, not a folder",
                          help="pick a folder path (it may be missing or hold other files)") from None
    try:
        write_table_properties(storage, props, create=True)
    except FileAlreadyExistsError:
        raise TableExistsError(f"a table already exists at {storage.uri()}",
                               help="open it with lakehouse.open_table, or pick another path") from None
    return Table(storage, config)


def _savepoint_time(savepoint: "str | Savepoint") -> str:
    return savepoint.instant if isinstance(savepoint, Savepoint) else str(savepoint)
