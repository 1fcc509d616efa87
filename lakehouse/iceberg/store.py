"""Where the Iceberg metadata of a table lives, and how a new version of it is published.

The layout is Iceberg's file-system ("Hadoop") table layout, under ``.hoodie/iceberg/metadata/``:
``v<N>.metadata.json`` files, manifests and manifest lists under unique names, and
``version-hint.text`` holding the latest N. A version is published by creating its file with the
storage's atomic create-if-absent, so of two publishers racing for N exactly one wins; the hint is
written afterwards with a plain write, so it may lag (or, after a race, even step back), and
readers look past it for newer versions.

Why under ``.hoodie``: every Hudi reader and lakehouse itself skip ``.hoodie`` when they look for
partitions and data files, and lakehouse's timeline listing skips sub-folders of ``.hoodie``
(Hudi's own ``.aux`` and ``archived`` live there too). A ``<table>/metadata/`` folder, Iceberg's
usual place, would sit among the partition folders: it happened to be tolerated by hudi-rs 0.5.0
and lakehouse in a check, but it is a legal Hudi partition path (a non-hive-style partition value
"metadata") whose cleaning and listing would then mix with Iceberg's files. ``.hoodie/metadata``
is Hudi's metadata table, hence the ``iceberg`` level. Pass ``<table>/.hoodie/iceberg`` to
readers that take a table folder and find ``metadata/version-hint.text`` beneath it.
"""

from __future__ import annotations

import re
import hashlib
import uuid

from lakehouse.errors import CorruptFileError, StorageError
from lakehouse.errors import IcebergSyncError
from lakehouse.iceberg.metadata import TableMetadata
from lakehouse.storage.base import Storage
from lakehouse import layout

ICEBERG_ROOT = layout.ICEBERG
METADATA_DIR = f"{ICEBERG_ROOT}/metadata"
VERSION_HINT = f"{METADATA_DIR}/version-hint.text"
_VERSION_FILE = re.compile(r"^v(\d+)\.metadata\.json$")


def partition_key(partition: str) -> str:
    """A Hudi partition's key in the names of its manifests and snapshot-view folders (a hash:
    partition paths are user data)."""
    return hashlib.sha256(partition.encode("utf-8")).hexdigest()[:16]


def metadata_file(version: int) -> str:
    return f"{METADATA_DIR}/v{version}.metadata.json"


class MetadataStore:
    def __init__(self, storage: Storage) -> None:
        self.storage = storage

    def uri(self, rel: str) -> str:
        return self.storage.uri(rel)

    def relative(self, uri: str) -> str:
        """The storage path of a file the metadata names by URI."""
        base = self.storage.uri().rstrip("/") + "/"
        if not uri.startswith(base):
            raise IcebergSyncError(
                f"the Iceberg metadata names {uri}, which is outside the table at {self.storage.uri()}",
                help="the table was moved or copied after publishing: delete its "
                     f"{ICEBERG_ROOT} folder and publish again")
        return uri[len(base):]

    def new_manifest_path(self, partition_key: str, spec_id: int) -> str:
        return f"{METADATA_DIR}/m-{partition_key}-s{spec_id}-{uuid.uuid4()}.avro"

    def new_manifest_list_path(self, snapshot_id: int) -> str:
        return f"{METADATA_DIR}/snap-{snapshot_id}-1-{uuid.uuid4()}.avro"

    # --- versions --------------------------------------------------------------------------

    def _hinted_version(self) -> int | None:
        try:
            text = self.storage.read(VERSION_HINT).decode("utf-8", "replace").strip()
        except (FileNotFoundError, StorageError):
            return None
        # The hint is only advice (a crash may leave it stale); a garbled one is ignored and the
        # folder listed instead, as Iceberg's own file-system tables do.
        return int(text) if text.isdigit() else None

    def latest_version(self) -> int:
        """The newest published version (0: none yet)."""
        version = self._hinted_version()
        if version is None or not self.storage.exists(metadata_file(version)):
            versions = [int(m.group(1)) for info in self.storage.list(METADATA_DIR)
                        if (m := _VERSION_FILE.match(info.name))]
            version = max(versions, default=0)
        while self.storage.exists(metadata_file(version + 1)):
            version += 1
        return version

    def read(self, version: int) -> TableMetadata:
        path = metadata_file(version)
        try:
            data = self.storage.read(path)
        except FileNotFoundError:
            raise CorruptFileError(self.uri(path), "the metadata version is missing",
                                   help="reload: another process may have removed it") from None
        return TableMetadata.from_bytes(data, self.uri(path))

    def load(self) -> tuple[int, TableMetadata | None]:
        version = self.latest_version()
        return version, (self.read(version) if version else None)

    def publish(self, version: int, metadata: TableMetadata) -> None:
        """Create ``v<version>.metadata.json``; FileAlreadyExistsError if another publisher did."""
        self.storage.create(metadata_file(version), metadata.to_bytes())
        try:
            hinted = self._hinted_version()
            if hinted is None or hinted < version:
                self.storage.write(VERSION_HINT, str(version).encode())
        except (OSError, StorageError):
            pass  # the version is published; a stale hint only makes readers look further

    def discard(self, paths: list[str]) -> None:
        """Remove files an attempt wrote and never published (best effort: they are unreferenced)."""
        for p in paths:
            try:
                self.storage.delete(p, missing_ok=True)
            except (OSError, StorageError):
                pass
