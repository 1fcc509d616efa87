"""Instant times: 17-digit UTC milliseconds, strictly increasing.

Within a process a clock that stands still or steps back is corrected by bumping the last time by
one millisecond. Across processes writing the same table, the generator also stays above every
instant already on the timeline, and the requested file is created atomically, so two writers
that race to the same millisecond cannot both own it (the loser asks again).
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone
from typing import Callable

FORMAT = "%Y%m%d%H%M%S"

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


def format_instant_time(dt: datetime) -> str:
    # A naive datetime is taken as UTC (instant times are UTC); astimezone() would read it as
    # the machine's local time and shift it.
    dt = dt.replace(tzinfo=timezone.utc) if dt.tzinfo is None else dt.astimezone(timezone.utc)
    return dt.strftime(FORMAT) + f"{dt.microsecond // 1000:03d}"


def parse_instant_time(t: str) -> datetime:
    if len(t) == 14:
        t += "000"
    dt = datetime.strptime(t[:14], FORMAT).replace(tzinfo=timezone.utc)
    return dt + timedelta(milliseconds=int(t[14:17]))


class InstantTimeGenerator:
    def __init__(self, clock: Clock = utc_now) -> None:
        self._clock = clock
        self._last = ""
        self._lock = threading.Lock()

    def next(self, *, after: str | None = None) -> str:
        """A new instant time greater than anything this process made and than ``after``."""
        with self._lock:
            floor = max(self._last, after or "")
            t = format_instant_time(self._clock())
            if t <= floor:
                t = format_instant_time(parse_instant_time(floor) + timedelta(milliseconds=1))
            self._last = t
            return t


DEFAULT_GENERATOR = InstantTimeGenerator()
