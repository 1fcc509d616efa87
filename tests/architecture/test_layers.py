"""The house in layers (docs/architecture.md): import-linter's layer contract in pyproject.toml,
no private name imported across modules, no import inside a function but optional dependencies."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "lakehouse"
BIN = Path(sys.executable).parent
# Imported lazily on purpose: a user without them still imports lakehouse (extras in pyproject;
# pyiceberg and SQLAlchemy only for tables registered in an Iceberg catalog; DuckDB and Polars
# only for a scan's to_duckdb / to_polars).
OPTIONAL = ("pyspark", "py4j", "airflow", "boto3", "botocore", "pyiceberg", "sqlalchemy", "fastapi", "uvicorn",
            "hudi", "duckdb", "polars")


def _lint_imports(cwd: Path) -> subprocess.CompletedProcess:
    exe = BIN / "lint-imports"
    if not exe.exists():
        pytest.skip("import-linter is not installed (pip install -e '.[dev]')")
    env = {**os.environ, "PYTHONPATH": str(cwd)}
    return subprocess.run([str(exe), "--no-cache"], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)


def test_the_layer_contracts_hold():
    res = _lint_imports(ROOT)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    assert "BROKEN" not in res.stdout and "KEPT" in res.stdout


def _copy_with(tmp_path: Path, appended: dict[str, str]) -> Path:
    """A copy of the package (and pyproject.toml) under ``tmp_path`` where each module of
    ``appended`` (dotted name) gained its text; returns the copy's package folder."""
    shutil.copytree(PACKAGE, tmp_path / "lakehouse", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    for module, text in appended.items():
        path = tmp_path.joinpath(*module.split(".")).with_suffix(".py")
        path.write_text(path.read_text() + f"\n{text}\n")
    return tmp_path / "lakehouse"


def _planted(tmp_path: Path, module: str, line: str) -> subprocess.CompletedProcess:
    """lint-imports over a copy of the package where ``module`` gained ``line``."""
    _copy_with(tmp_path, {module: line})
    return _lint_imports(tmp_path)


def _broken(res: subprocess.CompletedProcess) -> list[str]:
    return [line.removesuffix(" BROKEN").strip() for line in res.stdout.splitlines() if line.endswith(" BROKEN")]


def test_an_upward_import_breaks_the_layers(tmp_path):
    """A service importing the Table facade (the circle the meta client broke) is refused."""
    res = _planted(tmp_path, "lakehouse.services.clean", "from lakehouse.table import Table")
    assert "lakehouse layers" in _broken(res), res.stdout[-4000:]
    assert "lakehouse.services.clean -> lakehouse.table" in res.stdout


def test_a_type_only_circle_breaks_the_acyclic_contract(tmp_path):
    """The circle the write context and the S3 upload's Protocol broke: a module of a package
    naming, for its type hints only, the module that imports it."""
    res = _planted(tmp_path, "lakehouse.write.assign",
                   "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from lakehouse.write.client import WriteClient")
    assert _broken(res) == ["no import circle"], res.stdout[-4000:]
    assert "No cycles are allowed in lakehouse.write" in res.stdout


def test_a_type_only_upward_import_breaks_the_layers_too(tmp_path):
    res = _planted(tmp_path, "lakehouse.timeline.active",
                   "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from lakehouse.write.client import WriteClient")
    assert "lakehouse layers" in _broken(res), res.stdout[-4000:]


def test_the_table_format_importing_an_integration_breaks_the_contract(tmp_path):
    """The writer reaching for Iceberg publishing (it goes through lakehouse.meta_sync instead),
    or any core module for Spark, Airflow or the CLI: the forbidden contract."""
    res = _planted(tmp_path, "lakehouse.write.client", "from lakehouse.iceberg import publish")
    assert any(b == "table format apart from its integrations" for b in _broken(res)), \
        res.stdout[-4000:]
    assert "lakehouse.write.client -> lakehouse.iceberg.publish" in res.stdout


def test_the_cli_importing_airflow_breaks_their_independence(tmp_path):
    res = _planted(tmp_path, "lakehouse.cli.common", "from lakehouse.airflow import registry")
    assert any(b == "entry points independent" for b in _broken(res)), \
        res.stdout[-4000:]


def _modules(package: Path = PACKAGE):
    for path in sorted(package.rglob("*.py")):
        yield path, ast.parse(path.read_text(), str(path))


def _is_module(dotted: str) -> bool:
    p = ROOT.joinpath(*dotted.split("."))
    return p.with_suffix(".py").exists() or (p / "__init__.py").exists()


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def test_no_module_imports_a_private_name_of_another():
    """``from lakehouse.x import _y`` and ``x._y`` on an imported lakehouse module. (ruff's
    PLC2701 skips first-party imports, so the suite checks them itself.)"""
    found = []
    for path, tree in _modules():
        where = path.relative_to(ROOT)
        modules: set[str] = set()
        for n in ast.walk(tree):
            if isinstance(n, ast.ImportFrom) and n.module and n.module.startswith("lakehouse"):
                for a in n.names:
                    if _private(a.name):
                        found.append(f"{where}:{n.lineno} imports {n.module}.{a.name}")
                    elif _is_module(f"{n.module}.{a.name}"):
                        modules.add(a.asname or a.name)
            elif isinstance(n, ast.Import):
                modules |= {a.asname or a.name.split(".")[0] for a in n.names if a.name.startswith("lakehouse")}
        for n in ast.walk(tree):
            if isinstance(n, ast.Attribute) and _private(n.attr):
                base = n.value
                while isinstance(base, ast.Attribute):
                    base = base.value
                if isinstance(base, ast.Name) and base.id in modules:
                    found.append(f"{where}:{n.lineno} uses {ast.unparse(n)}")
    assert not found, "\n".join(found)


def test_no_import_inside_a_function_but_optional_dependencies():
    """ruff's PLC0415 over the package; the lines it is told to skip import optional
    dependencies only."""
    ruff = BIN / "ruff"
    if not ruff.exists():
        pytest.skip("ruff is not installed (pip install -e '.[dev]')")
    res = subprocess.run([str(ruff), "check", "--no-cache", "--preview", "--select", "PLC0415",
                          "--output-format", "concise", str(PACKAGE)], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout[-4000:]
    misused = []
    for path, tree in _modules():
        lines = path.read_text().splitlines()
        for n in ast.walk(tree):
            if isinstance(n, (ast.Import, ast.ImportFrom)) and "noqa: PLC0415" in lines[n.lineno - 1]:
                names = [n.module or ""] if isinstance(n, ast.ImportFrom) else [a.name for a in n.names]
                if not all(x.split(".")[0] in OPTIONAL for x in names):
                    misused.append(f"{path.relative_to(ROOT)}:{n.lineno} {lines[n.lineno - 1].strip()}")
    assert not misused, "lazy imports of required modules:\n" + "\n".join(misused)


# A path under the meta folder, or one of its folders' names: the table's layout, which
# lakehouse.layout alone spells (Hudi's names on HoodieTableMetaClient).
_LAYOUT = re.compile(r"(?<![\w.])\.hoodie(?!\w)|(^|/)\.(aux|temp|schema|locks)(/|$)")


def layout_spellings(package: Path) -> list[str]:
    """Strings (docstrings aside) that spell a part of the table's layout, outside
    ``lakehouse/layout.py``."""
    found = []
    for path, tree in _modules(package):
        if path == package / "layout.py":
            continue
        docs = {id(n.body[0].value) for n in ast.walk(tree)
                if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
        found += [f"{path.relative_to(package.parent)}:{n.lineno}: {n.value!r}" for n in ast.walk(tree)
                  if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs
                  and _LAYOUT.search(n.value)]
    return found


def test_the_table_layout_is_spelled_in_one_module():
    assert not layout_spellings(PACKAGE), "\n".join(layout_spellings(PACKAGE))


def test_a_layout_name_spelled_elsewhere_is_found(tmp_path):
    package = _copy_with(tmp_path, {"lakehouse.io.markers": 'OLD_TEMP = ".hoodie/.temp"',
                                    "lakehouse.services.clean": 'AUX_NAME = ".aux"'})
    assert [f.split(":")[0] for f in layout_spellings(package)] == [
        "lakehouse/io/markers.py", "lakehouse/services/clean.py"]


_LAUNCH_MODULES = {"subprocess", "multiprocessing", "pty", "concurrent.futures.process"}
_LAUNCH_CALLS = re.compile(r"^os\.(fork|forkpty|exec\w*|spawn\w*|posix_spawn\w*|system|popen)$")


def launchers(package: Path) -> list[str]:
    """Places in the library that start a process: an import of a process-starting module, or
    a call of ``os.fork``/``exec*``/``spawn*``/``system``/``popen``. Processes are started by the
    development platform (``deploy/``) and by the engines themselves (Spark, Airflow)."""
    found = []
    for path, tree in _modules(package):
        where = path.relative_to(package.parent)
        for n in ast.walk(tree):
            names = ([a.name for a in n.names] if isinstance(n, ast.Import)
                     else [n.module or ""] if isinstance(n, ast.ImportFrom) else [])
            found += [f"{where}:{n.lineno} imports {m}" for m in names
                      if m in _LAUNCH_MODULES or m.split(".")[0] in _LAUNCH_MODULES]
            if isinstance(n, ast.Call) and _LAUNCH_CALLS.match(ast.unparse(n.func)):
                found.append(f"{where}:{n.lineno} calls {ast.unparse(n.func)}")
    return found


def test_the_library_starts_no_process():
    assert not launchers(PACKAGE), "\n".join(launchers(PACKAGE))


def test_a_process_started_in_the_library_is_found(tmp_path):
    package = _copy_with(tmp_path, {"lakehouse.spark.submit":
                                    "import subprocess\n\ndef go(argv):\n    os.execvp(argv[0], argv)"})
    assert sorted(f.split(" ", 1)[1] for f in launchers(package)) == ["calls os.execvp", "imports subprocess"]
