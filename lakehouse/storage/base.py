"""The storage interface: every byte lakehouse reads or writes goes through a :class:`Storage`.

Paths are relative to the storage's base URI and always use ``/``. Storage knows nothing of tables.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import BinaryIO

import pyarrow as pa

from lakehouse.errors import StorageError


@dataclass(frozen=True, slots=True)
class FileInfo:
    path: str  # relative to the storage base, '/'-separated
    size: int
    is_dir: bool
    mtime_ns: int | None = None

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]


class Storage(abc.ABC):
    """File access bound to a base URI."""

    base_uri: str

    @abc.abstractmethod
    def read(self, path: str) -> bytes: ...

    @abc.abstractmethod
    def read_range(self, path: str, offset: int, length: int) -> bytes: ...

    @abc.abstractmethod
    def open_input(self, path: str, size: int | None = None) -> pa.NativeFile:
        """A random-access file, as pyarrow.parquet wants it. ``size``: the file's size, from a
        listing (an object store then does not ask for it)."""

    @abc.abstractmethod
    def write(self, path: str, data: bytes) -> None:
        """Write (or replace) the whole file; readers see the old or the new content, never a mix."""

    @abc.abstractmethod
    def create(self, path: str, data: bytes) -> None:
        """Atomically create ``path`` with ``data`` if it does not exist.

        Raises :class:`~lakehouse.errors.FileAlreadyExistsError` when it exists. Two racing creators
        never both succeed, and nobody ever sees a partial file.
        """

    @abc.abstractmethod
    def open_output(self, path: str) -> BinaryIO:
        """A stream that creates ``path``; for large data files guarded by markers."""

    def touch(self, path: str) -> None:
        """Create an empty file if absent (markers: cheap, no content to protect)."""
        if not self.exists(path):
            try:
                self.create(path, b"")
            except FileExistsError:
                pass

    @property
    def keeps_empty_folders(self) -> bool:
        """Whether a folder stays when its last file goes (a file system's does; an object
        store's prefix exists only while something is under it)."""
        return True

    @property
    def atomic_create(self) -> bool:
        """Whether :meth:`create` is truly atomic against other processes and machines.

        Concurrent writers rely on it (instant files, lock leases); a store that cannot promise
        it is refused for concurrent writers unless a lock provider outside the store is set."""
        return True

    def is_io_failure(self, error: BaseException) -> bool:
        """Whether ``error``, raised while reading a file from :meth:`open_input`, is a failure to
        fetch bytes (network, permissions) rather than bad content: such a file is not corrupt."""
        return isinstance(error, StorageError)

    @property
    @abc.abstractmethod
    def supports_append(self) -> bool: ...

    @abc.abstractmethod
    def append(self, path: str, data: bytes) -> int:
        """Append to ``path`` (created when absent); returns the offset the data starts at."""

    @abc.abstractmethod
    def list(self, path: str = "", *, recursive: bool = False) -> list[FileInfo]:
        """Entries under a directory; an absent directory lists as empty."""

    @abc.abstractmethod
    def info(self, path: str) -> FileInfo | None: ...

    def exists(self, path: str) -> bool:
        return self.info(path) is not None

    def size(self, path: str) -> int:
        info = self.info(path)
        if info is None:
            raise FileNotFoundError(self.uri(path))
        return info.size

    @abc.abstractmethod
    def delete(self, path: str, *, missing_ok: bool = True) -> bool:
        """Delete a file; True if it existed."""

    def delete_many(self, paths: "list[str]") -> None:
        """Delete files, absent ones too, in as few requests as the store allows (an object
        store deletes a thousand keys in one)."""
        for path in paths:
            self.delete(path, missing_ok=True)

    @abc.abstractmethod
    def delete_dir(self, path: str) -> None: ...

    @abc.abstractmethod
    def mkdirs(self, path: str) -> None: ...

    def uri(self, path: str = "") -> str:
        if not path:
            return self.base_uri
        return f"{self.base_uri.rstrip('/')}/{path.lstrip('/')}"

    def child(self, path: str) -> "Storage":
        """A storage rooted at a sub-path of this one."""
        raise NotImplementedError
