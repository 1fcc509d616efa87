"""The table a user gets with no options. A Merge-On-Read table created with defaults uses the
BUCKET index with consistent hashing (each partition's hash ring starting with the bucket count
its first write sizes, resized by clustering): every write appends to logs, no base file is
rewritten by a write, and an upsert's cost follows its batch, not the table. Copy-On-Write keeps
Hudi's SIMPLE index."""

from __future__ import annotations

import hashlib
import math
import os

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import lakehouse
from lakehouse.config import IndexType
from lakehouse.errors import CommitConflictError, ConfigError, UnsupportedTableError
from lakehouse.file_group.naming import bucket_of_file_id
from lakehouse.properties import parse_properties
from lakehouse.write.bucket_sizing import AUTO_KEY
from lakehouse.bucket_identifier import bucket_ids
from lakehouse.iceberg import background
from tests.interop.hudi_oracle import hudi_read
from tests.write.test_operations import files


def _batch(ids, ts=1, city=None):
    return pa.table({"id": [f"k{i:06d}" for i in ids],
                     "city": [city or ["sf", "la", "ny"][i % 3] for i in ids],
                     "ts": [ts] * len(ids), "v": [i * 10 + ts for i in ids]})


# A first write's partitions of ~33 KB (1,000 rows of _batch) then need two buckets each.
SMALL_FILES = {"hoodie.parquet.max.file.size": 20_000, "hoodie.parquet.small.file.limit": 0}


def _props(path) -> dict[str, str]:
    return parse_properties((path / ".hoodie" / "hoodie.properties").read_text("latin-1"))


def _ring_ids(t) -> dict[str, set[str]]:
    """Each written partition's bucket file ids: the nodes of its ring in force."""
    from lakehouse.consistent_hashing import committed_ring, ring_committed
    t = lakehouse.open_table(t.path)
    timeline = t.meta_client.active.load()
    return {p: {n.file_id for n in committed_ring(t.meta_client.storage, p, ring_committed(timeline)).nodes}
            for p in {s.partition for s in t.file_system_view().latest_slices()}}


def _digests(path, pred) -> dict[str, str]:
    return {os.path.relpath(f, path): hashlib.sha256(open(f, "rb").read()).hexdigest()
            for f in files(path, pred)}


def test_a_mor_table_with_no_options_stores_the_bucket_index_where_hudis_spark_writers_read_it(tmp_path):
    """Hudi's HoodieSparkSqlWriter (mergeParamsAndGetHoodieConfig) and Spark SQL
    (ProvidesHoodieConfig.combineOptions) merge every key of hoodie.properties into their write
    config: with these stored, a Spark writer of Apache Hudi hashes keys into the same buckets
    (HoodieIndexConfig: hoodie.index.type, hoodie.bucket.index.num.buckets,
    hoodie.bucket.index.hash.field, hoodie.index.bucket.engine)."""
    t = lakehouse.create_table(str(tmp_path / "m"), name="m", record_key="id", partition_by="city",
                               ordering_field="ts")
    props = _props(tmp_path / "m")
    assert props["hoodie.table.type"] == "MERGE_ON_READ"
    assert props["hoodie.index.type"] == "BUCKET" and props["hoodie.index.bucket.engine"] == "CONSISTENT_HASHING"
    assert props["hoodie.bucket.index.max.num.buckets"] == "65536"  # Hudi's unset limit: the initial count
    assert props["hoodie.bucket.index.num.buckets"] == "1" and props[AUTO_KEY] == "true"  # provisional
    assert props["hoodie.bucket.index.hash.field"] == "id"
    assert t.config.index_type is IndexType.BUCKET
    t.upsert(_batch(range(10)))
    props = _props(tmp_path / "m")
    assert props["hoodie.bucket.index.num.buckets"] == "1" and AUTO_KEY not in props  # fixed
    cow = lakehouse.create_table(str(tmp_path / "c"), name="c", record_key="id", table_type="COPY_ON_WRITE",
                                 ordering_field="ts")
    assert cow.config.index_type is IndexType.SIMPLE and _props(tmp_path / "c")["hoodie.index.type"] == "SIMPLE"
    # An index named by option (as Hudi users pass it) is the table's index.
    simple = lakehouse.create_table(str(tmp_path / "s"), name="s", record_key="id", ordering_field="ts",
                                    options={"hoodie.index.type": "SIMPLE"})
    assert simple.config.index_type is IndexType.SIMPLE


