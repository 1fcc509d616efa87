"""Java ``.properties`` files: what ``java.util.Properties`` reads and writes, checked on hand-made
text with known Java meaning and on the ``hoodie.properties`` files Apache Hudi wrote; what Hudi
never writes refused with its line; rewrites of ``hoodie.properties`` kept to what they change."""

from __future__ import annotations

import io
import json
import re
from datetime import datetime, timezone

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lakehouse
from lakehouse.iceberg import background
from lakehouse.layout import LOCKS as LOCK_DIR, PROPERTIES as HOODIE_PROPERTIES
from lakehouse.config import KeyGeneratorType, TableType
from lakehouse.errors import ConfigError, CorruptFileError
from lakehouse.properties import (FIXED_KEYS, format_properties, parse_properties,
                                  read_table_config, rewrite_table_config)
from lakehouse.storage import get_storage
from lakehouse.write.bucket_sizing import AUTO_KEY

FIXED_NOW = datetime(2025, 1, 2, 3, 4, 5, tzinfo=timezone.utc)


def _body_lines(text: str) -> list[str]:
    return [line for line in text.split("\n") if line and not line.startswith("#")]


# --- round trips ---------------------------------------------------------------------------

TRICKY = [
    "a:b", "a=b", "#not a comment", "!not a comment", "back\\slash", "trailing\\", "\\\\",
    " leading space", "  two leading", "\tleading tab", "inner  spaces ", "new\nline", "cr\rlf\r\n",
    "form\ffeed", "é ü ß", "日本語", "😀 outside the BMP", "mixed 😀:=#!\\ é", "", "=", ":", " ",
    "{\"type\":\"record\",\"fields\":[]}", "\x00\x01\x7f", "line\u2028sep\u2029par\x85nel",
    "\\u0041 is not an escape here",
]


@pytest.mark.parametrize("value", TRICKY)
def test_tricky_values_round_trip(value):
    props = {"hoodie.some.key": value}
    text = format_properties(props, now=FIXED_NOW)
    assert parse_properties(text) == props


@pytest.mark.parametrize("key", ["a b", " lead", "a:b", "a=b", "#k", "!k", "k\\", "é", "😀", "k\tt"])
def test_tricky_keys_round_trip(key):
    props = {key: "v"}
    assert parse_properties(format_properties(props, now=FIXED_NOW)) == props


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(), st.text(), max_size=6), st.text())
def test_any_unicode_round_trips(props, comment):
    text = format_properties(props, comment=comment, now=FIXED_NOW)
    # What Java's store(OutputStream) writes is pure ASCII: everything else is \\uXXXX. Whatever
    # the comment holds, the strict reader takes the file back, as bytes (as tables are read) too.
    assert text.isascii()
    assert parse_properties(text) == props
    assert parse_properties(text.encode("ascii"), path="p") == props


def test_written_file_has_comment_date_and_sorted_keys():
    text = format_properties({"b": "2", "a": "1"}, comment="Properties saved", now=FIXED_NOW)
    lines = text.split("\n")
    assert lines[0] == "#Properties saved"
    assert lines[1] == "#Thu Jan 02 03:04:05 UTC 2025"
    assert lines[2:] == ["a=1", "b=2", ""]


# Java's own output for these (Properties.store escapes with upper-case hex).
@pytest.mark.parametrize("props,line", [
    ({"k": "a:b=c"}, "k=a\\:b\\=c"),
    ({"k": " x y"}, "k=\\ x y"),
    ({"a b": "v"}, "a\\ b=v"),
    ({"k": "#!"}, "k=\\#\\!"),
    ({"k": "é"}, "k=\\u00E9"),
    ({"k": "😀"}, "k=\\uD83D\\uDE00"),
    ({"k": "a\\b"}, "k=a\\\\b"),
    ({"k": "t\tn\nr\rf\f"}, "k=t\\tn\\nr\\rf\\f"),
])
def test_escaping_matches_java(props, line):
    assert _body_lines(format_properties(props, now=FIXED_NOW)) == [line]


# --- java.util.Properties reading rules ----------------------------------------------------


