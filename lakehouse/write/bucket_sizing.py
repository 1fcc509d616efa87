"""The bucket count of a Merge-On-Read table created with defaults, fixed by its first write.

Hudi's simple bucket index hashes every key into a fixed number of buckets per partition; the
count cannot change once file groups exist (that takes a rewrite). Hudi makes users pick it:
Spark's default is 256 buckets, Flink's 4, whatever the data. A table created by lakehouse
without ``hoodie.bucket.index.num.buckets`` stores a provisional count and the marker
:data:`AUTO_KEY`; the first write that puts records into the table then sizes it from that
write's data: enough buckets that the largest partition's share of the batch fits each bucket's
base file under ``hoodie.parquet.max.file.size`` (as bulk insert sizes its files), and at least
:func:`min_buckets`. The count and the cleared marker go to ``hoodie.properties`` before any file
is written, where every later writer, Java Hudi's Spark writers included, reads them.

A table that already has writes (an earlier writer, Java's or a Spark job's, took the
provisional count) keeps its count; the marker is just cleared.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from lakehouse.config import IndexType, TableConfig, WriteConfig
from lakehouse.properties import read_table_config, rewrite_table_config
from lakehouse.timeline.instant import WRITE_ACTIONS, Action
from lakehouse.commit import exclusive

if TYPE_CHECKING:
    from lakehouse.meta_client import TableMetaClient
    from lakehouse.timeline.active import ActiveTimeline

AUTO_KEY = "lakehouse.bucket.index.num.buckets.auto"

# Unpartitioned tables get a few buckets even when small, so that reads and compactions of the
# one "partition" still run in parallel; a partitioned table's file groups are its partitions'.
MIN_BUCKETS_UNPARTITIONED = 4
MIN_BUCKETS_PARTITIONED = 1


def min_buckets(config: TableConfig) -> int:
    return MIN_BUCKETS_PARTITIONED if config.is_partitioned else MIN_BUCKETS_UNPARTITIONED


def buckets_for(config: TableConfig, write_config: WriteConfig, largest_partition_bytes: int) -> int:
    """Buckets per partition for a first write whose largest partition holds that many bytes
    (in memory; the base files it becomes are about as large or smaller)."""
    per_file = max(1, write_config.max_file_size)
    return max(min_buckets(config), math.ceil(largest_partition_bytes / per_file))


def has_writes(active: "ActiveTimeline") -> bool:
    """Whether any write or compaction, in any state, is on the table's timeline: a first-write
    setting (the bucket count, the key generator) is then no longer this write's to choose."""
    return any(i.action in WRITE_ACTIONS or i.action is Action.COMPACTION for i in active.load())


def is_provisional(config: TableConfig) -> bool:
    return config.index_type is IndexType.BUCKET and config.extra.get(AUTO_KEY) == "true"


def settle(meta: "TableMetaClient", config: TableConfig, write_config: WriteConfig,
           largest_partition_bytes: int) -> TableConfig | None:
    """Fix the table's bucket count before a write whose largest partition holds that many bytes
    (in memory) is written, if it is still provisional in ``config``; returns the table's config
    after that (None: nothing to settle), for the writer to adopt."""
    if not is_provisional(config):
        return None
    with exclusive(meta):  # several writers: one of them decides, the others read it
        stored = read_table_config(meta.storage)
        if is_provisional(stored):
            count = stored.bucket_num if has_writes(meta.active) else buckets_for(
                stored, write_config, largest_partition_bytes)
            extra = {k: v for k, v in stored.extra.items() if k != AUTO_KEY}
            stored = stored.replace(bucket_num=count, extra=extra)
            meta.check_lock()  # another writer may have fixed the count meanwhile
            rewrite_table_config(meta.storage, stored,
                                 may_change=("hoodie.bucket.index.num.buckets", AUTO_KEY))
    return stored
