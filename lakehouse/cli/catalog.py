"""``lakehouse catalog serve``: the Iceberg REST catalog (read-only) over the SQL catalog the
tables register in (:mod:`lakehouse.iceberg.rest`), for engines that attach REST catalogs only."""

from __future__ import annotations

import click

from lakehouse.cli.common import note
from lakehouse.iceberg.rest import serve as serve_rest


@click.group("catalog")
def catalog() -> None:
    """The Iceberg catalog the tables are registered in (hoodie.meta.sync.iceberg.catalog.*)."""


@catalog.command("serve")
@click.option("--uri", required=True,
              help="The SQL catalog's SQLAlchemy URL, as hoodie.meta.sync.iceberg.catalog.uri "
                   "(env:NAME reads it from the environment).")
@click.option("--name", default="lakehouse", show_default=True,
              help="The catalog name (hoodie.meta.sync.iceberg.catalog.name).")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Interface to bind; the catalog has no login of its own.")
@click.option("--port", default=8181, show_default=True, type=click.IntRange(1, 65535))
def serve(uri: str, name: str, host: str, port: int) -> None:
    """Serve the Iceberg REST catalog API, read-only, until interrupted. DuckDB:
    ATTACH '' AS lake (TYPE iceberg, ENDPOINT 'http://HOST:PORT', AUTHORIZATION_TYPE 'none')."""
    note(f"Iceberg REST catalog {name!r} on http://{host}:{port} (read-only)")
    serve_rest(uri, name, host, port)


COMMANDS = (catalog,)
