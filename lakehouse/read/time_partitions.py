"""Pruning partitions made by the timestamp-based key generator (Hudi's
``TimestampBasedAvroKeyGenerator``; Flink's default for a timestamp or date partition column).

Such a partition's folder is the rows' time printed with ``hoodie.keygen.timebased.output.dateformat``
(``2024013112`` for ``yyyyMMddHH``), so it stands for a span of time: from the folder's instant to
the next one at the format's finest unit (an hour, a day, a month, a year). A filter on the
partition column keeps the partitions whose span can hold a matching value. Only formats that
read back as an instant are pruned this way (year, month, day, hour, minute, second, quoted
text); anything else, and any filter on another column, keeps every partition."""

from __future__ import annotations

import calendar
from datetime import datetime, timedelta, timezone
from typing import Any, Sequence
from zoneinfo import ZoneInfo

import pyarrow as pa

from lakehouse.config import TableConfig
from lakehouse.errors import ConfigError
from lakehouse.keygen import java_to_strftime

_UNITS = (("ss", timedelta(seconds=1)), ("mm", timedelta(minutes=1)), ("HH", timedelta(hours=1)),
          ("dd", timedelta(days=1)), ("MM", "month"), ("yyyy", "year"))
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def _strptime_format(fmt: str) -> str | None:
    """The strptime pattern of an output format that reads back as an instant (None: one with
    milliseconds, two-digit years or zones, or letters lakehouse does not print)."""
    try:
        pattern = java_to_strftime(fmt)
    except ConfigError:
        return None
    return None if any(d in pattern for d in ("%f", "%y", "%z")) else pattern


def _unit(fmt: str) -> Any:
    unquoted = "".join(part for n, part in enumerate(fmt.split("'")) if n % 2 == 0)
    return next((u for tok, u in _UNITS if tok in unquoted), None)


class TimeSpans:
    """The span of time each partition folder of a timestamp-keyed table stands for."""

    def __init__(self, config: TableConfig) -> None:
        fmt = config.timestamp_output_format or ""
        self.pattern = _strptime_format(fmt)
        self.unit = _unit(fmt)
        tz = config.timestamp_output_timezone or config.timestamp_timezone
        self.tz = ZoneInfo(tz) if tz and tz.upper() != "UTC" else timezone.utc

    @property
    def usable(self) -> bool:
        return self.pattern is not None and self.unit is not None

    def span(self, folder: str) -> tuple[int, int] | None:
        """[start, end) in microseconds since the epoch (None: not a folder of the format)."""
        try:
            start = datetime.strptime(folder, self.pattern).replace(tzinfo=self.tz)
        except ValueError:
            return None
        if self.unit == "month":
            end = start.replace(day=1) + timedelta(days=calendar.monthrange(start.year, start.month)[1])
        elif self.unit == "year":
            end = start.replace(year=start.year + 1)
        else:
            end = start + self.unit
        return _micros(start), _micros(end)


def _micros(dt: datetime) -> int:
    return (dt.astimezone(timezone.utc) - EPOCH) // timedelta(microseconds=1)


def _value_micros(v: Any, typ: pa.DataType) -> int | None:
    try:
        s = pa.scalar(v, typ) if not isinstance(v, pa.Scalar) else v
        if pa.types.is_date(s.type):
            s = s.cast(pa.date32())
            return int(s.value) * 86_400_000_000
        if pa.types.is_timestamp(s.type):
            return s.cast(pa.timestamp("us", tz=s.type.tz)).cast(pa.int64()).as_py()
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError, ValueError):
        return None
    return None


def may_hold(span: tuple[int, int], terms: Sequence[tuple[str, str, Any]], typ: pa.DataType) -> bool:
    """Whether a partition spanning ``span`` may hold a row passing every one of ``terms``
    (filters on the partition column)."""
    start, end = span
    for _, op, value in terms:
        if op in ("in", "=", "=="):
            vals = value if op == "in" else [value]
            micros = [_value_micros(v, typ) for v in vals]
            if any(m is None for m in micros):
                continue  # cannot tell: keep
            if not any(start <= m < end for m in micros):
                return False
            continue
        if op not in ("<", "<=", ">", ">="):
            continue  # != and not in prune nothing
        m = _value_micros(value, typ)
        if m is None:
            continue
        if (op == ">" and end - 1 <= m) or (op == ">=" and end - 1 < m) or \
                (op == "<" and start >= m) or (op == "<=" and start > m):
            return False
    return True
