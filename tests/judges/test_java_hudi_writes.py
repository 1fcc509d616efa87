"""Apache Hudi itself (0.15.0 on Spark 3.5) writes into lakehouse tables with the options the README
gives (its Spark datasource keys, nothing about the index), lakehouse writes after it and before
it, and every reader (lakehouse, Java Hudi, hudi-rs) reads the model with no key twice.

The bucket index is what is at stake: Hudi's Spark writer takes the bucket count and hash field
from ``hoodie.properties``; a different count or hash function would put a key's new version in
another file group, which every reader returns beside the old one. So one table has 4 buckets
per partition, where a hash that differed would show."""

from __future__ import annotations

import datetime as dt
import decimal
import pathlib

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lakehouse
from tests.interop.hudi_oracle import hudi_read
from tests.judges.environment import find
from tests.judges.session import JavaSession, check
from tests.judges.test_java_hudi_reads import Model, rows

pytestmark = pytest.mark.judges

HERE = pathlib.Path(__file__).parent


def java_options(t: lakehouse.Table) -> dict[str, str]:
    """What the README tells a Java writer to pass: the table's name, key, ordering and partition
    fields, its type and the operation. Nothing about the index."""
    return {"hoodie.table.name": t.config.name, "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.precombine.field": "ts", "hoodie.datasource.write.partitionpath.field": "city",
            "hoodie.datasource.write.table.type": "MERGE_ON_READ", "hoodie.datasource.write.operation": "upsert"}


def elsewhere(batch: pa.Table, city: str) -> pa.Table:
    return batch.set_column(batch.schema.get_field_index("city"), "city", pa.array([city] * batch.num_rows))


@pytest.fixture(scope="module")
def judges():
    found, why = find()
    if found is None:
        pytest.skip(why)
    return found


@pytest.mark.parametrize("buckets, engine", [(None, None), (4, None), (4, "SIMPLE")],
                         ids=["default", "4-buckets", "4-simple-buckets"])
def test_java_and_lakehouse_write_one_merge_on_read_table_in_turn(tmp_path, judges, buckets, engine):
    """lakehouse first, then Java, then lakehouse (a new partition too), then Java again; by
    default consistent-hashing buckets (Java's HoodieSparkConsistentBucketIndex loads lakehouse's
    rings), else the SIMPLE engine's fixed count."""
    options = {**({"hoodie.bucket.index.num.buckets": buckets} if buckets else {}),
               **({"hoodie.index.bucket.engine": engine} if engine else {})} or None
    t = lakehouse.create_table(str(tmp_path / "t"), name="judged_mor", record_key="id", ordering_field="ts",
                               partition_by="city", options=options)
    m = Model()
    java = JavaSession(tmp_path, judges)

    first = rows(list(range(400)), 1)
    t.upsert(first)
    m.upsert(first)
    second = rows(list(range(0, 400, 3)) + list(range(400, 440)), 2)
    java.write(t.path, second, java_options(t))
    java.run()
    m.upsert(second)
    check(t.read(), m, "lakehouse after Java's upsert")

    third = pa.concat_tables([rows(list(range(1, 440, 5)), 3), elsewhere(rows(list(range(500, 520)), 3), "bos")])
    t.upsert(third)
    m.upsert(third)
    fourth = pa.concat_tables([rows(list(range(2, 450, 7)), 4), elsewhere(rows(list(range(505, 525)), 4), "bos")])
    java.read(t.path, "before")
    java.write(t.path, fourth, java_options(t))
    java.read(t.path, "after")
    java.run()
    before = Model()
    before.rows = dict(m.rows)
    check(java.result("before"), before, "Java after lakehouse's upsert")
    m.upsert(fourth)
    check(java.result("after"), m, "Java after its second upsert")
    check(t.read(), m, "lakehouse after Java's second upsert")
    check(hudi_read(t.path), m, "hudi-rs")
    # Every key's versions landed in one file group: the bucket its hash names.
    assert {(s.partition, s.file_id) for s in t.file_system_view().latest_slices()} <= buckets_of(t, buckets)


def buckets_of(t: lakehouse.Table, count: int | None) -> set:
    """The (partition, file id) a bucket's file group may have: a ring node's (consistent
    hashing), or any whose id starts with a bucket number below ``count`` (SIMPLE)."""
    from lakehouse.consistent_hashing import committed_ring, ring_committed
    slices = t.file_system_view().latest_slices()
    if t.config.consistent_hashing:
        timeline = t.meta_client.active.load()
        return {(p, n.file_id) for p in {s.partition for s in slices}
                for n in committed_ring(t.meta_client.storage, p, ring_committed(timeline)).nodes}
    return {(s.partition, s.file_id) for s in slices if count is None or s.file_id[:8] in {f"{b:08d}" for b in range(count)}}


