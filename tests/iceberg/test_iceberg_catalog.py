"""The table found by name in an Iceberg SQL catalog (hoodie.meta.sync.iceberg.catalog.*):
pyiceberg's SqlCatalog loads ``<namespace>.<table>`` after every service and reads what the
read-optimized read reads."""

from __future__ import annotations

import pyarrow as pa
import pytest

import lakehouse
from lakehouse.iceberg import sync_iceberg
from tests.iceberg.iceberg_oracle import assert_same_table, published, view_read

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
    published(t)
    assert_same_table(_by_name(uri).scan().to_arrow(), view_read(t), "after a write")
    # (what prepares the service, the service): the pointer is taken after the preparation, so
    # each service has to move it itself.
    steps = {"upsert": (None, lambda: t.upsert(_batch(range(3, 9), 2))),
             "compaction": (None, lambda: t.compact(force=True)),
             "clean": (lambda: (t.upsert(_batch(range(2), 3)), t.compact(force=True)), t.clean),
             "rollback": (lambda: t.upsert(_batch([40], 4)), t.rollback)}
    for what, (prepare, step) in steps.items():
        if prepare:
            prepare()
        published(t)
        before = _by_name(uri).metadata_location
        result = step()
        published(t)
        if what == "clean":
            assert result.files_deleted > 0, "the clean had nothing to do: the test needs one that does"
        found = _by_name(uri)
        assert found.metadata_location != before, what
        # ...to the table's newest metadata (a sync with nothing new to publish names it).
        assert found.metadata_location == sync_iceberg(lakehouse.open_table(t.path)).metadata_location, what
        assert_same_table(found.scan().to_arrow(), view_read(t), what)


@pytest.mark.parametrize("uri", ["http://127.0.0.1:8181", "https://catalog.example.com/api",
                                 "thrift://metastore:9083", "catalog.db", "env:"])
def test_a_catalog_url_lakehouse_cannot_register_in_is_refused_before_the_table_exists(tmp_path, uri):
    with pytest.raises(lakehouse.errors.ConfigError, match="hoodie.meta.sync.iceberg.catalog.uri") as e:
        _create(tmp_path / "trips", uri)
    assert e.value.help
    assert not (tmp_path / "trips").exists()


@pytest.mark.iceberg_failure_ok  # the taken name is logged as a warning
def test_the_url_can_come_from_the_environment_and_a_taken_name_is_left_alone(tmp_path, monkeypatch, caplog):
    uri = f"sqlite:///{tmp_path / 'catalog.db'}"
    monkeypatch.setenv("LAKEHOUSE_TEST_CATALOG", uri)
    a = _create(tmp_path / "a", "env:LAKEHOUSE_TEST_CATALOG")
    a.upsert(_batch(range(3), 1))
    published(a)
    first = _by_name(uri).metadata_location
    assert first.startswith(a.path)
    assert uri not in (tmp_path / "a" / ".hoodie" / "hoodie.properties").read_text("latin-1")
    # Another table under the same name does not take it over (it says so in the log).
    b = _create(tmp_path / "b", uri)
    with caplog.at_level("WARNING", "lakehouse.iceberg"):
        b.upsert(_batch(range(3), 1))
        published(b)
    assert _by_name(uri).metadata_location == first
    assert "registered for" in caplog.text


def test_an_env_url_naming_a_rest_catalog_is_refused_where_it_is_resolved(monkeypatch):
    from lakehouse.iceberg.catalog import resolve_uri
    from lakehouse.errors import IcebergSyncError

    monkeypatch.setenv("LAKEHOUSE_TEST_CATALOG", "http://127.0.0.1:8181")
    with pytest.raises(IcebergSyncError, match="REST or Hive catalog"):
        resolve_uri("env:LAKEHOUSE_TEST_CATALOG")
    monkeypatch.setenv("LAKEHOUSE_TEST_CATALOG", "sqlite:////tmp/catalog.db")
    assert resolve_uri("env:LAKEHOUSE_TEST_CATALOG") == "sqlite:////tmp/catalog.db"
