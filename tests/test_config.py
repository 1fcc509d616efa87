"""TableConfig against the hoodie.properties Apache Hudi wrote, the table checksum, and the
validation errors of WriteConfig."""

from __future__ import annotations

import dataclasses

import pytest

from lakehouse.config import (FLINK_KEYS, SERVICE_OPTION_KEYS, TABLE_OPTION_KEYS, WRITE_OPTION_KEYS, IndexType, KeyGeneratorType,
                              LogBlockFormat, MergeMode, TableConfig, TableType, WriteConfig,
                              option_docs, table_checksum)
from lakehouse.errors import ConfigError
from lakehouse.properties import parse_properties

K = KeyGeneratorType
COW, MOR = TableType.COPY_ON_WRITE, TableType.MERGE_ON_READ
# The fixture README and the SQL that made each table: (type, record key, partition fields,
# key generator, hive style, merge mode, populate meta fields). COW tables have no payload class
# in hoodie.properties; Hudi 0.x then uses DefaultHoodieRecordPayload (event-time ordering).
EXPECTED = {
    "quickstart_trips_table/mor/avro/v6_trips_8i1u":
        (MOR, ("uuid",), ("city",), K.SIMPLE, True, MergeMode.COMMIT_TIME_ORDERING, True),
    "quickstart_trips_table/mor/avro/v6_trips_8i3d":
        (MOR, ("uuid",), ("city",), K.SIMPLE, True, MergeMode.COMMIT_TIME_ORDERING, True),
    "sample_table/mor/parquet/v6_nonpartitioned":
        (MOR, ("id",), (), K.NON_PARTITION, True, MergeMode.COMMIT_TIME_ORDERING, True),
    "sample_table/mor/parquet/v6_nonpartitioned_rollback":
        (MOR, ("id",), (), K.NON_PARTITION, True, MergeMode.COMMIT_TIME_ORDERING, True),
    "sample_table/mor/parquet/v6_complexkeygen_hivestyle":
        (MOR, ("id", "name"), ("byteField", "shortField"), K.COMPLEX, True,
         MergeMode.COMMIT_TIME_ORDERING, True),
    "sample_table/mor/parquet/v6_simplekeygen_nonhivestyle":
        (MOR, ("id",), ("byteField",), K.SIMPLE, False, MergeMode.COMMIT_TIME_ORDERING, True),
    "sample_table/mor/parquet/v6_simplekeygen_nonhivestyle_overwritetable":
        (MOR, ("id",), ("byteField",), K.SIMPLE, False, MergeMode.COMMIT_TIME_ORDERING, True),
    "sample_table/mor/parquet/v6_simplekeygen_hivestyle_no_metafields":
        (MOR, ("id",), ("byteField",), K.SIMPLE, True, MergeMode.COMMIT_TIME_ORDERING, False),
    "sample_table/mor/parquet/v6_empty":
        (MOR, ("id",), (), K.NON_PARTITION, True, MergeMode.COMMIT_TIME_ORDERING, True),
    "sample_table/cow/v6_nonpartitioned":
        (COW, ("id",), (), K.NON_PARTITION, True, MergeMode.EVENT_TIME_ORDERING, True),
    "sample_table/cow/v6_complexkeygen_hivestyle":
        (COW, ("id", "name"), ("byteField", "shortField"), K.COMPLEX, True,
         MergeMode.EVENT_TIME_ORDERING, True),
    "sample_table/cow/v6_simplekeygen_nonhivestyle":
        (COW, ("id",), ("byteField",), K.SIMPLE, False, MergeMode.EVENT_TIME_ORDERING, True),
    "sample_table/cow/v6_simplekeygen_nonhivestyle_overwritetable":
        (COW, ("id",), ("byteField",), K.SIMPLE, False, MergeMode.EVENT_TIME_ORDERING, True),
    "sample_table/cow/v6_timebasedkeygen_nonhivestyle":
        (COW, ("id",), ("ts_str",), K.TIMESTAMP, False, MergeMode.EVENT_TIME_ORDERING, True),
    "sample_table/cow/v6_simplekeygen_hivestyle_no_metafields":
        (COW, ("id",), ("byteField",), K.SIMPLE, True, MergeMode.EVENT_TIME_ORDERING, False),
    "sample_table/cow/v6_empty":
        (COW, ("id",), (), K.NON_PARTITION, True, MergeMode.EVENT_TIME_ORDERING, True),
}