@pytest.mark.parametrize("text,expected", [
    # separators: '=' or ':', with whitespace around them (whitespace alone is refused below)
    ("a=1", {"a": "1"}),
    ("a:1", {"a": "1"}),
    ("a\t=\f1", {"a": "1"}),
    ("a   =   1", {"a": "1"}),
    ("a : 1", {"a": "1"}),
    ("a = = 1", {"a": "= 1"}),  # only the first separator is one
    ("a\\=b=c", {"a=b": "c"}),
    ("a\\ b=c d", {"a b": "c d"}),
    ("a=", {"a": ""}),
    ("   a=1", {"a": "1"}),  # leading whitespace of a line is dropped
    ("a=1   ", {"a": "1   "}),  # trailing whitespace of a value is kept
    ("=v", {"": "v"}),
    # comments and blank lines
    ("# c\n! c\n  # indented\n\n   \n\ta=1", {"a": "1"}),
    ("a=1#not a comment", {"a": "1#not a comment"}),
    # continuation lines: an odd count of trailing backslashes joins the next line, whose
    # leading whitespace is dropped
    ("a=one\\\n    two", {"a": "onetwo"}),
    ("a=one\\\n  two\\\n  three", {"a": "onetwothree"}),
    ("a=one\\\\\nb=2", {"a": "one\\", "b": "2"}),
    ("a=one\\\\\\\n  x", {"a": "one\\x"}),
    ("a=one\\\n# not a comment here", {"a": "one# not a comment here"}),
    ("# comment \\\nb=2", {"b": "2"}),  # a comment never continues
    ("a=x\\", {"a": "x"}),  # continuation at the end of the file
    ("ke\\\n  y=v", {"key": "v"}),
    ("\\\n  #k=v", {"#k": "v"}),  # a line continued from an empty one is no comment
    ("\\\n\nb=2", {"b": "2"}),  # a lone backslash continued by a blank line is nothing
    # line ends
    ("a=1\r\nb=2\rc=3\n", {"a": "1", "b": "2", "c": "3"}),
    # escapes
    ("a=\\t\\n\\r\\f", {"a": "\t\n\r\f"}),
    ("a=\\u00e9\\u00C9", {"a": "éÉ"}),
    ("a=\\ud83d\\ude00", {"a": "😀"}),
    ("a=\\q\\:\\=", {"a": "q:="}),  # an unknown escape is the character itself
])
def test_java_properties_reading_rules(text, expected):
    assert parse_properties(text) == expected


def test_only_cr_and_lf_end_a_line():
    # Python's str.splitlines() would break the line at a form feed; Java keeps it in the value.
    # (The other characters splitlines() breaks at are not text: refused below.)
    assert parse_properties("a=x\fy\nb=2") == {"a": "x\fy", "b": "2"}


# --- what Hudi never writes is refused, with its line ----------------------------------------

# Comments, a blank line, a continued entry and all three of Java's line ends before the line
# under test: its number counts physical lines as Java ends them.
PREFIX_LINES = ["#comment", "hoodie.a=1", "", "  ! other comment", "hoodie.b=x\\", "   continued"]
PREFIX = "".join(line + end for line, end in zip(PREFIX_LINES, ["\r\n", "\n", "\n", "\r", "\n", "\n"]))
BAD_LINE = len(PREFIX_LINES) + 1
SOURCE = "some/.hoodie/hoodie.properties"


def _refused(data: bytes | str) -> str:
    with pytest.raises(CorruptFileError) as e:
        parse_properties(data, path=SOURCE)
    assert e.value.path == SOURCE
    message = str(e.value)
    assert message.startswith(f"{SOURCE}: line {BAD_LINE}"), message
    assert "\nHelp: " in message
    return message


@pytest.mark.parametrize("bad,says", [
    ("garbage", "no '=' or ':'"),
    # Java reads these as hoodie.c=value and hoodie.c=value=x; hudi-rs, which splits at '=' only,
    # as "hoodie.c value" (empty) and "hoodie.c\tvalue"=x.
    ("hoodie.c value", "whitespace only"),
    ("hoodie.c\tvalue=x", "whitespace only"),
    ("hoodie.c=\\u12G4", "malformed escape"),
    ("hoodie.c=\\u00e", "malformed escape"),
    ("hoodie.c=\\u+0e9", "malformed escape"),  # int(s, 16) would take these two
    ("hoodie.c=\\u0_e9", "malformed escape"),
    ("hoodie.\\u004=c", "malformed escape"),
    ("hoodie.a=2", "again"),
    ("hoodie.\\a=2", "again"),  # the same key once unescaped
    ("hoodie.a : 2", "again"),
    ("hoodie.b=y", "again"),  # set by a continued entry
])
def test_a_line_hudi_never_writes_is_refused(bad, says):
    assert says in _refused(PREFIX + bad + "\nhoodie.z=1\n")