def test_a_java_writer_that_writes_first_fixes_the_provisional_bucket_count(tmp_path, judges):
    """A table created with defaults and not yet written has a provisional bucket count; a Java
    writer that writes first uses the stored one, and lakehouse keeps it from then on."""
    t = lakehouse.create_table(str(tmp_path / "t"), name="judged_first", record_key="id", ordering_field="ts",
                               partition_by="city")
    stored = t.config.bucket_num
    m = Model()
    java = JavaSession(tmp_path, judges)
    first = rows(list(range(300)), 1)
    java.write(t.path, first, java_options(t))
    java.run()
    m.upsert(first)
    t = lakehouse.open_table(t.path)
    check(t.read(), m, "lakehouse after Java's first write")
    second = rows(list(range(0, 330, 4)), 2)
    t.upsert(second)
    m.upsert(second)
    assert lakehouse.open_table(t.path).config.bucket_num == stored
    java.read(t.path, "final")
    java.run()
    check(java.result("final"), m, "Java after lakehouse's upsert")
    check(t.read(), m, "lakehouse after its upsert")


T0 = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
KEYED = {  # key column -> (type, values): Hudi's Spark writer prints each as its Avro value
    "at": (pa.timestamp("us", tz="UTC"), [T0 + dt.timedelta(seconds=97 * k) for k in range(-20, 60)]),
    "ms": (pa.timestamp("ms", tz="UTC"), [T0 + dt.timedelta(milliseconds=1501 * k) for k in range(80)]),
    "x": (pa.float64(), [k * 1e5 + 0.5 if k % 3 else k * 1.0e-5 for k in range(80)]),
    "bin": (pa.binary(), [bytes([k, 255 - k, 7]) for k in range(80)]),
    "d": (pa.date32(), [dt.date(1969, 12, 1) + dt.timedelta(days=k) for k in range(80)]),
    "amt": (pa.decimal128(12, 3), [decimal.Decimal(f"{k - 40}.{k:03d}") for k in range(80)]),
}


@pytest.mark.parametrize("table_type", ["MERGE_ON_READ", "COPY_ON_WRITE"])
def test_java_and_lakehouse_key_values_of_every_type_alike(tmp_path, judges, table_type):
    """Tables keyed on a timestamp, a double, bytes, a date and a decimal: Java Hudi upserts
    after lakehouse and lakehouse after Java; no key twice, and each key one text."""
    java = JavaSession(tmp_path, judges)
    tables, latest = {}, {}
    for col, (typ, values) in KEYED.items():
        t = lakehouse.create_table(str(tmp_path / col), name=f"keyed_{col}", table_type=table_type,
                                   record_key=col, ordering_field="ts", partition_by="city")
        first = pa.table({col: pa.array(values[:60], typ), "ts": [1] * 60, "city": ["sf", "la"] * 30})
        t.upsert(first)
        second = pa.table({col: pa.array(values[30:], typ), "ts": [2] * 50, "city": ["sf", "la"] * 25})
        java.write(t.path, second, {**java_options(t), "hoodie.datasource.write.recordkey.field": col,
                                    "hoodie.datasource.write.table.type": table_type})
        tables[col] = t
        latest[col] = {**{v: 1 for v in values[:30]}, **{v: 2 for v in values[30:]}}
    java.run()
    for col, (typ, values) in KEYED.items():
        third = pa.table({col: pa.array(values[::7], typ), "ts": [3] * len(values[::7]),
                          "city": ["sf", "la"] * 6 + ["sf"] * (len(values[::7]) - 12)})
        tables[col].upsert(third)
        latest[col].update({v: 3 for v in values[::7]})
        java.read(tables[col].path, f"final_{col}")
    java.run()
    for col, t in tables.items():
        for who, got in (("lakehouse", t.read()), ("Java Hudi", java.result(f"final_{col}"))):
            keys = got.column("_hoodie_record_key")
            assert pc.count_distinct(keys).as_py() == len(keys) == len(latest[col]), \
                f"{col} ({table_type}), read by {who}: {len(keys)} rows, {len(latest[col])} keys"
            versions = dict(zip(got.column(col).to_pylist(), got.column("ts").to_pylist()))
            if (col, table_type) == ("ms", "COPY_ON_WRITE"):
                # Hudi 0.15's Spark writer (microseconds only) carries the rows of a
                # timestamp-millis column it does not update into its new base file as
                # microseconds, unconverted (apache/hudi#13233; repaired in Hudi 1.1): the
                # README's "Hudi's semantics" section says so. Pinned: a fix shows here.
                carried = {v for v, n in latest[col].items() if n == 1}
                assert carried and not carried & versions.keys(), "Hudi no longer corrupts millis: update the README"
                continue
            assert versions == latest[col], f"{col} ({table_type}), read by {who}: not the latest version of every key"