def _props(fixture_tables, name: str) -> dict[str, str]:
    return parse_properties((fixture_tables[name] / ".hoodie" / "hoodie.properties")
                            .read_text("latin-1"))


# --- fixtures ------------------------------------------------------------------------------


@pytest.mark.interop
def test_every_v6_fixture_is_expected(fixture_tables):
    # A new v6 fixture must get an expectation here rather than go unchecked.
    assert {n for n in fixture_tables if n.rsplit("/", 1)[-1].startswith("v6_")} == set(EXPECTED)


@pytest.mark.interop
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_table_config_of_fixture(fixture_tables, name):
    ttype, keys, parts, kg, hive, mode, meta = EXPECTED[name]
    cfg = TableConfig.from_properties(_props(fixture_tables, name))
    assert cfg.name == name.rsplit("/", 1)[-1]
    assert cfg.table_type is ttype and cfg.is_mor == (ttype is MOR)
    assert cfg.version == 6 and cfg.timeline_layout_version == 1
    assert cfg.database_name == "default"
    assert cfg.record_key_fields == keys
    assert cfg.partition_fields == parts and cfg.is_partitioned == bool(parts)
    assert cfg.key_generator_type is kg
    assert cfg.hive_style_partitioning is hive
    assert cfg.url_encode_partitions is False
    assert cfg.merge_mode is mode
    assert cfg.populate_meta_fields is meta
    # The checksum Hudi stored is the one we compute from the names.
    assert cfg.checksum == cfg.expected_checksum()
    # Keys we do not model are kept, not dropped.
    if "hoodie.compaction.record.merger.strategy" in _props(fixture_tables, name):
        assert "hoodie.compaction.record.merger.strategy" in cfg.extra


@pytest.mark.interop
def test_ordering_field_of_fixtures(fixture_tables):
    assert TableConfig.from_properties(_props(
        fixture_tables, "quickstart_trips_table/mor/avro/v6_trips_8i1u")).ordering_field == "ts"
    assert TableConfig.from_properties(_props(
        fixture_tables, "sample_table/cow/v6_nonpartitioned")).ordering_field == "longField"
    assert TableConfig.from_properties(_props(
        fixture_tables, "sample_table/cow/v6_empty")).ordering_field is None


@pytest.mark.interop
def test_timestamp_keygen_settings_of_fixture(fixture_tables):
    cfg = TableConfig.from_properties(_props(fixture_tables,
                                             "sample_table/cow/v6_timebasedkeygen_nonhivestyle"))
    assert cfg.timestamp_input_format == "yyyy-MM-dd'T'HH:mm:ss.SSSZ"
    assert cfg.timestamp_output_format == "yyyy/MM/dd/HH"


@pytest.mark.interop
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_config_survives_our_properties(fixture_tables, name):
    cfg = TableConfig.from_properties(_props(fixture_tables, name))
    props = cfg.to_properties()
    again = TableConfig.from_properties(props)
    assert dataclasses.replace(again, extra={}) == dataclasses.replace(cfg, extra={})
    assert again.to_properties() == props
    # Everything Hudi wrote is still there with the same value (modelled or passed through).
    for k, v in _props(fixture_tables, name).items():
        assert k in props, k
        if k not in ("hoodie.table.partition.fields", "hoodie.table.recordkey.fields"):
            assert props[k] == v, k


