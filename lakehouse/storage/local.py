"""Local file system storage over pyarrow.fs, with an atomic create built on link(2)."""

from __future__ import annotations

import os
import uuid
from typing import BinaryIO

import pyarrow as pa
import pyarrow.fs as pafs

from lakehouse.errors import FileAlreadyExistsError, StorageError
from lakehouse.storage.base import FileInfo, Storage


class LocalStorage(Storage):
    def __init__(self, root: str) -> None:
        self.root = os.path.abspath(root)
        self.base_uri = "file://" + self.root
        self._fs = pafs.LocalFileSystem()

    def _abs(self, path: str) -> str:
        path = path.strip("/")
        return os.path.join(self.root, path) if path else self.root

    def child(self, path: str) -> "LocalStorage":
        return LocalStorage(self._abs(path))

    def read(self, path: str) -> bytes:
        try:
            with open(self._abs(path), "rb") as f:
                return f.read()
        except FileNotFoundError:
            raise
        except OSError as e:  # pragma: no cover - depends on the OS
            raise StorageError(f"cannot read {self._abs(path)}: {e}") from e

    def read_range(self, path: str, offset: int, length: int) -> bytes:
        with open(self._abs(path), "rb") as f:
            f.seek(offset)
            return f.read(length)

    def open_input(self, path: str) -> pa.NativeFile:
        return self._fs.open_input_file(self._abs(path))

    def write(self, path: str, data: bytes) -> None:
        target = self._abs(path)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        tmp = f"{target}.{uuid.uuid4().hex}.tmp"
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)

    def create(self, path: str, data: bytes) -> None:
        # Write the whole content under a private name, then link it into place: link(2) fails
        # when the target exists, so the create is atomic and never exposes a partial file.
        target = self._abs(path)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        tmp = os.path.join(os.path.dirname(target), f".{uuid.uuid4().hex}.creating")
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, target)
        except FileExistsError:
            raise FileAlreadyExistsError(
                f"{target} already exists",
                help="another writer created it first; re-read the state and retry") from None
        finally:
            os.unlink(tmp)

    def open_output(self, path: str) -> BinaryIO:
        target = self._abs(path)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        return open(target, "xb")

    @property
    def supports_append(self) -> bool:
        return True

    def append(self, path: str, data: bytes) -> int:
        target = self._abs(path)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "ab") as f:
            offset = f.tell()
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        return offset

    def _to_info(self, info: pafs.FileInfo) -> FileInfo:
        rel = os.path.relpath(info.path, self.root).replace(os.sep, "/")
        return FileInfo(path=rel, size=info.size or 0, is_dir=info.type == pafs.FileType.Directory,
                        mtime_ns=info.mtime_ns)

    def list(self, path: str = "", *, recursive: bool = False) -> list[FileInfo]:
        sel = pafs.FileSelector(self._abs(path), allow_not_found=True, recursive=recursive)
        return [self._to_info(i) for i in self._fs.get_file_info(sel)]

    def info(self, path: str) -> FileInfo | None:
        i = self._fs.get_file_info(self._abs(path))
        if i.type == pafs.FileType.NotFound:
            return None
        return self._to_info(i)

    def delete(self, path: str, *, missing_ok: bool = True) -> bool:
        try:
            os.unlink(self._abs(path))
            return True
        except FileNotFoundError:
            if missing_ok:
                return False
            raise

    def delete_dir(self, path: str) -> None:
        p = self._abs(path)
        if os.path.isdir(p):
            self._fs.delete_dir(p)

    def mkdirs(self, path: str) -> None:
        os.makedirs(self._abs(path), exist_ok=True)
