"""Typed, validated configuration under Hudi's ``hoodie.*`` names and defaults.

:class:`TableConfig` is what ``.hoodie/hoodie.properties`` holds: fixed when the table is created.
:class:`WriteConfig` is what a writer may set per write (sizing, index settings, log format); its
table-wide part (index type, bucket count) is stored in ``hoodie.properties`` too so every writer
of the table agrees. Plain ``dict[str, str]`` appears only at the edges (from_options/to_properties).
"""

from __future__ import annotations

import dataclasses
import enum
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from lakehouse.errors import ConfigError


class TableType(enum.StrEnum):
    COPY_ON_WRITE = "COPY_ON_WRITE"
    MERGE_ON_READ = "MERGE_ON_READ"


class MergeMode(enum.StrEnum):
    COMMIT_TIME_ORDERING = "COMMIT_TIME_ORDERING"
    EVENT_TIME_ORDERING = "EVENT_TIME_ORDERING"
    PARTIAL_UPDATE = "PARTIAL_UPDATE"

    @property
    def payload_class(self) -> str:
        return _PAYLOAD_CLASSES[self]

    @classmethod
    def from_payload_class(cls, name: str | None) -> "MergeMode":
        for mode, cls_name in _PAYLOAD_CLASSES.items():
            if name == cls_name:
                return mode
        if not name:
            return cls.EVENT_TIME_ORDERING
        raise ConfigError(f"payload class {name!r} is not supported",
                          help="supported: " + ", ".join(_PAYLOAD_CLASSES.values()))


_PAYLOAD_CLASSES = {
    MergeMode.COMMIT_TIME_ORDERING: "org.apache.hudi.common.model.OverwriteWithLatestAvroPayload",
    MergeMode.EVENT_TIME_ORDERING: "org.apache.hudi.common.model.DefaultHoodieRecordPayload",
    MergeMode.PARTIAL_UPDATE: "org.apache.hudi.common.model.PartialUpdateAvroPayload",
}


class IndexType(enum.StrEnum):
    BUCKET = "BUCKET"
    BLOOM = "BLOOM"
    SIMPLE = "SIMPLE"
    GLOBAL_BLOOM = "GLOBAL_BLOOM"
    GLOBAL_SIMPLE = "GLOBAL_SIMPLE"

    @property
    def is_global(self) -> bool:
        return self in (IndexType.GLOBAL_BLOOM, IndexType.GLOBAL_SIMPLE)


class KeyGeneratorType(enum.StrEnum):
    SIMPLE = "SIMPLE"
    COMPLEX = "COMPLEX"
    NON_PARTITION = "NON_PARTITION"
    TIMESTAMP = "TIMESTAMP"

    @property
    def java_class(self) -> str:
        return _KEYGEN_CLASSES[self]

    @classmethod
    def from_class(cls, name: str) -> "KeyGeneratorType":
        short = name.rsplit(".", 1)[-1]
        for t, c in _KEYGEN_CLASSES.items():
            if c.rsplit(".", 1)[-1] in (short, short.replace("Avro", "")):
                return t
        raise ConfigError(f"key generator {name!r} is not supported",
                          help="supported: " + ", ".join(_KEYGEN_CLASSES.values()))


_KEYGEN_CLASSES = {
    KeyGeneratorType.SIMPLE: "org.apache.hudi.keygen.SimpleKeyGenerator",
    KeyGeneratorType.COMPLEX: "org.apache.hudi.keygen.ComplexKeyGenerator",
    KeyGeneratorType.NON_PARTITION: "org.apache.hudi.keygen.NonpartitionedKeyGenerator",
    KeyGeneratorType.TIMESTAMP: "org.apache.hudi.keygen.TimestampBasedKeyGenerator",
}


class LogBlockFormat(enum.StrEnum):
    AVRO = "avro"
    PARQUET = "parquet"


