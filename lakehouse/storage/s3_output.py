"""A write stream to one S3 object that makes the object exist only when closed without error.

Small content goes up in one PutObject at close; once the buffer passes a part's size the stream
switches to a multipart upload, whose parts stay invisible until the completion at close. Leaving a
``with`` block by an exception, or dropping the stream unclosed, aborts: nothing is uploaded and the
parts already sent are discarded. Both the put and the completion are create-if-absent, as on local
storage, where ``open_output`` refuses an existing file.
"""

from __future__ import annotations

import io
from typing import Any, Callable, Protocol

from lakehouse.storage.s3_client import S3Clients
from lakehouse.storage.s3_conditional import TOKEN_METADATA_KEY, new_token


class S3Target(Protocol):
    """What an upload needs of the store it writes to (lakehouse.storage.s3.S3Storage)."""

    bucket: str
    clients: S3Clients

    def key(self, path: str) -> str: ...

    def boto_errors(self) -> tuple[type[BaseException], ...]: ...

    def error(self, e: BaseException, path: str) -> Exception: ...

    def put_new(self, path: str, data: bytes | None, *, token: str,
                complete: Callable[..., Any] | None = None) -> None: ...

# S3 wants parts of 5 MiB or more (all but the last); 8 MiB keeps the buffer small and the part
# count of a 1 GiB file far below the 10,000 part limit.
PART_SIZE = 8 * 1024 * 1024


class S3Output(io.BufferedIOBase):
    def __init__(self, storage: S3Target, path: str, *, part_size: int = PART_SIZE) -> None:
        super().__init__()
        self._storage = storage
        self._path = path
        self._key = storage.key(path)
        self._part_size = part_size
        self._buf = bytearray()
        self._pos = 0
        self._token = new_token()
        self._upload_id: str | None = None
        self._parts: list[dict[str, Any]] = []

    # --- io.BufferedIOBase -----------------------------------------------------------------

    def writable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def write(self, data) -> int:
        if self.closed:
            raise ValueError("write to a closed S3 output stream")
        n = len(memoryview(data).cast("B"))
        self._buf += data
        self._pos += n
        while len(self._buf) >= self._part_size:
            chunk = bytes(self._buf[:self._part_size])
            del self._buf[:self._part_size]
            self._send_part(chunk)
        return n

    def flush(self) -> None:
        # Nothing becomes visible before close: a flushed half file must not be readable.
        if self.closed:
            return

    def close(self) -> None:
        """Upload (clean close); on any failure nothing stays uploaded."""
        if self.closed:
            return
        try:
            self._finish()
        except BaseException:
            self._abort_upload()
            raise
        finally:
            self._buf = bytearray()
            super().close()

    def abort(self) -> None:
        """Discard everything written; the object is not created."""
        if self.closed:
            return
        self._buf = bytearray()
        self._abort_upload()
        super().close()

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is not None:
            self.abort()
        else:
            self.close()
        return False

    def __del__(self) -> None:
        # io.IOBase would close (= upload) a stream nobody closed; an abandoned stream is a failed one.
        try:
            if not self.closed:
                self.abort()
        except Exception:
            pass

    # --- S3 --------------------------------------------------------------------------------

    def _call(self, op: str, **kw: Any) -> Any:
        s = self._storage
        try:
            return getattr(s.clients.retrying, op)(Bucket=s.bucket, Key=self._key, **kw)
        except Exception as e:
            if isinstance(e, s.boto_errors()):
                raise s.error(e, self._path) from e
            raise

    def _send_part(self, chunk: bytes) -> None:
        if self._upload_id is None:
            self._upload_id = self._call("create_multipart_upload",
                                         Metadata={TOKEN_METADATA_KEY: self._token})["UploadId"]
        number = len(self._parts) + 1
        answer = self._call("upload_part", UploadId=self._upload_id, PartNumber=number, Body=chunk)
        part = {"PartNumber": number, "ETag": answer["ETag"]}
        for k in ("ChecksumCRC32", "ChecksumCRC32C", "ChecksumCRC64NVME", "ChecksumSHA1",
                  "ChecksumSHA256"):
            if answer.get(k):
                part[k] = answer[k]  # an upload created with a checksum wants it back per part
        self._parts.append(part)

    def _finish(self) -> None:
        s = self._storage
        if self._upload_id is None:
            s.put_new(self._path, bytes(self._buf), token=self._token)
            return
        if self._buf:
            self._send_part(bytes(self._buf))
            self._buf = bytearray()
        upload = {"Parts": self._parts}
        s.put_new(self._path, None, token=self._token,
                  complete=lambda client, **cond: client.complete_multipart_upload(
                      Bucket=s.bucket, Key=self._key, UploadId=self._upload_id,
                      MultipartUpload=upload, **cond))
        self._upload_id = None  # completed: nothing left to abort

    def _abort_upload(self) -> None:
        upload_id, self._upload_id = self._upload_id, None
        if upload_id is None:
            return
        s = self._storage
        try:
            s.clients.retrying.abort_multipart_upload(Bucket=s.bucket, Key=self._key,
                                                      UploadId=upload_id)
        except Exception:
            # Best effort: an upload never completed is invisible, and a bucket lifecycle rule
            # for incomplete multipart uploads reclaims its parts.
            pass