def test_every_write_of_a_default_mor_table_appends_and_no_base_file_is_rewritten(tmp_path):
    p = tmp_path / "t"
    t = lakehouse.create_table(str(p), name="t", record_key="id", partition_by="city", ordering_field="ts")
    t.bulk_insert(_batch(range(3000)), options=SMALL_FILES)
    buckets = t.config.bucket_num
    bases = _digests(p, lambda n: n.endswith(".parquet"))
    assert buckets > 1 and 3 < len(bases) <= 3 * buckets
    rings = _ring_ids(t)
    assert all(len(ids) == buckets for ids in rings.values())
    assert {(os.path.dirname(f), os.path.basename(f).split("_")[0]) for f in bases} <= \
        {(p, fid) for p, ids in rings.items() for fid in ids}
    t.upsert(_batch(list(range(0, 3000, 7)) + list(range(3000, 3600)), ts=2))  # updates and inserts
    t.insert(_batch(range(3600, 3700), ts=3))
    t.delete(_batch(range(0, 3000, 11)).select(["id", "city"]))
    assert _digests(p, lambda n: n.endswith(".parquet")) == bases, "a write rewrote or added a base file"
    logs = files(p, lambda n: ".log." in n)
    assert len(logs) >= 3 and len(logs) <= 3 * 3 * buckets
    expect = {f"k{i:06d}" for i in range(3700)} - {f"k{i:06d}" for i in range(0, 3000, 11)}
    got = t.read(columns=["id", "ts"]).to_pylist()
    assert {r["id"] for r in got} == expect and len(got) == len(expect)
    assert sorted((r["id"], r["ts"]) for r in hudi_read(p).select(["id", "ts"]).to_pylist()) == \
        sorted((r["id"], r["ts"]) for r in got)


def test_an_upsert_writes_what_its_batch_needs_whatever_the_size_of_the_table(tmp_path):
    """No lookup of stored keys, no base file merged: the same batch writes the same number of
    files, and about the same bytes, into a table ten times larger."""
    written = {}
    for n in (2_000, 20_000):
        p = tmp_path / f"t{n}"
        t = lakehouse.create_table(str(p), name="t", record_key="id", partition_by="city", ordering_field="ts")
        t.bulk_insert(_batch(range(n)))
        before = _digests(p, lambda name: True)
        t.upsert(_batch(list(range(0, 2000, 10)) + list(range(10**6, 10**6 + 1000)), ts=2))
        after = _digests(p, lambda name: True)
        added = [f for f in after if f not in before]
        written[n] = (len(added), sum(os.path.getsize(p / f) for f in added))
        assert t.config.bucket_num == 1  # both first writes fit one base file per partition
    (files_small, bytes_small), (files_big, bytes_big) = written[2_000], written[20_000]
    assert files_small == files_big <= 3  # a log file per partition
    assert bytes_big < 1.5 * bytes_small