class BulkInsertSortMode(enum.StrEnum):
    """How bulk insert lays records out (Hudi's ``BulkInsertSortMode``; one process has a single
    input partition, so PARTITION_SORT and GLOBAL_SORT order the same way)."""
    NONE = "NONE"
    GLOBAL_SORT = "GLOBAL_SORT"
    PARTITION_SORT = "PARTITION_SORT"


# --- typed option parsing -------------------------------------------------------------------


def _bool(key: str, v: Any) -> bool:
    if isinstance(v, bool):
        return v
    s = str(v).strip().lower()
    if s in ("true", "1", "yes"):
        return True
    if s in ("false", "0", "no"):
        return False
    raise ConfigError(f"{key}={v!r} is not a boolean", help=f"set {key} to true or false")


def _int(minimum: int = 0) -> Callable[[str, Any], int]:
    def parse(key: str, v: Any) -> int:
        try:
            # int() would quietly turn 1.5 into 1 and True into 1.
            if isinstance(v, bool) or (isinstance(v, float) and not v.is_integer()):
                raise ValueError(v)
            n = int(v)
        except (TypeError, ValueError, OverflowError):
            raise ConfigError(f"{key}={v!r} is not an integer",
                              help=f"set {key} to a whole number") from None
        if n < minimum:
            raise ConfigError(f"{key}={n} is below its minimum {minimum}",
                              help=f"set {key} to at least {minimum}")
        return n
    return parse


def _float_between(lo: float, hi: float) -> Callable[[str, Any], float]:
    def parse(key: str, v: Any) -> float:
        try:
            x = float(v)
        except (TypeError, ValueError):
            raise ConfigError(f"{key}={v!r} is not a number", help=f"set {key} to a number") from None
        if not lo < x < hi:
            raise ConfigError(f"{key}={x} is outside ({lo}, {hi})",
                              help=f"set {key} between {lo} and {hi}")
        return x
    return parse


def _enum(e: type[enum.StrEnum]) -> Callable[[str, Any], Any]:
    def parse(key: str, v: Any) -> Any:
        s = str(v).strip()
        for member in e:
            if s.upper() == member.value.upper():
                return member
        raise ConfigError(f"{key}={v!r} is not one of {', '.join(m.value for m in e)}",
                          help=f"set {key} to one of the listed values")
    return parse


def _str(key: str, v: Any) -> str:
    return str(v)


def _fields(key: str, v: Any) -> tuple[str, ...]:
    if isinstance(v, (list, tuple)):
        items = [str(x).strip() for x in v]
    else:
        items = [x.strip() for x in str(v).split(",")] if v is not None else []
    items = [x for x in items if x]
    if len(set(items)) != len(items):
        raise ConfigError(f"{key}={v!r} names a field twice", help="list each field once")
    return tuple(items)


def opt(key: str, default: Any, parse: Callable[[str, Any], Any], doc: str = "") -> Any:
    return field(default=default, metadata={"key": key, "parse": parse, "doc": doc})


def _option_fields(cls: type) -> dict[str, dataclasses.Field]:
    return {f.metadata["key"]: f for f in dataclasses.fields(cls) if "key" in f.metadata}


def option_keys(cls: type) -> frozenset[str]:
    """The ``hoodie.*`` keys a config class reads."""
    return frozenset(_option_fields(cls))


def _build(cls: type, options: Mapping[str, Any], *, strict: bool, **fixed: Any) -> Any:
    by_key = _option_fields(cls)
    kwargs: dict[str, Any] = dict(fixed)
    for k, v in options.items():
        f = by_key.get(k)
        if f is None:
            if strict and k.startswith("hoodie.") and k not in _PASSTHROUGH_KEYS:
                raise ConfigError(f"unknown option {k!r}",
                                  help="check the spelling; `lakehouse options` lists every option")
            continue
        kwargs[f.name] = f.metadata["parse"](k, v) if v is not None else f.default
    return cls(**kwargs)


def _to_props(obj: Any) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, f in _option_fields(type(obj)).items():
        v = getattr(obj, f.name)
        if v is None:
            continue
        if isinstance(v, bool):
            out[key] = "true" if v else "false"
        elif isinstance(v, tuple):
            out[key] = ",".join(v)
        else:
            out[key] = str(v)
    return out


