"""Retries with backoff for several writers, and the one step whose outcome can be unknown.

Backoff is Iceberg's (``commit.retry.*``: 4 retries, 100 ms doubling up to 60 s, 30 minutes in
all) with full jitter, so writers that collided do not collide again in step.

Publishing a commit is one atomic create of the completed instant file. On an object store the
answer to that request can be lost; then the commit may or may not have landed, and retrying it
blindly could commit twice while rolling it back could delete the files of a commit that did
land. So the store is asked first: the file there with our content means it landed.
"""

from __future__ import annotations

import time
from typing import Callable

from tenacity import retry, retry_if_exception_type, stop_after_attempt, stop_after_delay
from tenacity import wait_random_exponential

from lakehouse.config import ConcurrencyConfig
from lakehouse.errors import CommitOutcomeUnknownError, StorageOutcomeUnknownError, TimelineError
from lakehouse.timeline.active import ActiveTimeline
from lakehouse.timeline.commit_metadata import CommitMetadata
from lakehouse.timeline.instant import Instant, State


def retry_policy(config: ConcurrencyConfig, retry_on: tuple[type[BaseException], ...], *,
                 sleep: Callable[[float], None] = time.sleep):
    """A decorator retrying ``retry_on`` errors as ``config`` says; the last error is raised."""
    lo = config.retry_min_wait_ms / 1000.0
    return retry(
        retry=retry_if_exception_type(retry_on),
        stop=(stop_after_attempt(config.conflict_retries + 1)
              | stop_after_delay(config.retry_total_timeout_ms / 1000.0)),
        wait=wait_random_exponential(multiplier=max(lo, 1e-3), min=lo,
                                     max=config.retry_max_wait_ms / 1000.0),
        reraise=True, sleep=sleep)


def _landed(active: ActiveTimeline, done: Instant, content: bytes) -> bool | None:
    """Whether ``done`` is on the store with ``content`` (None: the store would not say)."""
    for delay in (0.0, 0.2, 1.0):
        time.sleep(delay)
        try:
            return active.storage.read(active.path(done)) == content
        except FileNotFoundError:
            return False
        except OSError:
            continue
    return None


def publish_completed(active: ActiveTimeline, inflight: Instant, meta: CommitMetadata) -> None:
    """Complete ``inflight`` with ``meta``; settle a lost answer by looking before deciding."""
    content = meta.to_bytes()
    done = inflight.with_state(State.COMPLETED)
    try:
        active.transition(inflight, State.COMPLETED, content)
        return
    except TimelineError:
        # The completed file exists: an earlier try of ours whose answer was lost, or another
        # committer of this very instant (a retried commit step). Either way it is committed;
        # reporting a failure would make the caller write the batch a second time.
        if _landed(active, done, content) is not None:
            return
        raise CommitOutcomeUnknownError(
            f"{active.path(done)} exists but cannot be read",
            help=f"do not write the batch again: call commit('{inflight.time}') once the store "
                 "answers") from None
    except StorageOutcomeUnknownError as e:
        landed = _landed(active, done, content)
        if landed:
            return
        raise CommitOutcomeUnknownError(
            f"completing {inflight.time} may or may not have landed ({e.message})",
            help=f"do not roll it back: call commit('{inflight.time}') again, which finds out; its "
                 "heartbeat stops, so if it never landed the next writer rolls it back") from e
