"""What ``.hoodie/hoodie.properties`` holds: the table type, keys, merge mode and index, fixed when
the table is created and agreed on by every reader and writer."""

from __future__ import annotations

import dataclasses
import enum
import zlib
from dataclasses import dataclass, field
from typing import Any, Mapping

from lakehouse.config.options import parse_bool, build_config, parse_enum, parse_fields, parse_int, option_fields, parse_str, options_to_properties, opt
from lakehouse.errors import ConfigError
from lakehouse import layout


class TableType(enum.StrEnum):
    COPY_ON_WRITE = "COPY_ON_WRITE"
    MERGE_ON_READ = "MERGE_ON_READ"


class MergeMode(enum.StrEnum):
    COMMIT_TIME_ORDERING = "COMMIT_TIME_ORDERING"
    EVENT_TIME_ORDERING = "EVENT_TIME_ORDERING"
    PARTIAL_UPDATE = "PARTIAL_UPDATE"

    @property
    def payload_class(self) -> str:
        return _PAYLOAD_CLASSES[self]

    @classmethod
    def from_payload_class(cls, name: str | None) -> "MergeMode":
        for mode, cls_name in _PAYLOAD_CLASSES.items():
            if name == cls_name:
                return mode
        if not name:
            return cls.EVENT_TIME_ORDERING
        raise ConfigError(f"payload class {name!r} is not supported",
                          help="supported: " + ", ".join(_PAYLOAD_CLASSES.values()))


_PAYLOAD_CLASSES = {
    MergeMode.COMMIT_TIME_ORDERING: "org.apache.hudi.common.model.OverwriteWithLatestAvroPayload",
    MergeMode.EVENT_TIME_ORDERING: "org.apache.hudi.common.model.DefaultHoodieRecordPayload",
    MergeMode.PARTIAL_UPDATE: "org.apache.hudi.common.model.PartialUpdateAvroPayload",
}


class IndexType(enum.StrEnum):
    BUCKET = "BUCKET"
    BLOOM = "BLOOM"
    SIMPLE = "SIMPLE"
    GLOBAL_BLOOM = "GLOBAL_BLOOM"
    GLOBAL_SIMPLE = "GLOBAL_SIMPLE"

    @property
    def is_global(self) -> bool:
        return self in (IndexType.GLOBAL_BLOOM, IndexType.GLOBAL_SIMPLE)


class BucketEngine(enum.StrEnum):
    """``hoodie.index.bucket.engine``: SIMPLE (a fixed bucket count per partition) or
    CONSISTENT_HASHING (a hash ring per partition, its buckets split and merged by clustering;
    Merge-On-Read only, as in Hudi)."""
    SIMPLE = "SIMPLE"
    CONSISTENT_HASHING = "CONSISTENT_HASHING"


class KeyGeneratorType(enum.StrEnum):
    SIMPLE = "SIMPLE"
    COMPLEX = "COMPLEX"
    NON_PARTITION = "NON_PARTITION"
    TIMESTAMP = "TIMESTAMP"

    @property
    def java_class(self) -> str:
        return _KEYGEN_CLASSES[self]

    @classmethod
    def from_class(cls, name: str) -> "KeyGeneratorType":
        short = name.rsplit(".", 1)[-1]
        for t, c in _KEYGEN_CLASSES.items():
            if c.rsplit(".", 1)[-1] in (short, short.replace("Avro", "")):
                return t
        raise ConfigError(f"key generator {name!r} is not supported",
                          help="supported: " + ", ".join(_KEYGEN_CLASSES.values()))


_KEYGEN_CLASSES = {
    KeyGeneratorType.SIMPLE: "org.apache.hudi.keygen.SimpleKeyGenerator",
    KeyGeneratorType.COMPLEX: "org.apache.hudi.keygen.ComplexKeyGenerator",
    KeyGeneratorType.NON_PARTITION: "org.apache.hudi.keygen.NonpartitionedKeyGenerator",
    KeyGeneratorType.TIMESTAMP: "org.apache.hudi.keygen.TimestampBasedKeyGenerator",
}


# How keys and partition paths print values that are not strings (lakehouse.key_text): "hudi"
# for every table created since the key exists, "arrow" for lakehouse tables made before it.
KEY_VALUE_FORMAT = "lakehouse.keygen.value.format"


