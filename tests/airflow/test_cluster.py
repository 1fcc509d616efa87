"""`make cluster`: docker-compose.yml's platform as processes on 127.0.0.1 (lakehouse/airflow/
compose.py plans them from the compose file, deploy/cluster.py runs them)."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import httpx
import pytest
import yaml

from tests.airflow.conftest import REPO
from tests.servers import free_port

pytest.importorskip("yaml", reason="the compose file is YAML (pip install '.[airflow]')")

from deploy import compose  # noqa: E402

COMPOSE = yaml.safe_load((REPO / "docker-compose.yml").read_text())
HOSTS = set(COMPOSE["services"]) | {s["hostname"] for s in COMPOSE["services"].values() if s.get("hostname")}
_NAMES = "|".join(sorted(map(re.escape, HOSTS), key=len, reverse=True))
# A host name where a host goes: a URL's authority, host:port, or the whole value (paths may
# hold a service's name as a folder).
_HOST = re.compile(rf"(//|@)({_NAMES})\b|(?<![\w./-])({_NAMES}):\d|^({_NAMES})$")


def _compose_env(name: str) -> dict[str, str]:
    env = COMPOSE["services"][name].get("environment") or {}
    return {k: str(v) for k, v in env.items()}


def test_every_compose_service_becomes_a_local_process_on_loopback(tmp_path):
    p = compose.plan(compose.Layout(REPO, var=tmp_path))
    assert [s.name for s in p.services if s.name in COMPOSE["services"]] == [s.name for s in p.services]
    assert {s.name for s in p.services} == set(COMPOSE["services"])
    order = [s.name for s in p.services]
    assert order.index("postgres") < order.index("airflow-init") < order.index("airflow-scheduler")
    assert order.index("spark-master") < order.index("spark-worker-1")
    for s in p.services:
        own = {k: v for k, v in s.env.items() if k in _compose_env(s.name)}
        for text in [*s.argv, *own.values()]:
            assert not _HOST.search(text) and "0.0.0.0" not in text, (s.name, text)
            assert not text.startswith(("/opt/", "/data", "/usr/local/bin/python")), (s.name, text)
    # The Airflow components get the compose file's settings, pointed at the local services.
    scheduler = p.service("airflow-scheduler")
    assert set(_compose_env("airflow-scheduler")) <= set(scheduler.env)
    for key in ("AIRFLOW__CORE__EXECUTOR", "AIRFLOW__CORE__PARALLELISM", "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"):
        assert scheduler.env[key] == _compose_env("airflow-scheduler")[key]
    assert f"@127.0.0.1:{p.ports['postgres:5432']}/airflow" in scheduler.env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]
    assert scheduler.env["AIRFLOW_CONN_SPARK_DEFAULT"].startswith(f"spark://127.0.0.1:{p.ports['spark-master:7077']}")
    assert scheduler.env["AWS_ENDPOINT_URL_S3"] == f"http://127.0.0.1:{p.ports['object-store:9000']}"
    assert scheduler.argv[-1] == "--skip-serve-logs"  # its log server would bind every interface
    # Ports: the API keeps the published one, the rest are free ones, no two the same.
    assert p.ports["airflow-apiserver:8080"] == 8080 and len(set(p.ports.values())) == len(p.ports)
    workers = [s for s in p.services if s.name.startswith("spark-worker")]
    assert len(workers) == 2 and all(s.argv[s.argv.index("--cores") + 1] == "2" for s in workers)
    assert len({s.env["SPARK_WORKER_DIR"] for s in workers}) == 2
    # The S3 credentials go to the workers (whose executors inherit them) and the Airflow tasks
    # through the environment only, never into the registry.
    secret = scheduler.env["AWS_SECRET_ACCESS_KEY"]
    assert all(s.env["AWS_SECRET_ACCESS_KEY"] == secret for s in workers)
    text = yaml.safe_dump(p.registry)
    assert secret not in text and "/data/" not in text and not _HOST.search(text)
    assert all(t["path"].startswith("s3://") for t in p.registry["tables"].values())


def test_the_plan_follows_the_compose_file(tmp_path):
    """Change the compose file, and make cluster changes with it: a third worker, another
    parallelism."""
    doc = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    doc["services"]["spark-worker-3"] = {**doc["services"]["spark-worker-2"], "hostname": "spark-worker-3"}
    doc["x-airflow-env"]["AIRFLOW__CORE__PARALLELISM"] = "3"
    for name, svc in doc["services"].items():
        if "environment" in svc and "AIRFLOW__CORE__PARALLELISM" in svc["environment"]:
            svc["environment"]["AIRFLOW__CORE__PARALLELISM"] = "3"
    for d in ("dags", "plugins", "deploy"):
        shutil.copytree(REPO / d, tmp_path / d)
    (tmp_path / "docker-compose.yml").write_text(yaml.safe_dump(doc))
    p = compose.plan(compose.Layout(REPO, port=18080, var=tmp_path / "var", compose_file=tmp_path / "docker-compose.yml"))
    workers = [s for s in p.services if s.name.startswith("spark-worker")]
    assert len(workers) == 3 and len({w.argv[w.argv.index("--webui-port") + 1] for w in workers}) == 3
    assert p.service("airflow-scheduler").env["AIRFLOW__CORE__PARALLELISM"] == "3"
    assert p.api_url == "http://127.0.0.1:18080"
    assert p.service("airflow-scheduler").env["AIRFLOW__CORE__DAGS_FOLDER"] == str(tmp_path / "dags")


# --- the cluster, run for real ----------------------------------------------------------------

def _postgres_or_skip() -> None:
    try:
        compose_pg = __import__("deploy.cluster", fromlist=["_pg_bin"])._pg_bin()
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"PostgreSQL's server is not installed ({e}); .ci/run installs Debian's postgresql")
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        pytest.skip("running as root needs runuser to start PostgreSQL as its own user")
    assert compose_pg


@pytest.fixture(scope="module")
def cluster(spark_submit_ready, tmp_path_factory):
    pytest.importorskip("psycopg2", reason="Airflow on PostgreSQL needs psycopg2 (pip install -e '.[dev]')")
    _postgres_or_skip()
    from deploy import cluster as cl
    var = tmp_path_factory.mktemp("cluster")
    layout = compose.Layout(REPO, port=free_port(), var=var)
    try:
        started = cl.start(layout, cycle=True, echo=lambda *_: None)
    except BaseException:
        cl.stop(layout)
        raise
    pids = dict(json.loads(layout.state_file.read_text())["pids"])
    try:
        yield layout, started, pids
    finally:
        cl.stop(layout)
    for name, pid in pids.items():  # stopped means gone, every process group
        with pytest.raises(ProcessLookupError):
            os.killpg(pid, 0)
    assert cl.postmaster_pid(layout) is None


def _api(layout, started):
    from deploy import platform as plat
    return plat.Api(plat.Layout(REPO, layout.port, var=layout.home), pw=started["password"])


def _applied_files(table, t) -> dict[str, list[str]]:
    """instant -> the landed files it applied: from the streaming query's checkpoint, or the
    batch ingest's ``lakehouse.ingest.files`` commit metadata."""
    from deploy.stream_demo import stream_files
    if t.source.mode == "stream":
        return stream_files(table, t.source.checkpoint)
    files = {}
    for inst in table.timeline.completed_writes().instants:
        names = table.active.commit_metadata(inst).extra_metadata.get("lakehouse.ingest.files")
        if names:
            files[inst.time] = [os.path.join(t.source.dir, n) for n in json.loads(names)]
    return files