@pytest.mark.parametrize("table_type", ["MERGE_ON_READ", "COPY_ON_WRITE"])
def test_java_writes_into_an_hourly_partitioned_table(tmp_path, judges, table_type):
    """A table partitioned by a timestamp column gets Hudi Flink's timestamp-based key generator
    (hourly folders, README "Hudi's semantics"); Java Hudi's Spark writer, given the table's
    hoodie.keygen.timebased.* settings, puts each row in the same hour folder lakehouse does: no
    key twice, one folder per hour."""
    hours = [dt.datetime(2024, 1, 31, 10, 0, tzinfo=dt.timezone.utc) + dt.timedelta(minutes=37 * i)
             for i in range(40)]
    batch = pa.table({"id": [f"k{i}" for i in range(40)], "ts": pa.array(hours, pa.timestamp("us", tz="UTC")),
                      "v": [1] * 40})
    t = lakehouse.create_table(str(tmp_path / "t"), name="hourly", table_type=table_type, record_key="id",
                               partition_by="ts", ordering_field="v", schema=batch.schema)
    assert t.config.timestamp_output_format == "yyyyMMddHH"
    t.upsert(batch.slice(0, 30))
    c = t.config
    java = JavaSession(tmp_path, judges)
    later = batch.slice(20, 20).set_column(2, "v", pa.array([2] * 20))
    java.write(t.path, later, {
        "hoodie.table.name": c.name, "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.precombine.field": "v", "hoodie.datasource.write.partitionpath.field": "ts",
        "hoodie.datasource.write.table.type": table_type, "hoodie.datasource.write.operation": "upsert",
        "hoodie.datasource.write.keygenerator.class": c.key_generator_class,
        "hoodie.keygen.timebased.timestamp.type": c.timestamp_type,
        "hoodie.keygen.timebased.timestamp.scalar.time.unit": c.timestamp_scalar_unit,
        "hoodie.keygen.timebased.output.dateformat": c.timestamp_output_format,
        "hoodie.keygen.timebased.output.timezone": "UTC", "hoodie.keygen.timebased.timezone": "UTC"})
    java.run()
    t = lakehouse.open_table(t.path)
    got = t.read(columns=["_hoodie_partition_path", "id", "ts", "v"])
    assert got.num_rows == 40 == pc.count_distinct(got.column("id")).as_py()
    for r in got.to_pylist():
        assert r["_hoodie_partition_path"] == r["ts"].astimezone(dt.timezone.utc).strftime("%Y%m%d%H"), r
        assert r["v"] == (2 if int(r["id"][1:]) >= 20 else 1), r
    assert sorted(hudi_read(t.path).column("id").to_pylist()) == sorted(got.column("id").to_pylist())


def test_java_writes_by_the_rings_a_lakehouse_resize_left(tmp_path, judges):
    """A consistent-hashing table whose buckets lakehouse split: Java Hudi's writer
    (HoodieSparkConsistentBucketIndex) loads each partition's newest ring, the clustering's, and
    routes every key to the bucket lakehouse put it in; lakehouse then writes by the same rings."""
    from lakehouse.consistent_hashing import committed_ring, ring_committed

    t = lakehouse.create_table(str(tmp_path / "t"), name="judged_rings", record_key="id", ordering_field="ts",
                               partition_by="city", options={"hoodie.index.bucket.engine": "CONSISTENT_HASHING",
                                                             "hoodie.bucket.index.num.buckets": 1,
                                                             "hoodie.parquet.max.file.size": 4096,
                                                             "hoodie.parquet.small.file.limit": 0})
    m = Model()
    first = rows(list(range(1500)), 1)
    t.upsert(first)
    m.upsert(first)
    assert t.cluster(force=True).committed
    t = in_turn(tmp_path, judges, t, m, rows(list(range(0, 1600, 3)), 2), rows(list(range(1, 1660, 4)), 3))
    timeline = t.meta_client.active.load()
    nodes = set()
    for city in {s.partition for s in t.file_system_view().latest_slices()}:
        ring = committed_ring(t.meta_client.storage, city, ring_committed(timeline))
        assert ring.seq_no == 1
        nodes |= {(city, n.file_id) for n in ring.nodes}
    assert {(s.partition, s.file_id) for s in t.file_system_view().latest_slices()} <= nodes


def in_turn(tmp_path, judges, t: lakehouse.Table, m: Model, java_batch: pa.Table, ours: pa.Table) -> lakehouse.Table:
    """Java upserts ``java_batch``, lakehouse ``ours``; every reader reads the model after each."""
    java = JavaSession(tmp_path, judges)
    java.write(t.path, java_batch, java_options(t))
    java.run()
    m.upsert(java_batch)
    t = lakehouse.open_table(t.path)
    check(t.read(), m, "lakehouse after Java's upsert")
    t.upsert(ours)
    m.upsert(ours)
    java.read(t.path, "final")
    java.run()
    check(java.result("final"), m, "Java after lakehouse's upsert")
    check(hudi_read(t.path), m, "hudi-rs")
    return t