@pytest.mark.interop
@pytest.mark.parametrize("name,kind", [
    ("sample_table/cow/v8_complexkeygen_hivestyle", K.COMPLEX),
    ("sample_table/cow/v8_nonpartitioned", K.NON_PARTITION),
    ("sample_table/cow/v8_simplekeygen_nonhivestyle", K.SIMPLE),
    ("quickstart_trips_table/mor/avro/v8_trips_8i3u1d", K.SIMPLE),
])
def test_key_generator_named_by_type_only(fixture_tables, name, kind):
    # Hudi 1.x writes hoodie.table.keygenerator.type and no class.
    props = _props(fixture_tables, name)
    assert "hoodie.table.keygenerator.class" not in props
    assert TableConfig.from_properties(props).key_generator_type is kind


@pytest.mark.parametrize("value,kind", [("COMPLEX", K.COMPLEX), ("complex_avro", K.COMPLEX),
                                        ("TIMESTAMP_AVRO", K.TIMESTAMP), ("NON_PARTITION", K.NON_PARTITION)])
def test_key_generator_type_property(value, kind):
    props = {"hoodie.table.name": "t", "hoodie.table.keygenerator.type": value}
    assert TableConfig.from_properties(props).key_generator_type is kind
    # The class wins when both are there.
    props["hoodie.table.keygenerator.class"] = "org.apache.hudi.keygen.SimpleKeyGenerator"
    assert TableConfig.from_properties(props).key_generator_type is K.SIMPLE


def test_unsupported_key_generator_type():
    with pytest.raises(ConfigError, match="CUSTOM"):
        TableConfig.from_properties({"hoodie.table.name": "t", "hoodie.table.keygenerator.type": "CUSTOM"})


# --- checksum ------------------------------------------------------------------------------


def test_checksum_spec_example():
    assert table_checksum("default", "v6_trips_8i1u") == 3843273058
    cfg = TableConfig(name="v6_trips_8i1u")
    assert cfg.expected_checksum() == 3843273058
    assert cfg.to_properties()["hoodie.table.checksum"] == "3843273058"


def test_checksum_depends_on_database_and_name():
    assert table_checksum("default", "t") != table_checksum("other", "t")
    assert table_checksum("default", "t") != table_checksum("default", "u")
    # The stored checksum follows the name even when an old checksum is carried along.
    cfg = TableConfig(name="x", checksum=1)
    assert cfg.to_properties()["hoodie.table.checksum"] == str(table_checksum("default", "x"))


# --- TableConfig validation ----------------------------------------------------------------


def test_non_partitioned_key_generator_refuses_partition_fields():
    with pytest.raises(ConfigError) as err:
        TableConfig(name="t", key_generator_class=K.NON_PARTITION.java_class,
                    partition_fields=("p",))
    assert "Help:" in str(err.value)


@pytest.mark.parametrize("cls,kind", [
    ("org.apache.hudi.keygen.SimpleKeyGenerator", K.SIMPLE),
    ("org.apache.hudi.keygen.SimpleAvroKeyGenerator", K.SIMPLE),
    ("org.apache.hudi.keygen.ComplexAvroKeyGenerator", K.COMPLEX),
    ("org.apache.hudi.keygen.NonpartitionedKeyGenerator", K.NON_PARTITION),
    ("org.apache.hudi.keygen.NonpartitionedAvroKeyGenerator", K.NON_PARTITION),
    ("org.apache.hudi.keygen.TimestampBasedKeyGenerator", K.TIMESTAMP),
    ("org.apache.hudi.keygen.TimestampBasedAvroKeyGenerator", K.TIMESTAMP),
])
def test_key_generator_classes(cls, kind):
    assert KeyGeneratorType.from_class(cls) is kind


def test_unsupported_key_generator_and_payload():
    with pytest.raises(ConfigError, match="CustomKeyGenerator"):
        KeyGeneratorType.from_class("org.apache.hudi.keygen.CustomKeyGenerator")
    with pytest.raises(ConfigError, match="MyPayload"):
        MergeMode.from_payload_class("com.example.MyPayload")