def _quiet(api, dag_ids: list[str]) -> None:
    """Pause the DAGs (their crons would go on writing) and wait until no task runs. Airflow
    examines no run of a paused DAG, so a run under way stays "running" with its next task not
    started: what it left (a phase 1 without its commit, a planned compaction) is pending on the
    timeline, where the next run would resume it."""
    import time
    for d in dag_ids:
        api.patch(f"/dags/{d}", {"is_paused": True})
    deadline = time.monotonic() + 600
    while api.get("/dags/~/dagRuns/~/taskInstances", state=["running", "queued"])["total_entries"]:
        assert time.monotonic() < deadline, "tasks did not finish"
        time.sleep(3)


def _resume_compactions(table) -> None:
    """Execute and commit a compaction a paused run left planned, as its next run would (hudi-rs
    0.5 reads no log under a pending compaction)."""
    from lakehouse.timeline.instant import Action
    for inst in table.timeline.pending().filter(actions=[Action.COMPACTION]).instants:
        table.run_compaction(inst.time)
        table.commit_compaction(inst.time)


@pytest.mark.airflow
@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.cluster
def test_make_cluster_runs_both_tables_on_postgres_two_spark_workers_and_s3(cluster, monkeypatch):
    """The first cycle of both registry tables (batch and streamed ingest, compaction, clean) runs
    under Airflow's scheduler on PostgreSQL, its Spark work spread over both workers, the tables
    on the S3 API server: equal to their history replayed with the Python API, read identically
    by hudi-rs, listed by the Lakehouse view; every server on 127.0.0.1."""
    import lakehouse
    from deploy.stream_demo import replay_model
    from lakehouse.airflow import registry as registry_mod
    from tests.interop.hudi_oracle import canonical

    layout, started, pids = cluster
    reg = registry_mod.load(str(layout.home / "tables.yaml"))
    assert [t.name for t in reg.tables] == ["trips", "trips_live"]
    for t in reg.tables:
        assert started["runs"][t.dag_id("ingest")] == ["success", "success"]
        assert started["runs"][t.dag_id("compaction")] == ["success"]
        assert started["runs"][t.dag_id("clean")] == ["success"]
    api = _api(layout, started)
    _quiet(api, [t.dag_id(s) for t in reg.tables for s in ("ingest", "compaction", "clean")])

    # Both workers ran executors of the same applications.
    apps = []
    for key, port in started["ports"].items():
        if key.startswith("spark-worker"):
            doc = httpx.get(f"http://127.0.0.1:{port}/json/", timeout=10).json()
            apps.append({e["appid"] for e in doc["finishedexecutors"] + doc["executors"]})
    assert len(apps) == 2 and apps[0] & apps[1], apps

    store = f"http://127.0.0.1:{started['ports']['object-store:9000']}"
    for k, v in {"AWS_ENDPOINT_URL_S3": store, "AWS_ACCESS_KEY_ID": "lakehouse",
                 "AWS_SECRET_ACCESS_KEY": "lakehouse-secret", "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(k, v)
    # The Iceberg catalog in Postgres, as docker-compose's services have it (env: in the registry).
    catalog_uri = json.loads(layout.state_file.read_text())["services"]["airflow-scheduler"]["env"][
        "LAKEHOUSE_CATALOG_URI"]
    assert catalog_uri.startswith("postgresql"), catalog_uri
    monkeypatch.setenv("LAKEHOUSE_CATALOG_URI", catalog_uri)  # for commits made here
    cols = ["trip_id", "city", "event_ts", "fare", "_hoodie_is_deleted"]
    import hudi
    import pyarrow as pa
    from pyiceberg.catalog.sql import SqlCatalog

    from lakehouse.iceberg import background
    from tests.iceberg.iceberg_oracle import assert_same_table, view_read
    by_name = SqlCatalog(reg.catalog.name, uri=catalog_uri, **{
        "s3.endpoint": store, "s3.access-key-id": "lakehouse", "s3.secret-access-key": "lakehouse-secret",
        "s3.region": "us-east-1"})
    for t in reg.tables:
        _resume_compactions(lakehouse.open_table(t.path))
        background.wait_all()  # what those commits publish to Iceberg (in the background) first
        table = lakehouse.open_table(t.path)
        files = _applied_files(table, t)
        assert files, t.name
        ours = canonical(table.read(columns=cols), cols)
        model = replay_model(table, str(layout.home / f"model-{t.name}"), files)
        assert canonical(model.read(columns=cols), cols) == ours, t.name
        theirs = hudi.HudiTableBuilder.from_base_uri(t.path).with_storage_options({
            "aws_endpoint_url": store, "aws_access_key_id": "lakehouse", "aws_secret_access_key": "lakehouse-secret",
            "aws_region": "us-east-1", "aws_allow_http": "true"}).build().read(hudi.HudiReadOptions())
        assert canonical(pa.Table.from_batches(theirs).select(cols), cols) == ours, t.name
        assert "lakehouse-secret" not in table.storage.read(".hoodie/hoodie.properties").decode()
        # Found by name in the Postgres catalog: pyiceberg reads the view the table publishes.
        found = by_name.load_table(f"{reg.catalog.namespace}.{table.name}")
        assert found.metadata_location.startswith(t.path), found.metadata_location
        assert_same_table(found.scan().to_arrow(), view_read(table), f"{t.name} by name")

    # The Lakehouse view of that Airflow lists both tables, and reads their history from S3 as
    # `lakehouse stats --json` does (the api-server has the store's credentials from its environment).
    from lakehouse.inspect.stats import table_stats
    listed = api.http.get("/lakehouse/api/tables").json()
    assert sorted(x["name"] for x in listed) == ["trips", "trips_live"]
    for t in reg.tables:
        one = api.http.get(f"/lakehouse/api/tables/{t.name}").json()
        assert one["stats"] == table_stats(lakehouse.open_table(t.path)), t.name
        assert len(one["history"]["points"]) == len(lakehouse.open_table(t.path).timeline.completed_writes().instants)
    # Every listening socket of the cluster's processes is on loopback.
    groups = set(pids.values())
    from deploy.cluster import postmaster_pid
    groups.add(os.getpgid(postmaster_pid(layout)))
    sockets = set()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            if os.getpgid(int(pid)) not in groups:
                continue
            for fd in os.listdir(f"/proc/{pid}/fd"):
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
                if link.startswith("socket:["):
                    sockets.add(link[8:-1])
        except (OSError, ProcessLookupError):
            continue
    listening = []
    for table_file in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table_file) as f:
            for line in f.readlines()[1:]:
                cols_ = line.split()
                if cols_[3] == "0A" and cols_[9] in sockets:
                    listening.append(cols_[1])
    assert len(listening) >= 6, listening
    assert all(a.split(":")[0] in ("0100007F", "0000000000000000FFFF00000100007F",
                                   "00000000000000000000000001000000") for a in listening), listening


