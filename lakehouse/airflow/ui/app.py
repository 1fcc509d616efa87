"""The Lakehouse view: a FastAPI app that Airflow's api-server mounts at ``/lakehouse``.

Every endpoint requires an authenticated Airflow user (a Bearer token, or the UI's ``_token``
cookie when the page is embedded in Airflow's UI). The view reads tables and never changes them:
its one action, running a table service, triggers the service's DAG through Airflow's own REST
API with the caller's token, so Airflow applies that user's permissions.

    GET  /lakehouse/                                  tables page (HTML)
    GET  /lakehouse/tables/{name}                     a table: timeline chart, file groups, cleans
    GET  /lakehouse/tables/{name}/timeline.svg        the timeline chart alone
    GET  /lakehouse/tables/{name}/instants/{instant}  one instant explained
    GET  /lakehouse/api/tables                        the tables, those that need attention first (JSON)
    GET  /lakehouse/api/tables/{name}                 one table in full: timeline, health, alerts, schema,
                                                      partitions, Iceberg side, query snippets (JSON)
    GET  /lakehouse/api/tables/{name}/instants/{i}    one instant explained (JSON)
    GET  /lakehouse/api/tables/{name}/runs            its recent service runs, with skip reasons (JSON)
    GET  /lakehouse/api/tables/{name}/assets          its Airflow Assets, with their ids (JSON)
    GET  /lakehouse/dags/{dag_id}[/runs/{r}/tasks/{t}] a DAG's table, a task run's instant (redirects)
    POST /lakehouse/api/tables/{name}/trigger/{svc}   run ingest | compaction | clean | health (JSON)
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import httpx
from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from lakehouse.airflow import registry as registry_mod
from lakehouse.airflow.ui import overview
from lakehouse.airflow.ui.chart import timeline_svg
from lakehouse.airflow.ui.health_charts import health_charts
from lakehouse.airflow.ui.pages import render
from lakehouse.airflow.ui.service_runs import service_runs, table_assets
from lakehouse.errors import LakehouseError
from lakehouse.inspect.explain import explain
from lakehouse.inspect.timeline import instant_facts
from lakehouse.table import open_table
from lakehouse.timeline.tags import task_run

PREFIX = "/lakehouse"
TRIGGER_HEADER = "X-Lakehouse-Trigger"


def _registry() -> registry_mod.Registry:
    try:
        return registry_mod.load()
    except LakehouseError as e:
        raise HTTPException(status_code=503, detail=f"{e.message} (Help: {e.help})") from None


def _entry(name: str) -> registry_mod.TableEntry:
    try:
        return _registry().table(name)
    except LakehouseError as e:
        raise HTTPException(status_code=404, detail=e.message) from None


def _service_info(t: registry_mod.TableEntry) -> dict[str, Any]:
    return {"services": list(t.services), "dags": {s: t.dag_id(s) for s in t.services}}


def _details(t: registry_mod.TableEntry) -> dict[str, Any]:
    # The registry's service options and compaction trigger set the alerts' thresholds.
    return overview.details(t.name, t.path, t.table_type, options=t.service_options,
                            compaction_after=t.compaction_trigger)


def _summaries(reg: registry_mod.Registry) -> list[dict[str, Any]]:
    """The registry's tables, those that need attention first."""
    return overview.ranked([overview.summary(t.name, t.path, t.table_type, options=t.service_options,
                                             compaction_after=t.compaction_trigger) for t in reg.tables])


def _entry_of_dag(dag_id: str) -> registry_mod.TableEntry:
    for t in _registry().tables:
        if dag_id in _service_info(t)["dags"].values():
            return t
    raise HTTPException(status_code=404, detail=f"{dag_id} is not a DAG of the lakehouse registry")


async def _from_airflow(request: Request, call) -> Any:
    """``call(api_base, token)`` against Airflow's REST API as the viewer."""
    token = _token(request)
    if not token:
        raise HTTPException(status_code=401, detail="no Airflow token")
    try:
        return await call(_api_base(request), token)
    except httpx.HTTPError as e:
        raise HTTPException(status_code=502, detail=f"Airflow's API did not answer: {e}") from None


def _explain(t: registry_mod.TableEntry, instant: str) -> dict[str, Any]:
    try:
        return explain(open_table(t.path), instant)
    except LakehouseError as e:
        raise HTTPException(status_code=404, detail=e.message) from None


def _token(request: Request) -> str | None:
    auth = request.headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    return request.cookies.get("_token")


def _api_base(request: Request) -> str:
    try:
        from airflow.configuration import conf  # noqa: PLC0415
        base = conf.get("api", "base_url", fallback="") or ""
    except Exception:  # noqa: BLE001 - outside Airflow (tests): the request's own origin
        base = ""
    return (base or str(request.base_url)).rstrip("/")


