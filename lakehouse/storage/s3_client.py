"""Reaching an S3 API: the ``s3.*`` options, the boto3 clients built from them, pyarrow's S3 file
system for random-access reads, and what S3's failures mean in lakehouse's error terms.

Option names follow pyiceberg's FileIO properties so that one set of settings serves both. Anything
not given falls back to boto3's standard chain (``AWS_ENDPOINT_URL_S3``/``AWS_ENDPOINT_URL``,
``AWS_ACCESS_KEY_ID``, ``AWS_DEFAULT_REGION``, profiles, instance roles): Spark executors and
Airflow tasks configured through their environment need no options at all.
"""

from __future__ import annotations

import errno
import threading
from dataclasses import dataclass, field
from typing import Any, Mapping
from urllib.parse import urlparse

import pyarrow.fs as pafs

from lakehouse.errors import ConfigError, StorageError

ENDPOINT = "s3.endpoint"
REGION = "s3.region"
ACCESS_KEY_ID = "s3.access-key-id"
SECRET_ACCESS_KEY = "s3.secret-access-key"
SESSION_TOKEN = "s3.session-token"
CONDITIONAL_PUT = "s3.conditional-put"
OPTION_KEYS = frozenset({ENDPOINT, REGION, ACCESS_KEY_ID, SECRET_ACCESS_KEY, SESSION_TOKEN,
                         CONDITIONAL_PUT})

# Total attempts (first try included) for requests that may be repeated safely.
RETRYING_ATTEMPTS = 5
# Threads of one process share a client: a reader and a writer each run up to 8 workers.
MAX_POOL_CONNECTIONS = 32

_INSTALL_HELP = "pip install 'lakehouse[s3]'"


def require_boto3() -> Any:
    try:
        import boto3  # noqa: PLC0415
    except ImportError:
        raise ConfigError("s3:// storage needs boto3, which is not installed",
                          help=_INSTALL_HELP) from None
    return boto3


def _flag(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise ConfigError(f"{key}={value!r} is not true or false", help=f"set {key} to true or false")


@dataclass(frozen=True)
class S3Settings:
    endpoint: str | None = None
    region: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)
    conditional_put: bool = True

    @classmethod
    def from_options(cls, options: Mapping[str, Any] | None) -> "S3Settings":
        """Settings from ``s3.*`` options; keys of other layers (``hoodie.*``) are left alone."""
        opts = {str(k): v for k, v in (options or {}).items() if str(k).startswith("s3.")}
        unknown = sorted(k for k in opts if k not in OPTION_KEYS)
        if unknown:
            raise ConfigError(f"unknown S3 option(s): {', '.join(unknown)}",
                              help=f"the S3 options are {', '.join(sorted(OPTION_KEYS))}")

        def text(key: str) -> str | None:
            v = opts.get(key)
            return None if v is None or str(v) == "" else str(v)

        endpoint = text(ENDPOINT)
        if endpoint is not None and urlparse(endpoint).scheme not in ("http", "https"):
            raise ConfigError(f"{ENDPOINT}={endpoint!r} is not an http(s) URL",
                              help=f"write the scheme too, e.g. {ENDPOINT}=http://127.0.0.1:9000")
        key_id, secret = text(ACCESS_KEY_ID), text(SECRET_ACCESS_KEY)
        if (key_id is None) != (secret is None):
            raise ConfigError(f"{ACCESS_KEY_ID} and {SECRET_ACCESS_KEY} go together; one is missing",
                              help="set both, or neither to use the AWS credential chain")
        return cls(endpoint=endpoint, region=text(REGION), access_key_id=key_id,
                   secret_access_key=secret, session_token=text(SESSION_TOKEN),
                   conditional_put=_flag(CONDITIONAL_PUT, opts.get(CONDITIONAL_PUT, True)))


