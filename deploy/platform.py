"""The embedded platform behind ``make run`` / ``make stop``: Airflow on one machine.

``start`` sets up ``var/airflow`` under the project (SQLite metadata database, LocalExecutor, the
DAGs of ``dags/`` and the plugin of ``plugins/``, Spark on ``local[2]``), starts Airflow's four
components in one process group bound to 127.0.0.1 (api-server, scheduler, dag-processor,
triggerer; not ``airflow standalone``, whose log servers bind every interface), waits until the
API is healthy and the DAGs are parsed, unpauses the lakehouse DAGs, runs a first cycle (two
ingests, a forced compaction, clean) through the REST API as a user would, and prints the URL and login.
``stop`` ends the process group; ``status`` says whether it runs.

    python -m deploy.platform start [--port 8080] [--no-cycle]
    python -m deploy.platform stop
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import click
import httpx
from tenacity import retry, retry_if_exception, stop_after_attempt, wait_random_exponential

from lakehouse.airflow import registry as registry_mod
from lakehouse.errors import LakehouseError

ROOT = Path(__file__).resolve().parents[1]
COMPONENTS = {
    "api-server": ["api-server", "--host", "127.0.0.1", "--port", "{port}"],
    "scheduler": ["scheduler", "--skip-serve-logs"],
    "dag-processor": ["dag-processor"],
    "triggerer": ["triggerer", "--skip-serve-logs"],
}
USER = "admin"


class PlatformError(LakehouseError):
    """The embedded platform could not start or stop."""


@dataclass(frozen=True)
class Layout:
    """Where the embedded platform keeps its state (all under the project's ``var/``)."""

    root: Path  # the project: dags/ and plugins/
    port: int = 8080
    var: Path | None = None  # state (Airflow's home, logs): default root/var
    registry_file: Path | None = None  # default: $LAKEHOUSE_REGISTRY, else root/dags/tables.yaml

    @property
    def home(self) -> Path:
        return (self.var or self.root / "var") / "airflow"

    @property
    def pid_file(self) -> Path:
        return self.home / "platform.pid"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def hold_file(self) -> Path:
        """While it exists the DAGs have no schedules (the first cycle: registry.schedules_held)."""
        return self.home / "schedules-held"

    @property
    def registry(self) -> Path:
        return self.registry_file or Path(os.environ.get("LAKEHOUSE_REGISTRY") or self.root / "dags" / "tables.yaml")

    def secret(self) -> str:
        # One JWT secret shared by every component (tasks talk to the API with tokens the
        # scheduler signs), kept so that a restart does not invalidate running tasks.
        path = self.home / "jwt_secret"
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists():
            path.write_text(secrets.token_urlsafe(32))
            path.chmod(0o600)
        return path.read_text().strip()

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW__")}
        bin_dir = str(Path(sys.executable).parent)
        env.update({
            "AIRFLOW_HOME": str(self.home),
            # SQLite's 5 s busy timeout is short on a loaded 2-core machine with four
            # components and Spark writing: a writer waits up to 30 s for another.
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{self.home}/airflow.db?timeout=30",
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__CORE__DAGS_FOLDER": str(self.root / "dags"),
            "AIRFLOW__CORE__PLUGINS_FOLDER": str(self.root / "plugins"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__PARALLELISM": "4",
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{USER}:admin",
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.url}/execution/",
            "AIRFLOW__API__BASE_URL": self.url,
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(self.port),
            "AIRFLOW__API_AUTH__JWT_SECRET": self.secret(),
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "30",
            "AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK": "False",
            "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps(
                {"conn_type": "spark", "host": "local[2]", "extra": {"deploy-mode": "client"}}),
            "LAKEHOUSE_REGISTRY": str(self.registry),
            registry_mod.HOLD_ENV: str(self.hold_file),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "PYSPARK_PYTHON": sys.executable,
            "PATH": os.pathsep.join([bin_dir, env.get("PATH", "")]),
            "PYTHONPATH": os.pathsep.join([str(self.root), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]),
        })
        return env


def _airflow(layout: Layout) -> list[str]:
    return [str(Path(sys.executable).parent / "airflow")]


