"""DuckDB with its Iceberg extension, loaded from the PyPI packages (no download at test time):
the second outside judge of the published metadata, by path (``iceberg_scan``) and by name
(``ATTACH`` of an Iceberg REST catalog)."""

from __future__ import annotations

import glob
import os

import pytest

duckdb = pytest.importorskip("duckdb", reason="DuckDB is the second Iceberg judge (pip install -e '.[dev]')")
PACKAGES = [pytest.importorskip(m, reason=f"DuckDB's {m} package (pip install -e '.[dev]')")
            for m in ("duckdb_extension_httpfs", "duckdb_extension_avro", "duckdb_extension_iceberg")]


def connect():
    con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
    for pkg in PACKAGES:
        found = glob.glob(os.path.join(os.path.dirname(pkg.__file__), "extensions", "*", "*.duckdb_extension"))
        if not found:
            pytest.skip(f"{pkg.__name__} holds no extension for this platform")
        con.execute(f"LOAD '{found[0]}'")
    return con


def attach(endpoint: str, token: str | None = None, alias: str = "lake"):
    """A fresh connection with the REST catalog at ``endpoint`` attached as ``alias``."""
    con = connect()
    if token is None:
        con.execute(f"ATTACH '' AS {alias} (TYPE iceberg, ENDPOINT '{endpoint}', AUTHORIZATION_TYPE 'none')")
    else:
        con.execute(f"CREATE SECRET {alias}_token (TYPE iceberg, TOKEN '{token}')")
        con.execute(f"ATTACH '' AS {alias} (TYPE iceberg, ENDPOINT '{endpoint}', SECRET {alias}_token)")
    return con
