"""The operator extra link from a lakehouse task to its table's page in the Lakehouse view."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from airflow.sdk import BaseOperatorLink


class LakehouseTableLink(BaseOperatorLink):
    """"Lakehouse table" on every lakehouse task instance: the table's timeline, file groups and
    cleans, beside the task run that changed them."""

    name = "Lakehouse table"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        table = getattr(operator, "table_name", None)
        if not table:
            return ""
        try:
            from airflow.configuration import conf  # noqa: PLC0415
            base = (conf.get("api", "base_url", fallback="") or "").rstrip("/")
        except Exception:  # noqa: BLE001 - a relative link still works inside the UI
            base = ""
        return f"{base}/lakehouse/tables/{quote(table)}"
