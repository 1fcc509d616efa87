"""Java ``.properties`` files, as Hudi writes ``hoodie.properties`` and ``.hoodie_partition_metadata``.

Java escapes ``:``, ``=``, ``#``, ``!`` and backslashes and writes non-Latin-1 characters as
``\\uXXXX``; a reader must undo all of that (and line continuations) or schemas stored in the file
come back mangled.

**Reading is strict.** ``java.util.Properties.load`` accepts nearly any bytes, but what Hudi's
``Properties.store`` writes has a narrow shape, and a file outside it was damaged or edited by
hand. Read leniently such a file is worse than refused: a second ``hoodie.table.type`` line
appended to a Merge-On-Read table won, and the next upsert wrote a copy-on-write commit over log
files. :func:`parse_properties` therefore raises :class:`CorruptFileError` naming the file, the
1-based line (lines end where Java ends them: at ``\\n``, ``\\r`` or ``\\r\\n``; an entry continued
over several lines is named by its first) and what is wrong, at the first of:

* **Not text**: any character but printable ASCII (0x20-0x7E), tab, line feed, carriage return
  and form feed, anywhere, comments included. ``store`` writes every other character of a key or
  value as ``\\uXXXX``, and Hudi's comments are ASCII; NUL, other control bytes and bytes >= 0x80
  are a binary tail or damage. (hudi-rs reads the file as UTF-8 lines, comments included: a byte
  sequence that is not UTF-8 anywhere in it and hudi-rs cannot open the table.)
* **Does not parse**: a malformed ``\\uXXXX`` escape (Java's ``load`` throws on it), and a
  non-comment line whose key is not followed by an unescaped ``=`` or ``:`` (whitespace around it
  allowed). Java would read a line without one as a key with an empty value, and whitespace alone
  as a separator (``key value``); Hudi always writes ``key=value``, and hudi-rs splits at ``=``
  only, so the two would read such a line differently.
* **A key twice** (compared after unescaping): Java and hudi-rs keep the last value; neither is
  known to be the right one.

What Java reads one way and Hudi merely does not write is still read as Java reads it: blank
lines, ``#``/``!`` comments, continuation lines, ``:`` separators, whitespace around separators,
``\\q`` for ``q``, and an empty key (``=v``, which :func:`format_properties` writes for ``""``).
There is no lenient mode: nothing needs one (lakehouse reads only ``hoodie.properties`` with this
module; it writes ``.hoodie_partition_metadata`` but never reads it back).

**Rewriting hoodie.properties** after ``create_table`` goes through :func:`rewrite_table_config`,
which refuses to change the table's name, type, version, record key, partition fields, key
generator or ordering field (:data:`FIXED_KEYS`), or any key the caller did not say it changes.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Collection
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from lakehouse.config import KEY_VALUE_FORMAT, TableConfig
from lakehouse.errors import (ConfigError, CorruptFileError, StorageError, TableNotFoundError,
                              UnsupportedTableError)
from lakehouse import layout

if TYPE_CHECKING:
    from lakehouse.storage.base import Storage

# hoodie.properties as lakehouse last wrote it (see load_table_config): under Hudi's auxiliary
# folder, which Hudi's services and table rewrites leave alone.
# Keys a Hudi rewrite of hoodie.properties may drop on purpose: never taken from the saved copy.
_NOT_RESTORED = ("hoodie.table.checksum", "hoodie.table.create.schema", "hoodie.table.metadata.")

log = logging.getLogger(__name__)
_WARNED: set[str] = set()

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
# Java ends lines at \n, \r or \r\n only; str.splitlines() would also split at \f, \x1c-\x1e,
# \x85, \u2028 and \u2029, which Java keeps inside a value.
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_NOT_TEXT = re.compile(r"[^\x20-\x7e\t\n\r\f]")
_HEX4 = re.compile(r"[0-9A-Fa-f]{4}")
# Longer values (a schema) would drown the line the error is about.
_SHOWN = 60


def _corrupt(path: str, where: str, what: str, fix: str) -> CorruptFileError:
    return CorruptFileError(path, f"{where}: {what}", help=f"{fix}; or restore the file from a backup")


def _shown(s: str) -> str:
    return repr(s if len(s) <= _SHOWN else s[:_SHOWN - 3] + "...")


def _line_of(text: str, pos: int) -> tuple[int, int]:
    """The 1-based line and column of ``text[pos]``, lines ending where Java ends them."""
    starts = [m.end() for m in _LINE_BREAK.finditer(text, 0, pos)]
    return len(starts) + 1, pos - (starts[-1] if starts else 0) + 1


def _check_text(text: str, path: str, from_bytes: bool) -> None:
    bad = _NOT_TEXT.search(text)
    if bad is None:
        return
    line, column = _line_of(text, bad.start())
    code = ord(bad.group())
    unit = f"byte 0x{code:02X}" if from_bytes else f"character U+{code:04X}"
    kind = "NUL" if code == 0 else "control" if code < 0x20 or code == 0x7F else "non-ASCII"
    raise _corrupt(path, f"line {line}, column {column}", f"{kind} {unit}: not text (Hudi writes "
                   "this file in printable ASCII, escaping everything else as \\uXXXX)",
                   "remove that byte and whatever else is not text (bytes appended after the last "
                   "key=value line are damage too)")


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(first physical line number, text) of each entry: comments and blank lines dropped,
    continuation lines joined, leading whitespace removed."""
    out: list[tuple[int, str]] = []
    parts: list[str] | None = None  # the entry being continued, if any
    start = 0
    for number, raw in enumerate(_LINE_BREAK.split(text), 1):
        # Only ' ', '\t' and '\f' are whitespace to Java here, not all of str.isspace().
        line = raw.lstrip(" \t\f")
        if parts is None:
            # A comment never continues, and a continued line is never a comment.
            if not line or line[0] in "#!":
                continue
            parts, start = [], number
        # An odd number of trailing backslashes continues the line.
        if (len(line) - len(line.rstrip("\\"))) % 2 == 1:
            parts.append(line[:-1])
            continue
        parts.append(line)
        out.append((start, "".join(parts)))
        parts = None
    if parts is not None:
        out.append((start, "".join(parts)))
    # A lone backslash continued by a blank line: Java reads nothing there.
    return [(number, entry) for number, entry in out if entry]


