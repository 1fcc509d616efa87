"""The Lakehouse view's endpoints: content from a real table (no server), and against the running
platform: authentication required everywhere, triggering through Airflow's API."""

from __future__ import annotations

import pyarrow as pa
import pytest

import lakehouse

pytest.importorskip("fastapi", reason="the Lakehouse view is a FastAPI app (pip install '.[airflow]')")
pytest.importorskip("jsonschema", reason="the registry needs jsonschema (pip install '.[airflow]')")

TAGS = {"airflow.dag_id": "orders_ingest", "airflow.run_id": "manual__1", "airflow.task_id": "ingest",
        "airflow.try_number": "1"}


def batch(keys, ts):
    return pa.table({"id": [f"k{k}" for k in keys], "p": [f"p{k % 2}" for k in keys],
                     "ts": [ts] * len(keys), "v": [f"<b>{k}</b>" for k in keys]})


@pytest.fixture
def view(tmp_path, monkeypatch):
    """A registry with one MOR table that went through writes, a compaction and a clean."""
    t = lakehouse.create_table(str(tmp_path / "orders"), name="orders", table_type="MERGE_ON_READ",
                               record_key="id", partition_by="p", ordering_field="ts", index="BUCKET",
                               options={"hoodie.bucket.index.num.buckets": 1})
    t.write(batch(range(20), 1), "upsert", extra_metadata=TAGS)
    t.write(batch(range(10), 2), "upsert")
    sched = t.schedule_compaction(force=True, extra_metadata={**TAGS, "airflow.task_id": "compaction_plan"})
    t.run_compaction(sched.instant)
    t.commit_compaction(sched.instant)
    t.write(batch(range(5), 3), "upsert")
    cleaned = t.clean(options={"hoodie.cleaner.commits.retained": 1})
    assert cleaned.instant is not None and cleaned.files_deleted > 0
    reg = tmp_path / "tables.yaml"
    reg.write_text(f"tables:\n  orders:\n    path: {tmp_path / 'orders'}\n    record_key: id\n"
                   f"    source: {{kind: files, dir: {tmp_path / 'in'}}}\n"
                   f"  later:\n    path: {tmp_path / 'later'}\n    table_type: COPY_ON_WRITE\n"
                   f"    source: {{kind: demo, dir: {tmp_path / 'in2'}}}\n")
    monkeypatch.setenv("LAKEHOUSE_REGISTRY", str(reg))
    from fastapi.testclient import TestClient

    from lakehouse.airflow.ui.app import create_app
    return t, TestClient(create_app(auth=False))


def test_overview_of_a_table(view):
    from lakehouse.airflow.ui import overview
    t, _ = view
    d = overview.details("orders", t.path, "MERGE_ON_READ")
    actions = [i["action"] for i in d["timeline"]]
    assert actions == ["deltacommit", "deltacommit", "compaction", "deltacommit", "clean"]
    first, comp = d["timeline"][0], d["timeline"][2]
    assert first["made_by"] == {"dag_id": "orders_ingest", "run_id": "manual__1", "task_id": "ingest",
                                "try_number": "1"}
    assert comp["made_by"]["task_id"] == "compaction_plan" and d["timeline"][1]["made_by"] is None
    assert all(i["state"] == "completed" and i["end_ns"] >= i["start_ns"] for i in d["timeline"])
    stats = t.stats()
    assert (d["file_groups"], d["log_files"], d["log_bytes"]) == (stats.file_groups, stats.log_files, stats.log_bytes)
    assert len(d["groups"]) == stats.file_groups and sum(g["log_files"] for g in d["groups"]) == stats.log_files
    [c] = d["cleans"]
    assert c["files_deleted"] > 0 and c["bytes_freed"] > 0


