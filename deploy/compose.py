"""docker-compose.yml's services as processes on 127.0.0.1: the plan ``make cluster`` runs.

The compose file is the configuration: every one of its services becomes a local process with
the service's own command and environment, so the two cannot drift. What changes on the way is
only what a single machine needs:

* host names of services (``postgres:5432``, ``spark-master``, ``airflow-scheduler``, ...) and
  ``0.0.0.0`` become ``127.0.0.1``, and every port a free one on loopback (the Airflow API keeps
  the compose file's published port unless asked otherwise);
* container paths become folders: bind mounts (``./dags:/opt/lakehouse/dags``) the repository's,
  named volumes (``tables:/data``) folders under ``var/cluster/volumes``, the image's
  ``AIRFLOW_HOME`` and Spark's work folders folders under ``var/cluster``;
* images that are not the project's are replaced by what this machine has: ``postgres`` by
  Debian's PostgreSQL server (its own data folder and port, the service's ``POSTGRES_*`` user,
  password and database), ``minio`` by moto's S3 server (in memory: the tables live as long as
  the cluster), and ``object-store-init`` by making the registry's buckets through the S3 API;
* Airflow's scheduler and triggerer run with ``--skip-serve-logs`` (their log servers bind every
  interface; the api-server reads the task logs from the shared ``AIRFLOW_HOME``).

The registry the compose file mounts (``LAKEHOUSE_REGISTRY``, ``deploy/tables.yaml``) is rewritten
the same way. The S3 credentials reach Airflow's tasks and the Spark executors (through the
workers' environment) as ``AWS_*`` variables only, as in the compose file.
"""

from __future__ import annotations

import os
import re
import secrets
import socket
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml

from deploy import platform as plat
from lakehouse.errors import LakehouseError

COMPOSE = plat.ROOT / "docker-compose.yml"
LOOPBACK = "127.0.0.1"
#: The project image's Python (Dockerfile): here, the interpreter running this module.
IMAGE_PYTHON = "/usr/local/bin/python"
#: The project image's AIRFLOW_HOME (Dockerfile ENV), a named volume in the compose file.
IMAGE_AIRFLOW_HOME = "/opt/airflow-home"
#: Log servers of these components bind every interface: off here (logs are in AIRFLOW_HOME).
SKIP_SERVE_LOGS = ("scheduler", "triggerer")
_INTERP = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_HOST_PORT = re.compile(r"(?<![\w.-])([a-z][a-z0-9-]*):(\d{2,5})\b")
_PORT_FLAGS = ("--port", "--webui-port")


class ClusterError(LakehouseError):
    """The local cluster could not start, stop or be planned from the compose file."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


@dataclass(frozen=True)
class Layout:
    root: Path = plat.ROOT
    port: int | None = None  # the Airflow API; default: the compose file's published port
    var: Path | None = None
    compose_file: Path | None = None

    @property
    def home(self) -> Path:
        return (self.var or self.root / "var") / "cluster"

    @property
    def compose(self) -> Path:
        return self.compose_file or self.root / "docker-compose.yml"

    @property
    def state_file(self) -> Path:
        return self.home / "state.json"


@dataclass
class Service:
    """One compose service as a local process (or a step run once)."""

    name: str
    kind: str  # "postgres" | "s3" | "buckets" | "once" | "daemon"
    argv: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    health: str | None = None  # a URL that answers 200 once the service is up
    depends_on: list[str] = field(default_factory=list)


@dataclass
class Plan:
    services: list[Service]
    ports: dict[str, int]  # "service:container port" -> local port
    registry: dict[str, Any]  # the rewritten registry document
    api_url: str
    env: dict[str, str]  # the Airflow components' environment (tasks inherit it)

    def service(self, name: str) -> Service:
        return next(s for s in self.services if s.name == name)


def _interpolate(value: Any, env: dict[str, str]) -> str:
    def one(m: re.Match) -> str:
        return env.get(m.group(1)) or (m.group(2) or "")
    return _INTERP.sub(one, str(value))


def _environment(svc: dict) -> dict[str, str]:
    env = svc.get("environment") or {}
    if isinstance(env, list):
        env = dict(e.split("=", 1) for e in env)
    return {k: "" if v is None else str(v) for k, v in env.items()}


def _command(svc: dict) -> list[str]:
    cmd = svc.get("command") or []
    return cmd.split() if isinstance(cmd, str) else [str(c) for c in cmd]


def _stand_in(svc: dict) -> bool:
    """A service whose image this machine replaces (Postgres, MinIO and its client)."""
    return str(svc.get("image", "")).startswith(("postgres", "minio/"))


def _container_ports(name: str, svc: dict, doc: dict) -> set[int]:
    """The ports a service listens on, as the compose file says anywhere: its published ports,
    its --port/--webui-port/--address flags, and ``<name>:<port>`` in any service's settings."""
    out = {int(str(p).rsplit(":", 1)[-1].split("/")[0]) for p in svc.get("ports") or []}
    cmd = _command(svc)
    for i, a in enumerate(cmd[:-1]):
        if a in _PORT_FLAGS or a == "--address":
            out.add(int(cmd[i + 1].rsplit(":", 1)[-1]))
    hostnames = {name, svc.get("hostname") or name}
    for other in doc["services"].values():
        for text in [*_environment(other).values(), *_command(other)]:
            for host, port in _HOST_PORT.findall(text):
                if host in hostnames:
                    out.add(int(port))
    return out


