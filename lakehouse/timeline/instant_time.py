"""Instant times: 17-digit UTC milliseconds, strictly increasing.

Within a process a clock that stands still or steps back is corrected by bumping the last time by
one millisecond. Across processes writing the same table, the generator also stays above every
instant already on the timeline, and the requested file is created atomically, so two writers
that race to the same millisecond cannot both own it (the loser asks again).
"""

from __future__ import annotations

import threading
from datetime import date, datetime, timedelta, timezone
from typing import Callable

from lakehouse.errors import TimelineError

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


def instant_time_of(value: str | datetime | date, what: str, *, prefix: bool = False) -> str:
    """``value`` as an instant time: one as the timeline shows it (17 digits, or 14 for a whole
    second, as Hudi's ``formatQueryInstant`` takes them; with ``prefix``, fewer digits too, such
    as the "000" Hudi's incremental reads start from), an ISO date or date-time
    (naive ones are UTC, as instant times are), or a ``datetime``/``date``. ``what`` names the
    argument in the error: a string that is none of these must not be compared with instant
    times as it is (``"yesterday"`` sorts after every instant, and would read as the latest)."""
    if isinstance(value, datetime):
        return format_instant_time(value)
    if isinstance(value, date):
        return format_instant_time(datetime(value.year, value.month, value.day))
    v = str(value).strip()
    if v.isdigit() and len(v) in (14, 17):
        try:
            parse_instant_time(v)
            return v
        except ValueError:
            pass
    elif prefix and v.isdigit() and len(v) < 17:
        # Instant times compare as strings: a shorter one is a point before the instants it
        # prefixes.
        return v
    else:
        try:
            return format_instant_time(datetime.fromisoformat(v))
        except ValueError:
            pass
    raise TimelineError(f"{what}={value!r} is neither an instant time (17 digits, yyyyMMddHHmmssSSS) "
                        "nor an ISO date or date-time",
                        help="pass an instant time as the timeline shows it (`lakehouse timeline`), "
                             "or e.g. '2026-11-25T06:00:00' (UTC unless it names a zone)")


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
