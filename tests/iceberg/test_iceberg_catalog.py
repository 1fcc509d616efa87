"""The table found by name in an Iceberg SQL catalog (hoodie.meta.sync.iceberg.catalog.*):
pyiceberg's SqlCatalog loads ``<namespace>.<table>`` after every service and reads what the
read-optimized read reads."""

from __future__ import annotations

import pyarrow as pa
import pytest

import lakehouse
from tests.iceberg.iceberg_oracle import assert_same_table

pytest.importorskip("sqlalchemy", reason="the SQL catalog needs SQLAlchemy (pyiceberg[sql-sqlite])")
from pyiceberg.catalog.sql import SqlCatalog  # noqa: E402


def _batch(ids, ts):
    return pa.table({"id": [f"k{i}" for i in ids], "city": ["sf" if i % 2 else "la" for i in ids],
                     "ts": [ts] * len(ids)})


def _create(path, uri, **extra):
    return lakehouse.create_table(str(path), name="trips", record_key="id", partition_by="city",
                                  ordering_field="ts", options={
                                      "hoodie.meta.sync.iceberg.catalog.uri": uri,
                                      "hoodie.meta.sync.iceberg.catalog.namespace": "lakehouse",
                                      "hoodie.cleaner.commits.retained": 1, **extra})


def _by_name(uri):
    return SqlCatalog("lakehouse", uri=uri).load_table("lakehouse.trips")


def test_the_catalog_pointer_moves_with_every_service(tmp_path):
    uri = f"sqlite:///{tmp_path / 'catalog.db'}"
    t = _create(tmp_path / "trips", uri)
    t.upsert(_batch(range(6), 1))
    assert_same_table(_by_name(uri).scan().to_arrow(), t.read(read_optimized=True), "after a write")
    steps = {"upsert": lambda: t.upsert(_batch(range(3, 9), 2)),
             "compaction": lambda: t.compact(force=True),
             "clean": lambda: (t.upsert(_batch(range(2), 3)), t.compact(force=True), t.clean()),
             "rollback": lambda: (t.upsert(_batch([40], 4)), t.rollback())}
    for what, step in steps.items():
        before = _by_name(uri).metadata_location
        step()
        found = _by_name(uri)
        assert found.metadata_location != before, what
        assert_same_table(found.scan().to_arrow(), t.read(read_optimized=True), what)


@pytest.mark.iceberg_failure_ok  # the taken name is logged as a warning
def test_the_url_can_come_from_the_environment_and_a_taken_name_is_left_alone(tmp_path, monkeypatch, caplog):
    uri = f"sqlite:///{tmp_path / 'catalog.db'}"
    monkeypatch.setenv("LAKEHOUSE_TEST_CATALOG", uri)
    a = _create(tmp_path / "a", "env:LAKEHOUSE_TEST_CATALOG")
    a.upsert(_batch(range(3), 1))
    first = _by_name(uri).metadata_location
    assert first.startswith(a.path)
    assert uri not in (tmp_path / "a" / ".hoodie" / "hoodie.properties").read_text("latin-1")
    # Another table under the same name does not take it over (it says so in the log).
    b = _create(tmp_path / "b", uri)
    with caplog.at_level("WARNING", "lakehouse.iceberg"):
        b.upsert(_batch(range(3), 1))
    assert _by_name(uri).metadata_location == first
    assert "registered for" in caplog.text