def test_json_endpoints(view):
    t, client = view
    rows = client.get("/api/tables").json()
    assert [r["name"] for r in rows] == ["orders", "later"]
    assert rows[0]["exists"] and rows[0]["last_commit"] == t.stats().last_commit
    assert rows[1] == {**rows[1], "exists": False, "services": ["ingest", "clean", "health"]}
    one = client.get("/api/tables/orders").json()
    assert one["dags"] == {"ingest": "orders_ingest", "compaction": "orders_compaction",
                           "clustering": "orders_clustering", "clean": "orders_clean", "health": "orders_health"}
    assert len(one["timeline"]) == 5
    assert client.get("/api/tables/nope").status_code == 404


def test_pages_and_chart(view):
    t, client = view
    page = client.get("/").text
    assert 'data-table="orders"' in page and "not created yet" in page
    page = client.get("/tables/orders").text
    assert page.count("<tr data-instant=") == 5 and 'data-service="compaction"' in page
    assert "orders_ingest.ingest (try 1)" in page
    # The charts' x axes: one slot per commit, labelled with the commit's number (4 commits).
    assert "#1 · " in page and "#4 · " in page
    svg = client.get("/tables/orders/timeline.svg")
    assert svg.headers["content-type"].startswith("image/svg+xml")
    assert svg.text.count("<g data-instant=") == 5
    assert client.get("/tables/nope").status_code == 404


def test_trigger_refuses_what_it_cannot_do(view):
    _, client = view
    assert client.post("/api/tables/orders/trigger/clean").status_code == 400  # no header: no CSRF
    h = {"X-Lakehouse-Trigger": "1"}
    assert client.post("/api/tables/later/trigger/compaction", headers=h).status_code == 404
    assert client.post("/api/tables/nope/trigger/clean", headers=h).status_code == 404
    assert client.post("/api/tables/orders/trigger/clean", headers=h).status_code == 401  # no token


def test_a_broken_registry_is_a_503_that_says_why(view, tmp_path, monkeypatch):
    _, client = view
    bad = tmp_path / "bad.yaml"
    bad.write_text("tables: {orders: {path: x}}")
    monkeypatch.setenv("LAKEHOUSE_REGISTRY", str(bad))
    r = client.get("/api/tables")
    assert r.status_code == 503 and "source" in r.json()["detail"]


def test_the_views_numbers_are_the_clis(view):
    """The page and its JSON say what `lakehouse stats --json` and `lakehouse timeline --json`
    print for the same table (one implementation, lakehouse.inspect, behind both)."""
    import json

    from click.testing import CliRunner

    from lakehouse.cli import main as cli
    t, client = view
    run = CliRunner()
    stats = json.loads(run.invoke(cli, ["stats", t.path, "--json"]).output)
    rows = json.loads(run.invoke(cli, ["timeline", t.path, "--json"]).output)
    one = client.get("/api/tables/orders").json()
    assert one["stats"] == stats
    assert [{k: v for k, v in i.items() if k not in ("made_by", "committed_by")} for i in one["timeline"]] == rows
    page = client.get("/tables/orders").text
    import re
    for key in ("file_groups", "base_files", "base_bytes", "log_files", "log_bytes", "partitions", "last_commit"):
        # The raw value where the page shows it friendlier (bytes as KiB, an instant as a date).
        m = re.search(rf'data-stat="{key}"(?: data-v="([^"]*)")?>([^<]*)<', page)
        assert m and (m.group(1) if m.group(1) is not None else m.group(2)) == str(stats[key]), key
    # The charts' data islands hold the health series the JSON has.
    islands = {m.group(1): json.loads(m.group(2)) for m in re.finditer(
        r'<script type="application/json" class="chart-data" data-chart="(\w+)">(.*?)</script>', page, re.S)}
    assert set(islands) == {"size", "backlog", "file_sizes", "cleans", "commits"}
    assert [p["instant"] for p in islands["size"]] == [p["instant"] for p in one["history"]["points"]]
    assert islands["cleans"] == one["history"]["cleans"] and islands["cleans"][0]["bytes_freed"] == one["cleans"][0]["bytes_freed"]
    assert sum(b["files"] for b in islands["file_sizes"]) == stats["base_files"]
    # The compaction is marked on the backlog chart, and its bar leaves no log behind it.
    comp = next(i["time"] for i in rows if i["action"] == "compaction")
    assert f'data-compaction="{comp}"' in page
    assert next(p for p in islands["backlog"] if p["instant"] == comp)["log_files"] == 0


