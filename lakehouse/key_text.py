"""How a record key or partition field that is not a string becomes text, as Apache Hudi's key
generators print it (``lakehouse.keygen.value.format``).

Hudi's Spark writers key a record by its Avro value (``HoodieAvroUtils.getNestedFieldValAsString``
with ``hoodie.datasource.write.keygenerator.consistent.logical.timestamp.enabled=false``, the
default), checked against Hudi 0.15's Spark datasource by the Java Hudi judge
(``tests/judges/test_java_hudi_writes.py``):

- a timestamp is its ``long``: microseconds since the epoch (Spark holds microseconds only, so
  a millisecond column is keyed in microseconds too);
- a double or float is Java's ``Double.toString`` / ``Float.toString``: the shortest decimal that
  reads back as the same value, with at least two digits (``1.0``), in plain notation from
  ``1.0E-3`` up to below ``1.0E7`` and as ``d.dddE<n>`` outside it;
- bytes are lowercase hexadecimal;
- integers, booleans (``true``/``false``), dates (``2024-01-03``) and decimals (``-0.50``) print
  as Arrow casts them to strings, which is already Hudi's text.

Java's text of a double or float is that of Java 19 and later (Raffaello Giulietti's shortest
decimal). Java 8 to 18, which Hudi 0.14/0.15 run on, print some values outside [1e-3, 1e7) with
more digits than needed (JDK-4511638: ``1.9999999999999998E23`` for ``2.0E23``); a key of such a
value written by a Java Hudi on those runtimes is another key here. Partition paths keep Arrow's
text in every table (``KeyGenerator.partition_paths``): readers turn folder names back into values.

Tables lakehouse created before it printed values this way (timestamps as
``2024-01-01 00:02:03.000000Z``, doubles as ``1e+20``, bytes as themselves) keep that text
(``arrow``): a key printed another way would no longer find the records written under it.
"""

from __future__ import annotations

import datetime
import decimal
import math

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse.config import KEY_VALUE_FORMAT, TableConfig
from lakehouse.errors import ConfigError

HUDI = "hudi"
ARROW = "arrow"  # lakehouse's text before the table property existed


def value_format(config: TableConfig) -> str:
    fmt = config.extra.get(KEY_VALUE_FORMAT, HUDI)
    if fmt not in (HUDI, ARROW):
        raise ConfigError(f"{KEY_VALUE_FORMAT}={fmt!r} is not one of {HUDI}, {ARROW}",
                          help=f"set it back to what the table was created with ({HUDI} for tables "
                               f"created since the key exists); it decides the text of every record key")
    return fmt


def as_text(col: pa.ChunkedArray | pa.Array, fmt: str = HUDI, *, consistent: bool = False) -> pa.ChunkedArray:
    """``col`` as the text of keys and partition paths (nulls stay null). ``consistent``:
    ``hoodie.datasource.write.keygenerator.consistent.logical.timestamp.enabled``, under which
    Hudi prints a timestamp as ``java.sql.Timestamp`` does (milliseconds, ``2024-01-31
    12:30:00.0``; in UTC here, as a JVM running in UTC prints it)."""
    t = col.type
    if pa.types.is_string(t):
        return col if isinstance(col, pa.ChunkedArray) else pa.chunked_array([col])
    if pa.types.is_dictionary(t):
        return as_text(pc.cast(col, t.value_type), fmt, consistent=consistent)
    if pa.types.is_boolean(t):
        return pc.if_else(col, "true", "false")
    if fmt == HUDI:
        if pa.types.is_timestamp(t) and consistent:
            return _by_value(_java_millis(col), _java_timestamp)
        if pa.types.is_timestamp(t):
            micros = pc.cast(col, pa.timestamp("us", tz=t.tz), safe=False)
            return pc.cast(pc.cast(micros, pa.int64()), pa.string())
        if pa.types.is_floating(t):
            if t.bit_width == 16:  # no hash kernel for half floats; Java has none either
                col, t = pc.cast(col, pa.float32()), pa.float32()
            return _by_value(col, _java_float if t.bit_width < 64 else _java_double)
        if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
            return _by_value(col, bytes.hex)
    return pc.cast(col, pa.string())