def _reap(pgid: int) -> None:
    """Collect exited members of the group that are this process's children (when the
    platform was started from this process, as tests do): a zombie still counts as alive."""
    while True:
        try:
            pid, _ = os.waitpid(-pgid, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def running_pgid(layout: Layout) -> int | None:
    try:
        pgid = int(layout.pid_file.read_text().split()[0])
    except (FileNotFoundError, ValueError, IndexError):
        return None
    _reap(pgid)
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        return pgid
    return pgid


PASSWORDS = "simple_auth_manager_passwords.json.generated"  # the simple auth manager's


def run_logs(layout: Layout, dag_id: str, run_id: str) -> Path:
    """Where a DAG run's task logs go (Airflow's default log_filename_template: one folder per
    run, a file per task and attempt)."""
    return layout.home / "logs" / f"dag_id={dag_id}" / f"run_id={run_id}"


def _shown(path: Path) -> str:
    """``path`` relative to the working folder where it is under it (shorter to read)."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def password(layout: Layout) -> str:
    path = layout.home / PASSWORDS
    try:
        return json.loads(path.read_text())[USER]
    except (FileNotFoundError, KeyError, ValueError):
        raise PlatformError(f"no generated password in {path}",
                            help="the api-server writes it on start: check var/airflow/logs/api-server.log") from None


def _server_hiccup(e: BaseException) -> bool:
    # A 5xx from Airflow on SQLite is mostly "database is locked": a transaction that read and
    # then wrote while another component committed (WAL gives it SQLITE_BUSY at once, whatever
    # the busy timeout). The transaction was rolled back, so asking again is safe.
    return isinstance(e, httpx.TransportError) or (
        isinstance(e, httpx.HTTPStatusError) and e.response.status_code >= 500)


_SERVER_HICCUPS = retry(retry=retry_if_exception(_server_hiccup), stop=stop_after_attempt(6),
                        wait=wait_random_exponential(multiplier=0.5, max=8), reraise=True)


class Api:
    """Airflow's REST API as a logged-in user."""

    def __init__(self, layout: Layout, user: str = USER, pw: str | None = None,
                 transport: httpx.BaseTransport | None = None) -> None:
        self.http = httpx.Client(base_url=layout.url, timeout=30, transport=transport)
        r = self.http.post("/auth/token", json={"username": user, "password": pw or password(layout)})
        if r.status_code >= 300:
            raise PlatformError(f"login as {user} failed: HTTP {r.status_code} {r.text[:200]}",
                                help="check AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS and the generated password file")
        self.http.headers["Authorization"] = f"Bearer {r.json()['access_token']}"

    def get(self, path: str, **params: Any) -> Any:
        return self._call("GET", path, params=params)

    def patch(self, path: str, body: dict) -> Any:
        return self._call("PATCH", path, json=body)

    def post(self, path: str, body: dict) -> Any:
        return self._call("POST", path, json=body)

    @_SERVER_HICCUPS
    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        r = self.http.request(method, f"/api/v2{path}", **kwargs)
        r.raise_for_status()
        return r.json()

    def dag_exists(self, dag_id: str) -> bool:
        """Whether the dag-processor has parsed ``dag_id`` yet."""
        try:
            self.get(f"/dags/{dag_id}")
            return True
        except httpx.HTTPStatusError:
            return False

    def trigger(self, dag_id: str, conf: dict | None = None) -> str:
        """A manual run of ``dag_id``; its run id is chosen here, so that a retry after a reply
        lost on the way (the run created, the answer a 500) finds the run instead of adding one."""
        run_id = f"manual__{datetime.now(timezone.utc).isoformat()}"
        body = {"dag_run_id": run_id, "logical_date": None, "conf": conf or {}}

        @_SERVER_HICCUPS
        def once() -> str:
            r = self.http.post(f"/api/v2/dags/{dag_id}/dagRuns", json=body)
            if r.status_code == 409:  # an earlier attempt of ours created it
                self._call("GET", f"/dags/{dag_id}/dagRuns/{run_id}")
                return run_id
            r.raise_for_status()
            return r.json()["dag_run_id"]

        try:
            return once()
        except httpx.HTTPStatusError as e:
            raise PlatformError(f"Airflow refused to trigger {dag_id}: HTTP {e.response.status_code} "
                                f"{e.response.text[:300]}",
                                help="see var/airflow/logs/api-server.log for the server's side") from e

    def wait_run(self, dag_id: str, run_id: str, timeout: float = 600) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = self.get(f"/dags/{dag_id}/dagRuns/{run_id}")["state"]
            if state in ("success", "failed"):
                return state
            time.sleep(2)
        raise PlatformError(f"{dag_id} run {run_id} did not finish in {timeout:.0f} s",
                            help="see its task logs in the Airflow UI")


def wait_until(what: str, check, timeout: float, log: Path | None = None) -> Any:
    """``check()``'s first truthy result within ``timeout`` s (exceptions count as not yet)."""
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            out = check()
            if out:
                return out
        except Exception as e:  # noqa: BLE001 - not up yet
            last = e
        time.sleep(1)
    raise PlatformError(f"{what} not ready after {timeout:.0f} s ({last})",
                        help=f"see {log}" if log else "see var/airflow/logs")


def _healthy(layout: Layout) -> bool:
    r = httpx.get(f"{layout.url}/api/v2/monitor/health", timeout=5)
    return r.status_code == 200 and r.json().get("metadatabase", {}).get("status") == "healthy"


def start(layout: Layout, *, cycle: bool = True, echo=print) -> dict[str, Any]:
    if (pgid := running_pgid(layout)) is not None:
        raise PlatformError(f"the platform is already running (process group {pgid})",
                            help="`make stop` stops it")
    logs = layout.home / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    # The first cycle's manual runs would wait behind the scheduled and Asset-triggered runs
    # that unpausing starts (minutes on 2 cores): the DAGs are parsed without schedules until
    # the cycle has run.
    if cycle:
        layout.hold_file.write_text("the DAGs' schedules start once the first cycle has run\n")
    else:
        layout.hold_file.unlink(missing_ok=True)
    env = layout.env()
    echo(f"airflow home: {layout.home}")
    subprocess.run([*_airflow(layout), "db", "migrate"], env=env, check=True,
                   stdout=open(logs / "db-migrate.log", "w"), stderr=subprocess.STDOUT)
    leader = None
    pids = []
    for name, args in COMPONENTS.items():
        cmd = [*_airflow(layout), *[a.format(port=layout.port) for a in args]]
        out = open(logs / f"{name}.log", "a")
        # All four in one process group (the first one's): one signal stops everything.
        p = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT,
                             process_group=0 if leader is None else leader, cwd=layout.root)
        leader = leader or p.pid
        pids.append(p.pid)
    layout.pid_file.write_text(f"{leader} {' '.join(map(str, pids))}\n")
    wait_until("the Airflow API", lambda: _healthy(layout), 180, logs / "api-server.log")
    # Usable from here on: say where and how to log in before the DAGs and the first cycle.
    echo(f"Airflow is up: {layout.url}  (login: {USER} / {password(layout)}; the password is kept "
         f"in {_shown(layout.home / PASSWORDS)})")
    api = Api(layout)
    reg = registry_mod.load(str(layout.registry))
    dag_ids = [t.dag_id(s) for t in reg.tables for s in t.services]
    wait_until("the lakehouse DAGs", lambda: all(api.dag_exists(d) for d in dag_ids), 240,
          logs / "dag-processor.log")
    for d in dag_ids:
        api.patch(f"/dags/{d}", {"is_paused": False})
    runs: dict[str, list[str]] = {}
    cycle_ended = None
    if cycle:
        echo("first cycle, each step a DAG run as you would trigger it (state, time, task logs):")
        for t in reg.tables:
            # Two ingests, so that the second one's updates leave logs for the compaction.
            steps = [(t.dag_id("ingest"), {}), (t.dag_id("ingest"), {})]
            if t.is_mor:
                steps.append((t.dag_id("compaction"), {"force": True}))
            steps.append((t.dag_id("clean"), {}))
            for dag_id, conf in steps:
                began = time.monotonic()
                run_id = api.trigger(dag_id, conf)
                runs.setdefault(dag_id, []).append(api.wait_run(dag_id, run_id))
                echo(f"  {dag_id:<24} {runs[dag_id][-1]:<8} {time.monotonic() - began:6.1f} s   "
                     f"{_shown(run_logs(layout, dag_id, run_id))}")
        cycle_ended = datetime.now(timezone.utc).isoformat()
        start_schedules(layout, env)
    return {"url": layout.url, "user": USER, "password": password(layout), "runs": runs,
            "pgid": leader, "cycle_ended": cycle_ended}