# Options Hudi writes or accepts that lakehouse keeps but does not interpret.
_PASSTHROUGH_KEYS = frozenset({
    "hoodie.table.metadata.partitions", "hoodie.table.metadata.partitions.inflight",
    "hoodie.compaction.record.merger.strategy", "hoodie.table.keygenerator.type",
    "hoodie.table.cdc.enabled", "hoodie.table.initial.version", "hoodie.record.merge.mode",
    "hoodie.datasource.write.table.type", "hoodie.table.base.file.format",
})


# --- hoodie.properties ----------------------------------------------------------------------


@dataclass(frozen=True)
class TableConfig:
    """The content of ``hoodie.properties``: what every reader and writer of the table agrees on."""

    name: str = opt("hoodie.table.name", "", _str)
    table_type: TableType = opt("hoodie.table.type", TableType.COPY_ON_WRITE, _enum(TableType))
    version: int = opt("hoodie.table.version", 6, _int(0))
    timeline_layout_version: int = opt("hoodie.timeline.layout.version", 1, _int(0))
    database_name: str = opt("hoodie.database.name", "default", _str)
    archive_folder: str = opt("hoodie.archivelog.folder", "archived", _str)
    record_key_fields: tuple[str, ...] = opt("hoodie.table.recordkey.fields", (), _fields)
    partition_fields: tuple[str, ...] = opt("hoodie.table.partition.fields", (), _fields)
    ordering_field: str | None = opt("hoodie.table.precombine.field", None, _str)
    populate_meta_fields: bool = opt("hoodie.populate.meta.fields", True, _bool)
    key_generator_class: str = opt("hoodie.table.keygenerator.class",
                                   KeyGeneratorType.SIMPLE.java_class, _str)
    hive_style_partitioning: bool = opt("hoodie.datasource.write.hive_style_partitioning", False, _bool)
    url_encode_partitions: bool = opt("hoodie.datasource.write.partitionpath.urlencode", False, _bool)
    drop_partition_columns: bool = opt("hoodie.datasource.write.drop.partition.columns", False, _bool)
    payload_class: str = opt("hoodie.compaction.payload.class",
                             MergeMode.EVENT_TIME_ORDERING.payload_class, _str)
    create_schema: str | None = opt("hoodie.table.create.schema", None, _str)
    timeline_timezone: str = opt("hoodie.table.timeline.timezone", "UTC", _str)
    checksum: int | None = opt("hoodie.table.checksum", None, _int(0))
    # Table-wide write settings every writer must share.
    index_type: IndexType = opt("hoodie.index.type", IndexType.SIMPLE, _enum(IndexType))
    bucket_num: int = opt("hoodie.bucket.index.num.buckets", 256, _int(1))
    bucket_hash_fields: tuple[str, ...] = opt("hoodie.bucket.index.hash.field", (), _fields)
    timestamp_type: str | None = opt("hoodie.keygen.timebased.timestamp.type", None, _str)
    timestamp_input_format: str | None = opt("hoodie.keygen.timebased.input.dateformat", None, _str)
    timestamp_output_format: str | None = opt("hoodie.keygen.timebased.output.dateformat", None, _str)
    timestamp_timezone: str | None = opt("hoodie.keygen.timebased.timezone", None, _str)
    extra: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.key_generator_type is KeyGeneratorType.NON_PARTITION and self.partition_fields:
            raise ConfigError("a non-partitioned key generator cannot have partition fields",
                              help="drop partition_by or use the SIMPLE/COMPLEX key generator")

    @property
    def key_generator_type(self) -> KeyGeneratorType:
        return KeyGeneratorType.from_class(self.key_generator_class)

    @property
    def merge_mode(self) -> MergeMode:
        return MergeMode.from_payload_class(self.payload_class)

    @property
    def is_mor(self) -> bool:
        return self.table_type is TableType.MERGE_ON_READ

    @property
    def is_partitioned(self) -> bool:
        return bool(self.partition_fields)

    def expected_checksum(self) -> int:
        return table_checksum(self.database_name, self.name)

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> "TableConfig":
        known = _option_fields(cls)
        extra = {k: v for k, v in props.items() if k not in known}
        options = {k: v for k, v in props.items() if k in known}
        # Hudi 1.x names the key generator by type only (hoodie.table.keygenerator.type, e.g.
        # COMPLEX or COMPLEX_AVRO); without the class the default SIMPLE would be wrong.
        kg_type = props.get("hoodie.table.keygenerator.type")
        if kg_type and "hoodie.table.keygenerator.class" not in props:
            t = _enum(KeyGeneratorType)("hoodie.table.keygenerator.type",
                                        kg_type.strip().upper().removesuffix("_AVRO"))
            options["hoodie.table.keygenerator.class"] = t.java_class
        return _build(cls, options, strict=False, extra=extra)

    def to_properties(self) -> dict[str, str]:
        props = dict(self.extra)
        props.update(_to_props(self))
        props["hoodie.table.checksum"] = str(self.expected_checksum())
        props.setdefault("hoodie.table.base.file.format", "PARQUET")
        return props

    def replace(self, **changes: Any) -> "TableConfig":
        return dataclasses.replace(self, **changes)


