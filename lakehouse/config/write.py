"""What a writer may set per write: file sizing, log format, codecs, bloom filters, index settings."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Mapping

from lakehouse.config.options import (parse_bool, parse_enum, parse_fields, parse_float_between, parse_int, parse_megabytes, option_fields,
                                      service_config, parse_str, options_to_properties, opt)
from lakehouse.errors import ConfigError


class LogBlockFormat(enum.StrEnum):
    AVRO = "avro"
    PARQUET = "parquet"


class BulkInsertSortMode(enum.StrEnum):
    """How bulk insert lays records out (Hudi's ``BulkInsertSortMode``; one process has a single
    input partition, so PARTITION_SORT and GLOBAL_SORT order the same way)."""
    NONE = "NONE"
    GLOBAL_SORT = "GLOBAL_SORT"
    PARTITION_SORT = "PARTITION_SORT"


@dataclass(frozen=True)
class WriteConfig:
    small_file_limit: int = opt("hoodie.parquet.small.file.limit", 104857600, parse_int(0),
                                "base files below this size receive new inserts")
    max_file_size: int = opt("hoodie.parquet.max.file.size", 125829120, parse_int(1),
                             "target size of a base file")
    record_size_estimate: int = opt("hoodie.copyonwrite.record.size.estimate", 1024, parse_int(1),
                                    "bytes per record until earlier commits tell better")
    record_size_estimation_threshold: float = opt(
        "hoodie.record.size.estimation.threshold", 1.0, parse_float_between(0.0, float("inf")),
        "a commit informs the record size estimate only if it wrote more than this times the "
        "small-file limit (small commits are dominated by file footers)")
    insert_split_size: int = opt("hoodie.copyonwrite.insert.split.size", 500000, parse_int(1))
    auto_split_inserts: bool = opt("hoodie.copyonwrite.insert.auto.split", True, parse_bool)
    log_max_size: int = opt("hoodie.logfile.max.size", 1073741824, parse_int(1),
                            "a log file rolls over to a new version past this size")
    # Hudi's HoodieAppendHandle cuts a data block when the records it holds reach this many
    # bytes (by their estimated in-memory size).
    log_block_max_size: int = opt("hoodie.logfile.data.block.max.size", 256 * 1024 * 1024, parse_int(1),
                                  "bytes of records (in memory) one log data block holds")
    # Hudi writes Avro blocks by default. Measured here (benchmarks/README.md), parquet blocks
    # make MOR upserts ~4x and snapshot reads ~2.7x faster with ~40% fewer log bytes, and every
    # Hudi reader (Java 0.14+, hudi-rs) reads them; set "avro" for Hudi's default.
    log_block_format: LogBlockFormat = opt("hoodie.logfile.data.block.format", LogBlockFormat.PARQUET,
                                           parse_enum(LogBlockFormat),
                                           "avro or parquet data blocks in MOR log files")
    # Hudi 0.14 defaults to gzip, several times slower to write on two cores. zstd (level 1)
    # writes and reads as fast as snappy here and makes base files ~20% and log blocks ~30%
    # smaller (measured, benchmarks/README.md); Hudi's readers and hudi-rs read it.
    parquet_codec: str = opt("hoodie.parquet.compression.codec", "zstd", parse_str)
    parquet_row_group_size: int = opt("hoodie.parquet.block.size", 125829120, parse_int(1),
                                      "bytes of a base file's parquet row group (Arrow's in-memory "
                                      "size of its rows, as Hudi counts the records it buffers)")
    combine_before_insert: bool = opt("hoodie.combine.before.insert", False, parse_bool)
    combine_before_upsert: bool = opt("hoodie.combine.before.upsert", True, parse_bool)
    bloom_num_entries: int = opt("hoodie.index.bloom.num_entries", 60000, parse_int(1))
    bloom_fpp: float = opt("hoodie.index.bloom.fpp", 0.000000001, parse_float_between(0.0, 1.0))
    bloom_filter_type: str = opt("hoodie.bloom.index.filter.type", "DYNAMIC_V0", parse_str)
    bloom_max_entries: int = opt("hoodie.bloom.index.filter.dynamic.max.entries", 100000, parse_int(1))
    # Hudi (0.15's key, default true) writes the filter whatever the index. lakehouse's default
    # leaves it out of BUCKET-indexed tables, which find file groups by hashing and never read
    # it: measured, it is ~25% of the CPU of writing a base file and ~430 KB per file. Set true
    # to write it anyway; a BLOOM index always writes it.
    bloom_in_base_files: bool | None = opt(
        "hoodie.parquet.bloom.filter.enabled", None, parse_bool,
        "write the record-key bloom filter into base file footers (default: unless the index is "
        "BUCKET; always with a BLOOM index)")
    bulk_insert_sort_mode: BulkInsertSortMode = opt(
        "hoodie.bulkinsert.sort.mode", BulkInsertSortMode.NONE, parse_enum(BulkInsertSortMode),
        "NONE groups by partition (and bucket) only; GLOBAL_SORT also sorts by record key, so "
        "every base file covers a narrow key range that a BLOOM index prunes by")
    bloom_update_partition_path: bool = opt("hoodie.bloom.index.update.partition.path", True, parse_bool)
    simple_update_partition_path: bool = opt("hoodie.simple.index.update.partition.path", True, parse_bool)
    set_null_for_missing_columns: bool = opt(
        "hoodie.write.set.null.for.missing.columns", False, parse_bool,
        "a batch without some table columns writes nulls for them (else it is refused: its "
        "updates would silently erase those columns)")
    # Hudi 0.14's default (0.15 turned it on): inserts routed into a small file group are merged
    # with its records by key; true writes them as they are, beside the existing records
    # (HoodieConcatHandle), so an insert of an existing key keeps both.
    allow_duplicates_on_insert: bool = opt(
        "hoodie.merge.allow.duplicate.on.inserts", False, parse_bool,
        "insert (not upsert): records going into an existing file group are written as they are, "
        "without merging with the records already there by key")
    small_file_candidates: int = opt(
        "hoodie.merge.small.file.group.candidates.limit", 1, parse_int(0),
        "MOR with an index that cannot index logs: how many of the smallest base files (no logs, "
        "under hoodie.parquet.small.file.limit) take inserts through a merge")
    # Hudi's TransactionUtils.overrideWithLatestCommitMetadata: extra metadata under these
    # prefixes is copied from commit to commit. lakehouse's own progress keys (ingest, the
    # streaming sink) are carried whatever this says (lakehouse.timeline.carried).
    meta_key_prefixes: tuple[str, ...] = opt(
        "hoodie.write.meta.key.prefixes", (), parse_fields,
        "extra metadata keys starting with one of these are copied into every later commit "
        "that does not set them (e.g. a Java streamer's deltastreamer.checkpoint.key)")
    # Hudi's Flink writer bounds a write task's memory by these two (same keys, MB, defaults):
    # records are buffered per file group, a file group's buffer is flushed to storage once it
    # reaches write.batch.size, and the largest buffer whenever all of them pass
    # write.task.max.size. lakehouse applies them to Merge-On-Read writes with the BUCKET index.
    task_max_size_mb: float = opt(
        "write.task.max.size", 1024.0, parse_megabytes(0.0625),
        "MB a write may buffer (Flink's key): past it the largest file-group buffer is flushed "
        "(MOR, BUCKET index)")
    batch_size_mb: float = opt(
        "write.batch.size", 256.0, parse_megabytes(0.0625),
        "MB of one file group's buffer that is flushed to a log file (Flink's key; MOR, BUCKET index)")

    @property
    def task_max_bytes(self) -> int:
        return int(self.task_max_size_mb * (1 << 20))

    @property
    def batch_bytes(self) -> int:
        return int(self.batch_size_mb * (1 << 20))

    @classmethod
    def from_options(cls, options: Mapping[str, Any] | None = None) -> "WriteConfig":
        cfg = service_config(cls, options)
        if cfg.small_file_limit > cfg.max_file_size:
            raise ConfigError(
                f"hoodie.parquet.small.file.limit ({cfg.small_file_limit}) exceeds "
                f"hoodie.parquet.max.file.size ({cfg.max_file_size})",
                help="the small-file limit must not exceed the max file size")
        return cfg

    def to_properties(self) -> dict[str, str]:
        return options_to_properties(self)


WRITE_OPTION_KEYS = frozenset(option_fields(WriteConfig))
