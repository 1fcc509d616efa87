"""docker-compose.yml: valid against the Compose specification (../shared/schemas/compose-spec.json),
and consistent with the DAGs' configuration (no Docker engine runs on these machines)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import SHARED

yaml = pytest.importorskip("yaml", reason="PyYAML reads the compose file (pip install '.[airflow]')")
jsonschema = pytest.importorskip("jsonschema", reason="jsonschema validates it (pip install '.[airflow]')")

REPO = Path(__file__).resolve().parents[2]
AIRFLOW = ("airflow-apiserver", "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer")
SPARK = ("spark-master", "spark-worker-1", "spark-worker-2")


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((REPO / "docker-compose.yml").read_text())


def _env(svc: dict) -> dict[str, str]:
    env = svc.get("environment") or {}
    if isinstance(env, list):
        env = dict(e.split("=", 1) for e in env)
    return {k: str(v) for k, v in env.items()}


def _mounts(svc: dict) -> dict[str, str]:
    """container path -> source of each volume."""
    out = {}
    for v in svc.get("volumes") or []:
        src, dst = v.split(":")[:2]
        out[dst] = src
    return out


def test_valid_against_the_compose_specification(compose):
    spec_path = SHARED / "schemas" / "compose-spec.json"
    if not spec_path.exists():
        pytest.skip(f"{spec_path} is absent (../shared is not beside the repository)")
    import json
    spec = json.loads(spec_path.read_text())
    assert "draft-07" in spec["$schema"]
    validator = jsonschema.Draft7Validator(spec)
    errors = sorted(validator.iter_errors(compose), key=lambda e: list(map(str, e.absolute_path)))
    assert not errors, "; ".join(f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors[:5])
    # The schema does catch mistakes of the kind a compose file has.
    bad = {"services": {"x": {"image": "i", "ports": "8080", "healthcheck": {"retries": "many"}, "restrat": "no"}}}
    assert len(list(validator.iter_errors(bad))) >= 2


def test_the_services_and_their_health_checks(compose):
    services = compose["services"]
    assert {"postgres", "object-store", "airflow-init", *AIRFLOW, *SPARK} <= set(services)
    for name in ("postgres", "object-store", *AIRFLOW, *SPARK):
        assert services[name].get("healthcheck", {}).get("test"), f"{name} has no health check"
    # Airflow and Spark share one image, built from the repository's Dockerfile.
    for name in ("airflow-init", *AIRFLOW, *SPARK):
        svc = services[name]
        assert svc["image"] == "lakehouse:latest" and svc["build"]["context"] == "."
        assert (REPO / svc["build"]["dockerfile"]).exists()
    dockerfile = (REPO / "Dockerfile").read_text()
    assert re.search(r'pip install "\.\[airflow,catalog,deploy,s3\]"', dockerfile) and "openjdk-17" in dockerfile
    for vol in ("postgres-data", "object-store-data", "tables"):
        assert vol in compose["volumes"]


def test_published_ports_bind_loopback_only(compose):
    for name, svc in compose["services"].items():
        for port in svc.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), f"{name} publishes {port} beyond this machine"


def test_airflow_agrees_with_postgres_spark_and_the_registry(compose):
    from lakehouse.airflow import registry
    services = compose["services"]
    pg = _env(services["postgres"])
    envs = {n: _env(services[n]) for n in ("airflow-init", *AIRFLOW)}
    for name, env in envs.items():
        # The metadata database is the postgres service, with its credentials.
        m = re.fullmatch(r"postgresql\+psycopg2://(\w+):(\w+)@([\w-]+):5432/(\w+)",
                         env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"])
        assert m and m.groups() == (pg["POSTGRES_USER"], pg["POSTGRES_PASSWORD"], "postgres", pg["POSTGRES_DB"]), name
        assert env == envs["airflow-apiserver"], f"{name}'s environment differs from the api-server's"
    env = envs["airflow-scheduler"]
    # Tasks reach the execution API on the api-server's port; the api-server serves it there.
    api_cmd = services["airflow-apiserver"]["command"]
    port = api_cmd[api_cmd.index("--port") + 1]
    assert env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"] == f"http://airflow-apiserver:{port}/execution/"
    # The Spark connection names the master service and the port it listens on.
    m = re.fullmatch(r"spark://([\w-]+):(\d+)\?deploy-mode=client", env["AIRFLOW_CONN_SPARK_DEFAULT"])
    master = services[m.group(1)]
    assert master["command"][master["command"].index("--port") + 1] == m.group(2)
    for w in ("spark-worker-1", "spark-worker-2"):
        assert f"spark://{m.group(1)}:{m.group(2)}" in services[w]["command"]
    # The DAG folder, the plugin folder and the registry are the repository's, mounted where the
    # environment says; the registry loads, and its tables live where Airflow and Spark both see them.
    mounts = _mounts(services["airflow-scheduler"])
    assert mounts[env["AIRFLOW__CORE__DAGS_FOLDER"]] == "./dags"
    assert mounts[env["AIRFLOW__CORE__PLUGINS_FOLDER"]] == "./plugins"
    reg_dir, reg_name = env["LAKEHOUSE_REGISTRY"].rsplit("/", 1)
    reg = registry.load(str(REPO / mounts[reg_dir].removeprefix("./") / reg_name))
    conns = {k[len("AIRFLOW_CONN_"):].lower() for k in env if k.startswith("AIRFLOW_CONN_")}
    store = _env(services["object-store"])
    for t in reg.tables:
        assert t.spark_conn_id in conns, f"{t.name} uses connection {t.spark_conn_id}, which is not defined"
        for svc in ("airflow-scheduler", *SPARK[1:]):
            data = [dst for dst, src in _mounts(services[svc]).items() if src == "tables"]
            # Landed files on the shared volume, at the same path everywhere.
            assert data and any(t.source.dir.startswith(d + "/") for d in data), f"{svc} cannot reach {t.source.dir}"
            if t.path.startswith("s3://"):
                # The table in the object store: every driver and executor reaches it with the
                # store's own credentials.
                env_s = _env(services[svc])
                assert env_s["AWS_ENDPOINT_URL_S3"] == "http://object-store:9000", svc
                assert env_s["AWS_ACCESS_KEY_ID"] == store["MINIO_ROOT_USER"], svc
                assert env_s["AWS_SECRET_ACCESS_KEY"] == store["MINIO_ROOT_PASSWORD"], svc
                assert env_s.get("AWS_DEFAULT_REGION"), svc
            else:
                assert any(t.path.startswith(d + "/") for d in data), f"{svc} cannot reach {t.path}"
        if t.path.startswith("s3://"):
            bucket = t.path.split("/")[2]
            init = services["object-store-init"]
            assert f"store/{bucket}" in " ".join(init["command"]), f"nothing creates bucket {bucket}"
            assert services["airflow-init"]["depends_on"]["object-store-init"]["condition"] == \
                "service_completed_successfully"
        assert t.spark_conf.get("spark.driver.host") == services["airflow-scheduler"]["hostname"]
