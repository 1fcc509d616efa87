"""Typed, validated configuration under Hudi's ``hoodie.*`` names and defaults.

:class:`TableConfig` is what ``.hoodie/hoodie.properties`` holds: fixed when the table is created.
:class:`WriteConfig` is what a writer may set per write (sizing, index settings, log format); its
table-wide part (index type, bucket count) is stored in ``hoodie.properties`` too so every writer
of the table agrees. Service settings (compaction, clean, archival, concurrency, Iceberg, merge
memory) each have their class. Plain ``dict[str, str]`` appears only at the edges
(from_options/to_properties).
"""

from __future__ import annotations

import dataclasses

from lakehouse.config.concurrency import (LOCK_PROVIDER_ALIASES, STORAGE_LOCK_PROVIDER, ConcurrencyConfig,
                                          ConcurrencyMode, FailedWritesPolicy)
from lakehouse.config.options import (_PASSTHROUGH_KEYS, FLINK_KEYS, _option_fields, check_option_names, opt,
                                      option_keys)
from lakehouse.config.services import ArchivalConfig, CleanConfig, CompactionConfig, IcebergConfig, MemoryConfig
from lakehouse.config.table import (BucketEngine, IndexType, KeyGeneratorType, MergeMode, TableConfig, TableType,
                                    TABLE_OPTION_KEYS, table_checksum)
from lakehouse.config.write import WRITE_OPTION_KEYS, BulkInsertSortMode, LogBlockFormat, WriteConfig

__all__ = [
    "ArchivalConfig", "BucketEngine", "BulkInsertSortMode", "CleanConfig", "CompactionConfig", "ConcurrencyConfig",
    "ConcurrencyMode", "FailedWritesPolicy", "FLINK_KEYS", "IcebergConfig", "IndexType", "KeyGeneratorType",
    "KNOWN_OPTION_KEYS", "LOCK_PROVIDER_ALIASES", "LogBlockFormat", "MemoryConfig", "MergeMode",
    "SERVICE_CONFIGS", "SERVICE_OPTION_KEYS", "STORAGE_LOCK_PROVIDER", "TABLE_OPTION_KEYS", "TableConfig",
    "TableType", "WRITE_OPTION_KEYS", "WriteConfig", "check_option_names", "opt", "option_docs", "option_keys", "table_checksum",
]

SERVICE_CONFIGS = (CompactionConfig, CleanConfig, ArchivalConfig, ConcurrencyConfig, IcebergConfig,
                   MemoryConfig)
SERVICE_OPTION_KEYS = frozenset(k for c in SERVICE_CONFIGS for k in _option_fields(c))
KNOWN_OPTION_KEYS = TABLE_OPTION_KEYS | WRITE_OPTION_KEYS | SERVICE_OPTION_KEYS | _PASSTHROUGH_KEYS


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
