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
import threading
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


# The newest version this process published or read, by table URI: the next publish builds on
# it after one existence check, and the atomic create of the version after it tells whether
# another publisher came first (then the store is read afresh).
_LATEST: dict[str, tuple[int, TableMetadata, int]] = {}  # version, metadata, its file's size
_LATEST_LOCK = threading.Lock()


class MetadataStore:
    def __init__(self, storage: Storage) -> None:
        self.storage = storage

    def _remember(self, version: int, metadata: TableMetadata | None, size: int) -> None:
        key = self.storage.uri()
        with _LATEST_LOCK:
            if metadata is None:
                _LATEST.pop(key, None)
            else:
                _LATEST[key] = (version, metadata, size)

    def _remembered(self) -> tuple[int, TableMetadata, int] | None:
        with _LATEST_LOCK:
            return _LATEST.get(self.storage.uri())

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

    def _read_bytes(self, version: int) -> bytes:
        path = metadata_file(version)
        try:
            return self.storage.read(path)
        except FileNotFoundError:
            raise CorruptFileError(self.uri(path), "the metadata version is missing",
                                   help="reload: another process may have removed it") from None

    def read(self, version: int) -> TableMetadata:
        return TableMetadata.from_bytes(self._read_bytes(version), self.uri(metadata_file(version)))

    def load(self, *, remembered: bool = False) -> tuple[int, TableMetadata | None]:
        """The newest version and its metadata. ``remembered``: the version this process last
        published or read, if its file is still there (one existence check): a publisher then
        finds out at its atomic create whether another came first, and loads again."""
        if remembered:
            known = self._remembered()
            if known is not None:
                # The same size too: a folder deleted and published afresh reuses the numbers.
                info = self.storage.info(metadata_file(known[0]))
                if info is not None and info.size == known[2]:
                    return known[0], known[1]
        version = self.latest_version()
        if not version:
            self._remember(0, None, 0)
            return 0, None
        data = self._read_bytes(version)
        metadata = TableMetadata.from_bytes(data, self.uri(metadata_file(version)))
        self._remember(version, metadata, len(data))
        return version, metadata

    def publish(self, version: int, metadata: TableMetadata) -> None:
        """Create ``v<version>.metadata.json``; FileAlreadyExistsError if another publisher did.
        The hint is written without reading it first: after a race it may step back, which
        readers tolerate (they look past it), and the next publish moves it on."""
        data = metadata.to_bytes()
        self.storage.create(metadata_file(version), data)
        self._remember(version, metadata, len(data))
        try:
            self.storage.write(VERSION_HINT, str(version).encode())
        except (OSError, StorageError):
            pass  # the version is published; a stale hint only makes readers look further

    def discard(self, paths: list[str]) -> None:
        """Remove files an attempt wrote and never published (best effort: they are unreferenced)."""
        if not paths:
            return
        try:
            self.storage.delete_many(list(paths))
        except (OSError, StorageError):
            pass
