"""Smoke test of benchmarks/bench_backlog.py: a tiny run, no timing or memory assertions (the
memory bound itself is asserted on held rows in tests/read/test_file_slice_reader.py)."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

BENCH = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "bench_backlog.py"


def test_quick_run_reports_every_rounds_and_budget_with_equal_results(tmp_path):
    out = tmp_path / "backlog.json"
    done = subprocess.run([sys.executable, str(BENCH), "--quick", "--budget-mib", "1", "--out", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "results equal across budgets" in done.stdout
    res = json.loads(out.read_text())
    assert res["equal"] is True
    assert {(x["rounds"], x["budget"]) for x in res["results"]} == {
        (r, b) for r in (2, 6) for b in ("default (1 GiB)", "1 MiB")}
    for x in res["results"]:
        assert x["read"]["rows"] == x["compaction"]["rows"] == res["rows"]
        assert x["log_mib"] > 0
