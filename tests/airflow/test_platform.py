"""`make run`'s platform: Airflow's four components on 127.0.0.1, the DAGs unpaused, a first cycle
of ingest, compaction and clean run through the REST API; stopped by its process group."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import lakehouse
from lakehouse.timeline.instant import Action

pytestmark = [pytest.mark.airflow, pytest.mark.spark, pytest.mark.slow]


def test_first_cycle_completes_and_leaves_its_instants(platform):
    layout, started, work = platform
    assert started["runs"] == {"trips_ingest": ["success", "success"], "trips_compaction": ["success"],
                               "trips_clean": ["success"], "live_ingest": ["success", "success"],
                               "live_compaction": ["success"], "live_clean": ["success"]}
    assert started["url"] == f"http://127.0.0.1:{layout.port}" and started["password"]
    table = lakehouse.open_table(str(work / "tables" / "trips"))
    tl = table.timeline
    done = tl.completed()
    assert len(done.filter(actions=[Action.DELTA_COMMIT]).instants) == 2
    compactions = [i for i in done.filter(actions=[Action.COMMIT]).instants if tl.is_compaction(i.time)]
    assert len(compactions) == 1
    # The clean (1 file version retained) removed the slices the compaction replaced.
    assert len(done.filter(actions=[Action.CLEAN]).instants) == 1
    assert not tl.pending().instants


def test_no_alert_on_a_healthy_table_right_after_the_first_cycle(platform):
    """What a new user sees first: the Lakehouse view has nothing to complain about after the
    cycle ingested, compacted and cleaned each table."""
    from deploy import platform as plat
    layout, _, _ = platform
    rows = plat.Api(layout).http.get(f"{layout.url}/lakehouse/api/tables").json()
    assert {r["name"] for r in rows} == {"trips", "live"}
    assert all(r["exists"] and r["alerts"] == [] for r in rows), [(r["name"], r["alerts"]) for r in rows]


def test_start_says_where_to_log_in_first_then_each_step_with_its_time_and_logs(platform):
    """The URL and the login as soon as the API answers (before the DAGs are parsed and the first
    cycle runs: minutes on 2 cores), then one line per step: its DAG, state, seconds and the
    folder of its task logs."""
    import re
    from deploy import platform as plat
    layout, started, _ = platform
    said = started["said"]
    up = next(i for i, line in enumerate(said) if line.startswith("Airflow is up: "))
    assert f"{started['url']}  (login: admin / {started['password']};" in said[up]
    assert plat.PASSWORDS in said[up]
    steps = [line for line in said[up + 1:] if re.match(r"  \w+ +(success|failed) +\d+\.\d s   ", line)]
    assert len(steps) == sum(len(v) for v in started["runs"].values())
    for line in steps:
        folder = Path(line.split("   ")[-1])
        folder = folder if folder.is_absolute() else Path.cwd() / folder
        assert folder.name.startswith("run_id=") and any(folder.rglob("*.log")), line


def test_the_first_cycle_runs_alone_and_the_schedules_start_after_it(platform):
    """The DAGs are parsed without schedules until the first cycle has run (its manual runs
    waited behind scheduled and Asset-triggered ones: minutes lost on 2 cores), then with them."""
    from deploy import platform as plat
    layout, started, _ = platform
    api = plat.Api(layout)
    assert not layout.hold_file.exists()
    dag = api.get("/dags/trips_compaction")  # Asset-triggered: after_commits in the registry
    assert dag["timetable_summary"] not in (None, "None")
    assert api.get("/dags/trips_health")["timetable_summary"] not in (None, "None")  # cron
    from datetime import datetime
    ended = datetime.fromisoformat(started["cycle_ended"])
    for dag_id in started["runs"]:
        early = [r for r in api.get(f"/dags/{dag_id}/dagRuns", limit=100)["dag_runs"]
                 if r["run_type"] != "manual" and datetime.fromisoformat(r["queued_at"]) < ended]
        assert not early, (dag_id, early)


def test_stop_leaves_no_run_marked_running(platform):
    """A run the stop interrupts is marked failed through the API first: Airflow's database
    otherwise keeps it "running" with nothing running it."""
    from deploy import platform as plat
    layout, _, _ = platform
    api = plat.Api(layout)
    run_id = api.trigger("trips_health", {})
    ended = plat.end_runs(layout)
    assert f"trips_health/{run_id}" in ended
    assert api.get(f"/dags/trips_health/dagRuns/{run_id}")["state"] == "failed"


def test_components_run_in_one_process_group_bound_to_loopback(platform):
    from deploy import platform as plat
    layout, started, _ = platform
    pgid = plat.running_pgid(layout)
    assert pgid == started["pgid"]
    pids = [int(p) for p in layout.pid_file.read_text().split()[1:]]
    assert len(pids) == 4 and all(os.getpgid(p) == pgid for p in pids)
    # Every listening TCP socket of the platform's processes is on 127.0.0.1.
    inodes = set()
    for pid in pids:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
    listening = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                cols = line.split()
                if cols[3] == "0A" and cols[9] in inodes:  # LISTEN
                    listening.append(cols[1])
    assert listening, "the api-server listens"
    assert all(addr.split(":")[0] in ("0100007F", "00000000000000000000000001000000") for addr in listening), listening


def test_a_second_start_is_refused_while_running(platform):
    from deploy import platform as plat
    layout, _, _ = platform
    with pytest.raises(plat.PlatformError, match="already running"):
        plat.start(layout, cycle=False)


def test_the_registrys_catalog_finds_the_table_by_name_behind_airflows_login(platform):
    """The registry's catalog (lakehouse.trips in SQLite), served by Airflow's api-server over
    Iceberg's REST protocol: DuckDB attaches it with an Airflow token and reads the table by name
    as lakehouse's read-optimized read does; without a token the catalog answers 401."""
    import httpx
    from deploy import platform as plat
    from tests.iceberg.duckdb_judge import attach
    layout, _, work = platform
    endpoint = f"{layout.url}/lakehouse-catalog"
    assert httpx.get(f"{endpoint}/v1/config").status_code == 401
    token = plat.Api(layout).http.headers["Authorization"].removeprefix("Bearer ")
    con = attach(endpoint, token)
    theirs = con.execute("SELECT _hoodie_record_key, _hoodie_commit_time FROM lake.lakehouse.trips").fetchall()
    ours = lakehouse.open_table(str(work / "tables" / "trips")).read(
        read_optimized=True, columns=["_hoodie_record_key", "_hoodie_commit_time"])
    assert sorted(theirs) == sorted(zip(*ours.to_pydict().values()))
    assert len(theirs) > 0


def test_make_demo_streams_while_the_compaction_dag_compacts(platform):
    """`make demo`: a streaming query (the stream application, format("lakehouse")) writes the
    streamed table while the compaction DAG, scheduled by Airflow from the Asset events of its
    commits, compacts it; the table equals its history replayed with the Python API and hudi-rs
    reads it identically."""
    from deploy import stream_demo
    layout, _, work = platform
    lines: list[str] = []
    r = stream_demo.run(layout, seconds=45, every=3, echo=lines.append)
    assert r.table == str(work / "tables" / "live")
    assert len(r.streamed) >= 5 and r.stream_status.startswith("ok"), lines
    # Compactions by the DAG (tagged with its runs, asset-triggered), between streaming commits.
    assert r.compactions and all(c["dag_id"] == "live_compaction" for c in r.compactions), lines
    assert any(c["run_id"].startswith("asset_triggered") for c in r.compactions), r.compactions
    assert r.interleaved, (r.streamed, r.compactions)
    assert r.model_equal and r.hudi_rs_equal, lines
    batches = [b for _, b in r.streamed]
    assert batches == sorted(set(batches))  # each micro-batch committed once
