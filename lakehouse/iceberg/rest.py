"""A read-only Iceberg REST catalog over the SQL catalog lakehouse registers its tables in.

Engines that attach catalogs only through Iceberg's REST protocol (DuckDB's ``ATTACH ... (TYPE
iceberg)``, Trino's ``iceberg.catalog.type=rest``, Spark's ``RESTCatalog``) find the tables by
name here: namespaces, table listings and ``loadTable`` (the current ``metadata-location`` and
its metadata) are answered from the SQL catalog's ``iceberg_tables``, so the pointer they see
moves with every commit, compaction, clean and rollback as the SQL catalog's does. Writes through
the catalog are refused (405): the tables change only through Hudi's timeline, and their Iceberg
metadata follows it.

Served by ``lakehouse catalog serve`` (127.0.0.1 by default) and by the Airflow plugin under
``/lakehouse-catalog`` when the registry names a catalog. No authentication of its own: behind
Airflow it is behind Airflow's login; standalone, bind it to a trusted interface.
"""

from __future__ import annotations

import json
from typing import Any, Sequence

from lakehouse.iceberg.catalog import resolve_uri, sql_catalog

#: The REST spec joins the levels of a namespace in a path with the unit separator.
NAMESPACE_SEPARATOR = "\x1f"


def _error(code: int, kind: str, message: str):
    from fastapi.responses import JSONResponse  # noqa: PLC0415 - optional: fastapi
    return JSONResponse({"error": {"message": message, "type": kind, "code": code}}, status_code=code)


def rest_app(uri: str, name: str = "lakehouse", dependencies: Sequence[Any] = ()):
    """A FastAPI app serving the Iceberg REST catalog API (read-only) for the SQL catalog
    ``name`` at the SQLAlchemy URL ``uri`` (``env:NAME`` allowed); ``dependencies`` guard every
    route (Airflow's login, in the plugin)."""
    from fastapi import FastAPI, Response  # noqa: PLC0415 - optional: fastapi
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError  # noqa: PLC0415

    url = resolve_uri(uri)
    app = FastAPI(title="lakehouse Iceberg REST catalog (read-only)", docs_url=None, redoc_url=None,
                  dependencies=list(dependencies))

    def namespace(ns: str) -> tuple[str, ...]:
        return tuple(ns.split(NAMESPACE_SEPARATOR))

    def catalog():
        return sql_catalog(name, url)

    def known_namespace(ns: tuple[str, ...]) -> bool:
        return ns in {tuple(n) for n in catalog().list_namespaces()}

    @app.get("/v1/config")
    def config(warehouse: str | None = None) -> dict[str, Any]:
        return {"defaults": {}, "overrides": {}}

    @app.get("/v1/namespaces")
    def namespaces(parent: str | None = None) -> dict[str, Any]:
        found = [list(n) for n in catalog().list_namespaces()]
        if parent:
            prefix = list(namespace(parent))
            found = [n for n in found if n[:len(prefix)] == prefix and len(n) > len(prefix)]
        return {"namespaces": found}

    @app.get("/v1/namespaces/{ns}")
    def load_namespace(ns: str):
        if not known_namespace(namespace(ns)):
            return _error(404, "NoSuchNamespaceException", f"namespace {'.'.join(namespace(ns))} does not exist")
        try:
            props = catalog().load_namespace_properties(namespace(ns))
        except NoSuchNamespaceError:
            props = {}
        return {"namespace": list(namespace(ns)), "properties": dict(props)}

    @app.head("/v1/namespaces/{ns}")
    def namespace_exists(ns: str):
        return Response(status_code=204 if known_namespace(namespace(ns)) else 404)

    @app.get("/v1/namespaces/{ns}/tables")
    def tables(ns: str):
        if not known_namespace(namespace(ns)):
            return _error(404, "NoSuchNamespaceException", f"namespace {'.'.join(namespace(ns))} does not exist")
        return {"identifiers": [{"namespace": list(t[:-1]), "name": t[-1]}
                                for t in catalog().list_tables(namespace(ns))]}

    @app.get("/v1/namespaces/{ns}/tables/{table}")
    def load_table(ns: str, table: str):
        try:
            t = catalog().load_table(namespace(ns) + (table,))
        except (NoSuchTableError, NoSuchNamespaceError):
            return _error(404, "NoSuchTableException", f"table {'.'.join(namespace(ns) + (table,))} does not exist")
        body = {"metadata-location": t.metadata_location,
                "metadata": json.loads(t.metadata.model_dump_json()), "config": {}}
        return Response(json.dumps(body), media_type="application/json")

    @app.head("/v1/namespaces/{ns}/tables/{table}")
    def table_exists(ns: str, table: str):
        return Response(status_code=204 if catalog().table_exists(namespace(ns) + (table,)) else 404)

    @app.api_route("/v1/{rest:path}", methods=["POST", "PUT", "DELETE"])
    def refuse(rest: str):
        # (No Request parameter: annotations are strings here, and FastAPI resolves them in
        # this module's globals, where the lazily imported fastapi names are not.)
        return _error(405, "NotAllowedException",
                      f"/v1/{rest}: this catalog is read-only; lakehouse tables "
                      "change through their Hudi timeline (write with lakehouse, Spark or the DAGs)")

    return app


def serve(uri: str, name: str = "lakehouse", host: str = "127.0.0.1", port: int = 8181) -> None:
    """Serve :func:`rest_app` until interrupted."""
    import uvicorn  # noqa: PLC0415 - optional: uvicorn

    uvicorn.run(rest_app(uri, name), host=host, port=port, log_level="warning")


__all__ = ["NAMESPACE_SEPARATOR", "rest_app", "serve"]
