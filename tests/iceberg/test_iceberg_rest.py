"""Tables found by name through Iceberg's REST protocol: ``lakehouse catalog serve`` (a real
server on 127.0.0.1, started and stopped by PID) answers DuckDB's ``ATTACH ... (TYPE iceberg)``,
pyiceberg's ``RestCatalog`` and Daft from the SQL catalog the table registers in; after every
service each reads what lakehouse's read-optimized read reads."""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request

import pyarrow as pa
import pytest

import lakehouse
from tests.iceberg.iceberg_oracle import assert_same_table, published, view_read
from tests.servers import free_port, http_server

pytest.importorskip("fastapi", reason="the REST catalog is a FastAPI app (pip install -e '.[catalog]')")
pytest.importorskip("uvicorn", reason="the REST catalog is served by uvicorn (pip install -e '.[catalog]')")
from pyiceberg.catalog.rest import RestCatalog  # noqa: E402
from pyiceberg.exceptions import NoSuchTableError  # noqa: E402

from tests.iceberg.duckdb_judge import attach  # noqa: E402

COLS = ["id", "city", "ts", "tags"]


@pytest.fixture
def server(tmp_path):
    """``lakehouse catalog serve`` over a SQLite catalog; yields (catalog URL, REST endpoint)."""
    uri = f"sqlite:///{tmp_path / 'catalog.db'}"
    port = free_port()
    cli = os.path.join(os.path.dirname(sys.executable), "lakehouse")
    endpoint = f"http://127.0.0.1:{port}"
    with http_server([cli, "catalog", "serve", "--uri", uri, "--port", str(port)], f"{endpoint}/v1/config",
                     tmp_path / "catalog-server.log", "the catalog server"):
        yield uri, endpoint


def _rows(table: pa.Table) -> list[tuple]:
    return sorted(tuple(r[c] for c in COLS) for r in table.select(COLS).to_pylist())


def _batch(ids, ts):
    return pa.table({"id": [f"k{i}" for i in ids], "city": ["sf" if i % 2 else "la" for i in ids],
                     "ts": [ts] * len(ids), "tags": [[f"t{ts}"] * (i % 3) for i in ids]})


@pytest.mark.parametrize("view", ["read_optimized", "snapshot"])
def test_duckdb_pyiceberg_and_daft_find_the_table_by_name_after_every_service(server, tmp_path, view):
    uri, endpoint = server
    t = lakehouse.create_table(str(tmp_path / "trips"), name="trips", record_key="id", partition_by="city",
                               ordering_field="ts", options={
                                   "hoodie.meta.sync.iceberg.catalog.uri": uri,
                                   "hoodie.meta.sync.iceberg.catalog.namespace": "lakehouse",
                                   "hoodie.meta.sync.iceberg.view": view,
                                   "hoodie.cleaner.commits.retained": 1})
    rest = RestCatalog("lake", uri=endpoint)
    daft = pytest.importorskip("daft", reason="Daft reads the table through the REST catalog")
    steps = {"insert": lambda: t.upsert(_batch(range(6), 1)),
             "upsert": lambda: t.upsert(_batch(range(3, 9), 2)),
             "compaction": lambda: t.compact(force=True),
             "clean": lambda: (t.upsert(_batch(range(2), 3)), t.compact(force=True), t.clean()),
             "rollback": lambda: (t.upsert(_batch([40], 4)), t.rollback())}
    seen = set()
    for what, step in steps.items():
        step()
        published(t)
        ours = view_read(t)
        # A fresh connection per step: what a new query of a user sees.
        con = attach(endpoint)
        assert con.execute("SELECT table_name FROM duckdb_tables() WHERE database_name = 'lake'").fetchall() == [("trips",)]
        theirs = con.execute(f"SELECT {', '.join(COLS)} FROM lake.lakehouse.trips").arrow().read_all()
        assert _rows(theirs) == _rows(ours), f"DuckDB by name, after {what}"
        loaded = rest.load_table("lakehouse.trips")
        assert loaded.metadata_location not in seen, f"the pointer did not move after {what}"
        seen.add(loaded.metadata_location)
        assert_same_table(loaded.scan().to_arrow(), ours, f"pyiceberg RestCatalog, after {what}")
        assert _rows(daft.read_iceberg(loaded).to_arrow()) == _rows(ours), f"Daft by name, after {what}"


def test_the_catalog_is_read_only_and_names_what_is_missing(server):
    _, endpoint = server
    rest = RestCatalog("lake", uri=endpoint)
    with pytest.raises(NoSuchTableError):
        rest.load_table("lakehouse.nope")
    req = urllib.request.Request(f"{endpoint}/v1/namespaces", method="POST",
                                 data=json.dumps({"namespace": ["x"]}).encode(),
                                 headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req)
    assert e.value.code == 405
    body = json.loads(e.value.read())
    assert body["error"]["type"] == "NotAllowedException" and "read-only" in body["error"]["message"]