def table_checksum(database: str, table: str) -> int:
    """Hudi's ``hoodie.table.checksum``: CRC32 of ``"<database>.<table>"``."""
    return zlib.crc32(f"{database}.{table}".encode("utf-8"))


TABLE_OPTION_KEYS = frozenset(_option_fields(TableConfig))


# --- per-write settings ---------------------------------------------------------------------


@dataclass(frozen=True)
class WriteConfig:
    small_file_limit: int = opt("hoodie.parquet.small.file.limit", 104857600, _int(0),
                                "base files below this size receive new inserts")
    max_file_size: int = opt("hoodie.parquet.max.file.size", 125829120, _int(1),
                             "target size of a base file")
    record_size_estimate: int = opt("hoodie.copyonwrite.record.size.estimate", 1024, _int(1),
                                    "bytes per record until earlier commits tell better")
    record_size_estimation_threshold: float = opt(
        "hoodie.record.size.estimation.threshold", 1.0, _float_between(0.0, float("inf")),
        "a commit informs the record size estimate only if it wrote more than this times the "
        "small-file limit (small commits are dominated by file footers)")
    insert_split_size: int = opt("hoodie.copyonwrite.insert.split.size", 500000, _int(1))
    auto_split_inserts: bool = opt("hoodie.copyonwrite.insert.auto.split", True, _bool)
    log_max_size: int = opt("hoodie.logfile.max.size", 1073741824, _int(1),
                            "a log file rolls over to a new version past this size")
    # Hudi writes Avro blocks by default. Measured here (benchmarks/README.md), parquet blocks
    # make MOR upserts ~4x and snapshot reads ~2.7x faster with ~40% fewer log bytes, and every
    # Hudi reader (Java 0.14+, hudi-rs) reads them; set "avro" for Hudi's default.
    log_block_format: LogBlockFormat = opt("hoodie.logfile.data.block.format", LogBlockFormat.PARQUET,
                                           _enum(LogBlockFormat),
                                           "avro or parquet data blocks in MOR log files")
    # Hudi 0.14 defaults to gzip, several times slower to write on two cores. zstd (level 1)
    # writes and reads as fast as snappy here and makes base files ~20% and log blocks ~30%
    # smaller (measured, benchmarks/README.md); Hudi's readers and hudi-rs read it.
    parquet_codec: str = opt("hoodie.parquet.compression.codec", "zstd", _str)
    parquet_row_group_size: int = opt("hoodie.parquet.block.size", 125829120, _int(1))
    combine_before_insert: bool = opt("hoodie.combine.before.insert", False, _bool)
    combine_before_upsert: bool = opt("hoodie.combine.before.upsert", True, _bool)
    bloom_num_entries: int = opt("hoodie.index.bloom.num_entries", 60000, _int(1))
    bloom_fpp: float = opt("hoodie.index.bloom.fpp", 0.000000001, _float_between(0.0, 1.0))
    bloom_filter_type: str = opt("hoodie.bloom.index.filter.type", "DYNAMIC_V0", _str)
    bloom_max_entries: int = opt("hoodie.bloom.index.filter.dynamic.max.entries", 100000, _int(1))
    bloom_in_base_files: bool = opt(
        "hoodie.parquet.bloom.filter.enabled", True, _bool,
        "write the record-key bloom filter into base file footers (always with a BLOOM index)")
    bulk_insert_sort_mode: BulkInsertSortMode = opt(
        "hoodie.bulkinsert.sort.mode", BulkInsertSortMode.NONE, _enum(BulkInsertSortMode),
        "NONE groups by partition (and bucket) only; GLOBAL_SORT also sorts by record key, so "
        "every base file covers a narrow key range that a BLOOM index prunes by")
    bloom_update_partition_path: bool = opt("hoodie.bloom.index.update.partition.path", True, _bool)
    simple_update_partition_path: bool = opt("hoodie.simple.index.update.partition.path", True, _bool)
    index_logs: bool = opt("hoodie.index.log.inserts", False, _bool,
                           "MOR: inserts may go to log files of small file groups")
    set_null_for_missing_columns: bool = opt(
        "hoodie.write.set.null.for.missing.columns", False, _bool,
        "a batch without some table columns writes nulls for them (else it is refused: its "
        "updates would silently erase those columns)")
    allow_duplicates_on_insert: bool = opt("hoodie.merge.allow.duplicate.on.inserts", False, _bool)

    @classmethod
    def from_options(cls, options: Mapping[str, Any] | None = None) -> "WriteConfig":
        cfg = _service_config(cls, options)
        if cfg.small_file_limit > cfg.max_file_size:
            raise ConfigError(
                f"hoodie.parquet.small.file.limit ({cfg.small_file_limit}) exceeds "
                f"hoodie.parquet.max.file.size ({cfg.max_file_size})",
                help="the small-file limit must not exceed the max file size")
        return cfg

    def to_properties(self) -> dict[str, str]:
        return _to_props(self)