def test_records_land_in_the_buckets_hudi_hashes_them_to(tmp_path):
    """The SIMPLE engine, Hudi's BucketIdentifier.getBucketId: (List<String>.hashCode() &
    Integer.MAX_VALUE) % N of the hash field values; the file group of bucket b is named with b,
    8 digits first. (Consistent hashing's ConsistentBucketIdentifier:
    tests/services/test_bucket_resize.py.)"""
    p = tmp_path / "t"
    t = lakehouse.create_table(str(p), name="t", record_key="id", partition_by="city", ordering_field="ts",
                               options={"hoodie.bucket.index.num.buckets": 4, "hoodie.index.bucket.engine": "SIMPLE"})
    t.upsert(_batch(range(500)))
    assert AUTO_KEY not in _props(p) and t.config.bucket_num == 4  # given, so never resized
    for f in files(p, lambda n: n.endswith(".parquet")):
        keys = pq.read_table(f, columns=["_hoodie_record_key"]).column(0)
        bucket = bucket_of_file_id(os.path.basename(f).split("_")[0])
        assert set(bucket_ids([keys], 4).tolist()) == {bucket}


@pytest.mark.parametrize("index,options,bloom", [
    (None, {}, False),                                           # default MOR: BUCKET
    (None, {"hoodie.parquet.bloom.filter.enabled": "true"}, True),
    ("SIMPLE", {}, True),                                        # Hudi's default: always written
    ("BLOOM", {"hoodie.parquet.bloom.filter.enabled": "false"}, True),  # the index reads it
])
def test_the_bloom_filter_is_written_where_something_reads_it(tmp_path, index, options, bloom):
    """Hudi 0.15's hoodie.parquet.bloom.filter.enabled (HoodieFileWriterFactory.enableBloomFilter:
    on by default, always for a BLOOM index); lakehouse's default leaves it out of BUCKET tables."""
    p = tmp_path / "t"
    t = lakehouse.create_table(str(p), name="t", record_key="id", ordering_field="ts", index=index,
                               options=options)
    t.upsert(_batch(range(100)))
    t.compact(force=True) if t.config.index_type is IndexType.BUCKET else None
    for f in files(p, lambda n: n.endswith(".parquet")):
        md = pq.read_metadata(f).metadata
        assert (b"org.apache.hudi.bloomfilter" in md) is bloom, f


def test_a_bucket_hash_field_outside_the_record_key_is_refused(tmp_path):
    """As HoodieIndexConfig.validateBucketIndexConfig: "Bucket index key (if configured) must be
    subset of record key"."""
    with pytest.raises(ConfigError, match="hoodie.bucket.index.hash.field names ts"):
        lakehouse.create_table(str(tmp_path / "t"), name="t", record_key="id", ordering_field="ts",
                               options={"hoodie.bucket.index.hash.field": "ts"})
    assert not (tmp_path / "t").exists()


def test_a_table_whose_bucket_engine_changed_after_writes_is_read_but_not_written(tmp_path):
    """Its file groups are not the nodes of the hash rings: a write by the rings would put each
    key in a second file group."""
    p = tmp_path / "t"
    t = lakehouse.create_table(str(p), name="t", record_key="id", ordering_field="ts",
                               options={"hoodie.index.bucket.engine": "SIMPLE"})
    t.upsert(_batch(range(10)))
    background.wait_all()  # the Iceberg publisher reads the file being rewritten
    props = (p / ".hoodie" / "hoodie.properties").read_text("latin-1")
    (p / ".hoodie" / "hoodie.properties").write_text(
        props.replace("hoodie.index.bucket.engine=SIMPLE", "hoodie.index.bucket.engine=CONSISTENT_HASHING"),
        "latin-1")
    t = lakehouse.open_table(str(p))
    assert t.read().num_rows == 10
    with pytest.raises(UnsupportedTableError, match="not a bucket of the table.s hash ring"):
        t.upsert(_batch(range(5)))
    assert lakehouse.open_table(str(p)).read().num_rows == 10