def end_runs(layout: Layout) -> list[str]:
    """Mark the DAG runs still queued or running failed, through the API, before the components
    stop: else Airflow's database keeps them "running" with nothing running them, and the next
    start shows them so (a scheduled run that `make stop` interrupted). Best effort; returns
    the runs ended."""
    ended = []
    try:
        api = Api(layout)
        found = api.get("/dags/~/dagRuns", state=["queued", "running"], limit=100)["dag_runs"]
        for r in found:
            api.patch(f"/dags/{r['dag_id']}/dagRuns/{r['dag_run_id']}", {"state": "failed"})
            ended.append(f"{r['dag_id']}/{r['dag_run_id']}")
    except Exception:  # noqa: BLE001 - the API may be down already: stop anyway
        pass
    return ended


def start_schedules(layout: Layout, env: dict[str, str]) -> None:
    """The DAGs parsed again with their schedules (the dag-processor would take up to its
    refresh interval to notice)."""
    layout.hold_file.unlink(missing_ok=True)
    subprocess.run([*_airflow(layout), "dags", "reserialize"], env=env, check=True,
                   stdout=open(layout.home / "logs" / "dags-reserialize.log", "w"), stderr=subprocess.STDOUT)


def stop(layout: Layout, timeout: float = 30) -> bool:
    pgid = running_pgid(layout)
    if pgid is None:
        layout.pid_file.unlink(missing_ok=True)
        return False
    end_runs(layout)
    os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and running_pgid(layout) is not None:
        time.sleep(0.5)
    if running_pgid(layout) is not None:
        os.killpg(pgid, signal.SIGKILL)
        while time.monotonic() < deadline + 10 and running_pgid(layout) is not None:
            time.sleep(0.2)
    layout.pid_file.unlink(missing_ok=True)
    return True


