"""A table partitioned by one timestamp or date column gets Hudi Flink's timestamp-based key
generator (issue 40, point 2; HoodieTableFactory.setupTimestampKeygenOptions, seed 000): hourly
folders (yyyyMMddHH) for a timestamp, daily (yyyyMMdd) for a date, in UTC; reads prune those
folders by time. Keys print timestamps as Hudi does, also under
hoodie.datasource.write.keygenerator.consistent.logical.timestamp.enabled. Judges: the model
(the rows written) and hudi-rs."""

from __future__ import annotations

import datetime as dt
import os

import pyarrow as pa
import pytest

import lakehouse
from lakehouse.config import KeyGeneratorType
from lakehouse.errors import ConfigError
from lakehouse.keygen import KEYGEN_AUTO_KEY
from lakehouse.read.time_partitions import TimeSpans, may_hold
from tests.interop.hudi_oracle import canonical, hudi_read

UTC = dt.timezone.utc
TS = [dt.datetime(2024, 1, 31, 12, 30, tzinfo=UTC), dt.datetime(2024, 1, 31, 12, 59, 59, tzinfo=UTC),
      dt.datetime(2024, 1, 31, 13, 0, tzinfo=UTC), dt.datetime(2024, 2, 1, 0, 15, tzinfo=UTC)]
TYPES = ["COPY_ON_WRITE", "MERGE_ON_READ"]


def events(unit="us"):
    return pa.table({"id": [f"e{i}" for i in range(len(TS))], "ts": pa.array(TS, pa.timestamp(unit, tz="UTC")),
                     "v": list(range(len(TS)))})


def folders(t) -> list[str]:
    root = t.path.removeprefix("file://")
    return sorted(f for f in os.listdir(root) if not f.startswith("."))


def judge(t, batch):
    cols = ["id", "ts", "v"]
    assert canonical(t.read(columns=cols), cols) == canonical(batch, cols)
    assert canonical(hudi_read(t.path), cols) == canonical(t.read(), cols)


@pytest.mark.parametrize("table_type", TYPES)
@pytest.mark.parametrize("with_schema", [True, False], ids=["schema", "first-write"])
def test_a_timestamp_column_partitions_by_the_hour(tmp_path, table_type, with_schema):
    batch = events()
    t = lakehouse.create_table(str(tmp_path / "t"), name="t", table_type=table_type, record_key="id",
                               partition_by="ts", schema=batch.schema if with_schema else None)
    t.upsert(batch)
    t = lakehouse.open_table(t.path)
    c = t.config
    assert c.key_generator_type is KeyGeneratorType.TIMESTAMP and KEYGEN_AUTO_KEY not in c.extra
    assert (c.timestamp_type, c.timestamp_scalar_unit, c.timestamp_output_format, c.timestamp_output_timezone) == \
        ("SCALAR", "MICROSECONDS", "yyyyMMddHH", "UTC")
    assert folders(t) == ["2024013112", "2024013113", "2024020100"]
    judge(t, batch)
    # A filter on the column reads only the hours it can match.
    scan = t.scan(filters=[("ts", ">=", dt.datetime(2024, 1, 31, 13, 0, tzinfo=UTC))])
    assert {f.partition for f in scan.plan_files()} == {"2024013113", "2024020100"}
    assert sorted(scan.to_arrow().column("id").to_pylist()) == ["e2", "e3"]


@pytest.mark.parametrize("unit,kind", [("s", "UNIX_TIMESTAMP"), ("ms", "EPOCHMILLISECONDS"),
                                       ("us", "SCALAR")])
def test_the_timestamp_type_follows_the_columns_precision(tmp_path, unit, kind):
    batch = events(unit)
    t = lakehouse.create_table(str(tmp_path / "t"), name="t", record_key="id", partition_by="ts",
                               schema=batch.schema)
    assert t.config.timestamp_type == kind
    t.upsert(batch)
    assert folders(t) == ["2024013112", "2024013113", "2024020100"]


@pytest.mark.parametrize("table_type", TYPES)
def test_a_date_column_partitions_by_the_day(tmp_path, table_type):
    batch = pa.table({"id": ["a", "b", "c"], "day": pa.array([dt.date(2024, 2, 28), dt.date(2024, 2, 29),
                                                              dt.date(2024, 2, 29)]), "v": [1, 2, 3]})
    t = lakehouse.create_table(str(tmp_path / "t"), name="t", table_type=table_type, record_key="id",
                               partition_by="day")
    t.upsert(batch)
    c = lakehouse.open_table(t.path).config
    assert (c.timestamp_type, c.timestamp_scalar_unit, c.timestamp_output_format) == ("SCALAR", "DAYS", "yyyyMMdd")
    assert folders(t) == ["20240228", "20240229"]
    assert canonical(t.read(columns=["id", "day", "v"]), ["id", "day", "v"]) == canonical(batch, ["id", "day", "v"])
    assert canonical(hudi_read(t.path), ["id", "v"]) == canonical(batch, ["id", "v"])
    got = t.read(columns=["id"], filters=[("day", "=", dt.date(2024, 2, 29))])
    assert sorted(got.column("id").to_pylist()) == ["b", "c"]
    assert {f.partition for f in t.scan(filters=[("day", "<", dt.date(2024, 2, 29))]).plan_files()} == {"20240228"}