WRITE_OPTION_KEYS = frozenset(_option_fields(WriteConfig))


def _choice(*values: str) -> Callable[[str, Any], str]:
    def parse(key: str, v: Any) -> str:
        s = str(v).strip().upper()
        if s not in values:
            raise ConfigError(f"{key}={v!r} is not one of {', '.join(values)}",
                              help=f"set {key} to one of the listed values")
        return s
    return parse


@dataclass(frozen=True)
class CompactionConfig:
    """When to schedule a compaction and what its plan may hold (MOR tables)."""

    trigger_strategy: str = opt(
        "hoodie.compact.inline.trigger.strategy", "NUM_COMMITS",
        _choice("NUM_COMMITS", "TIME_ELAPSED", "NUM_AND_TIME", "NUM_OR_TIME", "LOG_BYTES",
                "NUM_OR_LOG_BYTES"),
        "what triggers a compaction: delta commits, time, log bytes (the last two are lakehouse's)")
    max_delta_commits: int = opt("hoodie.compact.inline.max.delta.commits", 5, _int(1),
                                 "delta commits since the last compaction that trigger one")
    max_delta_seconds: int = opt("hoodie.compact.inline.max.delta.seconds", 3600, _int(1),
                                 "seconds since the last compaction that trigger one")
    max_log_bytes: int = opt("hoodie.compact.trigger.log.bytes", 1 << 30, _int(1),
                             "lakehouse: total log bytes that trigger a compaction")
    target_io_mb: int = opt("hoodie.compaction.target.io", 512000, _int(1),
                            "at most this many MB read and written by one plan")
    log_size_threshold: int = opt("hoodie.compaction.logfile.size.threshold", 0, _int(0),
                                  "file slices with fewer log bytes are left out of a plan")

    @classmethod
    def from_options(cls, options: Mapping[str, Any] | None = None) -> "CompactionConfig":
        return _service_config(cls, options)


