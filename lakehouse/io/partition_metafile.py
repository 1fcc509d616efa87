"""Partition folders as Java Hudi recognises them: a folder is a partition once it holds
``.hoodie_partition_metadata`` (HoodiePartitionMetadata), written before the partition's first
data file."""

from __future__ import annotations

from typing import Iterable

from lakehouse import layout
from lakehouse.errors import FileAlreadyExistsError
from lakehouse.file_group.naming import join, partition_metadata_content
from lakehouse.storage.base import Storage


def ensure_partitions(storage: Storage, partitions: Iterable[str], instant_time: str,
                      known: Iterable[str] = ()) -> None:
    """The metadata file of each of ``partitions`` that has none yet (another writer's at the
    same time is as good); ``known``: partitions a listing just showed one in."""
    known = set(known)
    for p in partitions:
        path = join(p, layout.PARTITION_METAFILE)
        if p in known or storage.exists(path):
            continue
        depth = len(p.split("/")) if p else 0
        try:
            storage.create(path, partition_metadata_content(instant_time, depth))
        except FileAlreadyExistsError:
            pass