def test_every_instant_is_explained(view):
    t, client = view
    rows = client.get("/api/tables/orders").json()["timeline"]
    first, comp, clean = rows[0]["time"], rows[2]["time"], rows[4]["time"]
    w = client.get(f"/api/tables/orders/instants/{first}").json()
    assert w["tags"]["airflow.task_id"] == "ingest"
    parts = {p["partition"]: p for p in w["write"]["partitions"]}
    assert sum(p["written"] for p in parts.values()) == 20 and set(parts) == {"p0", "p1"}
    assert all(f["change"] in ("added", "log") for f in w["write"]["files"])
    second = client.get(f"/api/tables/orders/instants/{rows[1]['time']}").json()
    assert sum(p["written"] for p in second["write"]["partitions"]) == 10
    assert {f["change"] for f in second["write"]["files"]} == {"log"}  # MOR: updates append to logs
    c = client.get(f"/api/tables/orders/instants/{comp}").json()["compaction"]
    assert c["operations"] == len(c["plan"]) == 2 and all(o["log_files"] >= 1 for o in c["plan"])
    assert sum(p["written"] for p in c["result"]["partitions"]) == 20
    cl = client.get(f"/api/tables/orders/instants/{clean}").json()["clean"]
    assert cl["files_deleted"] == sum(p["deleted"] for p in cl["partitions"]) > 0
    page = client.get(f"/tables/orders/instants/{comp}").text
    assert 'id="compaction-plan"' in page and "orders_ingest.compaction_plan (try 1)" in page
    assert client.get("/api/tables/orders/instants/20200101000000000").status_code == 404


def test_dag_and_task_instance_tabs_lead_to_the_table_and_the_instant(view):
    """The plugin's "Lakehouse table" tab on a DAG page and "Lakehouse instant" tab on a task
    instance page land here; a task run's instant is found by its tags."""
    t, client = view
    first = client.get("/api/tables/orders").json()["timeline"][0]["time"]
    r = client.get("/dags/orders_compaction", follow_redirects=False)
    assert r.status_code == 307 and r.headers["location"] == "/lakehouse/tables/orders"
    r = client.get("/dags/orders_ingest/runs/manual__1/tasks/ingest", follow_redirects=False)
    assert r.headers["location"] == f"/lakehouse/tables/orders/instants/{first}"
    r = client.get("/dags/orders_ingest/runs/manual__9/tasks/ingest", follow_redirects=False)
    assert r.headers["location"] == "/lakehouse/tables/orders"  # no instant of that run: the table
    assert client.get("/dags/someone_elses_dag").status_code == 404
    from lakehouse.airflow.plugin import LakehousePlugin
    tabs = {v["destination"]: v for v in LakehousePlugin.external_views}
    assert tabs["dag"]["href"] == "/lakehouse/dags/{DAG_ID}"
    assert tabs["task_instance"]["href"] == "/lakehouse/dags/{DAG_ID}/runs/{RUN_ID}/tasks/{TASK_ID}"


def test_a_pending_compaction_and_clean_show_their_plans(view):
    t, client = view
    t.write(batch(range(3), 4), "upsert")
    planned = t.schedule_compaction(force=True).instant
    e = client.get(f"/api/tables/orders/instants/{planned}").json()
    assert e["instant"]["state"] == "requested" and e["compaction"]["operations"] >= 1 and "result" not in e["compaction"]
    t.run_compaction(planned)
    t.commit_compaction(planned)
    for n in range(5, 8):
        t.write(batch(range(3), n), "upsert")
    from lakehouse import faults
    faults.activate("clean.after_plan", "raise")
    try:
        with pytest.raises(faults.InjectedFault):
            t.clean(options={"hoodie.cleaner.commits.retained": 1})
    finally:
        faults.reset()
    pending = [i for i in client.get("/api/tables/orders").json()["timeline"] if i["action"] == "clean"
               and i["state"] != "completed"]
    assert len(pending) == 1 and pending[0]["files_to_delete"] > 0
    plan = client.get(f"/api/tables/orders/instants/{pending[0]['time']}").json()["clean"]["plan"]
    assert plan["policy"] == "KEEP_LATEST_COMMITS" and sum(p["files"] for p in plan["partitions"]) == pending[0]["files_to_delete"]
    assert "Plans, with policy KEEP_LATEST_COMMITS" in client.get(f"/tables/orders/instants/{pending[0]['time']}").text