def test_other_columns_and_explicit_choices_keep_their_key_generator(tmp_path):
    t = lakehouse.create_table(str(tmp_path / "s"), name="s", record_key="id", partition_by="city")
    t.upsert(pa.table({"id": ["a"], "city": ["sf"]}))
    assert lakehouse.open_table(t.path).config.key_generator_type is KeyGeneratorType.SIMPLE
    assert KEYGEN_AUTO_KEY not in lakehouse.open_table(t.path).config.extra
    # Chosen in the options (a table that wants a day folder, or one made before this default).
    batch = events()
    daily = lakehouse.create_table(str(tmp_path / "d"), name="d", record_key="id", partition_by="ts",
                                   schema=batch.schema,
                                   options={"hoodie.keygen.timebased.output.dateformat": "yyyy/MM/dd",
                                            "hoodie.keygen.timebased.timestamp.type": "EPOCHMICROSECONDS"})
    daily.upsert(batch)
    assert daily.config.timestamp_output_format == "yyyy/MM/dd" and folders(daily) == ["2024"]
    simple = lakehouse.create_table(str(tmp_path / "o"), name="o", record_key="id", partition_by="ts",
                                    schema=batch.schema,
                                    options={"hoodie.table.keygenerator.class": "org.apache.hudi.keygen.SimpleKeyGenerator"})
    simple.upsert(batch)
    assert simple.config.key_generator_type is KeyGeneratorType.SIMPLE and len(folders(simple)) == 4
    judge(simple, batch)


def test_the_first_write_decides_once(tmp_path):
    """The first write that brings the column decides; later writes follow the stored choice."""
    t = lakehouse.create_table(str(tmp_path / "t"), name="t", record_key="id", partition_by="ts")
    assert t.config.extra.get(KEYGEN_AUTO_KEY) == "true"
    t.upsert(pa.table({"id": ["x"], "ts": ["2024-01-31"]}))  # a string column: the simple one
    t = lakehouse.open_table(t.path)
    assert t.config.key_generator_type is KeyGeneratorType.SIMPLE and KEYGEN_AUTO_KEY not in t.config.extra
    assert folders(t) == ["2024-01-31"]


def test_time_spans_prune_by_the_formats_finest_unit():
    cfg = lakehouse.config.TableConfig(timestamp_output_format="yyyy/MM", timestamp_output_timezone="UTC")
    spans = TimeSpans(cfg)
    feb = spans.span("2024/02")
    typ = pa.timestamp("us", tz="UTC")
    assert may_hold(feb, [("ts", "=", dt.datetime(2024, 2, 29, 23, 59, tzinfo=UTC))], typ)
    assert not may_hold(feb, [("ts", "=", dt.datetime(2024, 3, 1, tzinfo=UTC))], typ)
    assert not may_hold(feb, [("ts", ">=", dt.datetime(2024, 3, 1, tzinfo=UTC))], typ)
    assert may_hold(feb, [("ts", ">", dt.datetime(2024, 2, 29, 23, 59, tzinfo=UTC))], typ)
    assert not may_hold(feb, [("ts", "<", dt.datetime(2024, 2, 1, tzinfo=UTC))], typ)
    assert may_hold(feb, [("ts", "<=", dt.datetime(2024, 2, 1, tzinfo=UTC))], typ)
    assert may_hold(feb, [("ts", "!=", dt.datetime(2024, 2, 1, tzinfo=UTC))], typ)
    assert not may_hold(feb, [("ts", "in", [dt.datetime(2024, 1, 1, tzinfo=UTC)])], typ)
    assert TimeSpans(lakehouse.config.TableConfig(timestamp_output_format="yyyyMMdd-SSS")).usable is False


def test_consistent_logical_timestamp_keys(tmp_path):
    """HoodieAvroUtils.convertValueForAvroLogicalTypes: with the option, a timestamp key prints as
    java.sql.Timestamp (milliseconds; micros divided by 1000 towards zero); without, its micros."""
    key = "hoodie.datasource.write.keygenerator.consistent.logical.timestamp.enabled"
    batch = pa.table({"ts": pa.array([dt.datetime(2024, 1, 31, 12, 30, 0, 123456), dt.datetime(1969, 12, 31, 23, 59, 59, 998500)],
                                     pa.timestamp("us")), "v": [1, 2]})
    on = lakehouse.create_table(str(tmp_path / "on"), name="on", record_key="ts", options={key: "true"})
    on.upsert(batch)
    assert sorted(on.read(columns=["_hoodie_record_key"]).column(0).to_pylist()) == \
        ["1969-12-31 23:59:59.999", "2024-01-31 12:30:00.123"]
    off = lakehouse.create_table(str(tmp_path / "off"), name="off", record_key="ts")
    off.upsert(batch)
    assert sorted(off.read(columns=["_hoodie_record_key"]).column(0).to_pylist()) == ["-1500", "1706704200123456"]
    with pytest.raises(ConfigError, match="cannot change for one write"):
        on.upsert(batch, options={key: "false"})
    on.upsert(batch, options={key: "true"})  # the stored value: accepted
    assert on.read().num_rows == 2
    assert canonical(hudi_read(on.path), ["v"]) == canonical(on.read(), ["v"])
