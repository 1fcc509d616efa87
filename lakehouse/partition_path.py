"""Partition paths: what a partition value may become on disk, checked before any file exists.

Partition values come from data (a landed CSV, a DataFrame, a stream), so every one is checked
before a write creates its instant. A value is refused with :class:`PartitionPathError`, naming
the value, its column and its first row, when the folder it makes would be one of:

* outside the table or not the folder it names: a segment that is empty, ``.`` or ``..`` (so no
  absolute path and no ``a//b``);
* inside the metadata folder: a segment ``.hoodie``;
* a name Hudi readers trip on: a control character (Unicode ``Cc``: NUL, newline, tab, DEL,
  U+0080-U+009F), or a segment of more than :data:`MAX_SEGMENT_BYTES` bytes of UTF-8 (the file
  name limit of common file systems), or a whole path of more than :data:`MAX_PATH_BYTES` (an
  S3 key holds 1,024 bytes: the table's prefix, the path and a log file's or marker's name);
* a folder that is not the field's: a ``/`` in a value of a hive-style table (the second folder
  would not read ``field=value``) or of a table partitioned by several fields (the value's
  second folder would stand where the next field's folder goes).

With ``hoodie.datasource.write.partitionpath.urlencode=true`` a value's ``/``, ``%``, control
characters and the other characters Hive escapes become ``%XX`` (as Hudi encodes them), so
such values are one folder and pass; ``.`` and ``..`` are not escaped and stay refused.

A ``/`` in the value of a single, non-hive partition field makes nested folders, as Hudi writes
them (its quickstart partitions by ``americas/united_states/san_francisco``). Those are kept
readable by one more rule, on the table: every partition path of a table has the same depth
(Hudi's ``partitionDepth``), so no partition holds another one (hudi-rs drops a partition that
holds another partition's folder). A timestamp key generator's output format makes its ``/`` on
purpose; its depth is fixed by the format.
"""

from __future__ import annotations

from typing import Callable

import pyarrow as pa
import pyarrow.compute as pc

from lakehouse.errors import PartitionPathError
from lakehouse import layout

MAX_SEGMENT_BYTES = 255
MAX_PATH_BYTES = 512

# What may be wrong with a value, found over a batch's distinct values at once; each suspect is
# then looked at on its own for the message. A leading '.' covers '.', '..' and '.hoodie'.
_SUSPECT = r"[\x00-\x1f\x7f-\x{9f}/]|^\."


def _control(value: str) -> str | None:
    for c in value:
        o = ord(c)
        if o < 0x20 or 0x7F <= o <= 0x9F:
            return c
    return None


def value_problem(segments: list[str], *, nested: bool) -> str | None:
    """Why a value's folder(s) ``segments`` are refused, or None."""
    if len(segments) > 1 and not nested:
        return "holds '/', which would make a folder that is not this field's"
    for seg in segments:
        if seg in ("", ".", ".."):
            what = "an empty folder name" if not seg else f"the folder {seg!r}"
            return f"makes {what}, which would put files outside the partition (or the table)"
        if seg == layout.METAFOLDER:
            return f"makes the folder {layout.METAFOLDER!r}, the table's metadata folder"
        c = _control(seg)
        if c is not None:
            return f"holds the control character U+{ord(c):04X}, which Hudi readers cannot list"
        if len(seg.encode()) > MAX_SEGMENT_BYTES:
            return (f"makes a folder name of {len(seg.encode())} bytes; file systems hold "
                    f"{MAX_SEGMENT_BYTES}")
    return None


def _row(values: pa.ChunkedArray, value: str, offset: int | None) -> int | None:
    """The first row holding ``value``, counted from ``offset`` (None: rows are not the
    caller's to name, e.g. a Spark task's batch)."""
    if offset is None:
        return None
    return max(0, pc.index(values, pa.scalar(value, values.type)).as_py()) + offset


def _at(value: str, row: int | None) -> str:
    shown = repr(value) if len(value) <= 100 else repr(value[:100]) + "..."
    return shown if row is None else f"{shown} (row {row})"