# --- against the running platform -------------------------------------------------------------

@pytest.mark.airflow
@pytest.mark.spark
@pytest.mark.slow
def test_every_endpoint_needs_an_airflow_user(platform):
    import httpx

    from deploy import platform as plat
    layout, _, _ = platform
    base = f"{layout.url}/lakehouse"
    gets = ["/", "/tables/trips", "/tables/trips/timeline.svg", "/api/tables", "/api/tables/trips",
            "/api/tables/trips/runs", "/api/tables/trips/assets"]
    for path in gets:
        assert httpx.get(base + path).status_code == 401, path
        assert httpx.get(base + path, headers={"Authorization": "Bearer forged"}).status_code in (401, 403), path
    assert httpx.post(f"{base}/api/tables/trips/trigger/clean",
                      headers={"X-Lakehouse-Trigger": "1"}).status_code == 401
    api = plat.Api(layout)
    for path in gets:
        assert api.http.get(base + path).status_code == 200, path
    rows = {r["name"]: r for r in api.http.get(f"{base}/api/tables").json()}
    assert rows["trips"]["last_commit"]
    # The table's Assets with the ids of their Airflow pages (the view links to /assets/<id>).
    assets = {a["name"]: a for a in api.http.get(f"{base}/api/tables/trips/assets").json()}
    assert "lakehouse_trips_commits" in assets
    assert api.get(f"/assets/{assets['lakehouse_trips_commits']['id']}")["name"] == "lakehouse_trips_commits"
    # Triggering goes through Airflow's API as this user: the run is there afterwards.
    r = api.http.post(f"{base}/api/tables/trips/trigger/clean", headers={"X-Lakehouse-Trigger": "1"})
    assert r.status_code == 200, r.text
    run_id = r.json()["dag_run_id"]
    assert api.get(f"/dags/trips_clean/dagRuns/{run_id}")["conf"] == {"triggered_from": "lakehouse-view"}
    assert api.wait_run("trips_clean", run_id) == "success"


@pytest.mark.airflow
@pytest.mark.spark
@pytest.mark.slow
def test_task_instances_link_to_their_table(platform):
    from deploy import platform as plat
    layout, _, _ = platform
    api = plat.Api(layout)
    run = api.get("/dags/trips_ingest/dagRuns", order_by="-run_after", limit=1)["dag_runs"][0]
    links = api.get(f"/dags/trips_ingest/dagRuns/{run['dag_run_id']}/taskInstances/ingest/links")
    url = links["extra_links"]["Lakehouse table"]
    assert url == f"{layout.url}/lakehouse/tables/trips"
    assert api.http.get(url).status_code == 200