class S3Clients:
    """The boto3 clients (and pyarrow file system) of one set of settings, built on first use and
    shared by a storage and its children. Pickles as its settings, so work items that carry a
    storage to another process rebuild their own connections there."""

    def __init__(self, settings: S3Settings) -> None:
        require_boto3()
        self.settings = settings
        self._lock = threading.Lock()
        self._session: Any = None
        self._retrying: Any = None
        self._single_shot: Any = None
        self._fs: Any = None
        self._fs_key: tuple | None = None

    def __getstate__(self) -> dict:
        return {"settings": self.settings}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["settings"])

    def _client(self, attempts: int) -> Any:
        from botocore.config import Config  # noqa: PLC0415

        boto3 = require_boto3()
        s = self.settings
        if self._session is None:
            self._session = boto3.session.Session(
                aws_access_key_id=s.access_key_id, aws_secret_access_key=s.secret_access_key,
                aws_session_token=s.session_token, region_name=s.region)
        config = Config(retries={"mode": "standard", "total_max_attempts": attempts},
                        max_pool_connections=MAX_POOL_CONNECTIONS)
        return self._session.client("s3", endpoint_url=s.endpoint, config=config)

    @property
    def retrying(self) -> Any:
        """For requests that may be repeated as they are: reads, listings, plain puts, deletes."""
        with self._lock:
            if self._retrying is None:
                self._retrying = self._client(RETRYING_ATTEMPTS)
            return self._retrying

    @property
    def single_shot(self) -> Any:
        """For conditional puts: a silent retry of a put that landed would come back 412 and read
        as "someone else created it", so lakehouse retries those itself (see s3_conditional)."""
        with self._lock:
            if self._single_shot is None:
                self._single_shot = self._client(1)
            return self._single_shot

    @property
    def endpoint_url(self) -> str:
        return self.retrying.meta.endpoint_url

    def filesystem(self) -> Any:
        """pyarrow's S3 file system at the same endpoint, region and credentials as the boto3
        clients (resolved by boto3, so the two never disagree about where the table is)."""
        client = self.retrying
        creds = self._session.get_credentials()
        frozen = creds.get_frozen_credentials() if creds is not None else None
        # Role and instance credentials expire: a new set means a new file system.
        key = (frozen.access_key, frozen.secret_key, frozen.token) if frozen else None
        with self._lock:
            if self._fs is None or self._fs_key != key:
                url = urlparse(client.meta.endpoint_url)
                aws = url.hostname is not None and url.hostname.endswith(".amazonaws.com")
                kw: dict[str, Any] = {"region": client.meta.region_name or "us-east-1",
                                      "scheme": url.scheme or "https"}
                if not aws:
                    kw["endpoint_override"] = url.netloc + url.path.rstrip("/")
                if frozen is not None:
                    kw.update(access_key=frozen.access_key, secret_key=frozen.secret_key,
                              session_token=frozen.token)
                self._fs = pafs.S3FileSystem(**kw)
                self._fs_key = key
            return self._fs


# --- what S3's answers mean ----------------------------------------------------------------


def status_and_code(e: BaseException) -> tuple[int | None, str]:
    response = getattr(e, "response", None) or {}
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return status, str(response.get("Error", {}).get("Code", ""))


def unsent_errors() -> tuple[type[BaseException], ...]:
    """Failures before a request left: no connection (refused, DNS, connect timeout, TLS)."""
    from botocore.exceptions import ConnectionError  # noqa: PLC0415
    return (ConnectionError,)


def lost_answer_errors() -> tuple[type[BaseException], ...]:
    """Failures after which a request may have reached S3 and taken effect: the connection broke
    or timed out while waiting for the answer."""
    from botocore.exceptions import HTTPClientError  # noqa: PLC0415
    return (HTTPClientError,)


def translate(e: BaseException, uri: str, bucket: str, endpoint: str | None = None) -> Exception:
    """A lakehouse error (or FileNotFoundError) for a failed boto3 call on ``uri``."""
    from botocore.exceptions import (  # noqa: PLC0415
        ClientError, NoCredentialsError, PartialCredentialsError)

    if isinstance(e, (NoCredentialsError, PartialCredentialsError)):
        return ConfigError(f"no S3 credentials for {uri}: {e}",
                           help=f"set {ACCESS_KEY_ID} and {SECRET_ACCESS_KEY}, or AWS_ACCESS_KEY_ID "
                                "and AWS_SECRET_ACCESS_KEY, or an AWS profile or role")
    if isinstance(e, unsent_errors() + lost_answer_errors()):
        return StorageError(f"cannot reach S3 at {endpoint or 'the default endpoint'} for {uri}: {e}",
                            help=f"check {ENDPOINT} (or AWS_ENDPOINT_URL) and the network, then retry")
    if not isinstance(e, ClientError):
        return StorageError(f"S3 request for {uri} failed: {e}", help="retry; check the S3 settings "
                            "if it keeps failing")
    status, code = status_and_code(e)
    if code == "NoSuchBucket":
        return ConfigError(f"S3 bucket {bucket!r} does not exist (at {endpoint or 'the default endpoint'})",
                           help=f"create the bucket, or fix the bucket name in the URI or {ENDPOINT} "
                                f"/ {REGION} (AWS_ENDPOINT_URL, AWS_DEFAULT_REGION)")
    if code in ("NoSuchKey", "404", "NotFound") or status == 404:
        return FileNotFoundError(errno.ENOENT, "no such S3 object", uri)
    if code in ("InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "ExpiredToken"):
        return ConfigError(f"S3 refused the credentials for {uri}: {code}",
                           help=f"check {ACCESS_KEY_ID}, {SECRET_ACCESS_KEY} and {SESSION_TOKEN} "
                                "(or the AWS_* variables / profile in use)")
    if code in ("AccessDenied", "403", "Forbidden") or status == 403:
        return StorageError(f"access to {uri} is denied",
                            help="grant s3:GetObject, s3:PutObject, s3:DeleteObject and "
                                 "s3:ListBucket on the bucket to these credentials")
    return StorageError(f"S3 request for {uri} failed: {code or status} {e}",
                        help="retry; if it keeps failing check the S3 service and endpoint")