FAULT_REGISTRY = """
defaults:
  retries: 4
  retry_delay_s: 5
  spark_conf: {{spark.executor.memory: 1g, spark.cores.max: "4"}}
catalog: {{uri: "env:LAKEHOUSE_CATALOG_URI", namespace: faults}}
tables:
  orders:
    path: s3://lakehouse/faults/orders
    options: {{hoodie.bucket.index.num.buckets: 4}}
    source: {{kind: demo, dir: {land}/orders, demo_rows: 3000}}
    schedule: {{ingest: "* * * * *", compaction: {{after_commits: 2}}, clean: "*/2 * * * *"}}
  events:
    path: s3://lakehouse/faults/events
    options: {{hoodie.bucket.index.num.buckets: 4}}
    source: {{kind: demo, mode: stream, dir: {land}/events, checkpoint: {land}/checkpoints/events, demo_rows: 3000}}
    schedule: {{ingest: "* * * * *", compaction: {{after_commits: 2}}, clean: "*/2 * * * *"}}
"""


def _wait_for(what: str, check, timeout: float = 300, every: float = 1.0):
    import time
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = check()
        if out:
            return out
        time.sleep(every)
    pytest.fail(f"{what} within {timeout:.0f} s")


def _drain(api, registry_path, reg) -> None:
    """Stop the crons without pausing the DAGs (Airflow examines no run of a paused DAG, so a run
    under way would stall with its work pending): the registry's ingest and clean schedules become
    null, and once the dag-processor has parsed that, the runs under way finish, and so do the
    compactions their commits trigger."""
    import time
    doc = yaml.safe_load(registry_path.read_text())
    for entry in doc["tables"].values():
        entry["schedule"].update(ingest=None, clean=None, health=None)
    registry_path.write_text(yaml.safe_dump(doc, sort_keys=False))
    cron_dags = [t.dag_id(s) for t in reg.tables for s in ("ingest", "clean", "health")]
    _wait_for("the DAGs parsed without their crons", lambda: all(
        api.get(f"/dags/{d}")["timetable_summary"] in (None, "None") for d in cron_dags), timeout=300, every=5)
    # Quiet for 20 s: an asset-triggered compaction is created a scheduler loop after its commit.
    quiet_since = None
    deadline = time.monotonic() + 900
    while quiet_since is None or time.monotonic() - quiet_since < 20:
        assert time.monotonic() < deadline, "the DAG runs did not finish"
        busy = api.get("/dags/~/dagRuns", state=["running", "queued"])["total_entries"]
        quiet_since = None if busy else (quiet_since or time.monotonic())
        time.sleep(3)