def test_tables_that_need_attention_come_first(view, tmp_path, monkeypatch):
    """A table with a compaction backlog (more delta commits waiting than twice the trigger) ranks
    above a healthy one, whatever their names; the tables page and the JSON agree."""
    t, client = view
    busy = lakehouse.create_table(str(tmp_path / "busy"), name="busy", table_type="MERGE_ON_READ",
                                  record_key="id", partition_by="p", ordering_field="ts", index="BUCKET",
                                  options={"hoodie.bucket.index.num.buckets": 1})
    for n in range(5):  # the first makes the base files; four delta commits wait for compaction
        busy.write(batch(range(3), n), "upsert")
    reg = tmp_path / "tables.yaml"
    reg.write_text(reg.read_text() + f"  zz_busy:\n    path: {tmp_path / 'busy'}\n    record_key: id\n"
                   f"    source: {{kind: files, dir: {tmp_path / 'in3'}}}\n"
                   f"    schedule: {{compaction: {{after_commits: 2}}}}\n")
    r = client.get("/api/tables")
    assert r.status_code == 200, r.text
    rows = r.json()
    assert [r["name"] for r in rows] == ["zz_busy", "orders", "later"], [(r["name"], r["alerts"], r["attention"]) for r in rows]
    assert [a["kind"] for a in rows[0]["alerts"]] == ["compaction_backlog"]
    assert rows[0]["attention"]["backlog_age_s"] is not None and rows[1]["alerts"] == []
    page = client.get("/").text
    assert page.index('data-table="zz_busy"') < page.index('data-table="orders"') < page.index('data-table="later"')
    assert 'data-alert="compaction_backlog"' in page and str(tmp_path) not in page  # no server paths
    # Compacting clears it: no alert and no waiting log, so the table that has logs waiting
    # comes first; the one not created yet, with nothing to look at, last.
    busy.compact(force=True)
    rows = client.get("/api/tables").json()
    assert [r["name"] for r in rows] == ["orders", "zz_busy", "later"] and rows[1]["alerts"] == []
    assert rows[1]["attention"]["backlog_age_s"] is None


def test_the_table_page_shows_schema_partitions_iceberg_and_query(view):
    t, client = view
    one = client.get("/api/tables/orders").json()
    assert [c["name"] for c in one["schema"]["columns"]] == ["id", "p", "ts", "v"]
    assert {p["partition"] for p in one["partitions"]} == {"p0", "p1"}
    assert one["iceberg"]["snapshot_rows"] == t.read().num_rows == 20
    assert one["snapshot_rows"] == {"rows": 20, "as_of": one["iceberg"]["instant"], "from": "iceberg"}
    assert {q["id"] for q in one["query"]} == {"python", "duckdb", "pyiceberg", "spark"}
    python = next(q for q in one["query"] if q["id"] == "python")
    assert repr(t.path) in python["code"]
    page = client.get("/tables/orders").text
    for anchor in ('id="health"', 'id="schema"', 'id="schema-history"', 'id="partitions"', 'id="iceberg"', 'id="query"',
                   'data-snippet="duckdb"', 'class="pill state-completed"', "<time datetime="):
        assert anchor in page, anchor
    assert page.count('<tr data-column=') == 4 and page.count('<tr data-partition=') == 2


def test_without_iceberg_the_row_count_comes_from_write_stats_when_no_log_waits(tmp_path):
    from lakehouse.airflow.ui import overview
    path = str(tmp_path / "t")
    t = lakehouse.create_table(path, name="t", table_type="MERGE_ON_READ", record_key="id", index="BUCKET",
                               options={"hoodie.bucket.index.num.buckets": 1, "hoodie.meta.sync.iceberg.enabled": "false"})
    t.upsert(pa.table({"id": list(range(10))}))
    t.upsert(pa.table({"id": list(range(5, 15))}))  # a log append: new and updated keys together
    assert overview.details("t", path, "MERGE_ON_READ")["snapshot_rows"]["rows"] is None
    t.compact(force=True)
    d = overview.details("t", path, "MERGE_ON_READ")
    assert d["snapshot_rows"] == {"rows": 15, "as_of": d["stats"]["last_commit"], "from": "write stats"}
    assert d["iceberg"]["enabled"] is False and {q["id"] for q in d["query"]} == {"python", "spark"}


def test_iceberg_metadata_left_from_before_publishing_was_turned_off_is_called_stale(view):
    """Publishing turned off after commits were published: the metadata stays but no longer
    follows the table. Its row count is not the table's, no snippet reads it, the page says so."""
    from lakehouse import layout
    from lakehouse.airflow.ui import overview
    from lakehouse.iceberg import background
    from lakehouse.properties import parse_properties, write_table_properties
    t, client = view
    background.wait_all()
    props = parse_properties(t.storage.read(layout.PROPERTIES))
    write_table_properties(t.storage, {**props, "hoodie.meta.sync.iceberg.enabled": "false"})
    lakehouse.open_table(t.path).write(batch(range(100, 110), 4), "upsert")
    d = overview.details("orders", t.path, "MERGE_ON_READ")
    assert d["iceberg"]["enabled"] is False and d["iceberg"]["metadata_location"]
    assert d["iceberg"]["instant"] != d["stats"]["last_commit"]
    assert d["snapshot_rows"]["from"] != "iceberg"
    assert {q["id"] for q in d["query"]} == {"python", "spark"}
    page = client.get("/tables/orders").text
    assert 'id="iceberg-off"' in page and 'id="iceberg-behind"' not in page


