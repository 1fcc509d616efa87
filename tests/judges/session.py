"""Queued work for Apache Hudi on Spark 3.5 (``hudi_job.py`` in the judge's Python): writes with
Hudi's Spark datasource, snapshot reads and SQL statements (Hudi's ``CALL`` procedures), run in
order in one Spark session by :meth:`JavaSession.run`."""

from __future__ import annotations

import json
import pathlib

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from tests.interop.hudi_oracle import canonical
from tests.judges.environment import HUDI_VERSION, Judges
from tests.judges.test_java_hudi_reads import SCHEMA, Model

HERE = pathlib.Path(__file__).parent


class JavaSession:
    def __init__(self, root: pathlib.Path, judges: Judges) -> None:
        self.root, self.judges, self.n = root, judges, 0
        self.steps: list[dict] = []
        self.out = root / "out"
        self.out.mkdir(exist_ok=True)

    def write(self, path: str, batch: pa.Table, options: dict[str, str]) -> None:
        self.n += 1
        rows = self.root / f"batch{self.n}.parquet"
        pq.write_table(batch, rows)
        self.steps.append({"kind": "write", "name": f"write{self.n}", "path": path, "rows": str(rows),
                           "options": options})

    def read(self, path: str, name: str) -> None:
        self.steps.append({"kind": "read", "name": name, "path": path, "query": "snapshot"})

    def sql(self, name: str, statement: str) -> None:
        """A statement whose failure fails :meth:`run` (Hudi's services must run)."""
        self.steps.append({"kind": "sql", "name": name, "sql": statement})

    def run(self) -> None:
        self.n += 1
        request = self.root / f"request{self.n}.json"
        request.write_text(json.dumps({"out": str(self.out), "steps": self.steps}))
        done = self.judges.run(HERE / "hudi_job.py", str(request))
        assert done.returncode == 0, done.stderr[-4000:]
        for step in self.steps:
            error = self.out / f"{step['name']}.error"
            if step["kind"] != "read":
                assert not error.exists(), (f"Hudi {HUDI_VERSION} failed at {step['name']}:\n"
                                            f"{cause(error.read_text())}")
        self.steps = []

    def result(self, name: str) -> pa.Table:
        error = self.out / f"{name}.error"
        assert not error.exists(), f"Hudi {HUDI_VERSION} failed to read {name}:\n{cause(error.read_text())}"
        return ds.dataset(self.out / name).to_table()

    def rows(self, name: str) -> list[dict]:
        """The rows a statement returned."""
        return json.loads((self.out / f"{name}.json").read_text())


def cause(trace: str) -> str:
    """The Java exceptions of a Py4J trace, without its stack frames."""
    return "\n".join(line for line in trace.splitlines()
                     if ("Exception" in line or "Error" in line) and not line.lstrip().startswith("at "))[-3000:]


def check(got: pa.Table, model: Model, what: str) -> None:
    keys = got.column("id")
    assert pc.count_distinct(keys).as_py() == len(keys), f"{what}: a key is there twice"
    assert canonical(got.select(SCHEMA.names), SCHEMA.names) == model.table(), f"{what}: not the model"
