"""Retries with backoff for several writers.

Backoff is Iceberg's (``commit.retry.*``: 4 retries, 100 ms doubling up to 60 s, 30 minutes in
all) with full jitter, so writers that collided do not collide again in step. (The one step
whose outcome can be unknown, completing an instant, is settled in :mod:`lakehouse.commit`.)
"""

from __future__ import annotations

import time
from typing import Callable

from tenacity import retry, retry_if_exception_type, stop_after_attempt, stop_after_delay
from tenacity import wait_random_exponential

from lakehouse.config import ConcurrencyConfig


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