def _unescape(s: str, path: str, line: int) -> str:
    out: list[str] = []
    i = 0
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s):
            n = s[i + 1]
            if n == "u":
                digits = s[i + 2:i + 6]
                # Java's load throws here; int(..., 16) alone would also take "+1_a" or " 1a ".
                if not _HEX4.fullmatch(digits):
                    raise _corrupt(path, f"line {line}", f"malformed escape {s[i:i + 6]!r} (\\u "
                                   "takes four hex digits; Java cannot read this file)",
                                   f"repair the escape on line {line}")
                out.append(chr(int(digits, 16)))
                i += 6
                continue
            out.append(_ESCAPES.get(n, n))
            i += 2
            continue
        out.append(c)
        i += 1
    # Java escapes a character outside the BMP as two \uXXXX UTF-16 units: pair them back up.
    return "".join(out).encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def parse_properties(data: bytes | str, *, path: str = "properties text") -> dict[str, str]:
    """The entries of a properties file (bytes as Java reads them: ISO-8859-1), read strictly:
    see the module docstring. A file that is not what Hudi writes is a :class:`CorruptFileError`
    naming ``path`` and the line."""
    from_bytes = isinstance(data, bytes)
    text = data.decode("latin-1") if isinstance(data, bytes) else data
    _check_text(text, path, from_bytes)
    props: dict[str, str] = {}
    lines: dict[str, int] = {}
    for number, line in _logical_lines(text):
        # The key ends at the first unescaped '=', ':' or whitespace.
        i = 0
        while i < len(line) and line[i] not in "=: \t\f":
            i += 2 if line[i] == "\\" else 1
        key = line[:i]
        rest = line[i:].lstrip(" \t\f")
        if rest[:1] not in ("=", ":"):
            what = ("has no '=' or ':' after its key" if not rest else
                    f"separates its key {key!r} from the value by whitespace only")
            raise _corrupt(path, f"line {number}", f"{_shown(line)} is not key=value: it {what} "
                           "(Hudi writes key=value)", f"repair or delete line {number}")
        name, value = _unescape(key, path, number), _unescape(rest[1:].lstrip(" \t\f"), path, number)
        if name in props:
            first = lines[name]
            raise _corrupt(path, f"line {number}", f"key {name!r} again: line {first} sets it to "
                           f"{_shown(props[name])}, line {number} to {_shown(value)} (Java would "
                           "silently take the last one)",
                           f"keep the right one of lines {first} and {number} and delete the other "
                           "(lakehouse does not guess: a table's type, keys and name never change "
                           "after it is created)")
        props[name] = value
        lines[name] = number
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