@dataclass(frozen=True)
class CleanConfig:
    """What cleaning keeps (seed 003; Hudi's keys and defaults)."""

    policy: str = opt("hoodie.cleaner.policy", "KEEP_LATEST_COMMITS",
                      _choice("KEEP_LATEST_COMMITS", "KEEP_LATEST_BY_HOURS", "KEEP_LATEST_FILE_VERSIONS"),
                      "which file versions cleaning keeps")
    commits_retained: int = opt("hoodie.cleaner.commits.retained", 10, _int(1),
                                "KEEP_LATEST_COMMITS: commits whose files stay readable")
    hours_retained: int = opt("hoodie.cleaner.hours.retained", 24, _int(1),
                              "KEEP_LATEST_BY_HOURS: hours of commits whose files stay readable")
    file_versions_retained: int = opt("hoodie.cleaner.fileversions.retained", 3, _int(1),
                                      "KEEP_LATEST_FILE_VERSIONS: file slices kept per file group")
    max_commits: int = opt("hoodie.clean.max.commits", 1, _int(1),
                           "commits since the last clean that trigger a clean")
    incremental: bool = opt("hoodie.cleaner.incremental.mode", True, _bool,
                            "scan only partitions written since the last clean")
    parallelism: int = opt("hoodie.cleaner.parallelism", 200, _int(1),
                           "delete tasks run at once at most")

    @classmethod
    def from_options(cls, options: Mapping[str, Any] | None = None) -> "CleanConfig":
        return _service_config(cls, options)


@dataclass(frozen=True)
class ArchivalConfig:
    """How long the active timeline may grow (Hudi's defaults)."""

    max_commits: int = opt("hoodie.keep.max.commits", 30, _int(2),
                           "archive when the active timeline holds more completed commits")
    min_commits: int = opt("hoodie.keep.min.commits", 20, _int(1),
                           "archive down to this many completed commits")

    @classmethod
    def from_options(cls, options: Mapping[str, Any] | None = None) -> "ArchivalConfig":
        cfg = _service_config(cls, options)
        if cfg.min_commits >= cfg.max_commits:
            raise ConfigError(f"hoodie.keep.min.commits ({cfg.min_commits}) must be below "
                              f"hoodie.keep.max.commits ({cfg.max_commits})",
                              help="for example 20 and 30, Hudi's defaults")
        return cfg


class ConcurrencyMode(enum.StrEnum):
    SINGLE_WRITER = "SINGLE_WRITER"
    OPTIMISTIC_CONCURRENCY_CONTROL = "OPTIMISTIC_CONCURRENCY_CONTROL"


class FailedWritesPolicy(enum.StrEnum):
    EAGER = "EAGER"  # the next writer rolls back every pending write (one writer at a time)
    LAZY = "LAZY"  # only writes whose heartbeat stopped are failed (several writers)


STORAGE_LOCK_PROVIDER = "lakehouse.concurrency.lock.StorageLockProvider"
# Hudi's file-system lock provider does what ours does; a table configured for it keeps working.
LOCK_PROVIDER_ALIASES = {
    "org.apache.hudi.client.transaction.lock.FileSystemBasedLockProvider": STORAGE_LOCK_PROVIDER,
}


def _check_importable(key: str, class_path: str) -> None:
    """Refuse a class that cannot be loaded now, rather than when the first writer needs it
    (after a table was created with it, say)."""
    import importlib
    module, _, name = class_path.rpartition(".")
    try:
        getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as e:
        raise ConfigError(f"{key}={class_path!r} cannot be imported: {e}",
                          help="install the module or fix the class path") from None


