"""The lakehouse Airflow plugin: the Lakehouse view (a FastAPI app at /lakehouse, a "Lakehouse"
entry in the UI's navigation that embeds it) and the task-to-table extra link. ``plugins/``
holds the one-line module that makes Airflow load it."""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from lakehouse.airflow.links import LakehouseTableLink
from lakehouse.airflow.ui.app import PREFIX, create_app


class LakehousePlugin(AirflowPlugin):
    name = "lakehouse"
    fastapi_apps = [{"app": create_app(), "url_prefix": PREFIX, "name": "Lakehouse"}]
    external_views = [{"name": "Lakehouse", "href": f"{PREFIX}/", "destination": "nav",
                       "url_route": "lakehouse", "category": "browse"}]
    operator_extra_links = [LakehouseTableLink()]
