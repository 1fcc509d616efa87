"""The lakehouse Airflow plugin: the Lakehouse view (a FastAPI app at /lakehouse, a "Lakehouse"
entry in the UI's navigation that embeds it), the registry's Iceberg catalog over the REST
protocol at /lakehouse-catalog, and the task-to-table extra link. ``plugins/``
holds the one-line module that makes Airflow load it."""

from __future__ import annotations

import logging

from airflow.plugins_manager import AirflowPlugin
from fastapi import Depends

from lakehouse.airflow import registry
from lakehouse.airflow.links import LakehouseTableLink
from lakehouse.airflow.ui.app import PREFIX, create_app
from lakehouse.errors import LakehouseError
from lakehouse.iceberg.rest import rest_app

#: Where the registry's Iceberg catalog is served (Iceberg REST protocol, read-only).
CATALOG_PREFIX = "/lakehouse-catalog"

log = logging.getLogger("lakehouse.airflow")


def catalog_apps() -> list[dict]:
    """The registry's catalog as an Iceberg REST endpoint behind Airflow's login (engines send
    an Airflow token as their bearer token); none when the registry names no catalog."""
    try:
        reg = registry.load()
        if reg.catalog is None:
            return []
        from airflow.api_fastapi.core_api.security import requires_authenticated  # noqa: PLC0415
        app = rest_app(reg.catalog.uri, reg.catalog.name, dependencies=[Depends(requires_authenticated())])
    except LakehouseError as e:
        log.warning("no Iceberg REST catalog at %s: %s", CATALOG_PREFIX, e)
        return []
    return [{"app": app, "url_prefix": CATALOG_PREFIX, "name": "Lakehouse Iceberg catalog"}]


class LakehousePlugin(AirflowPlugin):
    name = "lakehouse"
    fastapi_apps = [{"app": create_app(), "url_prefix": PREFIX, "name": "Lakehouse"}, *catalog_apps()]
    # The view in the navigation, and as a tab on the lakehouse DAGs' pages and their task
    # instances' pages (Airflow fills in the placeholders; a DAG that is not the registry's
    # gets a page that says so).
    external_views = [
        {"name": "Lakehouse", "href": f"{PREFIX}/", "destination": "nav", "url_route": "lakehouse",
         "category": "browse"},
        {"name": "Lakehouse table", "href": f"{PREFIX}/dags/{{DAG_ID}}", "destination": "dag",
         "url_route": "lakehouse-table"},
        {"name": "Lakehouse instant", "href": f"{PREFIX}/dags/{{DAG_ID}}/runs/{{RUN_ID}}/tasks/{{TASK_ID}}",
         "destination": "task_instance", "url_route": "lakehouse-instant"},
    ]
    operator_extra_links = [LakehouseTableLink()]
