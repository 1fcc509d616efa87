"""``_hoodie_record_key`` filled from the key column instead of decoded, where a simple key
generator makes the keys of one string field as they are (Hudi's ``SimpleAvroKeyGenerator``,
``KeyGenUtils.getRecordKey``: the field's value as a string), guarded by each file's statistics."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lakehouse
from lakehouse.columns import RECORD_KEY
from lakehouse.config import KeyGeneratorType, TableConfig
from lakehouse.iceberg import background
from lakehouse.read.reader import simple_key_field

SCHEMA = pa.schema([("id", pa.string()), ("n", pa.int64()), ("ts", pa.int64()), ("v", pa.string())])


def cfg(**kw) -> TableConfig:
    return TableConfig(**{"name": "t", "record_key_fields": ("id",), "partition_fields": ("p",), **kw})


@pytest.mark.parametrize("config, schema, want", [
    (cfg(), SCHEMA, "id"),  # SimpleKeyGenerator on a string
    (cfg(key_generator_class=KeyGeneratorType.NON_PARTITION.java_class, partition_fields=()), SCHEMA, "id"),
    (cfg(record_key_fields=("n",)), SCHEMA, None),  # an int64 key is its decimal text: decoded
    (cfg(record_key_fields=("id", "n"), key_generator_class=KeyGeneratorType.COMPLEX.java_class), SCHEMA, None),
    # ComplexKeyGenerator writes "id:value" even for one field.
    (cfg(key_generator_class=KeyGeneratorType.COMPLEX.java_class), SCHEMA, None),
    (cfg(populate_meta_fields=False), SCHEMA, None),  # no meta fields to fill
    (cfg(), pa.schema([("id", pa.large_string())]), "id"),
])
def test_which_tables_fill_the_record_key_from_their_key_column(config, schema, want):
    assert simple_key_field(config, schema) == want


def rows(keys, ts):
    return pa.table({"id": [f"k{k:05d}" for k in keys], "n": list(keys), "ts": [ts] * len(keys),
                     "v": [f"{ts}-{k}" for k in keys]})


@pytest.fixture(params=["MERGE_ON_READ", "COPY_ON_WRITE"])
def table(tmp_path, request):
    t = lakehouse.create_table(str(tmp_path / "t"), name="t", table_type=request.param, record_key="id",
                               ordering_field="ts")
    t.upsert(rows(range(20_000), 1))
    t.upsert(rows(range(0, 20_000, 7), 2))  # logs on Merge-On-Read
    background.wait_all()  # the Iceberg publisher reads the files these tests spy on or rewrite
    return t


def test_reads_never_decode_the_record_key_column(table, monkeypatch):
    want = table.read()
    asked: list[list[str] | None] = []
    real = pq.ParquetFile.read

    def spy(self, columns=None, **kw):
        asked.append(columns)
        return real(self, columns=columns, **kw)

    monkeypatch.setattr(pq.ParquetFile, "read", spy)
    monkeypatch.setattr(pq.ParquetFile, "iter_batches", lambda *a, **k: pytest.fail("not streamed here"))
    got = table.read()
    projected = table.read(columns=["v", "ts"])
    assert asked and all(c is not None and RECORD_KEY not in c for c in asked)
    assert got.sort_by("id").equals(want.sort_by("id"))
    assert got.column(RECORD_KEY).equals(got.column("id"))
    latest = {f"k{k:05d}": f"{2 if k % 7 == 0 else 1}-{k}" for k in range(20_000)}
    assert sorted(projected.column("v").to_pylist()) == sorted(latest.values())


def test_a_base_file_whose_record_keys_differ_from_its_key_column_is_read_as_written(table):
    """A file another writer keyed some other way (here: ``id:value``, as a complex key
    generator would): the file's statistics disagree, so its record keys are decoded, and the
    merge keys rows as Hudi's readers do, by ``_hoodie_record_key``."""
    base = next(s.base_file for s in table.file_system_view().latest_slices())
    path = table.storage.uri(base.path)
    data = pq.read_table(path)
    i = data.schema.get_field_index(RECORD_KEY)
    keyed = pa.array([f"id:{k}" for k in data.column("id").to_pylist()])
    pq.write_table(data.set_column(i, data.schema.field(i), keyed), path)
    got = table.read()
    from_file = got.filter(pa.compute.starts_with(got.column(RECORD_KEY), "id:"))
    assert from_file.num_rows > 0
    assert from_file.column(RECORD_KEY).to_pylist() == [f"id:{k}" for k in from_file.column("id").to_pylist()]
