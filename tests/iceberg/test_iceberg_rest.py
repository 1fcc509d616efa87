"""Tables found by name through Iceberg's REST protocol: ``lakehouse catalog serve`` (a real
server on 127.0.0.1, started and stopped by PID) answers DuckDB's ``ATTACH ... (TYPE iceberg)``,
pyiceberg's ``RestCatalog`` and Daft from the SQL catalog the table registers in; after every
service each reads what lakehouse's read-optimized read reads."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pyarrow as pa
import pytest

import lakehouse
from tests.iceberg.iceberg_oracle import assert_same_table

pytest.importorskip("fastapi", reason="the REST catalog is a FastAPI app (pip install -e '.[catalog]')")
pytest.importorskip("uvicorn", reason="the REST catalog is served by uvicorn (pip install -e '.[catalog]')")
from tests.iceberg.duckdb_judge import attach  # noqa: E402
from pyiceberg.catalog.rest import RestCatalog  # noqa: E402
from pyiceberg.exceptions import NoSuchTableError  # noqa: E402

COLS = ["id", "city", "ts", "tags"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def server(tmp_path):
    """``lakehouse catalog serve`` over a SQLite catalog; yields (catalog URL, REST endpoint)."""
    uri = f"sqlite:///{tmp_path / 'catalog.db'}"
    port = _free_port()
    cli = os.path.join(os.path.dirname(sys.executable), "lakehouse")
    proc = subprocess.Popen([cli, "catalog", "serve", "--uri", uri, "--port", str(port)],
                            start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{endpoint}/v1/config", timeout=2).read()
                break
            except (urllib.error.URLError, ConnectionError):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"the catalog server did not start: {proc.stdout.read().decode()}")
                time.sleep(0.1)
        yield uri, endpoint
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


def _rows(table: pa.Table) -> list[tuple]:
    return sorted(tuple(r[c] for c in COLS) for r in table.select(COLS).to_pylist())


def _batch(ids, ts):
    return pa.table({"id": [f"k{i}" for i in ids], "city": ["sf" if i % 2 else "la" for i in ids],
                     "ts": [ts] * len(ids), "tags": [[f"t{ts}"] * (i % 3) for i in ids]})


def test_duckdb_pyiceberg_and_daft_find_the_table_by_name_after_every_service(server, tmp_path):
    uri, endpoint = server
    t = lakehouse.create_table(str(tmp_path / "trips"), name="trips", record_key="id", partition_by="city",
                               ordering_field="ts", options={
                                   "hoodie.meta.sync.iceberg.catalog.uri": uri,
                                   "hoodie.meta.sync.iceberg.catalog.namespace": "lakehouse",
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
        ours = t.read(read_optimized=True)
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