@pytest.mark.parametrize("key", ["hoodie.a", "hoodie.b"])
def test_a_key_twice_names_both_lines_and_values(key):
    first = next(i for i, line in enumerate(PREFIX_LINES, 1) if line.startswith(key + "="))
    before = parse_properties(PREFIX)[key]
    message = _refused(PREFIX + f"{key}=other\n")
    assert f"key {key!r}" in message
    assert f"line {first} sets it to {before!r}, line {BAD_LINE} to 'other'" in message


def _is_text(byte: int) -> bool:
    return chr(byte).isascii() and (chr(byte).isprintable() or chr(byte) in "\t\n\r\f")


@pytest.mark.parametrize("byte", range(256))
def test_every_byte_that_is_not_ascii_text_is_refused_even_in_a_comment(byte):
    line = b"# a comment "
    # What follows is a comment too if the byte ends the line.
    data = PREFIX.encode() + line + bytes([byte]) + b"#more\nhoodie.z=1\n"
    if _is_text(byte):
        assert parse_properties(data, path=SOURCE)["hoodie.z"] == "1"
        return
    message = _refused(data)
    assert f"line {BAD_LINE}, column {len(line) + 1}: " in message
    assert f"byte 0x{byte:02X}" in message


@pytest.mark.parametrize("bad", [b"hoodie.c=v\x00", b"hoodie.c\x01=v", b"hoodie.c=caf\xc3\xa9",
                                 b"hoodie.c=\xff", b"hoodie.c=a\x7fb", b"\x1bhoodie.c=v"])
def test_a_key_or_value_that_is_not_text_is_refused(bad):
    assert "not text" in _refused(PREFIX.encode() + bad + b"\n")


@pytest.mark.parametrize("char", ["\x0b", "\x1c", "\x85", "\u2028", "\u2029", "é"])
def test_text_given_as_str_names_the_character(char):
    # Python's str.splitlines() would break the line at most of these; Java would not.
    assert f"U+{ord(char):04X}" in _refused(PREFIX + f"hoodie.c=x{char}y\nb=2")


# --- the fixture files ---------------------------------------------------------------------


def _fixture_properties(fixture_tables):
    out = {}
    for name, root in fixture_tables.items():
        p = root / ".hoodie" / "hoodie.properties"
        if p.exists():
            out[name] = p
    assert out
    return out


@pytest.mark.interop
def test_fixture_hoodie_properties_parse(fixture_tables):
    for name, path in _fixture_properties(fixture_tables).items():
        raw = path.read_text("latin-1")
        props = parse_properties(raw)
        # Every non-comment line gave one entry (no key repeats in Hudi's files).
        assert len(props) == len(_body_lines(raw.replace("\r", ""))), name
        assert props["hoodie.table.name"] == path.parent.parent.name, name
        assert props["hoodie.table.type"] in ("COPY_ON_WRITE", "MERGE_ON_READ"), name
        assert all("\\" not in k for k in props), name


@pytest.mark.interop
def test_fixture_create_schema_is_json_after_unescaping(fixture_tables):
    checked = 0
    for name, path in _fixture_properties(fixture_tables).items():
        raw = path.read_text("latin-1")
        props = parse_properties(raw)
        schema = props.get("hoodie.table.create.schema")
        if schema is None:
            continue
        assert '"type"\\:"record"' in raw  # the file really holds escaped colons
        parsed = json.loads(schema)
        table = props["hoodie.table.name"]
        assert parsed["type"] == "record"
        assert parsed["name"] == f"{table}_record"
        assert parsed["namespace"] == f"hoodie.{table}"
        assert [f["name"] for f in parsed["fields"]][:1] in (["id"], ["ts"]), name
        checked += 1
    assert checked >= 10


@pytest.mark.interop
def test_fixture_timestamp_formats_unescape(fixture_tables):
    props = parse_properties((fixture_tables["sample_table/cow/v6_timebasedkeygen_nonhivestyle"]
                              / ".hoodie" / "hoodie.properties").read_text("latin-1"))
    assert props["hoodie.keygen.timebased.input.dateformat"] == "yyyy-MM-dd'T'HH:mm:ss.SSSZ"
    assert props["hoodie.keygen.timebased.output.dateformat"] == "yyyy/MM/dd/HH"