@dataclass(frozen=True)
class ConcurrencyConfig:
    """Several writers on one table (Hudi's multi-writer keys; Iceberg's commit-retry defaults)."""

    mode: ConcurrencyMode = opt(
        "hoodie.write.concurrency.mode", ConcurrencyMode.SINGLE_WRITER, _enum(ConcurrencyMode),
        "OPTIMISTIC_CONCURRENCY_CONTROL lets several writers and services work on the table: "
        "instants are allocated and commits checked for conflicts under the table lock")
    failed_writes_policy: FailedWritesPolicy | None = opt(
        "hoodie.cleaner.policy.failed.writes", None, _enum(FailedWritesPolicy),
        "EAGER: a new write rolls back every pending one; LAZY: only those whose heartbeat "
        "expired (default: LAZY with several writers, else EAGER)")
    lock_provider: str = opt("hoodie.write.lock.provider", STORAGE_LOCK_PROVIDER, _str,
                             "the table lock; the default keeps leases in the table's storage")
    lock_wait_ms: int = opt("hoodie.write.lock.wait_time_ms", 60000, _int(1),
                            "how long a writer waits for the table lock before giving up")
    lock_expire_minutes: int = opt("hoodie.write.lock.filesystem.expire", 1, _int(1),
                                   "a lock lease not renewed for this long may be taken over")
    lock_poll_ms: int = opt("hoodie.write.lock.wait_time_ms_between_retry", 100, _int(1),
                            "pause between attempts to take the table lock")
    heartbeat_interval_ms: int = opt("hoodie.client.heartbeat.interval_in_ms", 60000, _int(1),
                                     "how often a writer proves it is alive")
    heartbeat_misses: int = opt("hoodie.client.heartbeat.tolerable.misses", 2, _int(0),
                                "missed heartbeats after which a pending write counts as failed")
    conflict_retries: int = opt("hoodie.write.num.retries.on.conflict.failures", 4, _int(0),
                                "times a write is redone after a conflict or a lock timeout "
                                "(Iceberg's commit.retry.num-retries)")
    retry_min_wait_ms: int = opt("hoodie.write.commit.retry.min_wait_ms", 100, _int(0),
                                 "first backoff before a retry (doubles each time, with jitter)")
    retry_max_wait_ms: int = opt("hoodie.write.commit.retry.max_wait_ms", 60000, _int(0),
                                 "longest backoff between retries")
    retry_total_timeout_ms: int = opt("hoodie.write.commit.retry.total_timeout_ms", 1800000, _int(1),
                                      "no retry starts after this long since the first attempt")

    @classmethod
    def from_options(cls, options: Mapping[str, Any] | None = None) -> "ConcurrencyConfig":
        cfg = _service_config(cls, options)
        provider = LOCK_PROVIDER_ALIASES.get(cfg.lock_provider, cfg.lock_provider)
        if "." not in provider.strip(".") or " " in provider:
            raise ConfigError(f"hoodie.write.lock.provider={cfg.lock_provider!r} is not a class path",
                              help=f"use {STORAGE_LOCK_PROVIDER} (leases in the table's storage) "
                                   "or module.Class of your own provider")
        if cfg.multi_writer and provider != STORAGE_LOCK_PROVIDER:
            _check_importable("hoodie.write.lock.provider", provider)
        policy = cfg.failed_writes_policy or (FailedWritesPolicy.LAZY if cfg.multi_writer
                                              else FailedWritesPolicy.EAGER)
        if cfg.multi_writer and policy is FailedWritesPolicy.EAGER:
            raise ConfigError(
                "hoodie.cleaner.policy.failed.writes=EAGER with several writers would roll back "
                "the other writers' instants while they write",
                help="set it to LAZY (or leave it unset) with OPTIMISTIC_CONCURRENCY_CONTROL")
        if cfg.retry_min_wait_ms > cfg.retry_max_wait_ms:
            raise ConfigError(
                f"hoodie.write.commit.retry.min_wait_ms ({cfg.retry_min_wait_ms}) exceeds "
                f"hoodie.write.commit.retry.max_wait_ms ({cfg.retry_max_wait_ms})",
                help="the first backoff must not be longer than the longest")
        if cfg.lock_wait_ms < cfg.lock_poll_ms:
            raise ConfigError(
                f"hoodie.write.lock.wait_time_ms ({cfg.lock_wait_ms}) is shorter than one pause "
                f"between attempts ({cfg.lock_poll_ms} ms)",
                help="wait at least as long as hoodie.write.lock.wait_time_ms_between_retry")
        return dataclasses.replace(cfg, lock_provider=provider, failed_writes_policy=policy)

    @property
    def multi_writer(self) -> bool:
        return self.mode is ConcurrencyMode.OPTIMISTIC_CONCURRENCY_CONTROL

    @property
    def lazy_rollback(self) -> bool:
        return self.failed_writes_policy is FailedWritesPolicy.LAZY

    @property
    def heartbeat_expiry_s(self) -> float:
        return self.heartbeat_interval_ms * (self.heartbeat_misses + 1) / 1000.0

    @property
    def lock_lease_s(self) -> float:
        return self.lock_expire_minutes * 60.0


