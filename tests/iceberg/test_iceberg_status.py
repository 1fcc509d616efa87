"""lakehouse.iceberg.status: the snapshot row count comes from the published summaries alone and
equals what a read returns, commit after commit (upserts, deletes, a compaction); the catalog is
named, and a catalog URL with a password is never shown."""

from __future__ import annotations

import pyarrow as pa
import pytest

import lakehouse
from lakehouse.iceberg import sync_iceberg
from lakehouse.airflow.ui.query import snippets
from lakehouse.iceberg.status import iceberg_status


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_the_snapshot_row_count_is_what_a_read_returns(tmp_path, table_type):
    t = lakehouse.create_table(str(tmp_path / "t"), name="t", table_type=table_type, record_key="id",
                               partition_by="p", ordering_field="ts", index="BUCKET",
                               options={"hoodie.bucket.index.num.buckets": 2,
                                        "hoodie.meta.sync.iceberg.catalog.uri": f"sqlite:///{tmp_path}/cat.db"})
    steps = [lambda: t.upsert(pa.table({"id": list(range(50)), "p": ["a", "b"] * 25, "ts": [1] * 50})),
             lambda: t.upsert(pa.table({"id": list(range(40, 70)), "p": ["a", "b"] * 15, "ts": [2] * 30})),
             lambda: t.delete(pa.table({"id": [0, 1, 2], "p": ["a", "b", "a"]}))]
    if table_type == "MERGE_ON_READ":
        steps.append(lambda: t.compact(force=True))
    for step in steps:
        step()
        sync_iceberg(t)
        s = iceberg_status(t)
        assert s["snapshot_rows"] == t.read().num_rows
        assert s["instant"] == t.timeline.completed_writes().last.time
    assert s["snapshot_rows"] == 67  # keys 0-69, three deleted
    assert s["enabled"] and s["version"] >= len(steps) and s["metadata_location"].endswith(".metadata.json")
    assert s["catalog"] == {"name": "lakehouse", "namespace": "default", "table": "t", "identifier": "default.t",
                            "uri": f"sqlite:///{tmp_path}/cat.db"}


@pytest.mark.parametrize("url", ["postgresql+psycopg2://lake:s3cr3t@db.example/cat",
                                 "postgresql+psycopg2://lake@db.example/cat?password=s3cr3t",
                                 "postgresql+psycopg2://lake@db.example/cat?sslmode=require&token=s3cr3t"])
def test_a_catalog_url_with_a_credential_is_not_shown(tmp_path, url):
    t = lakehouse.create_table(str(tmp_path / "t"), name="t", record_key="id",
                               options={"hoodie.meta.sync.iceberg.catalog.uri": url})
    s = iceberg_status(t)
    assert s["catalog"]["uri"] is None and "s3cr3t" not in repr(s)
    assert "s3cr3t" not in repr(snippets("t", str(tmp_path / "t"), s))


def test_a_catalog_url_from_the_environment_is_shown_as_its_reference_and_its_problem_hides_the_credential(
        tmp_path, monkeypatch):
    """The URL an ``env:NAME`` reference resolves to is never shown: not in the panel, not in
    the problem it has (a REST URL here, which lakehouse does not register in)."""
    monkeypatch.setenv("LAKEHOUSE_TEST_CATALOG", "https://lake:s3cr3t@rest.example/v1?token=s3cr3t")
    t = lakehouse.create_table(str(tmp_path / "t"), name="t", record_key="id",
                               options={"hoodie.meta.sync.iceberg.catalog.uri": "env:LAKEHOUSE_TEST_CATALOG"})
    s = iceberg_status(t)
    assert s["problem"] and "REST" in s["problem"] and "rest.example" in s["problem"]
    assert "s3cr3t" not in repr(s)


def test_publishing_off_says_so(tmp_path):
    t = lakehouse.create_table(str(tmp_path / "t"), name="t", record_key="id",
                               options={"hoodie.meta.sync.iceberg.enabled": "false"})
    t.upsert(pa.table({"id": [1]}))
    s = iceberg_status(t)
    assert s["enabled"] is False and s["metadata_location"] is None and s["snapshot_rows"] is None


@pytest.mark.parametrize("url,shown", [
    ("postgresql+psycopg2://lake:s3cr3t@db.example:5432/cat?password=s3cr3t&sslmode=require",
     "postgresql+psycopg2://lake:***@db.example:5432/cat?password=***&sslmode=require"),
    # only the user part holds it: the query stays as written, its encoding too
    ("postgresql://lake:s3cr3t@db.example/cat?application_name=a%20b",
     "postgresql://lake:***@db.example/cat?application_name=a%20b"),
    ("sqlite:////tmp/cat.db", "sqlite:////tmp/cat.db"),
])
def test_a_catalog_url_in_a_message_has_its_credentials_masked(url, shown):
    from lakehouse.config.services import masked_url
    assert masked_url(url) == shown