def test_write_amplification_is_every_byte_written_over_the_bytes_held(tmp_path):
    """Oracle: a lakehouse write creates each data file once (a log append is a new log file),
    so before any clean the files on disk are every byte the commits wrote."""
    import os

    from lakehouse.airflow.ui import overview
    path = tmp_path / "t"
    t = lakehouse.create_table(str(path), name="t", table_type="MERGE_ON_READ", record_key="id", index="BUCKET",
                               options={"hoodie.bucket.index.num.buckets": 2, "hoodie.meta.sync.iceberg.enabled": "false"})
    for lo in (0, 5, 10):
        t.upsert(pa.table({"id": list(range(lo, lo + 20))}))
    t.compact(force=True)
    on_disk = sum(os.path.getsize(f) for f in path.rglob("*") if f.is_file() and ".hoodie" not in f.parts
                  and not f.name.startswith(".hoodie_partition_metadata"))
    d = overview.details("t", str(path), "MERGE_ON_READ")
    held = d["stats"]["base_bytes"] + d["stats"]["log_bytes"]
    assert d["write_amplification"] == round(on_disk / held, 2) > 1


def test_write_amplification_counts_what_a_log_append_wrote_not_the_whole_log_file():
    """Hudi appends to a log file across commits (HoodieAppendHandle): its write stat's
    fileSizeInBytes is the file's size so far, totalWriteBytes what that commit added."""
    from types import SimpleNamespace

    from lakehouse.airflow.ui import overview

    def fact(*stats):
        return SimpleNamespace(row={"state": "completed"}, meta=SimpleNamespace(
            write_stats=lambda: [SimpleNamespace(total_write_bytes=w, file_size_in_bytes=f) for w, f in stats]))
    facts = [fact((100, 100)), fact((50, 150)), fact((50, 200)), fact((0, 80))]  # the last: no totalWriteBytes
    assert overview.write_amplification(facts, 200) == round((100 + 50 + 50 + 80) / 200, 2)


@pytest.mark.airflow
@pytest.mark.spark
@pytest.mark.slow
def test_the_query_snippets_run_as_shown(platform):
    """Each snippet of the Query panel: the Python, pyiceberg and Spark ones run as shown in a
    fresh interpreter, the DuckDB one with its extensions loaded from their PyPI packages instead
    of INSTALL; each prints the row count of the `make run` table that lakehouse itself reads."""
    import subprocess
    import sys

    from deploy import platform as plat
    layout, _, _ = platform
    api = plat.Api(layout)
    doc = api.http.get(f"{layout.url}/lakehouse/api/tables/trips").json()
    expected = lakehouse.open_table(doc["path"]).read().num_rows
    assert expected > 0 and doc["iceberg"]["snapshot_rows"] == expected
    snippets = {q["id"]: q for q in doc["query"]}
    assert set(snippets) == {"python", "duckdb", "pyiceberg", "spark"}
    assert "SqlCatalog" in snippets["pyiceberg"]["code"]  # the registry's catalog, by name
    for sid in ("python", "pyiceberg", "spark"):
        out = subprocess.run([sys.executable, "-c", snippets[sid]["code"]], capture_output=True, text=True,
                             timeout=600, cwd="/")
        assert out.returncode == 0, (sid, out.stderr[-2000:])
        assert out.stdout.strip().splitlines()[-1] == str(expected), (sid, out.stdout)
    from tests.iceberg.duckdb_judge import connect
    con = connect()
    assert con.execute(snippets["duckdb"]["code"]).fetchall() == [(expected,)]
