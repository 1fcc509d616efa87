"""The table found by name: its Iceberg metadata registered in an Iceberg SQL catalog.

The catalog is Iceberg's JDBC catalog layout (the ``iceberg_tables`` table: catalog name,
namespace, table name, ``metadata_location``, ``previous_metadata_location``), which pyiceberg's
``SqlCatalog``, Iceberg's Java ``JdbcCatalog`` (Spark, Trino, Flink) and DuckDB through them
read. The first publish registers the table (pyiceberg's ``register_table``, which also creates
the catalog's tables); every later publish moves the pointer with the JDBC catalog's own
optimistic update (``UPDATE ... WHERE metadata_location = <the one we read>``), forward only: a
pointer already at a newer version of this table's metadata stays.

A name registered for another table's metadata is never taken over: the publish logs why and
leaves the catalog alone (the commit is durable either way; hooks never fail it).
"""

from __future__ import annotations

import functools
import logging
import os
import re
from dataclasses import dataclass

from lakehouse.config import IcebergConfig
from lakehouse.config.services import catalog_url_problem, masked_url
from lakehouse.errors import IcebergSyncError
from lakehouse.iceberg.store import METADATA_DIR

log = logging.getLogger("lakehouse.iceberg")

_VERSION = re.compile(r"/v(\d+)\.metadata\.json$")


@dataclass(frozen=True)
class CatalogEntry:
    catalog: str
    namespace: str
    name: str
    uri: str

    @property
    def identifier(self) -> str:
        return f"{self.namespace}.{self.name}"


def catalog_entry(config: IcebergConfig, table_name: str, database: str) -> CatalogEntry | None:
    """Where ``config`` registers the table (None: no catalog configured)."""
    uri = config.catalog_uri.strip()
    if not uri:
        return None
    return CatalogEntry(config.catalog_name, config.catalog_namespace or database, table_name,
                        resolve_uri(uri))


def resolve_uri(uri: str) -> str:
    """The catalog's SQLAlchemy URL from ``hoodie.meta.sync.iceberg.catalog.uri`` (``env:NAME``
    reads it from the environment), checked."""
    uri = uri.strip()
    if uri.startswith("env:"):
        var = uri.removeprefix("env:")
        uri = os.environ.get(var, "").strip()
        if not uri:
            raise IcebergSyncError(f"hoodie.meta.sync.iceberg.catalog.uri=env:{var}, but {var} is not set",
                                   help=f"export {var} (the catalog's SQLAlchemy URL) where the table is written")
    problem = catalog_url_problem(uri)
    if problem is not None:
        raise IcebergSyncError(f"the Iceberg catalog URL {masked_url(uri)!r} {problem[0]}", help=problem[1])
    return uri


def _version(location: str) -> int:
    m = _VERSION.search(location)
    return int(m.group(1)) if m else -1


def _same_table(location: str, table_uri: str) -> bool:
    return location.startswith(f"{table_uri.rstrip('/')}/{METADATA_DIR}/")


@functools.lru_cache(maxsize=16)
def sql_catalog(name: str, uri: str):
    """One catalog object per catalog and process: building one opens an engine and checks
    (or creates) the catalog's tables, which every publish would otherwise repeat."""
    from pyiceberg.catalog.sql import SqlCatalog  # noqa: PLC0415 - optional: pyiceberg
    return SqlCatalog(name, uri=uri)


def register(entry: CatalogEntry, table_uri: str, metadata_location: str) -> str:
    """Point ``entry`` at ``metadata_location``; returns what was done (for logs and tests)."""
    # pyiceberg (and SQLAlchemy) are needed only by tables that name a catalog.
    from pyiceberg.exceptions import TableAlreadyExistsError  # noqa: PLC0415
    from sqlalchemy import text  # noqa: PLC0415 - optional: comes with pyiceberg[sql-*]

    catalog = sql_catalog(entry.catalog, entry.uri)
    for _ in range(3):
        with catalog.engine.connect() as con:
            row = con.execute(text(
                "SELECT metadata_location FROM iceberg_tables WHERE catalog_name = :c AND "
                "table_namespace = :ns AND table_name = :t"),
                {"c": entry.catalog, "ns": entry.namespace, "t": entry.name}).fetchone()
        if row is None:
            catalog.create_namespace_if_not_exists(entry.namespace)
            try:
                catalog.register_table((entry.namespace, entry.name), metadata_location)
                return "registered"
            except TableAlreadyExistsError:
                continue  # another publisher registered it meanwhile: move its pointer instead
        current = row[0]
        if not _same_table(current, table_uri):
            log.warning("%s: the Iceberg catalog name %s is registered for %s, another table's "
                        "metadata; not moved", table_uri, entry.identifier, current)
            return "name taken"
        if current == metadata_location or _version(current) >= _version(metadata_location):
            return "up to date"
        with catalog.engine.begin() as con:
            moved = con.execute(text(
                "UPDATE iceberg_tables SET metadata_location = :new, previous_metadata_location = :old "
                "WHERE catalog_name = :c AND table_namespace = :ns AND table_name = :t "
                "AND metadata_location = :old"),
                {"new": metadata_location, "old": current, "c": entry.catalog,
                 "ns": entry.namespace, "t": entry.name}).rowcount
        if moved == 1:
            return "moved"
    raise IcebergSyncError(f"the catalog pointer of {entry.identifier} kept changing under us",
                           help="other publishers keep committing: the next commit moves it")


__all__ = ["CatalogEntry", "catalog_entry", "register", "resolve_uri", "sql_catalog"]
