"""Key generators: record keys and partition paths for a batch, as Hudi's key generators make them.

Record keys are computed with Arrow kernels over whole columns. Partition paths are computed per
*distinct* partition value (a table has few), so Java-compatible date formatting stays cheap.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse.config import KeyGeneratorType, TableConfig
from lakehouse.errors import ConfigError, RecordKeyError
from lakehouse.key_text import ARROW, as_text, value_format
from lakehouse.partition_path import check_values

DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
NULL_KEY = "__null__"
EMPTY_KEY = "__empty__"


def _has_empty(strings: pa.ChunkedArray) -> bool:
    """Whether a (non-null) value is the empty string, from the offsets alone: no copy, no
    per-value kernel (a million keys: ~1 ms against ~8 for utf8_length and equal)."""
    for chunk in strings.chunks if isinstance(strings, pa.ChunkedArray) else [strings]:
        if len(chunk) == 0:
            continue
        offsets = np.frombuffer(chunk.buffers()[1], dtype=np.int32)[chunk.offset:chunk.offset + len(chunk) + 1]
        empty = offsets[1:] == offsets[:-1]
        if chunk.null_count:
            empty &= np.asarray(chunk.is_valid())
        if empty.any():
            return True
    return False


class KeyGenerator:
    def __init__(self, config: TableConfig) -> None:
        self.config = config
        self.type = config.key_generator_type
        self.record_key_fields = config.record_key_fields
        self.partition_fields = () if self.type is KeyGeneratorType.NON_PARTITION else config.partition_fields
        self.value_format = value_format(config)
        self.consistent = bool(config.consistent_logical_timestamp)
        if not self.record_key_fields:
            raise ConfigError("the table has no record key field",
                              help="set record_key (hoodie.table.recordkey.fields)")
        if self.type is KeyGeneratorType.TIMESTAMP:
            if len(self.partition_fields) != 1:
                raise ConfigError("the timestamp-based key generator needs exactly one partition field",
                                  help="set partition_by to the timestamp column")
            self._ts = _TimestampFormatter(config)

    def required_columns(self) -> list[str]:
        return list(dict.fromkeys([*self.record_key_fields, *self.partition_fields]))

    def record_keys(self, table: pa.Table) -> pa.ChunkedArray:
        fields = self.record_key_fields
        for f in fields:
            if f not in table.column_names:
                raise RecordKeyError(f"record key column {f!r} is missing from the batch",
                                     help="add the column, or write to a table keyed on columns you have")
        if len(fields) == 1 and self.type is not KeyGeneratorType.COMPLEX:
            col = table.column(fields[0])
            if col.null_count:
                raise RecordKeyError(
                    f"record key column {fields[0]!r} has {col.null_count} null value(s)",
                    help="every record needs a key: fill or drop the rows with null keys")
            keys = as_text(col, self.value_format, consistent=self.consistent)
            if _has_empty(keys):
                raise RecordKeyError(f"record key column {fields[0]!r} has empty values",
                                     help="every record needs a non-empty key")
            return keys
        parts = []
        all_missing = None
        for f in fields:
            col = table.column(f)
            s = as_text(col, self.value_format, consistent=self.consistent)
            is_null = pc.is_null(col)
            is_empty = pc.equal(pc.utf8_length(pc.fill_null(s, "x")), 0)
            # Hudi rejects a key whose parts are all null *or empty*, not only all null.
            missing = pc.or_(is_null, is_empty)
            all_missing = missing if all_missing is None else pc.and_(all_missing, missing)
            s = pc.if_else(is_null, NULL_KEY, pc.if_else(is_empty, EMPTY_KEY, s))
            parts.append(pc.binary_join_element_wise(f"{f}:", s, ""))
        if pc.any(all_missing).as_py():
            raise RecordKeyError(
                f"record key columns {', '.join(fields)} are all null or empty in "
                f"{pc.sum(pc.cast(all_missing, pa.int64())).as_py()} row(s)",
                help="every record needs at least one non-null, non-empty key column")
        return pc.binary_join_element_wise(*parts, ",") if len(parts) > 1 else parts[0]

    def partition_paths(self, table: pa.Table, *, row_offset: int | None = 0) -> pa.ChunkedArray:
        """Each row's partition path, every value checked by :mod:`lakehouse.partition_path`
        (``row_offset``: the batch's first row in the whole write, for the errors; None where
        rows mean nothing to the user, as in a Spark task's batch)."""
        n = table.num_rows
        if not self.partition_fields:
            return pa.chunked_array([pa.repeat("", n)], type=pa.string()) if n else pa.chunked_array([], pa.string())
        for f in self.partition_fields:
            if f not in table.column_names:
                raise RecordKeyError(f"partition column {f!r} is missing from the batch",
                                     help="add the column; every record needs its partition value")
        parts = []
        for f in self.partition_fields:
            col = table.column(f)
            if self.type is KeyGeneratorType.TIMESTAMP:
                s = self._ts.format(col)
            else:
                # Partition folders keep lakehouse's text for every table: readers turn a folder
                # name back into its value to prune (read/reader.prune_partitions, the Iceberg
                # partition spec), which Hudi's text (hex bytes, epoch micros) would defeat.
                s = as_text(col, ARROW)
                if s.null_count or _has_empty(s):
                    s = pc.if_else(pc.or_(pc.is_null(s), pc.equal(pc.utf8_length(pc.fill_null(s, "")), 0)),
                                   DEFAULT_PARTITION, s)
            hive = self.config.hive_style_partitioning
            encode = escape_path_name if self.config.url_encode_partitions else None
            # A '/' nests folders on purpose in a timestamp's output format, and is the value's
            # own in a single plain field (Hudi's quickstart); anywhere else it would make a
            # folder that is not this field's.
            nested = self.type is KeyGeneratorType.TIMESTAMP or (len(self.partition_fields) == 1 and not hive)
            check_values(s, column=f, prefix=f"{f}=" if hive else "", nested=nested, encode=encode,
                         row_offset=row_offset)
            if encode is not None:
                s = _map_distinct(s, encode)
            if hive:
                s = pc.binary_join_element_wise(f"{f}=", s, "")
            parts.append(s)
        return pc.binary_join_element_wise(*parts, "/") if len(parts) > 1 else parts[0]


# The characters Hive's (and so Hudi's) escapePathName turns into %XX: control characters and a
# few path/URL specials. Everything else, spaces and non-ASCII included, stays as it is.
_PATH_ESCAPED = frozenset(chr(c) for c in range(0x20)) | frozenset('"#%\'*/:=?\\\x7f{[]^')


def escape_path_name(value: str) -> str:
    """A partition value as Hudi writes it with ``hoodie.datasource.write.partitionpath.urlencode``."""
    return "".join(f"%{ord(c):02X}" if c in _PATH_ESCAPED else c for c in value)


def _map_distinct(col: pa.ChunkedArray, fn) -> pa.ChunkedArray:
    """Apply a Python function once per distinct value and broadcast the results."""
    enc = pc.dictionary_encode(col).combine_chunks()
    mapped = pa.array([None if v is None else fn(v) for v in enc.dictionary.to_pylist()], pa.string())
    return pa.chunked_array([pc.take(mapped, enc.indices)])


# --- timestamp-based partition paths ---------------------------------------------------------

# Flink's FlinkOptions.PARTITION_FORMAT_HOUR / PARTITION_FORMAT_DAY.
HOURLY, DAILY = "yyyyMMddHH", "yyyyMMdd"
# Marks a table created without a schema whose one partition column may turn out to be a datetime:
# its first write chooses (lakehouse.write.datetime_partitioning).
KEYGEN_AUTO_KEY = "lakehouse.keygen.auto"
# The options that choose a key generator: given any of them, lakehouse chooses none itself.
KEYGEN_CHOICE_KEYS = ("hoodie.table.keygenerator.class", "hoodie.datasource.write.keygenerator.class",
                      "hoodie.keygen.timebased.output.dateformat", "hoodie.keygen.timebased.timestamp.type")


def datetime_partitioning(field_type: pa.DataType) -> dict[str, str] | None:
    """The timestamp-based key generator's options for a table partitioned by one column of
    ``field_type``, as Hudi's Flink writer sets them up for a datetime partition column
    (``HoodieTableFactory.setupTimestampKeygenOptions``): an hourly folder (``yyyyMMddHH``) for a
    timestamp, the timestamp type from its precision (microseconds: SCALAR MICROSECONDS); a daily one (``yyyyMMdd``) for a date, read
    as a SCALAR count of days; the output in UTC. None for any other type."""
    if pa.types.is_timestamp(field_type):
        # Hudi 0.14/0.15 know no EPOCHMICROSECONDS (the Java judge); a microsecond column is a
        # SCALAR count of MICROSECONDS there, the same instants.
        kind = {"s": {"hoodie.keygen.timebased.timestamp.type": "UNIX_TIMESTAMP"},
                "ms": {"hoodie.keygen.timebased.timestamp.type": "EPOCHMILLISECONDS"}}.get(
            field_type.unit, {"hoodie.keygen.timebased.timestamp.type": "SCALAR",
                              "hoodie.keygen.timebased.timestamp.scalar.time.unit": "MICROSECONDS"})
        opts = {**kind, "hoodie.keygen.timebased.output.dateformat": HOURLY}
    elif pa.types.is_date(field_type):
        opts = {"hoodie.keygen.timebased.timestamp.type": "SCALAR",
                "hoodie.keygen.timebased.timestamp.scalar.time.unit": "DAYS",
                "hoodie.keygen.timebased.input.dateformat": DAILY,
                "hoodie.keygen.timebased.output.dateformat": DAILY}
    else:
        return None
    return {"hoodie.table.keygenerator.class": KeyGeneratorType.TIMESTAMP.java_class,
            **opts, "hoodie.keygen.timebased.output.timezone": "UTC"}

_JAVA_TOKENS = [("yyyy", "%Y"), ("yy", "%y"), ("MM", "%m"), ("dd", "%d"), ("HH", "%H"),
                ("mm", "%M"), ("ss", "%S"), ("SSS", "%f"), ("Z", "%z"), ("XXX", "%z"), ("X", "%z")]


def java_to_strftime(fmt: str) -> str:
    """Translate the SimpleDateFormat patterns Hudi users write into strftime/strptime ones."""
    return "".join("%f" if part is None else part for part in _java_format_parts(fmt))


def _java_format_parts(fmt: str) -> list[str | None]:
    """strftime fragments of a Java date pattern; None stands for ``SSS`` (milliseconds), which
    strftime cannot print (its %f is six digits)."""
    out: list[str | None] = []
    i = 0
    while i < len(fmt):
        if fmt[i] == "'":
            j = fmt.index("'", i + 1) if "'" in fmt[i + 1:] else len(fmt)
            out.append(fmt[i + 1:j].replace("%", "%%") or "'")
            i = j + 1
            continue
        for tok, rep in _JAVA_TOKENS:
            if fmt.startswith(tok, i):
                out.append(None if tok == "SSS" else rep)
                i += len(tok)
                break
        else:
            if fmt[i].isalpha():
                raise ConfigError(f"date format {fmt!r} uses the pattern letter {fmt[i]!r}, which "
                                  "lakehouse does not support",
                                  help="use yyyy, yy, MM, dd, HH, mm, ss, SSS, Z and quoted text")
            out.append(fmt[i].replace("%", "%%"))
            i += 1
    return out


_SCALAR_UNITS = {"DAYS": timedelta(days=1), "HOURS": timedelta(hours=1), "MINUTES": timedelta(minutes=1),
                 "SECONDS": timedelta(seconds=1), "MILLISECONDS": timedelta(milliseconds=1),
                 "MICROSECONDS": timedelta(microseconds=1)}


class _TimestampFormatter:
    _TYPES = {"UNIX_TIMESTAMP", "EPOCHMILLISECONDS", "EPOCHMICROSECONDS", "DATE_STRING", "SCALAR"}

    def __init__(self, config: TableConfig) -> None:
        ts_type = (config.timestamp_type or ("DATE_STRING" if config.timestamp_input_format
                                             else "EPOCHMILLISECONDS")).upper()
        if ts_type not in self._TYPES:
            raise ConfigError(f"hoodie.keygen.timebased.timestamp.type={ts_type!r} is not one of "
                              f"{', '.join(sorted(self._TYPES))}", help="pick one of those")
        self.ts_type = ts_type
        if not config.timestamp_output_format:
            raise ConfigError("the timestamp-based key generator needs an output format",
                              help="set hoodie.keygen.timebased.output.dateformat, e.g. yyyy/MM/dd")
        self._out_parts = _java_format_parts(config.timestamp_output_format)
        self.in_fmt = (java_to_strftime(config.timestamp_input_format)
                       if config.timestamp_input_format else None)
        if ts_type == "DATE_STRING" and not self.in_fmt:
            raise ConfigError("DATE_STRING timestamps need an input format",
                              help="set hoodie.keygen.timebased.input.dateformat")
        self.tz = ZoneInfo(config.timestamp_timezone) if config.timestamp_timezone else timezone.utc
        out_tz = config.timestamp_output_timezone or config.timestamp_timezone
        self.out_tz = ZoneInfo(out_tz) if out_tz else timezone.utc
        unit = (config.timestamp_scalar_unit or "SECONDS").upper()
        if unit not in _SCALAR_UNITS:
            raise ConfigError(f"hoodie.keygen.timebased.timestamp.scalar.time.unit={unit!r} is not one "
                              f"of {', '.join(_SCALAR_UNITS)}", help="pick one of those (Java's TimeUnit)")
        self.scalar_unit = _SCALAR_UNITS[unit]

    def _to_datetime(self, v) -> datetime:
        if isinstance(v, datetime):
            return v if v.tzinfo else v.replace(tzinfo=timezone.utc)
        if isinstance(v, date):  # an Arrow date: the day's start, in UTC (Flink's SCALAR days)
            return datetime(v.year, v.month, v.day, tzinfo=timezone.utc)
        epoch = datetime(1970, 1, 1, tzinfo=timezone.utc)
        if self.ts_type == "DATE_STRING":
            s = str(v)
            if s.endswith("Z") and self.in_fmt.endswith("%z"):
                s = s[:-1] + "+0000"
            dt = datetime.strptime(s, self.in_fmt)
            return dt if dt.tzinfo else dt.replace(tzinfo=self.tz)
        n = int(v)
        # SCALAR counts hoodie.keygen.timebased.timestamp.scalar.time.unit, SECONDS by default.
        if self.ts_type == "SCALAR":
            return epoch + n * self.scalar_unit
        if self.ts_type == "UNIX_TIMESTAMP":
            return epoch + timedelta(seconds=n)
        if self.ts_type == "EPOCHMICROSECONDS":
            return epoch + timedelta(microseconds=n)
        return epoch + timedelta(milliseconds=n)

    def _print(self, dt: datetime) -> str:
        dt = dt.astimezone(self.out_tz)
        return "".join(f"{dt.microsecond // 1000:03d}" if part is None else dt.strftime(part)
                       for part in self._out_parts)

    def _null_value(self):
        # Hudi does not use __HIVE_DEFAULT_PARTITION__ here: a null timestamp becomes the value 1
        # in the type's unit (1 ms past the epoch for DATE_STRING), e.g. 1970/01/01.
        if self.ts_type == "DATE_STRING":
            return datetime(1970, 1, 1, 0, 0, 0, 1000, tzinfo=timezone.utc)
        return 1

    def format(self, col: pa.ChunkedArray) -> pa.ChunkedArray:
        def one(v) -> str:
            try:
                return self._print(self._to_datetime(v))
            except (ValueError, TypeError, OverflowError) as e:
                raise RecordKeyError(f"partition value {v!r} cannot be read as a timestamp ({e})",
                                     help="check hoodie.keygen.timebased.* against the data") from None

        if pa.types.is_timestamp(col.type):
            col = pc.cast(col, pa.timestamp("us", tz="UTC"))
        enc = pc.dictionary_encode(col).combine_chunks()
        values = enc.dictionary.to_pylist()
        null_path = one(self._null_value())
        mapped = pa.array([null_path if v is None else one(v) for v in values], pa.string())
        out = pc.take(mapped, enc.indices)
        return pa.chunked_array([pc.fill_null(out, null_path)])