def check_values(values: pa.ChunkedArray, *, column: str, prefix: str, nested: bool,
                 encode: Callable[[str], str] | None = None, row_offset: int | None = 0) -> None:
    """Every distinct (non-null) value of partition field ``column`` checked by the module's
    rules, as the folder it makes: ``encode(value)`` (url encoding) behind ``prefix`` (``field=``
    on a hive-style table). ``nested``: a ``/`` makes nested folders on purpose (a single plain
    field, or a timestamp format). Errors name the value as the data holds it."""
    uniq = pc.unique(values)
    if uniq.null_count:
        uniq = uniq.drop_null()
    if len(uniq) == 0:
        return
    suspect = pc.match_substring_regex(uniq, _SUSPECT)
    limit = MAX_SEGMENT_BYTES - len(prefix.encode())
    if encode is not None:
        limit //= 3  # an escape is three bytes for one
    suspect = pc.or_(suspect, pc.greater(pc.binary_length(uniq), limit))
    if not pc.any(suspect).as_py():
        return
    bad: list[tuple[int, str, str]] = []
    for v in uniq.filter(suspect).to_pylist():
        segments = (prefix + (v if encode is None else encode(v))).split("/")
        problem = value_problem(segments, nested=nested)
        if problem is not None:
            bad.append((_row(values, v, row_offset or 0), v, problem))
    if not bad:
        return
    row, value, problem = min(bad)  # the first offending row of the batch
    row = None if row_offset is None else row
    if encode is not None:
        help = ("fix the value in the data: with url-encoded partition paths only '.', '..', "
                f"{layout.METAFOLDER!r} and names too long stay refused")
    else:
        help = ("fix the value in the data, or create the table with hoodie.datasource.write."
                "partitionpath.urlencode=true so that each value is one folder with '/' and control "
                "characters escaped as %XX (as Hudi encodes them)")
    raise PartitionPathError(f"partition value {_at(value, row)} of column {column!r} {problem}; "
                             "nothing was written", help=help, value=value, row=row)


def check_paths(paths: pa.ChunkedArray, *, depth: int | None, row_offset: int | None = 0) -> int | None:
    """Whole partition paths: not longer than :data:`MAX_PATH_BYTES`, and all of one depth,
    ``depth`` (the table's, when it has partitions already). Returns the batch's depth (None
    for an empty batch or an unpartitioned table)."""
    uniq = pc.unique(paths)
    if len(uniq) == 0 or (len(uniq) == 1 and uniq[0].as_py() == ""):
        return None
    long = pc.greater(pc.binary_length(uniq), MAX_PATH_BYTES)
    if pc.any(long).as_py():
        value = uniq.filter(long)[0].as_py()
        row = _row(paths, value, row_offset)
        raise PartitionPathError(
            f"the partition path {_at(value, row)} is {len(value.encode())} bytes long; lakehouse "
            f"writes partition paths of at most {MAX_PATH_BYTES} bytes (an S3 key holds 1,024 with "
            "the table's prefix and a file's name); nothing was written",
            help="shorten the partition values, or partition by fewer or shorter fields",
            value=value, row=row)
    depths = pc.add(pc.count_substring(uniq, "/"), 1)
    lo, hi = (v.as_py() for v in pc.min_max(depths).values())
    if depth is None:  # the batch's first row sets it, as the first chunk of a chunked write does
        first = paths[0].as_py()
        depth = first.count("/") + 1
    if lo == hi == depth:
        return depth
    odd = uniq.filter(pc.not_equal(depths, depth))[0].as_py()
    row = _row(paths, odd, row_offset)
    raise PartitionPathError(
        f"the partition path {_at(odd, row)} is {odd.count('/') + 1} folder(s) deep, where the "
        f"table's partition paths are {depth} deep; nothing was written. Every partition path of "
        "a table has one depth, so that no partition holds another's folder (Hudi readers drop "
        "such a partition)", help="give every row a partition value of as many '/'-separated parts "
        "as the table's partitions, or create the table with hoodie.datasource.write.partitionpath."
        "urlencode=true (each value is then one folder)", value=odd, row=row)