@pytest.mark.interop
def test_fixture_partition_metadata(fixture_tables):
    checked = 0
    for name, root in fixture_tables.items():
        if "/v6_" not in name:
            continue
        for meta in root.rglob(".hoodie_partition_metadata"):
            props = parse_properties(meta.read_text("latin-1"))
            partition = meta.parent.relative_to(root).as_posix()
            depth = 0 if partition == "." else partition.count("/") + 1
            assert props["partitionDepth"] == str(depth), meta
            assert len(props["commitTime"]) == 17 and props["commitTime"].isdigit(), meta
            checked += 1
    assert checked >= 20


@pytest.mark.interop
def test_fixture_properties_round_trip_through_our_writer(fixture_tables):
    for name, path in _fixture_properties(fixture_tables).items():
        props = parse_properties(path.read_text("latin-1"))
        assert parse_properties(format_properties(props)) == props, name


@pytest.mark.interop
def test_every_properties_file_hudi_wrote_parses_strictly(fixture_tables):
    """hoodie.properties (of the tables and of their metadata tables, v6 and v8) and
    .hoodie_partition_metadata: the strict reader takes every file Apache Hudi wrote."""
    tables = files = 0
    for name, root in fixture_tables.items():
        for path in [*root.rglob("hoodie.properties"), *root.rglob(".hoodie_partition_metadata")]:
            props = parse_properties(path.read_bytes(), path=str(path))
            assert props, path
            files += 1
        props = parse_properties((root / HOODIE_PROPERTIES).read_bytes())
        if props["hoodie.table.version"] == "6":
            config = read_table_config(get_storage(str(root)))
            assert config.name == props["hoodie.table.name"], name
            tables += 1
    assert tables and files > tables


# --- damaged hoodie.properties of a table ----------------------------------------------------

def _batch(ids, ts=1) -> pa.Table:
    ids = list(ids)
    return pa.table({"id": [f"k{i:04d}" for i in ids], "city": [["sf", "la"][i % 2] for i in ids],
                     "ts": [ts] * len(ids), "v": [i * 10 + ts for i in ids]})


def _parquet(batch: pa.Table) -> bytes:
    out = io.BytesIO()
    pq.write_table(batch, out)
    return out.getvalue()


def _line_of(data: bytes, needle: bytes) -> int:
    return data[:data.index(needle)].count(b"\n") + 1


def _appended(extra: bytes, says: str):
    def damage(original: bytes):
        assert original.endswith(b"\n")
        return original + extra, original.count(b"\n") + 1, says
    return damage


def _binary_tail(original: bytes):
    tail = _parquet(_batch(range(5)))
    first_line = re.split(rb"\r|\n", tail)[0].decode("latin-1")
    assert not first_line.isprintable()  # the damage starts on the first appended line
    return original + tail, original.count(b"\n") + 1, "not text"


def _nul_in_the_table_type(original: bytes):
    line = b"hoodie.table.type=MERGE_ON_READ"
    return (original.replace(line, line.replace(b"_ON_", b"_ON\x00")), _line_of(original, line),
            "NUL byte 0x00")


DAMAGES = {
    "binary bytes appended": _binary_tail,
    "a second table type": _appended(b"hoodie.table.type=COPY_ON_WRITE\n", "'hoodie.table.type' again"),
    "a garbage line": _appended(b"garbage\n", "is not key=value"),
    "a malformed escape": _appended(b"hoodie.table.comment=caf\\u00e\n", "malformed escape"),
    "a non-ASCII byte": _appended("hoodie.table.comment=café\n".encode(),
                                  f"non-ASCII byte 0x{'é'.encode()[0]:02X}"),
    "a NUL": _nul_in_the_table_type,
}


def _mor_table(tmp_path, *, writes: int = 2, options=None):
    """A Merge-On-Read table after ``writes`` upserts (log files: what a wrong table type would
    lose), and its hoodie.properties as lakehouse wrote it."""
    path = tmp_path / "t"
    t = lakehouse.create_table(str(path), name="t", table_type="MERGE_ON_READ", record_key="id",
                               partition_by="city", ordering_field="ts", options=options)
    for ts in range(1, writes + 1):
        t.upsert(_batch(range(20), ts=ts))
    assert lakehouse.open_table(str(path)).config.is_mor  # what lakehouse writes, it reads
    return path, t


