"""Java ``.properties`` files, as Hudi writes ``hoodie.properties`` and ``.hoodie_partition_metadata``.

Java escapes ``:``, ``=``, ``#``, ``!`` and backslashes and writes non-Latin-1 characters as
``\\uXXXX``; a reader must undo all of that (and line continuations) or schemas stored in the file
come back mangled.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from lakehouse.config import TableConfig
from lakehouse.errors import CorruptFileError, StorageError, TableNotFoundError, UnsupportedTableError

if TYPE_CHECKING:
    from lakehouse.storage.base import Storage

HOODIE_PROPERTIES = ".hoodie/hoodie.properties"

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
# Java ends lines at \n, \r or \r\n only; str.splitlines() would also split at \f, \x1c-\x1e,
# \x85, \u2028 and \u2029, which Java keeps inside a value.
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def _logical_lines(text: str) -> list[str]:
    lines: list[str] = []
    pending = ""
    for raw in _LINE_BREAK.split(text):
        line = raw.lstrip(" \t\f") if pending else raw
        # Only ' ', '\t' and '\f' are whitespace to Java here, not all of str.isspace().
        body = line.lstrip(" \t\f")
        if not pending and (not body or body[0] in "#!"):
            continue
        # An odd number of trailing backslashes continues the line.
        stripped = line.rstrip("\\")
        if (len(line) - len(stripped)) % 2 == 1:
            pending += line[:-1]
            continue
        lines.append(pending + line)
        pending = ""
    if pending:
        lines.append(pending)
    return lines


def _unescape(s: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s):
            n = s[i + 1]
            if n == "u" and i + 6 <= len(s):
                out.append(chr(int(s[i + 2:i + 6], 16)))
                i += 6
                continue
            out.append(_ESCAPES.get(n, n))
            i += 2
            continue
        out.append(c)
        i += 1
    # Java escapes a character outside the BMP as two \uXXXX UTF-16 units: pair them back up.
    return "".join(out).encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def parse_properties(text: str) -> dict[str, str]:
    props: dict[str, str] = {}
    for line in _logical_lines(text):
        line = line.lstrip(" \t\f")
        # The key ends at the first unescaped '=', ':' or whitespace.
        i = 0
        while i < len(line):
            c = line[i]
            if c == "\\":
                i += 2
                continue
            if c in "=: \t\f":
                break
            i += 1
        key = line[:i]
        rest = line[i:].lstrip(" \t\f")
        if rest[:1] in ("=", ":"):
            rest = rest[1:].lstrip(" \t\f")
        props[_unescape(key)] = _unescape(rest)
    return props


def _escape(s: str, *, is_key: bool) -> str:
    out: list[str] = []
    for idx, c in enumerate(s):
        if c == "\\":
            out.append("\\\\")
        elif c in "=:#!":
            out.append("\\" + c)
        elif c == " " and (is_key or idx == 0):
            out.append("\\ ")
        elif c == "\t":
            out.append("\\t")
        elif c == "\n":
            out.append("\\n")
        elif c == "\r":
            out.append("\\r")
        elif c == "\f":
            out.append("\\f")
        elif ord(c) < 0x20 or ord(c) > 0x7E:
            out.extend(f"\\u{u:04X}" for u in _utf16_units(c))
        else:
            out.append(c)
    return "".join(out)


def _utf16_units(c: str) -> list[int]:
    b = c.encode("utf-16-be")
    return [int.from_bytes(b[i:i + 2], "big") for i in range(0, len(b), 2)]


def format_properties(props: dict[str, str], *, comment: str | None = None,
                      now: datetime | None = None) -> str:
    now = now or datetime.now(timezone.utc)
    lines = []
    if comment:
        lines.append(f"#{comment}")
    lines.append("#" + now.strftime("%a %b %d %H:%M:%S UTC %Y"))
    for k in sorted(props):
        lines.append(f"{_escape(k, is_key=True)}={_escape(props[k], is_key=False)}")
    return "\n".join(lines) + "\n"


# --- hoodie.properties -------------------------------------------------------------------

def read_table_config(storage: Storage) -> TableConfig:
    """The table config in ``.hoodie/hoodie.properties``, checked as every opener needs it."""
    try:
        raw = storage.read(HOODIE_PROPERTIES)
    except (FileNotFoundError, NotADirectoryError, StorageError):
        raise TableNotFoundError(f"{storage.uri()} is not a table: {HOODIE_PROPERTIES} is missing",
                                 help="check the path, or create the table with "
                                      "lakehouse.create_table / `lakehouse create`") from None
    try:
        # java.util.Properties reads ISO-8859-1; anything beyond it is written as \uXXXX.
        props = parse_properties(raw.decode("latin-1"))
    except ValueError as e:
        raise CorruptFileError(storage.uri(HOODIE_PROPERTIES), f"not a properties file ({e})") from None
    # A file cut at a line boundary parses: without these a MOR table would open with the
    # defaults (as COPY_ON_WRITE), and its next write would drop committed log records.
    missing = [k for k in ("hoodie.table.name", "hoodie.table.type", "hoodie.table.version")
               if not props.get(k)]
    if missing:
        raise CorruptFileError(storage.uri(HOODIE_PROPERTIES), f"{', '.join(missing)} missing (every Hudi "
                               "table has them: the file is truncated or damaged)")
    config = TableConfig.from_properties(props)
    if config.version not in (5, 6):
        raise UnsupportedTableError(
            f"{storage.uri()} has table version {config.version}; lakehouse reads and writes version 6",
            help="use Apache Hudi to downgrade the table to version 6, or read it with Hudi")
    if config.checksum is not None and config.checksum != config.expected_checksum():
        raise CorruptFileError(storage.uri(HOODIE_PROPERTIES),
                               f"hoodie.table.checksum {config.checksum} does not match the table "
                               f"name (expected {config.expected_checksum()})")
    return config