def _comment_lines(comment: str) -> list[str]:
    # Readers skip comments, but a strict one (this module, hudi-rs) still refuses bytes that are
    # not ASCII text in them; a line break would end the comment.
    return ["#" + "".join(c if " " <= c <= "~" else "".join(f"\\u{u:04X}" for u in _utf16_units(c))
                          for c in part)
            for part in _LINE_BREAK.split(comment)]


def format_properties(props: dict[str, str], *, comment: str | None = None,
                      now: datetime | None = None) -> str:
    now = now or datetime.now(timezone.utc)
    lines = _comment_lines(comment) if comment else []
    lines.append("#" + now.strftime("%a %b %d %H:%M:%S UTC %Y"))
    for k in sorted(props):
        lines.append(f"{_escape(k, is_key=True)}={_escape(props[k], is_key=False)}")
    return "\n".join(lines) + "\n"


# --- hoodie.properties -------------------------------------------------------------------

def read_table_config(storage: Storage) -> TableConfig:
    """The table config in ``.hoodie/hoodie.properties``, checked as every opener needs it."""
    return load_table_config(storage)[0]


def load_table_config(storage: Storage) -> tuple[TableConfig, tuple[str, ...]]:
    """The table config, and the keys taken from lakehouse's saved copy because
    ``hoodie.properties`` no longer has them.

    Apache Hudi's Spark SQL ``CREATE TABLE ... USING hudi LOCATION '<an existing table>'`` (the
    way a table is registered in Spark's catalog, which Hudi's ``CALL run_clean`` needs) writes
    ``hoodie.properties`` again with only the keys its ``HoodieTableConfig`` knows (0.14/0.15,
    ``HoodieCatalogTable.initHoodieTable``): the index settings, the write options stored at
    creation and the timeline's time zone are gone. Read as Hudi's defaults, a default
    Merge-On-Read table would be taken for a SIMPLE-index one, and its next writes would put new
    keys outside the buckets every bucket-index writer hashes to. So lakehouse keeps a copy of
    the file it writes (:data:`lakehouse.layout.SAVED_PROPERTIES`) and, where ``hoodie.properties`` has no
    ``hoodie.index.type`` (lakehouse always writes it) but the table's fixed keys are the copy's,
    takes the keys it lacks from the copy; the next commit writes them back
    (:func:`restore_table_properties`). Keys the file has win."""
    try:
        raw = storage.read(layout.PROPERTIES)
    except (FileNotFoundError, NotADirectoryError, StorageError):
        raise TableNotFoundError(f"{storage.uri()} is not a table: {layout.PROPERTIES} is missing",
                                 help="check the path, or create the table with "
                                      "lakehouse.create_table / `lakehouse create`") from None
    props = parse_properties(raw, path=storage.uri(layout.PROPERTIES))
    # A file cut at a line boundary parses: without these a MOR table would open with the
    # defaults (as COPY_ON_WRITE), and its next write would drop committed log records.
    missing = [k for k in ("hoodie.table.name", "hoodie.table.type", "hoodie.table.version")
               if not props.get(k)]
    if missing:
        raise CorruptFileError(storage.uri(layout.PROPERTIES), f"{', '.join(missing)} missing (every Hudi "
                               "table has them: the file is truncated or damaged)")
    try:
        config = TableConfig.from_properties(props)
    except ConfigError as e:  # a value no reader of the table takes: name the file it is in
        raise ConfigError(f"{storage.uri(layout.PROPERTIES)}: {e.message}", help=e.help) from None
    if config.version not in (5, 6):
        raise UnsupportedTableError(
            f"{storage.uri()} has table version {config.version}; lakehouse reads and writes version 6",
            help="use Apache Hudi to downgrade the table to version 6, or read it with Hudi")
    if config.checksum is not None and config.checksum != config.expected_checksum():
        raise CorruptFileError(storage.uri(layout.PROPERTIES),
                               f"hoodie.table.checksum {config.checksum} does not match the table "
                               f"name (expected {config.expected_checksum()})")
    restored = _from_saved_copy(storage, props) if "hoodie.index.type" not in props else {}
    if (KEY_VALUE_FORMAT not in props and KEY_VALUE_FORMAT not in restored
            and ("hoodie.index.type" in props or "hoodie.index.type" in restored)):
        # A table lakehouse made before the key existed (lakehouse always wrote the index type,
        # Hudi never does): its keys were printed as Arrow prints values; the next commit says so
        # in the file.
        restored[KEY_VALUE_FORMAT] = "arrow"
    if restored:
        if set(restored) - {KEY_VALUE_FORMAT} and storage.uri() not in _WARNED:
            _WARNED.add(storage.uri())  # once per table and process: every opener reads the file
            log.warning("%s lacks %s, which lakehouse stored with the table (the file was written "
                        "again by another program, such as Apache Hudi's Spark SQL CREATE TABLE): "
                        "taken from %s; the next commit writes them back", storage.uri(layout.PROPERTIES),
                        ", ".join(sorted(restored)), storage.uri(layout.SAVED_PROPERTIES))
        try:
            config = TableConfig.from_properties({**props, **restored})
        except ConfigError:
            return config, ()
    return config, tuple(sorted(restored))