def test_the_first_write_sizes_the_bucket_count_and_later_writes_keep_it(tmp_path):
    """Enough buckets that the first write's largest partition fits each bucket's base file
    under hoodie.parquet.max.file.size (as bulk insert sizes its files); stored in
    hoodie.properties before any file is written; never changed after."""
    p = tmp_path / "t"
    t = lakehouse.create_table(str(p), name="t", record_key="id", partition_by="city", ordering_field="ts")
    first = pa.concat_tables([_batch(range(3000)), _batch(range(3000, 3600), city="sf")])
    largest = first.filter(pc.equal(first.column("city"), "sf")).nbytes
    t.bulk_insert(first, options=SMALL_FILES)
    expected = math.ceil(largest / SMALL_FILES["hoodie.parquet.max.file.size"])
    assert expected > 2 and t.config.bucket_num == expected
    props = _props(p)
    assert props["hoodie.bucket.index.num.buckets"] == str(expected) and AUTO_KEY not in props
    assert lakehouse.open_table(str(p)).config.bucket_num == expected
    t.upsert(_batch(range(10**5, 2 * 10**5)), options=SMALL_FILES)  # much larger: no resize
    assert _props(p)["hoodie.bucket.index.num.buckets"] == str(expected)
    rings = _ring_ids(t)
    assert len(rings["sf"]) == expected
    assert {os.path.basename(f).split("_")[0] for f in files(p / "sf", lambda n: n.endswith(".parquet"))} == rings["sf"]
    got = t.read(columns=["id"]).num_rows
    assert got == 3600 + 100_000 and hudi_read(p).num_rows == got


def test_an_unpartitioned_table_gets_a_few_buckets_even_when_small(tmp_path):
    t = lakehouse.create_table(str(tmp_path / "t"), name="t", record_key="id", ordering_field="ts")
    assert _props(tmp_path / "t")["hoodie.bucket.index.num.buckets"] == "4"
    t.upsert(pa.table({"id": ["a", "b"], "ts": [1, 1]}))
    assert t.config.bucket_num == 4 and AUTO_KEY not in _props(tmp_path / "t")


def test_a_table_someone_already_wrote_keeps_its_bucket_count(tmp_path):
    """A writer that does not size buckets (a Spark job, Java Hudi) may write first: its files
    are hashed with the stored count, so the first lakehouse write only clears the marker."""
    p = tmp_path / "t"
    t = lakehouse.create_table(str(p), name="t", record_key="id", partition_by="city", ordering_field="ts")
    t.upsert(_batch(range(30)), commit=False)  # written, not committed: the count is in use
    props = (p / ".hoodie" / "hoodie.properties").read_text("latin-1")
    (p / ".hoodie" / "hoodie.properties").write_text(props + f"{AUTO_KEY}=true\n", "latin-1")
    t = lakehouse.open_table(str(p))
    t.bulk_insert(_batch(range(3000, 9000)), options=SMALL_FILES)
    assert t.config.bucket_num == 1 and _props(p)["hoodie.bucket.index.num.buckets"] == "1"
    assert AUTO_KEY not in _props(p)


def test_a_write_hashed_with_another_bucket_count_than_the_tables_cannot_commit(tmp_path):
    """With several writers, the commit checks under the table lock that the count its keys were
    hashed with is still the table's (another writer's first write fixes it)."""
    p = tmp_path / "t"
    t = lakehouse.create_table(str(p), name="t", record_key="id", partition_by="city", ordering_field="ts",
                               options={"hoodie.write.concurrency.mode": "OPTIMISTIC_CONCURRENCY_CONTROL",
                                        "hoodie.bucket.index.num.buckets": 2})
    t.upsert(_batch(range(30)))
    pending = t.upsert(_batch(range(30, 60)), commit=False)
    props = (p / ".hoodie" / "hoodie.properties").read_text("latin-1")
    background.wait_all()  # the Iceberg publisher reads the file being rewritten
    (p / ".hoodie" / "hoodie.properties").write_text(
        props.replace("hoodie.bucket.index.num.buckets=2", "hoodie.bucket.index.num.buckets=3"), "latin-1")
    with pytest.raises(CommitConflictError, match="hashed its keys into 2 buckets"):
        lakehouse.open_table(str(p)).commit(pending)
    t = lakehouse.open_table(str(p))
    assert t.timeline.get(pending) is None and t.read(columns=["id"]).num_rows == 30
