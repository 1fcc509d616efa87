"""The judges' environment: Apache Hudi and Apache Iceberg themselves (Hudi's Spark bundle and
Iceberg's Spark runtime on PySpark 3.5, the Spark line Hudi 0.15 builds for) beside the project's
own Spark 4, set up by the project.

``python -m tests.judges.environment setup`` (``make judges``) makes a virtual environment with
PySpark pinned to :data:`PYSPARK` and fetches the jars of :data:`JARS` from Maven Central by
version, each checked against the SHA-256 pinned here, into a cache
(``$LAKEHOUSE_JUDGES_HOME``, default ``~/.cache/lakehouse-judges``). Tests ask :func:`find` for
it and skip, saying why, where it is not set up; nothing is fetched while tests run.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import sys
import urllib.request
from dataclasses import dataclass

PYSPARK = "3.5.1"  # Hudi 0.15.0's Spark 3.5 bundle is built against 3.5.1
# The judge's own Python packages, pinned to what PySpark 3.5 works with.
PACKAGES = (f"pyspark=={PYSPARK}", "pyarrow>=14,<19", "pandas>=2,<2.3", "numpy>=1.24,<2")
MAVEN = "https://repo1.maven.org/maven2"
# name -> (path under Maven Central, SHA-256 of the released file)
JARS = {
    "hudi-spark3.5-bundle_2.12-0.15.0.jar": (
        "org/apache/hudi/hudi-spark3.5-bundle_2.12/0.15.0/hudi-spark3.5-bundle_2.12-0.15.0.jar",
        "aab6ecdb5c65fcd20406b980b31ccec294fae95693de947d5778f0b3fb4e302a"),
    "iceberg-spark-runtime-3.5_2.12-1.10.1.jar": (
        "org/apache/iceberg/iceberg-spark-runtime-3.5_2.12/1.10.1/iceberg-spark-runtime-3.5_2.12-1.10.1.jar",
        "39ea09e6c03550a300b9d9ab498949836d2d434e441da4c12a943a086e396940"),
    # Iceberg's JDBC catalog on SQLite: the SQL catalog lakehouse registers its tables in.
    "sqlite-jdbc-3.46.1.3.jar": (
        "org/xerial/sqlite-jdbc/3.46.1.3/sqlite-jdbc-3.46.1.3.jar",
        "4a4832720a65eaf7f4d6fd7ede52087b994dc5633c076f9e994dc0c8b4b0b4fa"),
}
HUDI_VERSION = "0.15.0"
ICEBERG_VERSION = "1.10.1"


def home() -> pathlib.Path:
    return pathlib.Path(os.environ.get("LAKEHOUSE_JUDGES_HOME", pathlib.Path.home() / ".cache" / "lakehouse-judges"))


@dataclass(frozen=True)
class Judges:
    python: pathlib.Path  # the judge environment's interpreter (PySpark 3.5)
    jars: tuple[pathlib.Path, ...]

    def run(self, script: pathlib.Path, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
        """``script`` under the judge's Python, with a clean environment: none of the project's
        Spark 4 settings leak into it."""
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("SPARK_", "PYSPARK_", "PYTHON")) and k not in ("VIRTUAL_ENV",)}
        env["PYSPARK_PYTHON"] = str(self.python)
        env["SPARK_LOCAL_IP"] = "127.0.0.1"
        env["LAKEHOUSE_JUDGE_JARS"] = ",".join(str(j) for j in self.jars)
        return subprocess.run([str(self.python), str(script), *args], env=env, capture_output=True,
                              text=True, timeout=timeout, check=False)


def _venv() -> pathlib.Path:
    return home() / f"pyspark-{PYSPARK}"


def _sha256(path: pathlib.Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _stamp() -> pathlib.Path:
    return _venv() / ".lakehouse-judges.json"


def find() -> tuple[Judges | None, str]:
    """The set-up environment, or None and why not."""
    python = _venv() / "bin" / "python"
    stamp = _stamp()
    if not python.exists() or not stamp.exists():
        return None, f"the Java Hudi judges are not set up under {home()}: run `make judges` (needs PyPI and Maven Central)"
    if json.loads(stamp.read_text()).get("packages") != list(PACKAGES):
        return None, f"the judge environment under {home()} is out of date: run `make judges`"
    jars = []
    for name in JARS:
        p = home() / "jars" / name
        if not p.exists():
            return None, f"{p} is missing: run `make judges`"
        jars.append(p)
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return None, "no Java runtime for Spark: install a JDK (17)"
    return Judges(python, tuple(jars)), ""


def fetch(name: str, path: str, sha: str) -> None:
    target = home() / "jars" / name
    if target.exists() and _sha256(target) == sha:
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    part = target.with_suffix(".part")
    print(f"fetching {name} from Maven Central", file=sys.stderr)
    with urllib.request.urlopen(f"{MAVEN}/{path}", timeout=600) as r, open(part, "wb") as f:
        shutil.copyfileobj(r, f, 1 << 20)
    got = _sha256(part)
    if got != sha:
        part.unlink()
        raise SystemExit(f"{name}: SHA-256 {got} is not the pinned {sha}; nothing was installed")
    part.replace(target)


def setup() -> None:
    venv = _venv()
    if not (venv / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    if not _stamp().exists() or json.loads(_stamp().read_text()).get("packages") != list(PACKAGES):
        print(f"installing {', '.join(PACKAGES)} into {venv}", file=sys.stderr)
        subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", *PACKAGES], check=True)
        _stamp().write_text(json.dumps({"packages": list(PACKAGES)}))
    for name, (path, sha) in JARS.items():
        fetch(name, path, sha)
    print(f"judges ready: {venv} (PySpark {PYSPARK}), Hudi {HUDI_VERSION}, Iceberg {ICEBERG_VERSION}",
          file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("command", choices=["setup", "status"])
    a = p.parse_args(argv)
    if a.command == "setup":
        setup()
        return 0
    judges, why = find()
    print("ready" if judges else why)
    return 0 if judges else 1


if __name__ == "__main__":
    raise SystemExit(main())
