"""How to read a table, as ready-to-copy snippets with its path, name and catalog filled in:
Python (``lakehouse.open_table(...).scan()``), DuckDB (``iceberg_scan`` of the published Iceberg
metadata), pyiceberg (the registry's SQL catalog, else the metadata file) and Spark
(``format("lakehouse")``). Each snippet reads the whole current snapshot and prints its row count,
so a reader can check it against the table page; tests/airflow/ui run the Python and DuckDB ones
against a platform table as they are shown."""

from __future__ import annotations

from typing import Any, Mapping

from lakehouse import layout


def _py(s: str) -> str:
    return repr(s)


def _sql(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def _local(path: str) -> str:
    return path.removeprefix("file://")


def _catalog_line(uri: str) -> str:
    if uri.startswith("env:"):
        return f"os.environ[{_py(uri.removeprefix('env:'))}]"
    return _py(uri)


def snippets(name: str, path: str, iceberg: Mapping[str, Any] | None) -> list[dict[str, str]]:
    """The snippets for table ``name`` at ``path``: a list of ``{id, title, language, setup,
    code}`` (``setup``: what to run once beforehand, e.g. install an extension). ``iceberg``: its
    :func:`lakehouse.iceberg.status.iceberg_status` (its catalog's ``uri`` is None when the URL
    holds a password: the snippet then reads the metadata file instead)."""
    out = [{"id": "python", "title": "Python", "language": "python", "setup": "pip install lakehouse",
            "code": f"import lakehouse\n\n"
                    f"table = lakehouse.open_table({_py(path)})\n"
                    f"rows = table.scan().to_arrow()  # the snapshot: base files merged with their logs\n"
                    f"print(rows.num_rows)\n"}]
    iceberg = iceberg or {}
    # Metadata left from before publishing was turned off is stale: no snippet reads it.
    if iceberg.get("enabled") and iceberg.get("metadata_location"):
        folder = _local(path.rstrip("/") + "/" + layout.ICEBERG)
        remote = "://" in folder
        out.append({"id": "duckdb", "title": "DuckDB", "language": "sql",
                    "setup": "INSTALL iceberg; LOAD iceberg;" + (" INSTALL httpfs; LOAD httpfs;" if remote else ""),
                    "code": ("-- the object store's credentials first: CREATE SECRET (TYPE s3, ...);\n" if remote else "")
                            + "-- the newest published snapshot (version-hint.text names it)\n"
                            f"SELECT count(*) AS row_count FROM iceberg_scan({_sql(folder)});\n"})
        cat = iceberg.get("catalog")
        shown = cat.get("uri") if cat else None
        if shown:
            code = ("import os\n\n" if shown.startswith("env:") else "") + \
                "from pyiceberg.catalog.sql import SqlCatalog\n\n" \
                f"catalog = SqlCatalog({_py(cat['name'])}, uri={_catalog_line(shown)})\n" \
                f"table = catalog.load_table({_py(cat['identifier'])})\n"
        else:
            code = "from pyiceberg.table import StaticTable\n\n" \
                   "# the metadata version published now; a later commit publishes a newer one\n" \
                   f"table = StaticTable.from_metadata({_py(iceberg['metadata_location'])})\n"
        out.append({"id": "pyiceberg", "title": "pyiceberg", "language": "python",
                    "setup": "pip install 'pyiceberg[sql-sqlite,pyarrow]'",
                    "code": code + "rows = table.scan().to_arrow()\nprint(rows.num_rows)\n"})
    view = "".join(ch if ch.isalnum() else "_" for ch in name)
    out.append({"id": "spark", "title": "Spark", "language": "python",
                "setup": "pip install 'lakehouse[spark]'  # where the driver and executors run",
                "code": "from lakehouse.spark.session import build_session\n\n"
                        "spark = build_session()  # or your own session, with lakehouse installed\n"
                        f"spark.read.format(\"lakehouse\").load({_py(path)}).createOrReplaceTempView({_py(view)})\n"
                        f"print(spark.sql(\"SELECT count(*) AS row_count FROM {view}\").first().row_count)\n"})
    return out


__all__ = ["snippets"]
