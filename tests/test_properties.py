"""Java ``.properties`` files: what ``java.util.Properties`` reads and writes, checked on hand-made
text with known Java meaning and on the ``hoodie.properties`` files Apache Hudi wrote."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakehouse.properties import format_properties, parse_properties

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
@given(st.dictionaries(st.text(), st.text(), max_size=6))
def test_any_unicode_round_trips(props):
    text = format_properties(props, comment="c", now=FIXED_NOW)
    assert parse_properties(text) == props
    # What Java's store(OutputStream) writes is pure ASCII: everything else is \\uXXXX.
    assert text.isascii()


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
    # separators: '=', ':', whitespace, and whitespace around them
    ("a=1", {"a": "1"}),
    ("a:1", {"a": "1"}),
    ("a 1", {"a": "1"}),
    ("a\t1", {"a": "1"}),
    ("a   =   1", {"a": "1"}),
    ("a : 1", {"a": "1"}),
    ("a = = 1", {"a": "= 1"}),  # only the first separator is one
    ("a\\=b=c", {"a=b": "c"}),
    ("a\\ b c", {"a b": "c"}),
    ("a", {"a": ""}),
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
    # line ends
    ("a=1\r\nb=2\rc=3\n", {"a": "1", "b": "2", "c": "3"}),
    # escapes
    ("a=\\t\\n\\r\\f", {"a": "\t\n\r\f"}),
    ("a=\\u00e9\\u00C9", {"a": "éÉ"}),
    ("a=\\ud83d\\ude00", {"a": "😀"}),
    ("a=\\q\\:\\=", {"a": "q:="}),  # an unknown escape is the character itself
    # later duplicates win
    ("a=1\na=2", {"a": "2"}),
])
def test_java_properties_reading_rules(text, expected):
    assert parse_properties(text) == expected


@pytest.mark.parametrize("sep", ["\f", "\x0b", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"])
def test_only_cr_and_lf_end_a_line(sep):
    # Python's str.splitlines() would break the line at these; Java keeps them in the value.
    assert parse_properties(f"a=x{sep}y\nb=2") == {"a": f"x{sep}y", "b": "2"}


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