def _from_saved_copy(storage: Storage, props: dict[str, str]) -> dict[str, str]:
    """The keys of the saved copy that ``props`` lacks, where the copy is of this table."""
    try:
        saved = parse_properties(storage.read(layout.SAVED_PROPERTIES), path=storage.uri(layout.SAVED_PROPERTIES))
    except (FileNotFoundError, NotADirectoryError, StorageError):
        return {}
    except CorruptFileError as e:  # a backup only: hoodie.properties itself is sound
        log.warning("ignoring lakehouse's saved copy of hoodie.properties: %s", e)
        return {}
    # Another table created at this path since the copy was written is not restored from it.
    # The database is not compared: Hudi's catalog writes the one the table is registered in.
    if any(saved.get(k) != props.get(k) for k in FIXED_KEYS
           if k != "hoodie.database.name" and (k in saved or k in props)):
        return {}
    return {k: v for k, v in saved.items() if k not in props and not k.startswith(_NOT_RESTORED)}


def write_table_properties(storage: Storage, props: dict[str, str], *, create: bool = False,
                           comment: str = "Properties saved by lakehouse") -> None:
    """Write ``hoodie.properties`` and lakehouse's saved copy of it. A rewrite saves the copy
    first: a crash between the two leaves a copy ahead of the file, never behind it (a bucket
    count fixed by the first write is not lost). A create makes the file first (it may find a
    table there, whose copy must stay as it is); a crash before the copy leaves none, and
    nothing is restored until the next rewrite saves one."""
    data = format_properties(props, comment=comment).encode()
    if create:
        storage.create(layout.PROPERTIES, data)
        _save_copy(storage, data)
    else:
        _save_copy(storage, data)
        storage.write(layout.PROPERTIES, data)


