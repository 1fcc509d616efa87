"""Smoke test of benchmarks/bench_read_bound.py: a tiny run whose parts read what they say (no
timing assertions; the ratios are reported by `make bench-read`)."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

BENCH = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "bench_read_bound.py"


def test_quick_run_measures_every_part_after_the_upserts_and_after_the_delete(tmp_path):
    out = tmp_path / "bound.json"
    done = subprocess.run([sys.executable, str(BENCH), "--quick", "--out", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "snapshot rows match the model" in done.stdout
    res = json.loads(out.read_text())
    upserts, deleted = res["results"]
    assert (upserts["rounds"], deleted["rounds"]) == (res["batches"], res["batches"] + 1)
    for r in (upserts, deleted):
        assert r["read_optimized"]["vs_read_optimized"] == 1.0
        # Both read every base record and nothing else.
        assert r["decode_base"]["rows"] == r["read_optimized"]["rows"] == res["rows"]
        # Inserts sit in the logs: a snapshot returns more than the base files hold.
        assert r["snapshot"]["rows"] > r["read_optimized"]["rows"]
        # The bound drops the base records the logs replace (1% of each upsert updates).
        assert r["merge_free_bound"]["rows"] < r["decode_base_and_logs"]["rows"]
    # A delete block adds no rows, and its keys' base records are dropped too.
    assert deleted["decode_base_and_logs"]["rows"] == upserts["decode_base_and_logs"]["rows"]
    assert deleted["merge_free_bound"]["rows"] < upserts["merge_free_bound"]["rows"]
    assert deleted["snapshot"]["rows"] < upserts["snapshot"]["rows"]