def test_payload_classes_map_to_merge_modes():
    for mode in MergeMode:
        assert MergeMode.from_payload_class(mode.payload_class) is mode
    assert MergeMode.from_payload_class(None) is MergeMode.EVENT_TIME_ORDERING
    assert MergeMode.from_payload_class(
        "org.apache.hudi.common.model.OverwriteWithLatestAvroPayload") is MergeMode.COMMIT_TIME_ORDERING
    assert MergeMode.from_payload_class(
        "org.apache.hudi.common.model.DefaultHoodieRecordPayload") is MergeMode.EVENT_TIME_ORDERING


@pytest.mark.parametrize("key,value", [
    ("hoodie.table.version", "six"),
    ("hoodie.table.type", "MERGE_ON_WRITE"),
    ("hoodie.populate.meta.fields", "perhaps"),
    ("hoodie.bucket.index.num.buckets", "0"),
    ("hoodie.table.recordkey.fields", "id,id"),
])
def test_ill_typed_table_properties(key, value):
    with pytest.raises(ConfigError) as err:
        TableConfig.from_properties({"hoodie.table.name": "t", key: value})
    assert key in str(err.value) and "Help:" in str(err.value)


def test_table_option_parsing_is_lenient_where_hudi_is():
    cfg = TableConfig.from_properties({
        "hoodie.table.name": "t", "hoodie.table.type": "merge_on_read",
        "hoodie.table.recordkey.fields": " a , b ,", "hoodie.table.partition.fields": "",
        "hoodie.populate.meta.fields": "FALSE", "hoodie.index.type": "bucket"})
    assert cfg.table_type is MOR
    assert cfg.record_key_fields == ("a", "b")
    assert cfg.partition_fields == ()
    assert cfg.populate_meta_fields is False
    assert cfg.index_type is IndexType.BUCKET


# --- WriteConfig ---------------------------------------------------------------------------


def test_write_config_defaults_are_hudis():
    cfg = WriteConfig.from_options({})
    assert cfg == WriteConfig()
    assert cfg.small_file_limit == 104857600
    assert cfg.max_file_size == 125829120
    assert cfg.log_max_size == 1073741824
    assert cfg.record_size_estimation_threshold == 1.0
    # The one deliberate difference, chosen by measurement (benchmarks/README.md).
    assert cfg.log_block_format is LogBlockFormat.PARQUET
    assert WriteConfig.from_options({"hoodie.logfile.data.block.format": "avro"}).log_block_format \
        is LogBlockFormat.AVRO


def test_write_config_parses_strings():
    cfg = WriteConfig.from_options({
        "hoodie.parquet.max.file.size": "1000", "hoodie.parquet.small.file.limit": "10",
        "hoodie.combine.before.upsert": "false", "hoodie.logfile.data.block.format": "PARQUET",
        "hoodie.index.bloom.fpp": "0.01"})
    assert cfg.max_file_size == 1000 and cfg.small_file_limit == 10
    assert cfg.combine_before_upsert is False
    assert cfg.log_block_format is LogBlockFormat.PARQUET
    assert cfg.bloom_fpp == 0.01


def test_write_config_takes_whole_floats_as_integers():
    cfg = WriteConfig.from_options({"hoodie.parquet.max.file.size": 2048.0,
                                    "hoodie.parquet.small.file.limit": 0})
    assert cfg.max_file_size == 2048 and isinstance(cfg.max_file_size, int)


def test_write_config_round_trips_its_properties():
    cfg = WriteConfig.from_options({"hoodie.parquet.max.file.size": 5000,
                                    "hoodie.parquet.small.file.limit": 100,
                                    "hoodie.merge.allow.duplicate.on.inserts": True})
    assert WriteConfig.from_options(cfg.to_properties()) == cfg


