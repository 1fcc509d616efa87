"""A table's recent service runs, read from Airflow's REST API with the viewer's own token (so
Airflow applies that user's permissions): each task instance of the table's DAGs with its state,
and for a skipped one the reason its application gave (the operator keeps the report in the XCom
``lakehouse_report``: the trigger not met, a pending write, nothing landed)."""

from __future__ import annotations

import asyncio
from typing import Any, Mapping
from urllib.parse import quote

import httpx

#: The XCom key the operator writes (lakehouse.airflow.operators.REPORT_KEY; not imported, so
#: the view does not load the operator's Airflow provider modules).
REPORT_KEY = "lakehouse_report"
PER_DAG = 10


async def _task_instances(client: httpx.AsyncClient, service: str, dag_id: str) -> list[dict[str, Any]]:
    r = await client.get(f"/api/v2/dags/{dag_id}/dagRuns/~/taskInstances",
                         params={"order_by": "-start_date", "limit": PER_DAG})
    if r.status_code == 404:
        return []
    r.raise_for_status()
    return [{"service": service, "dag_id": dag_id, "run_id": ti["dag_run_id"], "task_id": ti["task_id"],
             "state": ti.get("state"), "start": ti.get("start_date"), "end": ti.get("end_date"),
             "try_number": ti.get("try_number"), "reason": None}
            for ti in r.json().get("task_instances", [])]


async def _reason(client: httpx.AsyncClient, ti: dict[str, Any]) -> None:
    r = await client.get(f"/api/v2/dags/{ti['dag_id']}/dagRuns/{quote(ti['run_id'], safe='')}/taskInstances/"
                         f"{ti['task_id']}/xcomEntries/{REPORT_KEY}")
    if r.status_code == 200:
        value = r.json().get("value")
        if isinstance(value, dict):
            ti["reason"] = value.get("reason")
        elif value is not None:
            ti["reason"] = str(value)


async def service_runs(api_base: str, token: str, dags: Mapping[str, str], limit: int = 20) -> list[dict[str, Any]]:
    """The newest ``limit`` task instances of ``dags`` (service -> DAG id), newest first."""
    async with httpx.AsyncClient(base_url=api_base, timeout=10,
                                 headers={"Authorization": f"Bearer {token}"}) as client:
        found = await asyncio.gather(*(_task_instances(client, s, d) for s, d in dags.items()))
        tis = sorted((ti for part in found for ti in part), key=lambda ti: ti["start"] or "", reverse=True)[:limit]
        await asyncio.gather(*(_reason(client, ti) for ti in tis if ti["state"] == "skipped"))
    for ti in tis:
        if ti["state"] == "skipped" and not ti["reason"] and not ti["try_number"]:
            ti["reason"] = "not run: an earlier step of its DAG run had nothing to do"
    return tis


async def table_assets(api_base: str, token: str, table_name: str) -> list[dict[str, Any]]:
    """The table's Assets (``lakehouse_<table>_commits``, ``lakehouse_<table>_alerts``) with the
    ids their Airflow pages (``/assets/<id>``) need."""
    async with httpx.AsyncClient(base_url=api_base, timeout=10,
                                 headers={"Authorization": f"Bearer {token}"}) as client:
        r = await client.get("/api/v2/assets", params={"uri_prefix_pattern": f"lakehouse://tables/{table_name}/",
                                                       "limit": 20})
        r.raise_for_status()
    return [{"id": a["id"], "name": a["name"], "uri": a["uri"]} for a in r.json().get("assets", [])
            if a["uri"].startswith(f"lakehouse://tables/{table_name}/")]


__all__ = ["service_runs", "table_assets", "REPORT_KEY"]
