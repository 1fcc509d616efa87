"""Where things live in a table: every folder and file name under ``.hoodie`` defined once.

Hudi keeps these names on ``HoodieTableMetaClient`` (``METAFOLDER_NAME``, ``AUXILIARYFOLDER_NAME``,
``TEMPFOLDER_NAME``, ``SCHEMA_FOLDER_NAME``, ``HEARTBEAT_FOLDER_NAME``, ``METADATA_TABLE_FOLDER_PATH``)
and every module asks it; here they are this module's, at the bottom of the house so that the
storage rules (``partition_path``), the timeline, the lock and the integrations all read the same.
Paths are relative to the table's root, '/'-separated, as :class:`lakehouse.storage.Storage` takes
them. ``tests/architecture`` checks that no other module spells a ``.hoodie`` path.

lakehouse's own files go under ``.hoodie/.aux/lakehouse``: Hudi's auxiliary folder, which Hudi's
services and table rewrites leave alone, so that a Java Hudi job run on the table keeps them.
"""

from __future__ import annotations

# Hudi's folders (HoodieTableMetaClient).
METAFOLDER = ".hoodie"
PROPERTIES = f"{METAFOLDER}/hoodie.properties"
AUX = f"{METAFOLDER}/.aux"
TEMP = f"{METAFOLDER}/.temp"
SCHEMA = f"{METAFOLDER}/.schema"
HEARTBEAT = f"{METAFOLDER}/.heartbeat"
METADATA_TABLE = f"{METAFOLDER}/metadata"
# hoodie.archivelog.folder's default: the archived timeline's folder under METAFOLDER.
DEFAULT_ARCHIVE_FOLDER = "archived"
ARCHIVED = f"{METAFOLDER}/{DEFAULT_ARCHIVE_FOLDER}"  # the archived timeline, by default
# The folders a new table is created with (HoodieTableMetaClient.initTableAndGetMetaClient).
CREATED_FOLDERS = (AUX, TEMP, SCHEMA)
# Each partition folder's marker file (HoodiePartitionMetadata.HOODIE_PARTITION_METAFILE_PREFIX).
PARTITION_METAFILE = ".hoodie_partition_metadata"

# The consistent-hashing bucket index's rings, a folder per partition
# (HoodieTableMetaClient.getHashingMetadataPath).
HASHING_METADATA = f"{METAFOLDER}/.bucket_index/consistent_hashing_metadata"

# lakehouse's folders.
LOCKS = f"{METAFOLDER}/.locks"  # the storage lock's leases (lakehouse.concurrency.lock)
ICEBERG = f"{METAFOLDER}/iceberg"  # the Iceberg metadata published for every commit
# The Iceberg data and position delete files of a Merge-On-Read table's snapshot view (the
# rows its logs add over the base files): under the meta folder, where no Hudi reader lists.
ICEBERG_DATA = f"{ICEBERG}/data"
LAKEHOUSE_AUX = f"{AUX}/lakehouse"
SAVED_PROPERTIES = f"{LAKEHOUSE_AUX}/hoodie.properties"  # lakehouse's copy (lakehouse.properties)
INGEST_MANIFESTS = f"{LAKEHOUSE_AUX}/ingest"  # what a file source ingested (lakehouse.sources)
SPARK_STAGING = f"{LAKEHOUSE_AUX}/staging"  # the Spark data source's staged files
SPARK_SINKS = f"{LAKEHOUSE_AUX}/sinks"  # the streaming sink's batch marks
STREAMS = f"{LAKEHOUSE_AUX}/streams"  # the streaming app's checkpoints


def archive_folder(folder: str) -> str:
    """The archived timeline's folder for ``hoodie.archivelog.folder`` = ``folder`` (empty: the
    meta folder itself, as Hudi before 0.x's default; HoodieTableMetaClient.getArchivePath)."""
    return f"{METAFOLDER}/{folder}" if folder else METAFOLDER


def timeline_file(file_name: str) -> str:
    """The path of an instant's file on the active timeline."""
    return f"{METAFOLDER}/{file_name}"


def service_results(instant_time: str, service: str) -> str:
    """Where a table service's execute step (``service``: compaction, clustering) leaves its
    write stats for its commit step."""
    return f"{AUX}/{instant_time}.{service}.results.json"


def hashing_metadata_folder(partition: str) -> str:
    """Where a partition's consistent-hashing rings are (the folder itself when unpartitioned)."""
    return f"{HASHING_METADATA}/{partition}" if partition else HASHING_METADATA


def in_metafolder(path: str) -> bool:
    """Whether ``path`` (relative to the table) is the meta folder or under it."""
    return path == METAFOLDER or path.startswith(METAFOLDER + "/")