def _by_value(col: pa.ChunkedArray | pa.Array, text) -> pa.ChunkedArray:
    """Printed once per distinct value (keys of these types are rare; the rules are not
    vectorisable)."""
    chunked = col if isinstance(col, pa.ChunkedArray) else pa.chunked_array([col])
    distinct = pc.unique(chunked)
    printed = pa.array([None if v is None else text(v) for v in distinct.to_pylist()], pa.string())
    # One lookup over all chunks: index_in builds its hash table of ``distinct`` per call.
    return pa.chunked_array([pc.take(printed, pc.index_in(chunked, value_set=distinct, skip_nulls=True))],
                            pa.string())


def _java_millis(col: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray:
    """A timestamp column as the milliseconds Hudi hands ``java.sql.Timestamp``: its Avro
    ``timestamp-millis`` value, or a ``timestamp-micros`` value divided by 1000 as Java divides
    (towards zero)."""
    unit = col.type.unit
    if unit in ("s", "ms"):
        return pc.cast(pc.cast(col, pa.timestamp("ms", tz=col.type.tz)), pa.int64())
    micros = pc.cast(pc.cast(col, pa.timestamp("us", tz=col.type.tz), safe=False), pa.int64())
    return pc.divide(micros, 1000)  # integer division: truncates towards zero, as Java's /


def _java_timestamp(millis: int) -> str:
    """``new java.sql.Timestamp(millis).toString()`` in UTC: ``yyyy-mm-dd hh:mm:ss.f``, the
    fraction as nanoseconds without trailing zeros (at least one digit)."""
    seconds, ms = divmod(millis, 1000)
    dt = datetime.datetime(1970, 1, 1) + datetime.timedelta(seconds=seconds)
    frac = f"{ms * 1_000_000:09d}".rstrip("0") or "0"
    return f"{dt.year:04d}-{dt.month:02d}-{dt.day:02d} {dt.hour:02d}:{dt.minute:02d}:{dt.second:02d}.{frac}"


def _java_double(x: float) -> str:
    return _java_text(x, repr(x), lambda d: float(d) == x)


def _java_float(x: float) -> str:
    f = np.float32(x)
    shortest = np.format_float_scientific(f, unique=True, trim="-")
    return _java_text(float(f), shortest, lambda d: np.float32(float(d)) == f)


def _java_text(x: float, shortest: str, reads_back) -> str:
    """Java's ``toString`` of a binary floating-point value, given its shortest decimal."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    # A context of our own: the caller's (its precision, its traps) must not change a key.
    ctx = decimal.Context(prec=800, traps=[])
    sign, digits, exp = ctx.normalize(decimal.Decimal(shortest)).as_tuple()
    if len(digits) == 1:
        # Java prints at least two digits and takes the two-digit decimal closest to the value:
        # d.0 but for the least subnormals (4.9E-324, whose shortest decimal is 5E-324).
        exact = decimal.Decimal(x)
        near = exact.quantize(decimal.Decimal(1).scaleb(exact.adjusted() - 1, context=ctx),
                              rounding=decimal.ROUND_HALF_EVEN, context=ctx)
        if reads_back(near):
            sign, digits, exp = ctx.normalize(near).as_tuple()
    text = "".join(map(str, digits))
    point = len(digits) + exp  # digits before the decimal point
    if 1e-3 <= abs(x) < 1e7:
        if point <= 0:
            body = "0." + "0" * -point + text
        elif point >= len(text):
            body = text + "0" * (point - len(text)) + ".0"
        else:
            body = text[:point] + "." + text[point:]
    else:
        body = f"{text[0]}.{text[1:] or '0'}E{point - 1}"
    return ("-" if sign else "") + body