def _save_copy(storage: Storage, data: bytes) -> None:
    """A backup: failing to write it never fails the table's own write."""
    try:
        storage.write(layout.SAVED_PROPERTIES, data)
    except OSError as e:
        log.warning("could not save lakehouse's copy of hoodie.properties at %s (%s): keys another "
                    "program's rewrite drops cannot be restored until the next rewrite saves it",
                    storage.uri(layout.SAVED_PROPERTIES), e)
        try:  # an older copy must not restore values the file no longer has
            storage.delete(layout.SAVED_PROPERTIES)
        except OSError:
            pass


def restore_table_properties(storage: Storage) -> tuple[str, ...]:
    """Write back into ``hoodie.properties`` the keys :func:`load_table_config` took from the
    saved copy (the caller holds the table lock); the keys written back."""
    config, restored = load_table_config(storage)
    if restored:
        write_table_properties(storage, config.to_properties())
    return restored


# What the table's files mean: file layout, record keys and merging follow from these, so they are
# fixed when the table is created (Hudi cannot change them in place either).
FIXED_KEYS = ("hoodie.table.name", "hoodie.database.name", "hoodie.table.type", "hoodie.table.version",
              "hoodie.table.recordkey.fields", "hoodie.table.partition.fields",
              "hoodie.table.keygenerator.class", "hoodie.table.keygenerator.type",
              "hoodie.table.precombine.field")


def _value(props: dict[str, str], key: str) -> str:
    return _shown(props[key]) if key in props else "unset"


def rewrite_table_config(storage: Storage, config: TableConfig, *, may_change: Collection[str],
                         comment: str = "Properties saved by lakehouse", before_data: bool = False) -> None:
    """Replace ``.hoodie/hoodie.properties`` of a table with ``config``, where it differs from the
    file only in the keys ``may_change`` names (the caller holds the table lock).

    The file is read again first, as every opener reads it, and both are compared as
    :class:`TableConfig` reads them (a key left out and Hudi's default for it are the same): a
    change to one of :data:`FIXED_KEYS`, or to a key not in ``may_change``, is a
    :class:`ConfigError` and nothing is written. Only ``create_table`` chooses those keys, but for
    ``before_data``: the first write of a table created without a schema choosing its key
    generator (lakehouse.write.datetime_partitioning), under the lock, with no write on the
    timeline, may change the ones it names."""
    fixed = sorted(set(may_change) & set(FIXED_KEYS)) if not before_data else []
    if fixed:
        raise ConfigError(f"{', '.join(fixed)} cannot be rewritten once the table exists",
                          help="create a new table with the settings wanted and write the data into it")
    uri = storage.uri(layout.PROPERTIES)
    current = read_table_config(storage).to_properties()
    new = config.to_properties()
    changed = sorted(k for k in current.keys() | new.keys() if current.get(k) != new.get(k))
    diff = ", ".join(f"{k} from {_value(current, k)} to {_value(new, k)}" for k in changed)
    if any(k in FIXED_KEYS and not (before_data and k in may_change) for k in changed):
        raise ConfigError(f"{uri}: refusing to change {diff}: a table's name, type, version, keys, "
                          "key generator and ordering field are fixed when it is created",
                          help="create a new table with the settings wanted and write the data into "
                               "it; nothing was written")
    if any(k not in may_change for k in changed):
        raise ConfigError(f"{uri}: refusing to change {diff}: this rewrite changes only "
                          f"{', '.join(sorted(may_change)) or 'nothing'}",
                          help="another program may have rewritten the file since it was read: run "
                               "the operation again; nothing was written")
    write_table_properties(storage, new, comment=comment)
