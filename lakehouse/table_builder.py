"""A new table, built as Hudi builds one: arguments checked, key generator chosen, the table config
resolved, then the folders and ``hoodie.properties`` created.

Hudi splits it the same way (``HoodieTableMetaClient.newTableBuilder().setTableType(..)
.setRecordKeyFields(..)...initTable(conf, path)``), as hudi-rs's ``TableBuilder`` does: the
builder holds what the user asked for; :meth:`TableBuilder.config` resolves it into the
:class:`~lakehouse.config.TableConfig` to store without touching storage (every check before the
first byte), and :meth:`TableBuilder.init_table` creates the table. ``lakehouse.create_table`` is
the builder in one call.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import pyarrow as pa

from lakehouse import layout
from lakehouse.config import (KEY_VALUE_FORMAT, SERVICE_CONFIGS, SERVICE_OPTION_KEYS, TABLE_OPTION_KEYS,
                              WRITE_OPTION_KEYS, BucketEngine, IndexType, KeyGeneratorType, MergeMode, TableConfig,
                              TableType, WriteConfig)
from lakehouse.errors import ConfigError, FileAlreadyExistsError, TableExistsError
from lakehouse.keygen import KEYGEN_AUTO_KEY, KEYGEN_CHOICE_KEYS, KeyGenerator, datetime_partitioning
from lakehouse.properties import write_table_properties
from lakehouse.schema import arrow_to_avro_schema
from lakehouse.storage import Storage
from lakehouse.write import bucket_sizing
from lakehouse.write.validate import data_schema

# Hudi's write-config name of the record key, stored for Hudi's table services (see TableBuilder.config).
RECORD_KEY_WRITE_KEY = "hoodie.datasource.write.recordkey.field"
# The bucket limit stored with the consistent-hashing tables lakehouse creates (per partition;
# 65536 buckets of the default 120 MiB files hold 7.5 TiB).
MAX_BUCKETS_KEY = "hoodie.bucket.index.max.num.buckets"
DEFAULT_MAX_BUCKETS = 65536


@dataclass(frozen=True)
class Arguments:
    """The builder's arguments, checked and typed."""

    table_type: TableType
    merge_mode: MergeMode
    index_type: IndexType
    record_key: tuple[str, ...]
    partition_by: tuple[str, ...]
    ordering: str | None


@dataclass(frozen=True)
class TableBuilder:
    """What a new table is to be (``options``: ``hoodie.*`` table, write and service options; the
    store's ``s3.*`` settings are the storage's, never stored)."""

    name: str
    record_key: str | Sequence[str]
    table_type: str = "MERGE_ON_READ"
    partition_by: str | Sequence[str] | None = None
    ordering_field: str | None = None
    merge_mode: str | None = None
    index: str | None = None
    schema: pa.Schema | None = None
    hive_style_partitioning: bool = False
    database: str = "default"
    options: Mapping[str, Any] = field(default_factory=dict)

    def arguments(self) -> Arguments:
        """The arguments checked: the name, known options, the enums, the ordering field a merge
        mode needs."""
        name, opts, ordering_field = self.name, self.options, self.ordering_field
        table_type, merge_mode, index = self.table_type, self.merge_mode, self.index
        record_key, partition_by = self.record_key, self.partition_by
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
        return Arguments(ttype, mode, itype, keys, parts, ordering)

    def key_generator(self, args: Arguments) -> tuple[KeyGeneratorType, dict[str, Any], bool]:
        """(the key generator, the options with the ones it implies, whether the first write
        decides it: lakehouse.write.datetime_partitioning)."""
        opts, schema = dict(self.options), self.schema
        keys, parts = args.record_key, args.partition_by
        # A single datetime partition column gets Hudi Flink's timestamp-based key generator (hourly or
        # daily folders), unless the options choose a key generator; its type is known from the
        # schema, or else from the first write (lakehouse.write.datetime_partitioning).
        decide_later = False
        if len(parts) == 1 and len(keys) <= 1 and not any(k in opts for k in KEYGEN_CHOICE_KEYS):
            if schema is not None and parts[0] in schema.names:
                opts = {**opts, **(datetime_partitioning(schema.field(parts[0]).type) or {})}
            decide_later = schema is None
        kg = _pick_keygen(keys, parts, opts)
        return kg, opts, decide_later

    def config(self) -> TableConfig:
        """The table config to store, every argument and option checked (nothing is written)."""
        args = self.arguments()
        ttype, mode, itype = args.table_type, args.merge_mode, args.index_type
        keys, parts = args.record_key, args.partition_by
        name, schema, ordering_field = self.name, self.schema, self.ordering_field
        merge_mode, index, database = self.merge_mode, self.index, self.database
        hive_style_partitioning = self.hive_style_partitioning
        kg, opts, decide_later = self.key_generator(args)
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
        if (ttype is TableType.MERGE_ON_READ and config.index_type is IndexType.BUCKET
                and "hoodie.index.bucket.engine" not in table_opts):
            # Hudi's default engine (SIMPLE) fixes the bucket count for ever; consistent hashing
            # lets clustering split the buckets of a table that outgrew its first write.
            config = config.replace(bucket_engine=BucketEngine.CONSISTENT_HASHING)
        if config.consistent_hashing and ttype is not TableType.MERGE_ON_READ:
            raise ConfigError("hoodie.index.bucket.engine=CONSISTENT_HASHING needs a MERGE_ON_READ table "
                              "(as in Hudi: a resize rewrites buckets while writers append to them)",
                              help="create a MERGE_ON_READ table, or use the SIMPLE bucket engine or another index")
        if config.consistent_hashing and MAX_BUCKETS_KEY not in write_opts:
            # Hudi leaves the limit at the initial count, so its rings never split: a table that
            # starts small would stay so. Stored, so every writer and service of the table reads it.
            config = config.replace(extra={**config.extra, MAX_BUCKETS_KEY: str(DEFAULT_MAX_BUCKETS)})
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
        return config

    def init_table(self, storage: Storage, config: TableConfig | None = None) -> TableConfig:
        """Create the table at ``storage``'s root with ``config`` (default: :meth:`config`): its
        folders, then ``hoodie.properties`` (the atomic create that makes it a table);
        TableExistsError where one is."""
        config = config if config is not None else self.config()
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
        return config


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
