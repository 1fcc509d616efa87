import json

import pytest

pytestmark = pytest.mark.spark


def test_spark_ingest_benchmark_runs_and_checks_rows(tmp_path):
    pytest.importorskip("pyspark")
    from benchmarks.bench_spark_ingest import main
    out = tmp_path / "r.json"
    assert main(["--rows", "2000", "--files", "2", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["same_rows"] is True and doc["rows"] == 2000
    assert doc["spark"]["startup_s"] > 0 and doc["spark"]["in_app_s"] > 0
    assert doc["spark"]["idle_status"] == "nothing_to_do"