@dataclass(frozen=True)
class IcebergConfig:
    """Iceberg metadata published with every completed instant (seed 004)."""

    enabled: bool = opt("hoodie.meta.sync.iceberg.enabled", True, _bool,
                        "publish Iceberg v2 metadata (the read-optimized view) under "
                        ".hoodie/iceberg after every commit, compaction, clean and rollback")

    @classmethod
    def from_options(cls, options: Mapping[str, Any] | None = None) -> "IcebergConfig":
        return _service_config(cls, options)


@dataclass(frozen=True)
class MemoryConfig:
    """How much memory merging one file slice's log records may hold (snapshot reads, compaction)."""

    merge_max_size: int = opt(
        "hoodie.memory.merge.max.size", 1 << 30, _int(1),
        "bytes of decoded log records one file slice's merge holds before it merges them down to "
        "one version per key and reads on (log files past this on disk are read one at a time)")

    @classmethod
    def from_options(cls, options: Mapping[str, Any] | None = None) -> "MemoryConfig":
        return _service_config(cls, options)

    @classmethod
    def of_table(cls, config: "TableConfig") -> "MemoryConfig":
        """The table's stored setting (tables written by Hudi carry keys this class does not read)."""
        own = _option_fields(cls)
        return cls.from_options({k: v for k, v in config.extra.items() if k in own})


SERVICE_CONFIGS = (CompactionConfig, CleanConfig, ArchivalConfig, ConcurrencyConfig, IcebergConfig,
                   MemoryConfig)
SERVICE_OPTION_KEYS = frozenset(k for c in SERVICE_CONFIGS for k in _option_fields(c))
KNOWN_OPTION_KEYS = TABLE_OPTION_KEYS | WRITE_OPTION_KEYS | SERVICE_OPTION_KEYS | _PASSTHROUGH_KEYS


def _service_config(cls: type, options: Mapping[str, Any] | None) -> Any:
    """``cls`` from its options in ``options``; any unknown ``hoodie.*`` key is an error."""
    options = dict(options or {})
    unknown = [k for k in options if k.startswith("hoodie.") and k not in KNOWN_OPTION_KEYS]
    if unknown:
        raise ConfigError(f"unknown option(s) {', '.join(sorted(unknown))}",
                          help="check the spelling; `lakehouse options` lists every option")
    own = _option_fields(cls)
    return _build(cls, {k: v for k, v in options.items() if k in own}, strict=True)


def option_docs() -> list[tuple[str, str, str]]:
    """(key, default, doc) of every option, for ``lakehouse options`` and the docs."""
    rows = []
    for cls in (TableConfig, WriteConfig, *SERVICE_CONFIGS):
        for key, f in _option_fields(cls).items():
            default = f.default if f.default is not dataclasses.MISSING else ""
            if isinstance(default, tuple):
                default = ",".join(default)
            rows.append((key, "" if default is None else str(default), f.metadata.get("doc", "")))
    return rows