def plan(layout: Layout, registry_file: Path | None = None) -> Plan:
    """The compose file's services as local processes (nothing is started)."""
    try:
        doc = yaml.safe_load(layout.compose.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise ClusterError(f"cannot read {layout.compose}: {e}", help="make cluster runs docker-compose.yml's topology") from None
    services: dict[str, dict] = doc["services"]
    outer = dict(os.environ)
    secret_file = layout.home / "jwt_secret"
    if "LAKEHOUSE_JWT_SECRET" not in outer:
        secret_file.parent.mkdir(parents=True, exist_ok=True)
        if not secret_file.exists():
            secret_file.write_text(secrets.token_urlsafe(32))
        outer["LAKEHOUSE_JWT_SECRET"] = secret_file.read_text().strip()

    hosts: dict[str, str] = {}  # every host name -> its service
    for name, svc in services.items():
        hosts[name] = name
        if svc.get("hostname"):
            hosts[svc["hostname"]] = name
    ports: dict[str, int] = {}
    for name, svc in services.items():
        published = {int(str(p).rsplit(":", 1)[-1]): int(str(p).split(":")[-2]) for p in svc.get("ports") or []}
        for p in sorted(_container_ports(name, svc, doc)):
            api = name == "airflow-apiserver" and p in published
            ports[f"{name}:{p}"] = (layout.port or published[p]) if api else free_port()

    paths: dict[str, str] = {IMAGE_AIRFLOW_HOME: str(layout.home / "airflow")}
    for svc in services.values():
        if _stand_in(svc):
            continue  # the stand-ins keep their data their own way
        for v in svc.get("volumes") or []:
            src, _, rest = str(v).partition(":")
            target = rest.split(":")[0]
            if src.startswith((".", "/")):
                paths[target] = str((layout.compose.parent / src).resolve())
            elif target not in paths:
                paths[target] = str(layout.home / "volumes" / src)

    def rewrite(text: str) -> str:
        def hostport(m: re.Match) -> str:
            host, port = m.group(1), m.group(2)
            owner = hosts.get(host)
            if owner is None:
                return m.group(0)
            key = f"{owner}:{port}"
            return f"{LOOPBACK}:{ports[key]}" if key in ports else f"{LOOPBACK}:{port}"
        text = _HOST_PORT.sub(hostport, text)
        if text in hosts or text in ("0.0.0.0", "localhost"):
            return LOOPBACK
        if text == IMAGE_PYTHON:
            return sys.executable
        for target in sorted(paths, key=len, reverse=True):
            if text == target or text.startswith(target + "/"):
                return paths[target] + text[len(target):]
        return text

    bin_dir = Path(sys.executable).parent
    base_env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW__", "AIRFLOW_CONN_"))}
    base_env.update({
        "PATH": os.pathsep.join([str(bin_dir), base_env.get("PATH", "")]),
        "SPARK_LOCAL_IP": LOOPBACK, "PYSPARK_PYTHON": sys.executable,
        "AIRFLOW_HOME": paths[IMAGE_AIRFLOW_HOME],
        "PYTHONPATH": os.pathsep.join([str(layout.root), *filter(None, base_env.get("PYTHONPATH", "").split(os.pathsep))]),
    })
    out: list[Service] = []
    airflow_env: dict[str, str] = {}
    registry_path = layout.home / "tables.yaml"
    for name, svc in services.items():
        image = str(svc.get("image", ""))
        env = {k: rewrite(_interpolate(v, outer)) for k, v in _environment(svc).items()}
        deps = list(svc.get("depends_on") or [])
        if image.startswith("postgres"):
            out.append(Service(name, "postgres", env=env, depends_on=deps))
            continue
        if image.startswith("minio/minio"):
            port = ports[f"{name}:9000"]
            out.append(Service(name, "s3", [sys.executable, "-m", "moto.server", "-H", LOOPBACK, "-p", str(port)],
                               env={**base_env}, health=f"http://{LOOPBACK}:{port}/", depends_on=deps))
            continue
        if image.startswith("minio/mc"):
            out.append(Service(name, "buckets", env=env, depends_on=deps))
            continue
        cmd = _command(svc)
        argv: list[str] = []
        for i, a in enumerate(cmd):
            if i and cmd[i - 1] in _PORT_FLAGS:
                argv.append(str(ports[f"{name}:{a}"]))
            else:
                argv.append(rewrite(a))
        if argv and argv[0] in ("airflow", "spark-class", "spark-submit"):
            argv[0] = str(bin_dir / argv[0])
        if len(cmd) > 1 and cmd[0] == "airflow" and cmd[1] in SKIP_SERVE_LOGS:
            argv.append("--skip-serve-logs")
        if "org.apache.spark.deploy.worker.Worker" in cmd and "--host" not in cmd:
            argv[2:2] = ["--host", LOOPBACK]
        senv = {**base_env, **env}
        if "SPARK_WORKER_DIR" in senv:
            senv["SPARK_WORKER_DIR"] = str(layout.home / name / "work")
        if "LAKEHOUSE_REGISTRY" in senv:
            senv["LAKEHOUSE_REGISTRY"] = str(registry_path)
            airflow_env = senv
        health = None
        if svc.get("healthcheck"):
            test = " ".join(str(t) for t in svc["healthcheck"].get("test", []))
            m = re.search(r"http://localhost:(\d+)(\S*)", test)
            if m:
                health = f"http://{LOOPBACK}:{ports[f'{name}:{m.group(1)}']}{m.group(2)}"
        kind = "once" if svc.get("restart") == "no" else "daemon"
        out.append(Service(name, kind, argv, senv, health, deps))
    if not airflow_env:
        raise ClusterError(f"{layout.compose} has no service with LAKEHOUSE_REGISTRY", help="the Airflow services set it")
    # The registry the compose file mounts (LAKEHOUSE_REGISTRY), rewritten like the services.
    reg_source = registry_file or Path(rewrite(next(
        _environment(svc)["LAKEHOUSE_REGISTRY"] for svc in services.values()
        if "LAKEHOUSE_REGISTRY" in _environment(svc))))
    registry = _rewrite_doc(yaml.safe_load(Path(reg_source).read_text()), rewrite)
    api = f"http://{LOOPBACK}:{ports['airflow-apiserver:8080']}"
    return Plan(_ordered(out), ports, registry, api, airflow_env)


def _rewrite_doc(doc: Any, rewrite: Callable[[str], str]) -> Any:
    if isinstance(doc, dict):
        return {k: _rewrite_doc(v, rewrite) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_rewrite_doc(v, rewrite) for v in doc]
    return rewrite(doc) if isinstance(doc, str) else doc


def _ordered(services: list[Service]) -> list[Service]:
    by = {s.name: s for s in services}
    done: list[Service] = []

    def visit(s: Service, stack: tuple = ()) -> None:
        if s in done:
            return
        if s.name in stack:
            raise ClusterError(f"the compose services depend on each other in a cycle: {' -> '.join(stack)}")
        for d in s.depends_on:
            visit(by[d], (*stack, s.name))
        done.append(s)
    for s in services:
        visit(s)
    return done