@dataclass(frozen=True)
class TableConfig:
    """The content of ``hoodie.properties``: what every reader and writer of the table agrees on."""

    name: str = opt("hoodie.table.name", "", parse_str)
    table_type: TableType = opt("hoodie.table.type", TableType.COPY_ON_WRITE, parse_enum(TableType))
    version: int = opt("hoodie.table.version", 6, parse_int(0))
    timeline_layout_version: int = opt("hoodie.timeline.layout.version", 1, parse_int(0))
    database_name: str = opt("hoodie.database.name", "default", parse_str)
    archive_folder: str = opt("hoodie.archivelog.folder", layout.DEFAULT_ARCHIVE_FOLDER, parse_str)
    record_key_fields: tuple[str, ...] = opt("hoodie.table.recordkey.fields", (), parse_fields)
    partition_fields: tuple[str, ...] = opt("hoodie.table.partition.fields", (), parse_fields)
    ordering_field: str | None = opt("hoodie.table.precombine.field", None, parse_str)
    populate_meta_fields: bool = opt("hoodie.populate.meta.fields", True, parse_bool)
    key_generator_class: str = opt("hoodie.table.keygenerator.class",
                                   KeyGeneratorType.SIMPLE.java_class, parse_str)
    hive_style_partitioning: bool = opt("hoodie.datasource.write.hive_style_partitioning", False, parse_bool)
    url_encode_partitions: bool = opt("hoodie.datasource.write.partitionpath.urlencode", False, parse_bool)
    drop_partition_columns: bool = opt("hoodie.datasource.write.drop.partition.columns", False, parse_bool)
    payload_class: str = opt("hoodie.compaction.payload.class",
                             MergeMode.EVENT_TIME_ORDERING.payload_class, parse_str)
    create_schema: str | None = opt("hoodie.table.create.schema", None, parse_str)
    timeline_timezone: str = opt("hoodie.table.timeline.timezone", "UTC", parse_str)
    checksum: int | None = opt("hoodie.table.checksum", None, parse_int(0))
    # Table-wide write settings every writer must share.
    index_type: IndexType = opt("hoodie.index.type", IndexType.SIMPLE, parse_enum(IndexType))
    # Hudi's defaults: a table without these keys in hoodie.properties (any table Hudi wrote) is
    # read as Hudi would write it. create_table stores them explicitly, so that Spark writers of
    # Apache Hudi, which merge hoodie.properties into their write config, agree with lakehouse.
    bucket_num: int = opt("hoodie.bucket.index.num.buckets", 256, parse_int(1))
    bucket_hash_fields: tuple[str, ...] = opt("hoodie.bucket.index.hash.field", (), parse_fields)
    bucket_engine: BucketEngine = opt("hoodie.index.bucket.engine", BucketEngine.SIMPLE, parse_enum(BucketEngine))
    timestamp_type: str | None = opt("hoodie.keygen.timebased.timestamp.type", None, parse_str)
    timestamp_input_format: str | None = opt("hoodie.keygen.timebased.input.dateformat", None, parse_str)
    timestamp_output_format: str | None = opt("hoodie.keygen.timebased.output.dateformat", None, parse_str)
    timestamp_timezone: str | None = opt("hoodie.keygen.timebased.timezone", None, parse_str)
    timestamp_output_timezone: str | None = opt("hoodie.keygen.timebased.output.timezone", None, parse_str)
    timestamp_scalar_unit: str | None = opt("hoodie.keygen.timebased.timestamp.scalar.time.unit", None, parse_str)
    # Hudi's write option (KeyGeneratorOptions.KEYGENERATOR_CONSISTENT_LOGICAL_TIMESTAMP_ENABLED),
    # kept with the table: every writer must print a timestamp key the same way.
    consistent_logical_timestamp: bool | None = opt(
        "hoodie.datasource.write.keygenerator.consistent.logical.timestamp.enabled", None, parse_bool)
    extra: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.key_generator_type is KeyGeneratorType.NON_PARTITION and self.partition_fields:
            raise ConfigError("a non-partitioned key generator cannot have partition fields",
                              help="drop partition_by or use the SIMPLE/COMPLEX key generator")
        # As Hudi's HoodieIndexConfig.validateBucketIndexConfig: the hash must follow the key,
        # or two versions of a record could land in two buckets.
        stray = [f for f in self.bucket_hash_fields if f not in self.record_key_fields]
        if self.index_type is IndexType.BUCKET and self.record_key_fields and stray:
            raise ConfigError(f"hoodie.bucket.index.hash.field names {', '.join(stray)}, which "
                              f"{'is' if len(stray) == 1 else 'are'} not among the record key fields "
                              f"({', '.join(self.record_key_fields)})",
                              help="hash a subset of the record key fields, or leave the option unset")

    @property
    def key_generator_type(self) -> KeyGeneratorType:
        return KeyGeneratorType.from_class(self.key_generator_class)

    @property
    def merge_mode(self) -> MergeMode:
        return MergeMode.from_payload_class(self.payload_class)

    @property
    def is_mor(self) -> bool:
        return self.table_type is TableType.MERGE_ON_READ

    @property
    def consistent_hashing(self) -> bool:
        """Whether the table's buckets are consistent-hashing rings (resized by clustering)."""
        return self.index_type is IndexType.BUCKET and self.bucket_engine is BucketEngine.CONSISTENT_HASHING

    @property
    def is_partitioned(self) -> bool:
        return bool(self.partition_fields)

    def expected_checksum(self) -> int:
        return table_checksum(self.database_name, self.name)

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> "TableConfig":
        known = option_fields(cls)
        extra = {k: v for k, v in props.items() if k not in known}
        options = {k: v for k, v in props.items() if k in known}
        # Hudi 1.x names the key generator by type only (hoodie.table.keygenerator.type, e.g.
        # COMPLEX or COMPLEX_AVRO); without the class the default SIMPLE would be wrong.
        kg_type = props.get("hoodie.table.keygenerator.type")
        if kg_type and "hoodie.table.keygenerator.class" not in props:
            t = parse_enum(KeyGeneratorType)("hoodie.table.keygenerator.type",
                                        kg_type.strip().upper().removesuffix("_AVRO"))
            options["hoodie.table.keygenerator.class"] = t.java_class
        return build_config(cls, options, strict=False, extra=extra)

    def to_properties(self) -> dict[str, str]:
        props = dict(self.extra)
        props.update(options_to_properties(self))
        props["hoodie.table.checksum"] = str(self.expected_checksum())
        props.setdefault("hoodie.table.base.file.format", "PARQUET")
        # Written with every file lakehouse writes: a table Java Hudi made (no key) has Hudi's text.
        props.setdefault(KEY_VALUE_FORMAT, "hudi")
        return props

    def replace(self, **changes: Any) -> "TableConfig":
        return dataclasses.replace(self, **changes)


def table_checksum(database: str, table: str) -> int:
    """Hudi's ``hoodie.table.checksum``: CRC32 of ``"<database>.<table>"``."""
    return zlib.crc32(f"{database}.{table}".encode("utf-8"))


TABLE_OPTION_KEYS = frozenset(option_fields(TableConfig))
