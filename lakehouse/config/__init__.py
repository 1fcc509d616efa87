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
from typing import Any, Mapping

from lakehouse.config.clustering import ClusteringConfig, CurveBuildMethod, LayoutStrategy, PartitionFilterMode
from lakehouse.config.concurrency import (LOCK_PROVIDER_ALIASES, STORAGE_LOCK_PROVIDER, ConcurrencyConfig,
                                          ConcurrencyMode, FailedWritesPolicy)
from lakehouse.config.options import (FLINK_KEYS, KNOWN_OPTION_KEYS, PASSTHROUGH_KEYS, check_option_names, opt,
                                      option_fields, option_keys)
from lakehouse.config.services import ArchivalConfig, CleanConfig, CompactionConfig, IcebergConfig, IcebergView, MemoryConfig
from lakehouse.config.table import (KEY_VALUE_FORMAT, BucketEngine, IndexType, KeyGeneratorType, MergeMode,
                                    TableConfig, TableType, TABLE_OPTION_KEYS, table_checksum)
from lakehouse.config.write import WRITE_OPTION_KEYS, BulkInsertSortMode, LogBlockFormat, WriteConfig
from lakehouse.errors import ConfigError

__all__ = [
    "ArchivalConfig", "BucketEngine", "BulkInsertSortMode", "CleanConfig", "ClusteringConfig",
    "CurveBuildMethod", "LayoutStrategy", "PartitionFilterMode", "CompactionConfig", "ConcurrencyConfig",
    "ConcurrencyMode", "FailedWritesPolicy", "FLINK_KEYS", "KEY_VALUE_FORMAT", "IcebergConfig", "IcebergView", "IndexType", "KeyGeneratorType",
    "KNOWN_OPTION_KEYS", "LOCK_PROVIDER_ALIASES", "LogBlockFormat", "MemoryConfig", "MergeMode", "merged_options",
    "SERVICE_CONFIGS", "SERVICE_OPTION_KEYS", "STORAGE_LOCK_PROVIDER", "TABLE_OPTION_KEYS", "TableConfig",
    "TableType", "WRITE_OPTION_KEYS", "WriteConfig", "check_option_names", "opt", "option_docs", "option_keys", "table_checksum",
]

SERVICE_CONFIGS = (CompactionConfig, ClusteringConfig, CleanConfig, ArchivalConfig, ConcurrencyConfig, IcebergConfig,
                   MemoryConfig)
SERVICE_OPTION_KEYS = frozenset(k for c in SERVICE_CONFIGS for k in option_fields(c))
KNOWN_OPTION_KEYS.update(TABLE_OPTION_KEYS | WRITE_OPTION_KEYS | SERVICE_OPTION_KEYS | PASSTHROUGH_KEYS)


def merged_options(stored: Mapping[str, Any], given: Mapping[str, Any] | None, where: str) -> dict[str, Any]:
    """The one recipe every entry point (the API, the CLI, the Spark apps, Airflow's tasks) uses
    for its settings: the table's stored ones (``hoodie.properties``) with this call's options over
    them. Stored keys lakehouse does not read (a newer Hudi's, say) stay in the file and are left
    out here, so they never fail a service; the call's own options must be known keys, since a
    misspelt one would otherwise be silently ignored."""
    check_option_names(given, where)
    unknown = sorted(k for k in (given or {}) if k.startswith("hoodie.") and k not in KNOWN_OPTION_KEYS)
    if unknown:
        raise ConfigError(f"unknown option(s) passed to {where}: {', '.join(unknown)}",
                          help="check the spelling; `lakehouse options` lists every option")
    merged = {k: v for k, v in stored.items() if k in KNOWN_OPTION_KEYS or k in FLINK_KEYS}
    merged.update(given or {})
    return merged


def option_docs() -> list[tuple[str, str, str]]:
    """(key, default, doc) of every option, for ``lakehouse options`` and the docs."""
    rows = []
    seen: set[str] = set()
    for cls in (TableConfig, WriteConfig, *SERVICE_CONFIGS):
        for key, f in option_fields(cls).items():
            if key in seen:  # a switch several services read (hoodie.table.services.enabled)
                continue
            seen.add(key)
            default = f.default if f.default is not dataclasses.MISSING else ""
            if isinstance(default, tuple):
                default = ",".join(default)
            rows.append((key, "" if default is None else str(default), f.metadata.get("doc", "")))
    return rows
