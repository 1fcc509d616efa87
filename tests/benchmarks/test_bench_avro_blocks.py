"""Smoke test of benchmarks/bench_avro_blocks.py: a tiny run that checks the vectorised code
and fastavro agree and reports every step (no timing assertions; `make bench-avro` reports the ratios)."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

BENCH = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "bench_avro_blocks.py"


def test_small_run_reports_every_step(tmp_path):
    out = tmp_path / "avro.json"
    done = subprocess.run([sys.executable, str(BENCH), "-m", "300", "--repeats", "1", "--out", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    res = json.loads(out.read_text())
    assert [r["step"] for r in res] == ["data block decode", "nested data block decode", "data block encode",
                                          "nested data block encode", "delete block decode", "delete block encode"]
    assert all(r["records"] == 300 and r["vectorised_ms"] > 0 and r["fastavro_ms"] > 0 for r in res)