@click.group()
@click.option("--root", type=click.Path(file_okay=False, path_type=Path), default=ROOT, show_default=True,
              help="the project folder (var/ goes under it)")
@click.option("--var", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="where Airflow's state goes (default: ROOT/var)")
@click.option("--port", type=int, default=lambda: int(os.environ.get("LAKEHOUSE_PORT", 8080)),
              show_default="8080 or $LAKEHOUSE_PORT", help="the Airflow API and UI port on 127.0.0.1")
@click.pass_context
def cli(ctx: click.Context, root: Path, var: Path | None, port: int) -> None:
    """The embedded lakehouse platform (Airflow on this machine)."""
    ctx.obj = Layout(root.resolve(), port, var.resolve() if var else None)


@cli.command("start")
@click.option("--no-cycle", is_flag=True, help="do not run the first ingest/compaction/clean cycle")
@click.pass_obj
def start_cmd(layout: Layout, no_cycle: bool) -> None:
    try:
        out = start(layout, cycle=not no_cycle, echo=click.echo)
    except LakehouseError as e:
        click.echo(f"error: {e.message}\nHelp: {e.help}", err=True)
        raise SystemExit(1)
    click.echo(f"\nAirflow is running: {out['url']}  (login: {out['user']} / {out['password']})")
    click.echo("The DAGs' schedules are on now: ingest, compaction and clean run by themselves."
               if not no_cycle else "The DAGs' schedules are on.")
    click.echo("Lakehouse tables: the 'Lakehouse' entry of the Airflow menu. Stop with `make stop`.")


@cli.command("stop")
@click.pass_obj
def stop_cmd(layout: Layout) -> None:
    click.echo("stopped" if stop(layout) else "not running")


@cli.command("status")
@click.pass_obj
def status_cmd(layout: Layout) -> None:
    pgid = running_pgid(layout)
    click.echo(f"running (process group {pgid}) at {layout.url}" if pgid else "not running")
    raise SystemExit(0 if pgid else 3)


if __name__ == "__main__":
    cli()
