"""``make cluster`` / ``make cluster-stop``: the platform of docker-compose.yml as processes on
127.0.0.1 (:mod:`deploy.compose` turns the compose file into them).

``start`` runs the services in the compose file's dependency order, each in a process group of
its own (Debian's PostgreSQL through ``pg_ctl``), waits for their health checks and for both Spark
workers to register, unpauses the DAGs of the registry, runs a first ingest → compaction → clean
cycle of every table (side by side) through Airflow's REST API, and prints where to look.
``stop`` ends every process it started, newest first, and leaves none behind.

    python -m deploy.cluster start [--port 8080] [--no-cycle]
    python -m deploy.cluster stop
    python -m deploy.cluster status
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

import click
import httpx
import yaml

from deploy import platform as plat
from lakehouse.airflow import registry as registry_mod
from deploy.compose import LOOPBACK, ClusterError, Layout, Plan, Service, plan
from lakehouse.errors import LakehouseError

def _pg_bin() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return Path(found[-1]).parent
    if shutil.which("initdb"):
        return Path(shutil.which("initdb")).parent
    raise ClusterError("PostgreSQL's server is not installed (no initdb)",
                       help="apt-get install postgresql (make cluster does it where it may)")


def _as_postgres(argv: list[str]) -> list[str]:
    # initdb and postgres refuse to run as root: run them as Debian's postgres user.
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


def _own(path: Path) -> None:
    if os.geteuid() == 0:
        shutil.chown(path, "postgres", "postgres")


def _pg_root(layout: Layout) -> Path:
    """Where PostgreSQL keeps its data: under the cluster's folder, unless Debian's postgres user
    cannot reach it (a root-only temporary folder): then a folder of its own named after it."""
    root = layout.home / "postgres"
    if os.geteuid() != 0 or subprocess.run(_as_postgres(["test", "-x", str(layout.home)]),
                                           capture_output=True).returncode == 0:
        return root
    digest = hashlib.sha256(str(layout.home).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"lakehouse-postgres-{digest}"


def _start_postgres(layout: Layout, svc: Service, port: int, log: Path) -> None:
    pg = _pg_bin()
    root = _pg_root(layout)
    if root != layout.home / "postgres":
        marker = layout.home / "postgres.location"
        if root.exists() and not marker.exists():
            # Left by an earlier cluster folder of the same path, since deleted: its database
            # (DAG runs, users) belongs to that cluster, not this fresh one.
            shutil.rmtree(root)
        marker.write_text(f"{root}\n")
    data, run = root / "data", root / "run"
    for d in (root, run):
        d.mkdir(parents=True, exist_ok=True)
        _own(d)
    user, password = svc.env.get("POSTGRES_USER", "postgres"), svc.env.get("POSTGRES_PASSWORD", "")
    db = svc.env.get("POSTGRES_DB", user)
    if not (data / "PG_VERSION").exists():
        pwfile = root / "pwfile"
        pwfile.write_text(password + "\n")
        _own(pwfile)
        subprocess.run(_as_postgres([str(pg / "initdb"), "-D", str(data), "-U", user, f"--pwfile={pwfile}",
                                     "--auth-host=scram-sha-256", "--auth-local=trust", "-E", "UTF8"]),
                       check=True, stdout=open(log, "a"), stderr=subprocess.STDOUT)
        pwfile.unlink()
    subprocess.run(_as_postgres([str(pg / "pg_ctl"), "-D", str(data), "-l", str(root / "server.log"), "-w",
                                 "-o", f"-p {port} -k {run} -c listen_addresses={LOOPBACK}", "start"]),
                   check=True, stdout=open(log, "a"), stderr=subprocess.STDOUT)
    env = {**os.environ, "PGPASSWORD": password}
    exists = subprocess.run([str(pg / "psql"), "-h", LOOPBACK, "-p", str(port), "-U", user, "-d", "postgres",
                             "-tAc", f"SELECT 1 FROM pg_database WHERE datname = '{db}'"],
                            env=env, capture_output=True, text=True, check=True).stdout.strip()
    if exists != "1":
        subprocess.run([str(pg / "createdb"), "-h", LOOPBACK, "-p", str(port), "-U", user, db], env=env, check=True)


def _stop_postgres(layout: Layout) -> None:
    data = _pg_root(layout) / "data"
    if (data / "postmaster.pid").exists():
        subprocess.run(_as_postgres([str(_pg_bin() / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"]),
                       capture_output=True)


def _make_buckets(plan_: Plan) -> None:
    import boto3  # noqa: PLC0415 - the s3 extra
    env = plan_.env
    s3 = boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL_S3"], aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
                      aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"], region_name=env.get("AWS_DEFAULT_REGION"))
    for t in plan_.registry.get("tables", {}).values():
        path = str(t["path"])
        if path.startswith(("s3://", "s3a://")):
            bucket = path.split("://", 1)[1].split("/", 1)[0]
            try:
                s3.create_bucket(Bucket=bucket)
            except s3.exceptions.BucketAlreadyOwnedByYou:
                pass


def _ok(url: str) -> bool:
    return httpx.get(url, timeout=5).status_code == 200


def _state(layout: Layout) -> dict[str, Any]:
    try:
        return json.loads(layout.state_file.read_text())
    except (FileNotFoundError, ValueError):
        return {}


def _alive(pid: int) -> bool:
    try:
        os.killpg(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def postmaster_pid(layout: Layout) -> int | None:
    try:
        return int((_pg_root(layout) / "data" / "postmaster.pid").read_text().split()[0])
    except (FileNotFoundError, ValueError, IndexError):
        return None


def running(layout: Layout) -> dict[str, int]:
    """The services of a started cluster whose processes are alive."""
    return {n: p for n, p in _state(layout).get("pids", {}).items() if _alive(p)}


def _spark_workers(master_ui: str) -> int:
    doc = httpx.get(f"{master_ui}/json/", timeout=5).json()
    return sum(1 for w in doc.get("workers", []) if w.get("state") == "ALIVE")


def _spawn(argv: list[str], env: dict[str, str], layout: Layout, log: Path) -> int:
    proc = subprocess.Popen(argv, env=env, cwd=layout.root, start_new_session=True,
                            stdout=open(log, "a"), stderr=subprocess.STDOUT)
    return proc.pid


def _save(layout: Layout, state: dict[str, Any]) -> None:
    # It holds the services' environment (the store's credentials): the owner's eyes only.
    layout.state_file.write_text(json.dumps(state))
    layout.state_file.chmod(0o600)


def start(layout: Layout, *, cycle: bool = True, echo: Callable[[str], Any] = print,
          registry_file: Path | None = None) -> dict[str, Any]:
    """Start every service; ``registry_file`` replaces the registry the compose file mounts."""
    if running(layout):
        raise ClusterError("the cluster is already running", help="`make cluster-stop` stops it")
    p = plan(layout, registry_file)
    logs = layout.home / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    (layout.home / "tables.yaml").write_text(yaml.safe_dump(p.registry, sort_keys=False))
    state: dict[str, Any] = {"ports": p.ports, "api": p.api_url, "pids": {}, "services": {}}
    _save(layout, state)
    workers = [s for s in p.services if "org.apache.spark.deploy.worker.Worker" in s.argv]
    try:
        for svc in p.services:
            log = logs / f"{svc.name}.log"
            echo(f"  {svc.name} ...")
            if svc.kind == "postgres":
                _start_postgres(layout, svc, p.ports[f"{svc.name}:5432"], log)
                state["postgres"] = True
            elif svc.kind == "buckets":
                _make_buckets(p)
            elif svc.kind == "once":
                subprocess.run(svc.argv, env=svc.env, check=True, cwd=layout.root,
                               stdout=open(log, "a"), stderr=subprocess.STDOUT)
            else:
                state["pids"][svc.name] = _spawn(svc.argv, svc.env, layout, log)
                state["services"][svc.name] = {"argv": svc.argv, "env": svc.env}
                if svc.health:
                    plat.wait_until(svc.name, lambda u=svc.health: _ok(u), 180, log)
            _save(layout, state)
        master = next(s for s in p.services if "org.apache.spark.deploy.master.Master" in s.argv)
        ui = master.health.rsplit("/json", 1)[0] if master.health else None
        if ui:
            plat.wait_until(f"{len(workers)} Spark workers", lambda: _spark_workers(ui) >= len(workers), 180,
                  logs / f"{workers[0].name}.log")
    except BaseException:
        stop(layout)
        raise
    api = _api(layout, p)
    reg = registry_mod.load(str(layout.home / "tables.yaml"))
    dag_ids = [t.dag_id(s) for t in reg.tables for s in t.services]
    plat.wait_until("the lakehouse DAGs", lambda: all(api.dag_exists(d) for d in dag_ids), 300,
                    logs / "airflow-dag-processor.log")
    for d in dag_ids:
        api.patch(f"/dags/{d}", {"is_paused": False})
    runs: dict[str, list[str]] = {}
    if cycle:
        runs = first_cycle(api, reg, echo)
    return {"url": p.api_url, "user": plat.USER, "password": _password(layout, p), "runs": runs,
            "spark_master_ui": ui, "ports": p.ports}


def kill(layout: Layout, name: str) -> None:
    """SIGKILL a service and everything it started (a machine lost, for the fault tests)."""
    pid = _state(layout).get("pids", {}).get(name)
    if pid is None or not _alive(pid):
        raise ClusterError(f"{name} is not running", help="`python -m deploy.cluster status` lists them")
    os.killpg(pid, signal.SIGKILL)
    _gone(pid, 30)


def restart(layout: Layout, name: str, timeout: float = 60) -> int:
    """Stop a service (SIGTERM, as an operator would; SIGKILL after ``timeout``) if it runs, and
    start it again with the same command and environment; returns its new PID."""
    state = _state(layout)
    spec = state.get("services", {}).get(name)
    if spec is None:
        raise ClusterError(f"the cluster has no restartable service {name!r}",
                           help=f"services: {', '.join(state.get('services', {}))}")
    pid = state["pids"].get(name)
    if pid is not None and _alive(pid):
        os.killpg(pid, signal.SIGTERM)
        if not _gone(pid, timeout):
            os.killpg(pid, signal.SIGKILL)
            _gone(pid, 30)
    state["pids"][name] = _spawn(spec["argv"], spec["env"], layout, layout.home / "logs" / f"{name}.log")
    _save(layout, state)
    return state["pids"][name]


def _gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:  # a service this process started stays a zombie (still "alive") until reaped
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        if not _alive(pid):
            return True
        time.sleep(0.2)
    return not _alive(pid)


def first_cycle(api: "plat.Api", reg: registry_mod.Registry, echo: Callable[[str], Any]) -> dict[str, list[str]]:
    """ingest → compaction → clean for every table, the tables side by side (as their schedules
    would run them)."""
    runs: dict[str, list[str]] = {}
    errors: list[BaseException] = []

    def one(t: registry_mod.TableEntry) -> None:
        try:
            steps = [(t.dag_id("ingest"), {}), (t.dag_id("ingest"), {})]
            if t.is_mor:
                steps.append((t.dag_id("compaction"), {"force": True}))
            steps.append((t.dag_id("clean"), {}))
            for dag_id, conf in steps:
                state = api.wait_run(dag_id, api.trigger(dag_id, conf), timeout=900)
                runs.setdefault(dag_id, []).append(state)
                echo(f"  {dag_id}: {state}")
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)
    threads = [threading.Thread(target=one, args=(t,)) for t in reg.tables]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    if errors:
        raise errors[0]
    return runs


def _platform_layout(layout: Layout, p: Plan) -> "plat.Layout":
    # The compose plan puts AIRFLOW_HOME where the embedded platform's layout would under var.
    return plat.Layout(layout.root, int(p.api_url.rsplit(":", 1)[1]), var=layout.home)


def _password(layout: Layout, p: Plan) -> str:
    try:
        return plat.password(_platform_layout(layout, p))
    except plat.PlatformError:  # the api-server generates none for a user the compose file names
        users = p.env.get("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS", "admin:admin").split(",")
        return dict(u.split(":", 1) for u in users).get(plat.USER, "")


def _api(layout: Layout, p: Plan) -> "plat.Api":
    return plat.Api(_platform_layout(layout, p), pw=_password(layout, p))


def stop(layout: Layout, timeout: float = 30) -> bool:
    """Stop every process the cluster started (newest first); True if anything was running."""
    state = _state(layout)
    pids = state.get("pids", {})
    was = bool(running(layout)) or bool(state.get("postgres"))
    for name, pid in reversed(list(pids.items())):
        if not _alive(pid):
            continue
        os.killpg(pid, signal.SIGTERM)
        if not _gone(pid, timeout):
            os.killpg(pid, signal.SIGKILL)
            _gone(pid, 10)
    _stop_postgres(layout)
    layout.state_file.unlink(missing_ok=True)
    return was


@click.group()
@click.option("--port", type=int, default=None, help="the Airflow API and UI port (default: docker-compose.yml's)")
@click.option("--var", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="where the cluster's state goes (default: var/ of the project)")
@click.pass_context
def cli(ctx: click.Context, port: int | None, var: Path | None) -> None:
    """docker-compose.yml's platform as processes on 127.0.0.1."""
    ctx.obj = Layout(plat.ROOT, port, var.resolve() if var else None)


@cli.command("start")
@click.option("--no-cycle", is_flag=True, help="do not run a first ingest/compaction/clean cycle")
@click.pass_obj
def start_cmd(layout: Layout, no_cycle: bool) -> None:
    try:
        out = start(layout, cycle=not no_cycle, echo=click.echo)
    except LakehouseError as e:
        click.echo(f"error: {e.message}\nHelp: {e.help}", err=True)
        raise SystemExit(1)
    click.echo(f"\nThe cluster is running. Airflow: {out['url']} (login {out['user']} / {out['password']}); "
               f"Spark master: {out['spark_master_ui']}; logs: {layout.home / 'logs'}. "
               "Stop it with `make cluster-stop`.")


@cli.command("stop")
@click.pass_obj
def stop_cmd(layout: Layout) -> None:
    click.echo("stopped" if stop(layout) else "not running")


@cli.command("status")
@click.pass_obj
def status_cmd(layout: Layout) -> None:
    alive = running(layout)
    click.echo("\n".join(f"{n}: pid {p}" for n, p in alive.items()) if alive else "not running")
    raise SystemExit(0 if alive else 3)


if __name__ == "__main__":
    cli()