def _damage(path, damage: str) -> tuple[int, str]:
    f = path / ".hoodie" / "hoodie.properties"
    damaged, line, says = DAMAGES[damage](f.read_bytes())
    f.write_bytes(damaged)
    return line, says


def _snapshot(root) -> dict[str, bytes | None]:
    """Every file and folder of the table but the table lock's lease records, which whoever takes
    the lock leaves behind (a write takes it before it reads hoodie.properties again), once the
    Iceberg publishing of earlier commits (in the background) is done."""
    background.wait_all()
    return {p.relative_to(root).as_posix(): p.read_bytes() if p.is_file() else None
            for p in root.rglob("*") if LOCK_DIR not in p.relative_to(root).as_posix()}


def _open_error(path) -> CorruptFileError:
    with pytest.raises(CorruptFileError) as e:
        lakehouse.open_table(str(path))
    return e.value


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_hoodie_properties_is_refused_naming_the_file_and_line(tmp_path, damage):
    path, _ = _mor_table(tmp_path)
    line, says = _damage(path, damage)
    error = _open_error(path)
    assert error.path.endswith((path / ".hoodie" / "hoodie.properties").as_posix())
    message = str(error)
    assert message.startswith(f"{error.path}: line {line}"), message
    assert says in message and "\nHelp: " in message


def _reopened(tmp_path):
    path, _ = _mor_table(tmp_path)
    return path, lambda: lakehouse.open_table(str(path)).upsert(_batch(range(10, 30), ts=9))


def _held_before_its_first_write(tmp_path):
    # The first write reads hoodie.properties again to fix the bucket count.
    path, t = _mor_table(tmp_path, writes=0)
    return path, lambda: t.upsert(_batch(range(10, 30), ts=9))


def _held_by_one_of_several_writers(tmp_path):
    # With several writers, every write of a bucket-index table reads hoodie.properties again.
    path, t = _mor_table(tmp_path, options={
        "hoodie.write.concurrency.mode": "OPTIMISTIC_CONCURRENCY_CONTROL"})
    return path, lambda: t.upsert(_batch(range(10, 30), ts=9))


@pytest.mark.parametrize("writer", [_reopened, _held_before_its_first_write, _held_by_one_of_several_writers],
                         ids=lambda f: f.__name__.strip("_").replace("_", " "))
@pytest.mark.parametrize("damage", DAMAGES)
def test_a_write_to_a_damaged_table_fails_alike_and_changes_no_file(tmp_path, damage, writer):
    path, write = writer(tmp_path)
    _damage(path, damage)
    before = _snapshot(path)
    expected = str(_open_error(path))
    with pytest.raises(CorruptFileError) as e:
        write()
    assert str(e.value) == expected
    assert _snapshot(path) == before


# --- rewriting hoodie.properties ---------------------------------------------------------------

def _cow_table(tmp_path):
    path = tmp_path / "c"
    lakehouse.create_table(str(path), name="c", table_type="COPY_ON_WRITE", record_key="id",
                           partition_by="city", ordering_field="ts")
    storage = get_storage(str(path))
    return path / ".hoodie" / "hoodie.properties", storage, read_table_config(storage)


FIXED_CHANGES = {
    "hoodie.table.name": lambda c: c.replace(name="other"),
    "hoodie.database.name": lambda c: c.replace(database_name="other"),
    "hoodie.table.type": lambda c: c.replace(table_type=TableType.MERGE_ON_READ),
    "hoodie.table.version": lambda c: c.replace(version=5),
    "hoodie.table.recordkey.fields": lambda c: c.replace(record_key_fields=("id", "v")),
    "hoodie.table.partition.fields": lambda c: c.replace(partition_fields=()),
    "hoodie.table.keygenerator.class": lambda c: c.replace(
        key_generator_class=KeyGeneratorType.COMPLEX.java_class),
    "hoodie.table.keygenerator.type": lambda c: c.replace(
        extra={**c.extra, "hoodie.table.keygenerator.type": "COMPLEX"}),
    "hoodie.table.precombine.field": lambda c: c.replace(ordering_field=None),
}


def test_every_fixed_key_has_a_change_below():
    assert set(FIXED_CHANGES) == set(FIXED_KEYS)


