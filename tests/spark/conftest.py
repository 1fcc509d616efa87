"""Spark for the tests: an in-process SparkSession on local[2], the spark-submit command line,
and a standalone cluster (one master, one worker) on 127.0.0.1, each started once per session."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.servers import free_port

REPO = Path(__file__).resolve().parents[2]
LOOPBACK = "127.0.0.1"


def _require_spark() -> None:
    pytest.importorskip("pyspark", reason="pyspark is needed for the Spark tests (pip install '.[spark]')")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Spark needs Java (17 or later) on PATH or in JAVA_HOME")


def _bin(name: str) -> str:
    # The scripts pyspark installs beside this interpreter drive the same Spark as the tests.
    path = os.path.join(os.path.dirname(sys.executable), name)
    found = path if os.access(path, os.X_OK) else shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed beside {sys.executable} nor on PATH")
    return found


def _with_repo_path(env: dict[str, str]) -> dict[str, str]:
    parts = [str(REPO)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    return {**env, "PYTHONPATH": os.pathsep.join(parts)}


def _base_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "LAKEHOUSE_FAULTS"}
    env.update(SPARK_LOCAL_IP=LOOPBACK, PYSPARK_PYTHON=sys.executable)
    env.pop("PYSPARK_DRIVER_PYTHON", None)
    return env


@dataclass
class Run:
    args: list[str]
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    doc: dict | None = None  # the app's last stdout line, parsed

    def explain(self) -> str:
        return (f"$ {' '.join(self.args)}\nexit {self.returncode} after {self.seconds:.1f} s\n"
                f"--- stdout\n{self.stdout[-3000:]}\n--- stderr (tail)\n{self.stderr[-6000:]}")


@dataclass
class SparkSubmit:
    """``spark-submit`` of lakehouse's submit.py, with an environment in which executors import
    lakehouse from this work tree."""

    binary: str
    env: dict[str, str]

    def __call__(self, app: str, *app_args: str, master: str = "local[2]",
                 spark_args: tuple[str, ...] = (), env: dict[str, str] | None = None,
                 app_file: str | None = None, timeout: float = 240) -> Run:
        from lakehouse.spark.submit import submit_path

        cmd = [self.binary, "--master", master, *spark_args, app_file or submit_path(), app,
               *map(str, app_args)]
        started = time.monotonic()
        p = subprocess.run(cmd, env=env or self.env, capture_output=True, text=True, timeout=timeout,
                           cwd=os.environ.get("TMPDIR", "/tmp"))
        run = Run(cmd, p.returncode, p.stdout, p.stderr, time.monotonic() - started)
        lines = p.stdout.strip().splitlines()
        if lines:
            try:
                run.doc = json.loads(lines[-1])
            except ValueError:
                pass
        return run


@pytest.fixture(scope="session")
def spark_submit() -> SparkSubmit:
    _require_spark()
    return SparkSubmit(_bin("spark-submit"), _with_repo_path(_base_env()))


@pytest.fixture(scope="session")
def spark():
    """One SparkSession on local[2] for the in-process tests; its Python workers import
    lakehouse and these tests from the work tree."""
    _require_spark()
    from lakehouse.spark.session import build_session

    with pytest.MonkeyPatch.context() as mp:
        # The JVM, started now, hands its environment to the Python workers it forks.
        for k, v in _with_repo_path(_base_env()).items():
            if os.environ.get(k) != v:
                mp.setenv(k, v)
        session = build_session("lakehouse-tests", master="local[2]", ui=False)
        try:
            yield session
        finally:
            session.stop()


@pytest.fixture
def spark_env() -> dict[str, str]:
    """The environment of a Spark driver run as a subprocess (its own JVM)."""
    _require_spark()
    return _with_repo_path(_base_env())


@dataclass
class Cluster:
    master_url: str
    ui_url: str
    procs: list[subprocess.Popen]
    logs: Path


def _alive_workers(ui_url: str) -> int:
    try:
        with urllib.request.urlopen(f"{ui_url}/json/", timeout=2) as r:
            doc = json.load(r)
    except (OSError, ValueError):
        return 0
    return sum(1 for w in doc.get("workers", []) if w.get("state") == "ALIVE")


def _stop(procs: list[subprocess.Popen]) -> None:
    # Each daemon leads its own process group (start_new_session): the group holds the JVM and
    # any executor JVMs the worker forked.
    for p in reversed(procs):
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    for p in reversed(procs):
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait(timeout=10)


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory) -> Cluster:
    """A standalone master and one worker (2 cores, 1 GB) on 127.0.0.1, stopped by PID."""
    _require_spark()
    spark_class = _bin("spark-class")
    root = tmp_path_factory.mktemp("spark-cluster")
    port, ui, worker_ui = free_port(), free_port(), free_port()
    env = _base_env()
    # The daemons (and so the executors) get no PYTHONPATH: the cluster test proves that
    # --py-files alone ships lakehouse.
    env.pop("PYTHONPATH", None)
    env.update(SPARK_DAEMON_MEMORY="512m", SPARK_WORKER_DIR=str(root / "work"),
               SPARK_LOG_DIR=str(root / "logs"),
               # No REST submission server: it would listen on another port.
               SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false")
    master_url = f"spark://{LOOPBACK}:{port}"
    commands = [
        ("master", [spark_class, "org.apache.spark.deploy.master.Master", "--host", LOOPBACK,
                    "--port", str(port), "--webui-port", str(ui)]),
        ("worker", [spark_class, "org.apache.spark.deploy.worker.Worker", "--host", LOOPBACK,
                    "--cores", "2", "--memory", "1g", "--webui-port", str(worker_ui), master_url]),
    ]
    procs: list[subprocess.Popen] = []
    cluster = Cluster(master_url, f"http://{LOOPBACK}:{ui}", procs, root)
    try:
        for name, cmd in commands:
            with open(root / f"{name}.out", "wb") as out:
                procs.append(subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                              stdin=subprocess.DEVNULL, cwd=root, start_new_session=True))
        deadline = time.monotonic() + 90
        while _alive_workers(cluster.ui_url) < 1:
            dead = [p for p in procs if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                logs = "\n".join(f"--- {n}\n" + (root / f"{n}.out").read_text(errors="replace")[-3000:]
                                 for n, _ in commands)
                pytest.fail(f"the standalone cluster did not come up with an ALIVE worker "
                            f"({'a daemon exited' if dead else 'timed out'}):\n{logs}")
            time.sleep(0.5)
        yield cluster
    finally:
        _stop(procs)
