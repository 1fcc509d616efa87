"""The judges' environment: Apache Hudi and Apache Iceberg themselves (Hudi 0.15's Spark bundle and
Iceberg's Spark runtime on PySpark 3.5, Hudi 0.14's on PySpark 3.4: the Spark lines they build
for) beside the project's own Spark 4, set up by the project.

``python -m tests.judges.environment setup`` (``make judges``) makes, for each Spark line of
:data:`LINES`, a virtual environment with PySpark pinned and fetches its jars from Maven Central
by version, each checked against the SHA-256 pinned here, into a cache
(``$LAKEHOUSE_JUDGES_HOME``, default ``~/.cache/lakehouse-judges``). Tests ask :func:`find` (or
:func:`find_hudi`) for a line and skip, saying why, where it is not set up; nothing is fetched
while tests run.
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

MAVEN = "https://repo1.maven.org/maven2"


@dataclass(frozen=True)
class Line:
    """One Spark line of judges: a virtual environment with PySpark pinned, and its jars, each
    name -> (path under Maven Central, SHA-256 of the released file)."""

    pyspark: str
    packages: tuple[str, ...]
    jars: dict


LINES = {
    # Hudi 0.15.0's Spark 3.5 bundle is built against 3.5.1; Iceberg's runtime for Spark 3.5.
    "3.5": Line("3.5.1", ("pyspark==3.5.1", "pyarrow>=14,<19", "pandas>=2,<2.3", "numpy>=1.24,<2"), {
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
    }),
    # Hudi 0.14 has no Spark 3.5 bundle; Maven Central serves 0.14.0's for Spark 3.4 (not 0.14.1's).
    "3.4": Line("3.4.4", ("pyspark==3.4.4", "pyarrow>=14,<19", "pandas>=1.5,<2.1", "numpy>=1.24,<2"), {
        "hudi-spark3.4-bundle_2.12-0.14.0.jar": (
            "org/apache/hudi/hudi-spark3.4-bundle_2.12/0.14.0/hudi-spark3.4-bundle_2.12-0.14.0.jar",
            "f80922ef453fed3089d549d5a02d4c3c157f722a8fb3db099dbcc2c3a923c174"),
    }),
}
# Each Hudi judged -> its Spark line.
HUDI_LINES = {"0.15.0": "3.5", "0.14.0": "3.4"}
HUDI_VERSION = "0.15.0"  # the one the write and service judges run
ICEBERG_VERSION = "1.10.1"
# The 3.5 line's, as before the lines (tests/judges/test_environment.py).
PACKAGES = LINES["3.5"].packages
JARS = LINES["3.5"].jars


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


def _venv(line: str) -> pathlib.Path:
    return home() / f"pyspark-{LINES[line].pyspark}"


def _sha256(path: pathlib.Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _stamp(line: str) -> pathlib.Path:
    return _venv(line) / ".lakehouse-judges.json"


def find(line: str = "3.5") -> tuple[Judges | None, str]:
    """The set-up environment of a Spark line (the 3.5 line: Hudi 0.15 and Iceberg), or None
    and why not."""
    spec = LINES[line]
    python = _venv(line) / "bin" / "python"
    stamp = _stamp(line)
    if not python.exists() or not stamp.exists():
        return None, (f"the judges on Spark {line} are not set up under {home()}: run `make judges` "
                      "(needs PyPI and Maven Central)")
    if json.loads(stamp.read_text()).get("packages") != list(spec.packages):
        return None, f"the Spark {line} judge environment under {home()} is out of date: run `make judges`"
    jars = []
    for name in spec.jars:
        p = home() / "jars" / name
        if not p.exists():
            return None, f"{p} is missing: run `make judges`"
        jars.append(p)
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return None, "no Java runtime for Spark: install a JDK (17)"
    return Judges(python, tuple(jars)), ""


def find_hudi(version: str) -> tuple[Judges | None, str]:
    return find(HUDI_LINES[version])


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


def setup(line: str) -> None:
    spec, venv = LINES[line], _venv(line)
    if not (venv / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    stamp = _stamp(line)
    if not stamp.exists() or json.loads(stamp.read_text()).get("packages") != list(spec.packages):
        print(f"installing {', '.join(spec.packages)} into {venv}", file=sys.stderr)
        subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", *spec.packages], check=True)
        stamp.write_text(json.dumps({"packages": list(spec.packages)}))
    for name, (path, sha) in spec.jars.items():
        fetch(name, path, sha)
    print(f"judges on Spark {line} ready: {venv} (PySpark {spec.pyspark}), {', '.join(spec.jars)}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("command", choices=["setup", "status"])
    a = p.parse_args(argv)
    if a.command == "setup":
        failed = []
        for line in LINES:  # one line that cannot be set up leaves the other's judges running
            try:
                setup(line)
            except (OSError, subprocess.CalledProcessError, SystemExit) as e:
                print(f"the judges on Spark {line} could not be set up: {e}", file=sys.stderr)
                failed.append(line)
        return 1 if failed else 0
    answers = {line: find(line) for line in LINES}
    for line, (judges, why) in answers.items():
        print(f"Spark {line}: {'ready' if judges else why}")
    return 0 if all(j for j, _ in answers.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