@pytest.mark.parametrize("key", FIXED_CHANGES)
@pytest.mark.parametrize("may_change", [(), ("hoodie.bucket.index.num.buckets",)])
def test_a_rewrite_cannot_change_a_fixed_key(tmp_path, key, may_change):
    f, storage, config = _cow_table(tmp_path)
    before = f.read_bytes()
    with pytest.raises(ConfigError) as e:
        rewrite_table_config(storage, FIXED_CHANGES[key](config), may_change=may_change)
    # Told why: not "another program changed the file", which the help would then suggest.
    assert key in str(e.value) and "fixed when it is created" in str(e.value)
    assert "\nHelp: create a new table" in str(e.value)
    assert f.read_bytes() == before


def test_a_rewrite_cannot_be_allowed_to_change_a_fixed_key(tmp_path):
    f, storage, config = _cow_table(tmp_path)
    before = f.read_bytes()
    with pytest.raises(ConfigError, match="hoodie.table.type"):
        rewrite_table_config(storage, config.replace(table_type=TableType.MERGE_ON_READ),
                             may_change=("hoodie.table.type",))
    assert f.read_bytes() == before


def test_a_rewrite_changes_what_it_may_change_and_nothing_else(tmp_path):
    f, storage, config = _cow_table(tmp_path)
    before = f.read_bytes()
    count = config.bucket_num + 1
    with pytest.raises(ConfigError, match="hoodie.bucket.index.num.buckets"):
        rewrite_table_config(storage, config.replace(bucket_num=count), may_change=())
    assert f.read_bytes() == before
    rewrite_table_config(storage, config.replace(bucket_num=count),
                         may_change=("hoodie.bucket.index.num.buckets",))
    old, new = parse_properties(before), parse_properties(f.read_bytes())
    assert {k for k in old.keys() | new.keys() if old.get(k) != new.get(k)} == {
        "hoodie.bucket.index.num.buckets"}
    assert read_table_config(storage) == config.replace(bucket_num=count)


def test_the_bucket_count_fix_is_a_rewrite_that_may_change_it(tmp_path):
    """What lakehouse.write.bucket_sizing does with a new table's provisional count."""
    path, _ = _mor_table(tmp_path, writes=0)
    storage = get_storage(str(path))
    stored = read_table_config(storage)
    assert stored.extra.get(AUTO_KEY) == "true"
    fixed = stored.replace(bucket_num=stored.bucket_num + 3,
                           extra={k: v for k, v in stored.extra.items() if k != AUTO_KEY})
    rewrite_table_config(storage, fixed, may_change=("hoodie.bucket.index.num.buckets", AUTO_KEY))
    assert read_table_config(storage) == fixed


def test_a_rewrite_does_not_drop_what_another_program_wrote_meanwhile(tmp_path):
    f, storage, config = _cow_table(tmp_path)
    f.write_bytes(f.read_bytes() + b"hoodie.table.metadata.partitions=files\n")
    before = f.read_bytes()
    with pytest.raises(ConfigError, match="hoodie.table.metadata.partitions"):
        rewrite_table_config(storage, config.replace(bucket_num=config.bucket_num + 1),
                             may_change=("hoodie.bucket.index.num.buckets",))
    assert f.read_bytes() == before


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_rewrite_of_a_damaged_file_is_refused(tmp_path, damage):
    path, _ = _mor_table(tmp_path, writes=0)
    storage = get_storage(str(path))
    config = read_table_config(storage)
    line, _ = _damage(path, damage)
    before = _snapshot(path)
    with pytest.raises(CorruptFileError, match=f": line {line}"):
        rewrite_table_config(storage, config.replace(bucket_num=config.bucket_num + 1),
                             may_change=("hoodie.bucket.index.num.buckets",))
    assert _snapshot(path) == before


@pytest.mark.interop
def test_a_rewrite_of_a_file_hudi_wrote_changes_nothing_by_itself(fixture_tables, tmp_path):
    """TableConfig's defaults (keys Hudi left out) are no change: only what differs in meaning is."""
    checked = 0
    for name, root in fixture_tables.items():
        data = (root / HOODIE_PROPERTIES).read_bytes()
        if parse_properties(data)["hoodie.table.version"] != "6":
            continue
        copy = tmp_path / name
        (copy / ".hoodie").mkdir(parents=True)
        (copy / HOODIE_PROPERTIES).write_bytes(data)
        storage = get_storage(str(copy))
        config = read_table_config(storage)
        rewrite_table_config(storage, config, may_change=())
        assert read_table_config(storage).to_properties() == config.to_properties(), name
        checked += 1
    assert checked
