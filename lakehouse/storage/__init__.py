"""Storage chosen by URI scheme."""

from __future__ import annotations

from typing import Any, Mapping
from urllib.parse import unquote, urlparse

from lakehouse.errors import ConfigError
from lakehouse.storage.base import FileInfo, Storage
from lakehouse.storage.local import LocalStorage
from lakehouse.storage.s3 import S3Storage  # boto3 is imported only when one is built

__all__ = ["FileInfo", "Storage", "LocalStorage", "get_storage"]


def get_storage(uri: str, options: Mapping[str, Any] | None = None) -> Storage:
    """The storage for a table URI: a plain path, ``file://`` or ``s3://bucket/prefix`` (``s3a://``
    too). ``options``: the ``s3.*`` settings (see :mod:`lakehouse.storage.s3_client`); local
    storage has none."""
    if isinstance(uri, Storage):
        return uri
    uri = str(uri)
    parsed = urlparse(uri)
    if parsed.scheme == "file":
        # file://host/path names a path on that host; only this machine's is reachable. Reading
        # "file://tmp/t" as "/t" would silently write somewhere else than meant.
        if parsed.netloc not in ("", "localhost"):
            raise ConfigError(f"{uri!r} names the host {parsed.netloc!r}, not a local path",
                              help="write file:///absolute/path (three slashes) or a plain path")
        return LocalStorage(unquote(parsed.path))
    if parsed.scheme in ("s3", "s3a"):
        return S3Storage(uri, options)
    if parsed.scheme == "" or (len(parsed.scheme) == 1 and uri[1:3] in (":\\", ":/")):
        return LocalStorage(uri)
    raise ConfigError(
        f"unsupported storage scheme {parsed.scheme!r} in {uri!r}",
        help="use a local path, a file:// URI or s3://bucket/prefix")
