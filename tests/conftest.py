"""Shared test fixtures. ``../shared`` is found relative to the repository root."""

from __future__ import annotations

import pathlib
import zipfile

import pytest

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
SHARED = REPO_ROOT.parent / "shared"
HUDI_FIXTURES = SHARED / "fixtures" / "hudi"
HUDI_AVRO_SCHEMAS = SHARED / "schemas" / "hudi-avro"


def require_shared(path: pathlib.Path) -> pathlib.Path:
    if not path.exists():
        pytest.skip(f"{path} is absent: these tests need ../shared beside the repository")
    return path


@pytest.fixture(scope="session")
def hudi_fixtures() -> pathlib.Path:
    return require_shared(HUDI_FIXTURES)


@pytest.fixture(scope="session")
def hudi_avro_schemas() -> pathlib.Path:
    return require_shared(HUDI_AVRO_SCHEMAS)


@pytest.fixture(scope="session")
def fixture_tables(tmp_path_factory, hudi_fixtures) -> dict[str, pathlib.Path]:
    """Every fixture table zip, extracted once per session: name (zip stem) -> table root."""
    out = tmp_path_factory.mktemp("hudi-fixtures")
    tables: dict[str, pathlib.Path] = {}
    for z in sorted(hudi_fixtures.rglob("*.zip")):
        dest = out / z.relative_to(hudi_fixtures).parent / z.stem
        with zipfile.ZipFile(z) as zf:
            zf.extractall(dest)
        roots = [p for p in dest.iterdir() if p.is_dir() and p.name != "__MACOSX"]
        assert len(roots) == 1, f"{z}: expected one table folder, found {roots}"
        key = f"{z.parent.relative_to(hudi_fixtures).as_posix()}/{z.stem}"
        tables[key] = roots[0]
    return tables


# --- a local S3 API for s3:// storage: moto's server in a subprocess on 127.0.0.1 ------------

S3_TEST_CREDENTIALS = {"s3.access-key-id": "testing", "s3.secret-access-key": "testing",
                       "s3.region": "us-east-1"}


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """The endpoint URL of a moto S3 server started for this session and stopped by its PID."""
    import sys

    from tests.servers import free_port, http_server

    pytest.importorskip("moto.server", reason="moto[server] is not installed (the s3:// tests "
                        "need it: pip install 'moto[server]')")
    pytest.importorskip("boto3", reason="boto3 is not installed: pip install 'lakehouse[s3]'")
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    with http_server([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                     f"{endpoint}/moto-api/", tmp_path_factory.mktemp("moto") / "server.log", "moto server"):
        yield endpoint


@pytest.fixture
def s3_options(s3_server) -> dict[str, str]:
    """Options that make get_storage reach the test server."""
    return {"s3.endpoint": s3_server, **S3_TEST_CREDENTIALS}


@pytest.fixture
def s3_uri(s3_server, s3_options, monkeypatch) -> str:
    """``s3://<fresh bucket>/table``. The AWS_* variables are set as well, so code that calls
    get_storage(uri) or open_table(uri) without options reaches the server too."""
    import os
    import uuid

    import boto3

    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ROLE_ARN",
                 "AWS_WEB_IDENTITY_TOKEN_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", s3_server)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", S3_TEST_CREDENTIALS["s3.access-key-id"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", S3_TEST_CREDENTIALS["s3.secret-access-key"])
    monkeypatch.setenv("AWS_DEFAULT_REGION", S3_TEST_CREDENTIALS["s3.region"])
    # Keep a developer's own ~/.aws settings and the instance metadata service out of the tests.
    monkeypatch.setenv("AWS_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    bucket = f"lakehouse-test-{uuid.uuid4().hex[:16]}"
    boto3.client("s3", endpoint_url=s3_server, region_name=S3_TEST_CREDENTIALS["s3.region"],
                 aws_access_key_id=S3_TEST_CREDENTIALS["s3.access-key-id"],
                 aws_secret_access_key=S3_TEST_CREDENTIALS["s3.secret-access-key"]
                 ).create_bucket(Bucket=bucket)
    return f"s3://{bucket}/table"


class _IcebergWarnings(__import__("logging").Handler):
    def __init__(self) -> None:
        super().__init__(level=__import__("logging").WARNING)
        self.records: list = []

    def emit(self, record) -> None:
        self.records.append(record)


@pytest.fixture
def listed_data_folders(monkeypatch, tmp_path) -> list[str]:
    """The folders outside ``.hoodie`` that local storage listings of tables under ``tmp_path``
    are asked for, in order (on an object store, a request each): what a step's listings
    follow. Other tests' leftover background threads are not counted."""
    from lakehouse.storage.local import LocalStorage
    seen: list[str] = []
    real = LocalStorage.list
    root = str(tmp_path)

    def spy(self, path="", *, recursive=False):
        if not path.startswith(".hoodie") and self.root.startswith(root):
            seen.append(path)
        return real(self, path, recursive=recursive)
    monkeypatch.setattr(LocalStorage, "list", spy)
    return seen


@pytest.fixture(autouse=True)
def no_silent_iceberg_failures(request):
    """Publishing Iceberg metadata never fails a commit, so a failure would only be logged: any
    test during which it was fails here, unless it expects it (marker ``iceberg_failure_ok``)."""
    import logging
    handler = _IcebergWarnings()
    logger = logging.getLogger("lakehouse.iceberg")
    logger.addHandler(handler)
    try:
        yield
    finally:
        # A background publisher still running would log (or fail on removed files) during
        # another test: each test waits for its own.
        from lakehouse.iceberg import background
        background.wait_all(120)
        logger.removeHandler(handler)
    if handler.records and request.node.get_closest_marker("iceberg_failure_ok") is None:
        r = handler.records[0]
        pytest.fail(f"Iceberg publishing failed silently: {r.getMessage()}\n"
                    f"{logging.Formatter().formatException(r.exc_info) if r.exc_info else ''}")


# --- the reliability ledger (tests/reliability/ledger.py): any test may record a scenario ------

from tests.reliability.ledger import FAILED, Case, Ledger, output_dir  # noqa: E402

_LEDGER = Ledger()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.when == "call":
        item._reliability_outcome = rep.outcome


class _Recorder:
    def __init__(self, test: str) -> None:
        self.test = test
        self.cases: list[Case] = []

    def case(self, area: str, scenario: str, point: str | None = None, **kw) -> Case:
        c = Case(area=area, scenario=scenario, point=point, test=self.test, **kw)
        self.cases.append(c)
        return c


@pytest.fixture
def reliability(request):
    rec = _Recorder(request.node.nodeid)
    yield rec
    outcome = getattr(request.node, "_reliability_outcome", "failed")
    if outcome == "skipped":
        return
    for c in rec.cases:
        if outcome != "passed":
            c.outcome = FAILED
        _LEDGER.add(c)


def pytest_sessionfinish(session, exitstatus):
    if _LEDGER.cases:
        _LEDGER.write(output_dir())
