"""Create-if-absent on S3: a request with ``If-None-Match: *`` (PutObject, or the completion of a
multipart upload), retried by hand so that a lost answer never turns into a wrong one.

S3 answers 412 when the key exists and 409 when another conditional write to the key is in flight.
The risk is the lost answer: the request landed but the connection died before the 200 came back.
Retrying then gets 412 from our own object, which must not read as "another writer won". Every
attempt carries one token in the object's metadata; after a lost answer a 412 is settled by reading
the token back: ours means created, another means somebody else's, and anything else is reported as
unknown (:class:`~lakehouse.errors.StorageOutcomeUnknownError`) rather than guessed.
"""

from __future__ import annotations

import random
import time
import uuid
from typing import Any, Callable

from lakehouse.errors import FileAlreadyExistsError, StorageError, StorageOutcomeUnknownError
from lakehouse.storage.s3_client import lost_answer_errors, status_and_code, unsent_errors

# Sent as x-amz-meta-lakehouse-create-token; boto3 adds the prefix and S3 lower-cases the name.
TOKEN_METADATA_KEY = "lakehouse-create-token"
ATTEMPTS = 6
_BASE_DELAY = 0.05


def new_token() -> str:
    return uuid.uuid4().hex


def already_exists(uri: str) -> FileAlreadyExistsError:
    return FileAlreadyExistsError(
        f"{uri} already exists",
        help="another writer created it first; re-read the state and retry")


def _pause(attempt: int) -> None:
    # Full jitter: racing writers that collided (409) should not collide again in lockstep.
    time.sleep(random.uniform(0, _BASE_DELAY * (2 ** attempt)))


def put_if_absent(send: Callable[[], Any], *, token: str, read_token: Callable[[], str | None],
                  uri: str, translate: Callable[[BaseException], Exception]) -> None:
    """Run ``send`` (one conditional request whose object carries ``token``) until S3 answers.

    ``read_token`` returns the token of the object now at the key (``""`` when it has none) or
    None when there is no object; ``translate`` maps other failures to lakehouse errors.
    """
    from botocore.exceptions import ClientError  # noqa: PLC0415

    lost = False  # an earlier attempt may have landed without us hearing of it
    last: BaseException | None = None
    for attempt in range(ATTEMPTS):
        try:
            send()
            return
        except ClientError as e:
            status, code = status_and_code(e)
            if status == 412 or code == "PreconditionFailed":
                if lost:
                    _settle(read_token, token, uri, e)
                    return
                raise already_exists(uri) from None
            if status == 409 or code == "ConditionalRequestConflict":
                last = e  # nothing was written: a racing conditional write held the key
            elif code == "NoSuchUpload" and lost:
                # A multipart completion that landed unheard leaves no upload to complete again.
                _settle(read_token, token, uri, e)
                return
            elif status is not None and status >= 500:
                lost, last = True, e  # S3 may have applied a request it answered with a 5xx
            else:
                raise translate(e) from e
        except lost_answer_errors() as e:
            lost, last = True, e
        except unsent_errors() as e:
            last = e  # never reached S3
        _pause(attempt)
    if lost:
        _settle(read_token, token, uri, last)
        return
    if not isinstance(last, ClientError):
        raise translate(last) from last  # S3 unreachable: nothing was created
    raise StorageError(f"creating {uri} kept conflicting with other writers ({last})",
                       help="retry the operation; nothing was created") from last


def _settle(read_token: Callable[[], str | None], token: str, uri: str,
            cause: BaseException | None) -> None:
    """After a lost answer: created (return), somebody else's (raise), or unknown (raise)."""
    try:
        found = read_token()
    except Exception as e:
        raise StorageOutcomeUnknownError(
            f"creating {uri}: the answer was lost and the object cannot be checked ({e})",
            help="check whether the file exists before retrying or acting as if it did not") from e
    if found == token:
        return
    if found is not None:
        raise already_exists(uri) from None
    raise StorageOutcomeUnknownError(
        f"creating {uri}: the answer was lost ({cause}) and no object is there now; the request "
        "may still land, or the object was deleted since",
        help="check whether the file exists before retrying or acting as if it did not")
