"""lakehouse.partition_path: which partition values a key generator turns into folders, which it
refuses (naming the value, its column and its first row), and the one-depth rule of a table."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakehouse.config import KeyGeneratorType, TableConfig
from lakehouse.errors import PartitionPathError, RecordKeyError
from lakehouse.keygen import KeyGenerator
from lakehouse.partition_path import MAX_PATH_BYTES, check_paths

# The values issue 37 found writing outside the table, into .hoodie, or where readers lose rows.
HOSTILE = ["../x", "../../escaped", ".hoodie", ".", "..", "/abs", "a/", "a//b", "a\nb", "x\x00y",
           "tab\there", "del\x7f", "c1\x85", "y" * 300]


def cfg(**kw) -> TableConfig:
    base = dict(name="t", record_key_fields=("id",), partition_fields=("p",))
    base.update(kw)
    return TableConfig(**base)


def paths(config: TableConfig, values: list, **kw) -> list[str]:
    cols = {"id": [str(i) for i in range(len(values))]}
    for f in config.partition_fields:
        cols[f] = values if f == config.partition_fields[0] else ["z"] * len(values)
    return KeyGenerator(config).partition_paths(pa.table(cols), **kw).to_pylist()


DOT_NAMES = ["..", ".", ".hoodie"]  # behind a hive-style 'p=' these are ordinary folder names


@pytest.mark.parametrize("value,hive", [(v, False) for v in HOSTILE]
                         + [(v, True) for v in HOSTILE if v not in DOT_NAMES])
def test_a_hostile_value_is_refused_naming_value_column_and_row(value, hive):
    with pytest.raises(PartitionPathError) as info:
        paths(cfg(hive_style_partitioning=hive), ["ok", "fine", value, value], row_offset=100)
    e = info.value
    assert isinstance(e, RecordKeyError)  # what callers catching bad keys already catch
    assert e.value == value and e.row == 102, (e.value, e.row)
    assert "'p'" in e.message and "(row 102)" in e.message and repr(value)[:50] in e.message
    assert "urlencode" in e.help


@pytest.mark.parametrize("value", DOT_NAMES)
def test_behind_a_hive_prefix_dot_names_are_ordinary_folders(value):
    assert paths(cfg(hive_style_partitioning=True), [value]) == [f"p={value}"]


def test_a_spark_batch_names_the_value_but_no_row():
    with pytest.raises(PartitionPathError) as info:
        paths(cfg(), ["ok", "../x"], row_offset=None)
    assert info.value.row is None and "row" not in info.value.message and "'../x'" in info.value.message


@pytest.mark.parametrize("value,encoded", [("a/b", "a%2Fb"), ("a\nb", "a%0Ab"), ("x\x00y", "x%00y"),
                                           ("/abs", "%2Fabs"), ("../x", "..%2Fx")])
def test_url_encoding_makes_slashes_and_control_characters_one_folder(value, encoded):
    assert paths(cfg(url_encode_partitions=True), [value]) == [encoded]


@pytest.mark.parametrize("value", ["..", ".", ".hoodie", "y" * 300])
def test_url_encoding_does_not_make_dot_names_or_long_names_safe(value):
    with pytest.raises(PartitionPathError, match="url-encoded"):
        paths(cfg(url_encode_partitions=True), [value])


def test_a_slash_nests_folders_only_in_a_single_plain_field():
    # Hudi's quickstart partitions by region/country/city in one field.
    assert paths(cfg(), ["americas/brazil/sao_paulo"]) == ["americas/brazil/sao_paulo"]
    with pytest.raises(PartitionPathError, match="not this field's"):
        paths(cfg(hive_style_partitioning=True), ["americas/brazil"])
    with pytest.raises(PartitionPathError, match="not this field's"):
        paths(cfg(partition_fields=("p", "q"), key_generator_class=KeyGeneratorType.COMPLEX.java_class), ["a/b"])
    assert paths(cfg(partition_fields=("p", "q"), key_generator_class=KeyGeneratorType.COMPLEX.java_class,
                     hive_style_partitioning=True), ["a"]) == ["p=a/q=z"]


def test_a_timestamp_output_format_nests_folders_on_purpose():
    c = cfg(key_generator_class=KeyGeneratorType.TIMESTAMP.java_class, timestamp_type="EPOCHMILLISECONDS",
            timestamp_output_format="yyyy/MM/dd")
    assert paths(c, [86_400_000]) == ["1970/01/02"]
    # A format's quoted text is data like any value: it cannot climb out either.
    c = cfg(key_generator_class=KeyGeneratorType.TIMESTAMP.java_class, timestamp_type="EPOCHMILLISECONDS",
            timestamp_output_format="'..'/yyyy")
    with pytest.raises(PartitionPathError, match="'..'"):
        paths(c, [0])


def test_nulls_and_empty_values_still_go_to_the_default_partition():
    assert paths(cfg(), [None, "", "x"]) == ["__HIVE_DEFAULT_PARTITION__", "__HIVE_DEFAULT_PARTITION__", "x"]


def test_the_first_offending_row_is_named_whatever_the_distinct_order():
    values = ["ok"] * 5 + ["a\nb", "../x", "a\nb"]
    with pytest.raises(PartitionPathError) as info:
        paths(cfg(), values)
    assert (info.value.value, info.value.row) == ("a\nb", 5)


def test_unicode_names_are_kept_as_they_are():
    values = ["é", "日本", "a b", " lead", "trail ", "%2F", "a=b", "\\", "#?*", "\u2028", "\ufeff", "..a", "a.."]
    assert paths(cfg(), values) == values


def test_every_partition_path_of_a_table_has_one_depth():
    def check(values, depth=None, offset=0):
        return check_paths(pa.chunked_array([pa.array(values, pa.string())]), depth=depth, row_offset=offset)

    assert check(["a/b", "c/d"]) == 2 and check(["a/b"], depth=2) == 2
    assert check([""] * 3) is None and check([]) is None
    with pytest.raises(PartitionPathError) as info:
        check(["a", "b", "a/b"], offset=10)
    assert (info.value.value, info.value.row) == ("a/b", 12)
    with pytest.raises(PartitionPathError, match="2 deep"):
        check(["x"], depth=2)
    with pytest.raises(PartitionPathError, match=f"at most {MAX_PATH_BYTES} bytes"):
        check(["/".join(["y" * 200] * 3)])