def test_write_config_accepts_table_and_foreign_keys():
    # Table options and non-Hudi keys may travel in the same options dict.
    WriteConfig.from_options({"hoodie.table.name": "t", "hoodie.index.type": "BLOOM",
                              "hoodie.table.cdc.enabled": "false", "spark.foo": "x", "path": "/t"})


@pytest.mark.parametrize("options,mentions", [
    ({"hoodie.parquet.max.file.sise": "1"}, "hoodie.parquet.max.file.sise"),
    ({"hoodie.parquet.max.file.size": "big"}, "hoodie.parquet.max.file.size"),
    ({"hoodie.parquet.max.file.size": "0"}, "hoodie.parquet.max.file.size"),
    ({"hoodie.parquet.small.file.limit": "-1"}, "hoodie.parquet.small.file.limit"),
    ({"hoodie.parquet.max.file.size": "1.5"}, "hoodie.parquet.max.file.size"),
    ({"hoodie.parquet.max.file.size": 1.5}, "hoodie.parquet.max.file.size"),
    ({"hoodie.parquet.max.file.size": True}, "hoodie.parquet.max.file.size"),
    ({"hoodie.parquet.max.file.size": float("inf")}, "hoodie.parquet.max.file.size"),
    ({"hoodie.index.bloom.fpp": "0"}, "hoodie.index.bloom.fpp"),
    ({"hoodie.index.bloom.fpp": "1"}, "hoodie.index.bloom.fpp"),
    ({"hoodie.index.bloom.fpp": "x"}, "hoodie.index.bloom.fpp"),
    ({"hoodie.combine.before.upsert": "yesno"}, "hoodie.combine.before.upsert"),
    ({"hoodie.logfile.data.block.format": "orc"}, "hoodie.logfile.data.block.format"),
    ({"hoodie.parquet.small.file.limit": "200", "hoodie.parquet.max.file.size": "100"},
     "hoodie.parquet.small.file.limit"),
])
def test_write_config_errors(options, mentions):
    with pytest.raises(ConfigError) as err:
        WriteConfig.from_options(options)
    text = str(err.value)
    assert mentions in text
    # Every error tells what to do on a Help line.
    assert "\nHelp: " in text and err.value.help


def test_option_keys_are_unique_and_documented():
    docs = option_docs()
    keys = [k for k, _, _ in docs]
    assert len(keys) == len(set(keys))
    assert set(keys) == TABLE_OPTION_KEYS | WRITE_OPTION_KEYS | SERVICE_OPTION_KEYS
    assert not TABLE_OPTION_KEYS & WRITE_OPTION_KEYS
    assert not (TABLE_OPTION_KEYS | WRITE_OPTION_KEYS) & SERVICE_OPTION_KEYS
    assert all(k.startswith("hoodie.") or k in FLINK_KEYS for k in keys)


def test_service_configs_defaults_and_validation():
    from lakehouse.config import ArchivalConfig, CleanConfig, CompactionConfig
    assert CompactionConfig.from_options({}).max_delta_commits == 5
    c = CleanConfig.from_options({"hoodie.cleaner.policy": "keep_latest_file_versions",
                                  "hoodie.parquet.max.file.size": "1000"})
    assert c.policy == "KEEP_LATEST_FILE_VERSIONS" and c.file_versions_retained == 3
    assert (ArchivalConfig.from_options({}).max_commits, ArchivalConfig().min_commits) == (30, 20)
    for cls, opts in [(CleanConfig, {"hoodie.cleaner.policy": "KEEP_ALL"}),
                      (CompactionConfig, {"hoodie.compact.inline.max.delta.commits": 0}),
                      (ArchivalConfig, {"hoodie.keep.min.commits": 30}),
                      (CleanConfig, {"hoodie.cleaner.polcy": "KEEP_LATEST_COMMITS"})]:
        with pytest.raises(ConfigError):
            cls.from_options(opts)
