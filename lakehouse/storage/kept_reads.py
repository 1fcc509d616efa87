"""A storage that keeps what it read whole, for one piece of work that reads a file more than
once (an Iceberg publish attempt reads a delta commit's new log file to plan its copy, then again
to decide which of its records win): on an object store each read is a request.

Only on stores whose files never change once written (no append: an object store); a write or
delete through it forgets the path. Bounded: small files only, and so many bytes in all.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import BinaryIO

import pyarrow as pa

from lakehouse.storage.base import FileInfo, Storage


class KeptReads(Storage):
    """``inner``, with the whole-file reads of files up to ``file_bytes`` kept (``max_bytes`` in
    all, the least recently read out first)."""

    def __init__(self, inner: Storage, *, max_bytes: int = 64 << 20, file_bytes: int = 8 << 20) -> None:
        self.inner = inner
        self.base_uri = inner.base_uri
        self.max_bytes, self.file_bytes = max_bytes, file_bytes
        self._kept: OrderedDict[str, bytes] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()  # file groups are published on several threads

    def read(self, path: str) -> bytes:
        with self._lock:
            data = self._kept.get(path)
            if data is not None:
                self._kept.move_to_end(path)
                return data
        data = self.inner.read(path)
        if not self.inner.supports_append and len(data) <= self.file_bytes:
            with self._lock:
                if path not in self._kept:
                    self._kept[path] = data
                    self._bytes += len(data)
                while self._bytes > self.max_bytes:
                    self._bytes -= len(self._kept.popitem(last=False)[1])
        return data

    def _forget(self, path: str) -> None:
        with self._lock:
            data = self._kept.pop(path, None)
            if data is not None:
                self._bytes -= len(data)

    def read_range(self, path: str, offset: int, length: int) -> bytes:
        return self.inner.read_range(path, offset, length)

    def open_input(self, path: str, size: int | None = None) -> pa.NativeFile:
        return self.inner.open_input(path, size)

    def write(self, path: str, data: bytes) -> None:
        self._forget(path)
        self.inner.write(path, data)

    def create(self, path: str, data: bytes) -> None:
        self.inner.create(path, data)

    def open_output(self, path: str) -> BinaryIO:
        return self.inner.open_output(path)

    def touch(self, path: str) -> None:
        self.inner.touch(path)

    @property
    def keeps_empty_folders(self) -> bool:
        return self.inner.keeps_empty_folders

    @property
    def atomic_create(self) -> bool:
        return self.inner.atomic_create

    def is_io_failure(self, error: BaseException) -> bool:
        return self.inner.is_io_failure(error)

    @property
    def supports_append(self) -> bool:
        return self.inner.supports_append

    def append(self, path: str, data: bytes) -> int:
        self._forget(path)
        return self.inner.append(path, data)

    def list(self, path: str = "", *, recursive: bool = False) -> list[FileInfo]:
        return self.inner.list(path, recursive=recursive)

    def info(self, path: str) -> FileInfo | None:
        return self.inner.info(path)

    def exists(self, path: str) -> bool:
        return self.inner.exists(path)

    def size(self, path: str) -> int:
        return self.inner.size(path)

    def delete(self, path: str, *, missing_ok: bool = True) -> bool:
        self._forget(path)
        return self.inner.delete(path, missing_ok=missing_ok)

    def delete_many(self, paths: "list[str]") -> None:
        for path in paths:
            self._forget(path)
        self.inner.delete_many(paths)

    def delete_dir(self, path: str) -> None:
        with self._lock:
            for kept in [p for p in self._kept if p == path or p.startswith(path.rstrip("/") + "/")]:
                self._bytes -= len(self._kept.pop(kept))
        self.inner.delete_dir(path)

    def mkdirs(self, path: str) -> None:
        self.inner.mkdirs(path)

    def uri(self, path: str = "") -> str:
        return self.inner.uri(path)

    def child(self, path: str) -> "Storage":
        return self.inner.child(path)
