"""Smoke test of benchmarks/bench_write_memory.py: a tiny run on two paths whose chunked and
whole writes make the same table (no memory assertion: machines are noisy; `make bench`
reports the peaks)."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

BENCH = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "bench_write_memory.py"


def test_a_tiny_run_compares_each_chunked_write_with_the_write_taken_whole(tmp_path):
    out = tmp_path / "mem.json"
    done = subprocess.run([sys.executable, str(BENCH), "--budget-mb", "0.5", "--times", "4", "--load", "2",
                           "--paths", "cow-simple-upsert,cow-insert-overwrite", "--out", str(out)],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    res = json.loads(out.read_text())
    assert [r["path"] for r in res["results"]] == ["cow-simple-upsert", "cow-insert-overwrite"]
    for r in res["results"]:
        assert r["same_table_as_whole"] and r["unique_keys"]
        c = r["chunked"]
        assert c["batch_mib"] > 3 * 0.5 and c["table"]["rows"] >= c["rows"] // 2
        assert r["peak_in_budgets"] == round(c["peak_over_start_mib"] / 0.5, 2)
