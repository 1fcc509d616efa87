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