def create_app(auth: bool = True) -> FastAPI:
    """The app; ``auth=False`` only for tests of the pages' content without an Airflow server."""
    deps = []
    if auth:
        from airflow.api_fastapi.core_api.security import requires_authenticated  # noqa: PLC0415
        deps = [Depends(requires_authenticated())]
    app = FastAPI(title="Lakehouse", dependencies=deps,
                  description="Tables, timelines and table services of the lakehouse registry.")

    @app.get("/", response_class=HTMLResponse)
    def tables_page() -> str:
        return render("tables", prefix=PREFIX, tables=_summaries(_registry()))

    @app.get("/tables/{name}", response_class=HTMLResponse)
    def table_page(name: str) -> str:
        t = _entry(name)
        d = _details(t)
        return render("table", prefix=PREFIX, t=d, services=list(t.services), dags=_service_info(t)["dags"],
                      chart=timeline_svg(d["timeline"]), charts=health_charts(d))

    @app.get("/tables/{name}/timeline.svg")
    def timeline_chart(name: str) -> Response:
        # The timeline alone: no file listing, health replay or alerts behind it.
        table = overview.open_or_none(_entry(name).path)
        rows = overview.timeline(instant_facts(table)) if table is not None else []
        return Response(timeline_svg(rows), media_type="image/svg+xml")

    @app.get("/tables/{name}/instants/{instant}", response_class=HTMLResponse)
    def instant_page(name: str, instant: str) -> str:
        t = _entry(name)
        return render("instant", prefix=PREFIX, table=t.name, e=_explain(t, instant))

    @app.get("/dags/{dag_id}")
    def dag_table(dag_id: str) -> Response:
        """A lakehouse DAG's table (the "Lakehouse table" tab on a DAG's page)."""
        t = _entry_of_dag(dag_id)
        return RedirectResponse(f"{PREFIX}/tables/{quote(t.name)}", status_code=307)

    @app.get("/dags/{dag_id}/runs/{run_id}/tasks/{task_id}")
    def task_instant(dag_id: str, run_id: str, task_id: str) -> Response:
        """The instant a lakehouse task run made or committed (found by its tags), else its table."""
        t = _entry_of_dag(dag_id)
        wanted = (dag_id, run_id, task_id)
        table = overview.open_or_none(t.path)
        for f in reversed(instant_facts(table) if table is not None else []):
            for prefix in (overview.MADE, overview.COMMITTED):
                run = task_run(f.tags, prefix)
                if run and (run["dag_id"], run["run_id"], run["task_id"]) == wanted:
                    return RedirectResponse(f"{PREFIX}/tables/{quote(t.name)}/instants/{f.row['time']}",
                                            status_code=307)
        return RedirectResponse(f"{PREFIX}/tables/{quote(t.name)}", status_code=307)

    @app.get("/api/tables")
    def tables() -> list[dict[str, Any]]:
        reg = _registry()
        entries = {t.name: t for t in reg.tables}
        return [{**row, **_service_info(entries[row["name"]])} for row in _summaries(reg)]

    @app.get("/api/tables/{name}")
    def table(name: str) -> dict[str, Any]:
        t = _entry(name)
        return {**_details(t), **_service_info(t)}

    @app.get("/api/tables/{name}/runs")
    async def runs(name: str, request: Request, limit: int = 20) -> list[dict[str, Any]]:
        t = _entry(name)
        limit = max(1, min(limit, 100))
        return await _from_airflow(request, lambda base, token: service_runs(base, token, _service_info(t)["dags"],
                                                                            limit))

    @app.get("/api/tables/{name}/assets")
    async def assets(name: str, request: Request) -> list[dict[str, Any]]:
        t = _entry(name)
        return await _from_airflow(request, lambda base, token: table_assets(base, token, t.name))

    @app.get("/api/tables/{name}/instants/{instant}")
    def instant_detail(name: str, instant: str) -> dict[str, Any]:
        return _explain(_entry(name), instant)

    @app.post("/api/tables/{name}/trigger/{service}")
    async def trigger(name: str, service: str, request: Request) -> dict[str, Any]:
        # A custom header: a form on another site cannot send it, so a cookie alone cannot
        # trigger anything (no cross-site request forgery).
        if request.headers.get(TRIGGER_HEADER) != "1":
            raise HTTPException(status_code=400, detail=f"send the {TRIGGER_HEADER}: 1 header")
        t = _entry(name)
        if service not in list(t.services):
            raise HTTPException(status_code=404, detail=f"{name} has no {service} service; "
                                f"it has {', '.join(list(t.services))}")
        token = _token(request)
        if not token:
            raise HTTPException(status_code=401, detail="no Airflow token")
        dag_id = t.dag_id(service)
        async with httpx.AsyncClient(timeout=30) as client:
            r = await client.post(f"{_api_base(request)}/api/v2/dags/{dag_id}/dagRuns",
                                  json={"logical_date": None, "conf": {"triggered_from": "lakehouse-view"}},
                                  headers={"Authorization": f"Bearer {token}"})
        if r.status_code >= 300:
            detail = r.json().get("detail", r.text) if r.headers.get("content-type", "").startswith(
                "application/json") else r.text
            raise HTTPException(status_code=r.status_code, detail=f"Airflow refused to trigger {dag_id}: {detail}")
        body = r.json()
        return {"dag_id": dag_id, "dag_run_id": body.get("dag_run_id"), "state": body.get("state")}

    return app


__all__ = ["create_app", "PREFIX", "TRIGGER_HEADER"]