@pytest.mark.airflow
@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.cluster
def test_the_scheduler_runs_the_services_on_their_crons_through_a_lost_worker_and_a_restart(
        spark_submit_ready, tmp_path, monkeypatch):
    """Two tables on one-minute crons under Airflow's scheduler: a Spark worker is SIGKILLed while
    it runs a task's executor, and the scheduler is restarted while a DAG run is under way. The
    services go on (Spark moves the work to the other worker or Airflow retries the task, which
    resumes from the timeline): every landed batch is applied exactly once, each table equals its
    history replayed with the Python API and hudi-rs reads it identically."""
    import lakehouse
    from deploy import cluster as cl
    from deploy.stream_demo import replay_model
    from lakehouse.airflow import registry as registry_mod
    from lakehouse.errors import TableNotFoundError
    from lakehouse.timeline.instant import Action
    from tests.interop.hudi_oracle import canonical

    pytest.importorskip("psycopg2", reason="Airflow on PostgreSQL needs psycopg2 (pip install -e '.[dev]')")
    _postgres_or_skip()
    land = tmp_path / "landing"
    reg_file = tmp_path / "faults.yaml"
    reg_file.write_text(FAULT_REGISTRY.format(land=land))
    layout = compose.Layout(REPO, port=free_port(), var=tmp_path / "var")
    try:
        started = cl.start(layout, cycle=False, echo=lambda *_: None, registry_file=reg_file)
        api = _api(layout, started)
        reg = registry_mod.load(str(layout.home / "tables.yaml"))
        worker_ui = f"http://127.0.0.1:{started['ports']['spark-worker-1:8082']}/json/"
        # A worker dies while it runs an executor of a task.
        _wait_for("an executor on spark-worker-1",
                  lambda: httpx.get(worker_ui, timeout=5).json()["executors"], timeout=400, every=0.5)
        cl.kill(layout, "spark-worker-1")
        # The scheduler restarts while a DAG run is under way.
        _wait_for("a running DAG run", lambda: any(
            api.get(f"/dags/{t.dag_id('ingest')}/dagRuns", state=["running"])["dag_runs"] for t in reg.tables))
        cl.restart(layout, "airflow-scheduler")
        cl.restart(layout, "spark-worker-1")
        api = _api(layout, started)

        def progressed():
            done = []
            for t in reg.tables:
                try:
                    tl = lakehouse.open_table(t.path).timeline.completed()
                except TableNotFoundError:  # its first ingest has not created it yet
                    return False
                done.append(len(tl.filter(actions=[Action.DELTA_COMMIT]).instants) >= 4
                            and any(tl.is_compaction(i.time) for i in tl.filter(actions=[Action.COMMIT]).instants))
            return all(done)
        store = f"http://127.0.0.1:{started['ports']['object-store:9000']}"
        for k, v in {"AWS_ENDPOINT_URL_S3": store, "AWS_ACCESS_KEY_ID": "lakehouse",
                     "AWS_SECRET_ACCESS_KEY": "lakehouse-secret", "AWS_DEFAULT_REGION": "us-east-1"}.items():
            monkeypatch.setenv(k, v)
        _wait_for("four ingests and a compaction of each table", progressed, timeout=900, every=5)
        _drain(api, layout.home / "tables.yaml", reg)
        # The services went on: every run finished, retries included.
        for t in reg.tables:
            for d in (t.dag_id("ingest"), t.dag_id("compaction"), t.dag_id("clean")):
                states = [r["state"] for r in api.get(f"/dags/{d}/dagRuns", limit=100)["dag_runs"]]
                assert states and set(states) == {"success"}, (d, states)

        import hudi
        import pyarrow as pa
        cols = ["trip_id", "city", "event_ts", "fare", "_hoodie_is_deleted"]
        for t in reg.tables:
            table = lakehouse.open_table(t.path)
            assert not table.timeline.pending().filter(actions=[Action.DELTA_COMMIT]).instants
            landed = sorted(p.name for p in Path(t.source.dir).iterdir() if p.suffix == ".parquet")
            files = _applied_files(table, t)
            applied = [os.path.basename(f) for fs in files.values() for f in fs]
            # Exactly once: every landed batch applied (the runs all finished), none twice.
            assert len(applied) == len(set(applied)), t.name
            assert sorted(applied) == landed, (t.name, applied, landed)
            ours = canonical(table.read(columns=cols), cols)
            keys = [r["trip_id"] for r in ours]
            assert len(keys) == len(set(keys)), t.name
            model = replay_model(table, str(tmp_path / f"model-{t.name}"), files)
            assert canonical(model.read(columns=cols), cols) == ours, t.name
            theirs = hudi.HudiTableBuilder.from_base_uri(t.path).with_storage_options({
                "aws_endpoint_url": store, "aws_access_key_id": "lakehouse",
                "aws_secret_access_key": "lakehouse-secret", "aws_region": "us-east-1",
                "aws_allow_http": "true"}).build().read(hudi.HudiReadOptions())
            assert canonical(pa.Table.from_batches(theirs).select(cols), cols) == ours, t.name
    finally:
        cl.stop(layout)
