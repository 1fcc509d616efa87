"""Smoke test of benchmarks/bench_view.py: a tiny run, every page served, no timing assertions
(serving times are reported by `make bench-view`, never asserted)."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

BENCH = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "bench_view.py"


def test_quick_run_serves_every_page_of_a_registry_with_archived_instants(tmp_path):
    pytest.importorskip("fastapi", reason="the Lakehouse view is a FastAPI app (pip install '.[airflow]')")
    out = tmp_path / "view.json"
    done = subprocess.run([sys.executable, str(BENCH), "--quick", "--out", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    res = json.loads(out.read_text())
    assert res["tables"] == 3 and res["instants_big"] >= 100 and res["archived_big"] > 0
    assert len(res["pages"]) == 5
    for page in res["pages"].values():
        assert page["cold_ms"] > 0 and page["warm_ms"] > 0 and page["warm_vs_cli"] > 0
