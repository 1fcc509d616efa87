"""Record keys and partition paths: equal to what Apache Hudi wrote into the fixtures'
``_hoodie_record_key`` / ``_hoodie_partition_path`` columns, and to Hudi's rules (KeyGenUtils,
PartitionPathEncodeUtils, TimestampBasedAvroKeyGenerator) on the cases the fixtures lack."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakehouse.config import KeyGeneratorType, TableConfig
from lakehouse.errors import ConfigError, RecordKeyError
from lakehouse.properties import parse_properties
from lakehouse.keygen import DEFAULT_PARTITION, KeyGenerator, escape_path_name

K = KeyGeneratorType


def cfg(**kw) -> TableConfig:
    base = dict(name="t", record_key_fields=("id",), partition_fields=("p",))
    base.update(kw)
    return TableConfig(**base)


def paths(config: TableConfig, **cols) -> list[str]:
    return KeyGenerator(config).partition_paths(pa.table(cols)).to_pylist()


def keys(config: TableConfig, **cols) -> list[str]:
    return KeyGenerator(config).record_keys(pa.table(cols)).to_pylist()


# --- the fixtures --------------------------------------------------------------------------


@pytest.mark.interop
def test_keys_and_paths_equal_what_hudi_wrote(fixture_tables):
    tables = rows = 0
    for name, root in fixture_tables.items():
        if not name.rsplit("/", 1)[-1].startswith("v6_"):
            continue
        config = TableConfig.from_properties(parse_properties(
            (root / ".hoodie" / "hoodie.properties").read_text("latin-1")))
        files = sorted(root.rglob("*.parquet"))
        if not config.populate_meta_fields or not files:
            continue
        kg = KeyGenerator(config)
        for f in files:
            data = pq.read_table(f)
            where = f.relative_to(root)
            assert kg.record_keys(data).to_pylist() == data.column("_hoodie_record_key").to_pylist(), where
            assert kg.partition_paths(data).to_pylist() == \
                data.column("_hoodie_partition_path").to_pylist(), where
            # And the file sits in the folder its partition path names.
            assert {f.parent.relative_to(root).as_posix().replace(".", "")} == \
                set(data.column("_hoodie_partition_path").to_pylist()), where
            rows += data.num_rows
        tables += 1
    assert tables >= 11 and rows >= 40


# --- simple ---------------------------------------------------------------------------------


def test_simple_keys_of_any_type_are_strings():
    assert keys(cfg(), id=pa.array([1, -2], pa.int8()), p=["a", "b"]) == ["1", "-2"]
    assert keys(cfg(), id=pa.array([2**40], pa.int64()), p=["a"]) == [str(2**40)]
    assert keys(cfg(), id=[True, False], p=["a", "b"]) == ["true", "false"]
    assert keys(cfg(), id=pa.array(["x", "y"], pa.large_string()), p=["a", "b"]) == ["x", "y"]
    assert keys(cfg(), id=pa.array(["x", "y", "x"]).dictionary_encode(), p=["a"] * 3) == ["x", "y", "x"]
    chunked = pa.chunked_array([["a", "b"], ["c"]])
    assert KeyGenerator(cfg()).record_keys(pa.table({"id": chunked, "p": ["1", "2", "3"]})).to_pylist() == \
        ["a", "b", "c"]


@pytest.mark.parametrize("bad", [[None, "x"], ["", "x"]])
def test_simple_null_or_empty_key_is_refused(bad):
    with pytest.raises(RecordKeyError) as err:
        keys(cfg(), id=pa.array(bad, pa.string()), p=["a", "b"])
    assert "Help:" in str(err.value)


def test_an_empty_key_is_found_in_any_chunk_or_slice():
    # Empty values are found from the Arrow offsets: a later chunk, an array's slice, and a
    # null value (whose slot is also zero bytes long) must each be told apart correctly.
    def table(col):
        return pa.table({"id": col, "p": ["a"] * len(col)})
    gen = KeyGenerator(cfg())
    with pytest.raises(RecordKeyError, match="empty"):
        gen.record_keys(table(pa.chunked_array([["a", "b"], ["c", ""]])))
    with pytest.raises(RecordKeyError, match="empty"):
        gen.record_keys(table(pa.array(["a", "", "c"]).slice(1)))
    assert gen.record_keys(table(pa.array(["", "b", "c"]).slice(1))).to_pylist() == ["b", "c"]
    assert gen.partition_paths(pa.table({"id": ["1"], "p": pa.array(["", "x"]).slice(1)})
                               ).to_pylist() == ["x"]
    assert gen.partition_paths(pa.table({"id": ["1", "2", "3"], "p": pa.chunked_array([["x"], ["y", ""]])})
                               ).to_pylist() == ["x", "y", DEFAULT_PARTITION]


def test_missing_columns_are_refused():
    with pytest.raises(RecordKeyError, match="'id'"):
        keys(cfg(), other=["1"], p=["a"])
    with pytest.raises(RecordKeyError, match="'p'"):
        paths(cfg(), id=["1"])


def test_simple_partition_paths():
    assert paths(cfg(), id=["1", "2"], p=["a", "b"]) == ["a", "b"]
    assert paths(cfg(hive_style_partitioning=True), id=["1"], p=["a"]) == ["p=a"]
    assert paths(cfg(), id=["1", "2"], p=pa.array([10, 20], pa.int16())) == ["10", "20"]


def test_null_and_empty_partition_values_go_to_the_default_partition():
    assert paths(cfg(), id=["1", "2", "3"], p=pa.array([None, "", "x"])) == [
        DEFAULT_PARTITION, DEFAULT_PARTITION, "x"]
    assert DEFAULT_PARTITION == "__HIVE_DEFAULT_PARTITION__"
    assert paths(cfg(hive_style_partitioning=True), id=["1"], p=pa.array([None], pa.string())) == [
        f"p={DEFAULT_PARTITION}"]
    assert paths(cfg(url_encode_partitions=True), id=["1"], p=pa.array([None], pa.string())) == [
        DEFAULT_PARTITION]


# Hive's escapePathName, which Hudi applies with partitionpath.urlencode=true: only control
# characters and  " # % ' * / : = ? \ DEL { [ ] ^  become %XX (upper-case hex); spaces, '+', ','
# '&', '}', '~' and all non-ASCII characters stay as they are.
@pytest.mark.parametrize("value,encoded", [
    ("a b", "a b"), ("x/y:z", "x%2Fy%3Az"), ("é,+&~!@$()}", "é,+&~!@$()}"), ("100%", "100%25"),
    ("a=b", "a%3Db"), ("q?", "q%3F"), ("#'\"*", "%23%27%22%2A"), ("\\", "%5C"),
    ("{[]^", "%7B%5B%5D%5E"), ("\x7f\n\x00\x1f", "%7F%0A%00%1F"), ("😀 日本", "😀 日本"),
    ("2024-01-02 03:04:05", "2024-01-02 03%3A04%3A05"),
])
def test_url_encoding_is_hives_escape_path_name(value, encoded):
    assert escape_path_name(value) == encoded
    assert paths(cfg(url_encode_partitions=True), id=["1"], p=[value]) == [encoded]
    assert paths(cfg(url_encode_partitions=True, hive_style_partitioning=True), id=["1"], p=[value]) == \
        [f"p={encoded}"]


# --- complex ------------------------------------------------------------------------------


def complex_cfg(**kw) -> TableConfig:
    return cfg(key_generator_class=K.COMPLEX.java_class, record_key_fields=("id", "name"),
               partition_fields=("a", "b"), **kw)


def test_complex_keys_and_paths():
    c = complex_cfg()
    assert keys(c, id=[1, 2], name=["x", "y"], a=["1", "2"], b=["3", "4"]) == ["id:1,name:x", "id:2,name:y"]
    assert paths(c, id=[1], name=["x"], a=[10], b=[300]) == ["10/300"]
    assert paths(complex_cfg(hive_style_partitioning=True), id=[1], name=["x"], a=[10], b=[300]) == \
        ["a=10/b=300"]
    assert paths(c, id=[1], name=["x"], a=pa.array([None], pa.int8()), b=[""]) == [
        f"{DEFAULT_PARTITION}/{DEFAULT_PARTITION}"]


def test_complex_null_and_empty_parts_use_placeholders():
    c = complex_cfg()
    got = keys(c, id=pa.array([None, 1, 2], pa.int32()), name=["x", None, ""], a=["1"] * 3, b=["2"] * 3)
    assert got == ["id:__null__,name:x", "id:1,name:__null__", "id:2,name:__empty__"]


@pytest.mark.parametrize("ids,names", [([None], [None]), ([None], [""]), ([""], [""])])
def test_complex_key_entirely_null_or_empty_is_refused(ids, names):
    # Hudi: "recordKey values ... cannot be entirely null or empty".
    with pytest.raises(RecordKeyError) as err:
        keys(complex_cfg(), id=pa.array(ids, pa.string()), name=pa.array(names, pa.string()),
             a=["1"], b=["2"])
    assert "Help:" in str(err.value)


def test_complex_key_generator_with_one_field_keeps_the_field_name():
    c = cfg(key_generator_class=K.COMPLEX.java_class)
    assert keys(c, id=[7], p=["a"]) == ["id:7"]


# --- non-partitioned -----------------------------------------------------------------------


def test_non_partitioned():
    c = cfg(key_generator_class=K.NON_PARTITION.java_class, partition_fields=())
    assert paths(c, id=["1", "2"]) == ["", ""]
    assert keys(c, id=["1", "2"]) == ["1", "2"]
    assert KeyGenerator(c).partition_paths(pa.table({"id": pa.array([], pa.string())})).to_pylist() == []
    two = cfg(key_generator_class=K.NON_PARTITION.java_class, partition_fields=(),
              record_key_fields=("id", "v"))
    assert keys(two, id=["1"], v=["x"]) == ["id:1,v:x"]


def test_key_generator_needs_a_record_key():
    with pytest.raises(ConfigError):
        KeyGenerator(cfg(record_key_fields=()))


def test_required_columns():
    assert KeyGenerator(complex_cfg()).required_columns() == ["id", "name", "a", "b"]
    assert KeyGenerator(cfg(record_key_fields=("p",))).required_columns() == ["p"]


# --- timestamp-based -----------------------------------------------------------------------


def ts_cfg(**kw) -> TableConfig:
    return cfg(key_generator_class=K.TIMESTAMP.java_class, **kw)


def test_date_string_as_in_the_fixture():
    c = ts_cfg(timestamp_input_format="yyyy-MM-dd'T'HH:mm:ss.SSSZ", timestamp_output_format="yyyy/MM/dd/HH")
    assert paths(c, id=["1", "2"], p=["2023-04-01T12:01:00.123Z", "2023-04-04T13:01:00.123+0200"]) == [
        "2023/04/01/12", "2023/04/04/11"]


def test_epoch_types():
    out = dict(timestamp_output_format="yyyy-MM-dd HH:mm:ss")
    assert paths(ts_cfg(timestamp_type="EPOCHMILLISECONDS", **out), id=["1"], p=[1_700_000_000_123]) == [
        "2023-11-14 22:13:20"]
    assert paths(ts_cfg(timestamp_type="UNIX_TIMESTAMP", **out), id=["1"], p=[1_700_000_000]) == [
        "2023-11-14 22:13:20"]
    # SCALAR counts in hoodie.keygen.timebased.timestamp.scalar.time.unit, SECONDS by default.
    assert paths(ts_cfg(timestamp_type="SCALAR", **out), id=["1"], p=[86_400]) == ["1970-01-02 00:00:00"]


def test_output_milliseconds_are_three_digits():
    c = ts_cfg(timestamp_type="EPOCHMILLISECONDS", timestamp_output_format="yyyyMMddHHmmssSSS")
    assert paths(c, id=["1", "2"], p=[1234, 1_700_000_000_007]) == ["19700101000001234", "20231114221320007"]


def test_output_timezone():
    c = ts_cfg(timestamp_type="EPOCHMILLISECONDS", timestamp_output_format="yyyy/MM/dd/HH",
               timestamp_timezone="Asia/Tokyo")
    assert paths(c, id=["1"], p=[0]) == ["1970/01/01/09"]


def test_quoted_literals_in_the_output_format():
    c = ts_cfg(timestamp_type="EPOCHMILLISECONDS", timestamp_output_format="'year='yyyy'/month='MM")
    assert paths(c, id=["1"], p=[0]) == ["year=1970/month=01"]


def test_null_timestamp_is_the_epoch_not_the_default_partition():
    # TimestampBasedAvroKeyGenerator replaces a null with 1 (in the type's unit).
    out = dict(timestamp_output_format="yyyy/MM/dd/HH")
    c = ts_cfg(timestamp_input_format="yyyy-MM-dd'T'HH:mm:ss.SSSZ", **out)
    assert paths(c, id=["1", "2"], p=pa.array([None, "2023-04-01T12:01:00.123Z"])) == [
        "1970/01/01/00", "2023/04/01/12"]
    assert paths(ts_cfg(timestamp_type="EPOCHMILLISECONDS", **out), id=["1"],
                 p=pa.array([None], pa.int64())) == ["1970/01/01/00"]
    assert paths(ts_cfg(timestamp_type="EPOCHMILLISECONDS", timestamp_output_format="ss.SSS"),
                 id=["1"], p=pa.array([None], pa.int64())) == ["00.001"]
    assert paths(ts_cfg(timestamp_type="UNIX_TIMESTAMP", timestamp_output_format="HH:mm:ss",
                        hive_style_partitioning=True), id=["1"], p=pa.array([None], pa.int64())) == \
        ["p=00:00:01"]


def test_timestamp_paths_are_url_encoded_too():
    c = ts_cfg(timestamp_type="EPOCHMILLISECONDS", timestamp_output_format="yyyy-MM-dd HH:mm",
               url_encode_partitions=True)
    assert paths(c, id=["1"], p=[0]) == ["1970-01-01 00%3A00"]


def test_arrow_timestamps():
    c = ts_cfg(timestamp_output_format="yyyy/MM/dd")
    col = pa.array([0, 86_400_000_000], pa.timestamp("us", tz="UTC"))
    assert paths(c, id=["1", "2"], p=col) == ["1970/01/01", "1970/01/02"]


def test_bad_timestamp_values_and_settings():
    c = ts_cfg(timestamp_input_format="yyyy-MM-dd", timestamp_output_format="yyyy/MM")
    with pytest.raises(RecordKeyError) as err:
        paths(c, id=["1"], p=["not a date"])
    assert "not a date" in str(err.value) and "Help:" in str(err.value)
    with pytest.raises(ConfigError):
        KeyGenerator(ts_cfg(timestamp_type="EPOCHMILLISECONDS"))  # no output format
    with pytest.raises(ConfigError):
        KeyGenerator(ts_cfg(timestamp_type="DATE_STRING", timestamp_output_format="yyyy"))
    with pytest.raises(ConfigError):
        KeyGenerator(ts_cfg(timestamp_type="WEEKLY", timestamp_output_format="yyyy"))
    with pytest.raises(ConfigError, match="'E'"):
        KeyGenerator(ts_cfg(timestamp_type="EPOCHMILLISECONDS", timestamp_output_format="EEE yyyy"))
    with pytest.raises(ConfigError):
        KeyGenerator(ts_cfg(partition_fields=("a", "b"), timestamp_output_format="yyyy"))
