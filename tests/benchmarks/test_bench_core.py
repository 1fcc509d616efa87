"""Smoke test of benchmarks/bench_core.py: tiny sizes, both table types, no timing assertions."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import pathlib
import sys

import numpy as np
import pytest

BENCH = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "bench_core.py"
K = 1


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_core_under_test", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)


@pytest.fixture(scope="module")
def run(bench, tmp_path_factory):
    """One tiny run of both tables: (exit code, JSON result, stdout, work folder)."""
    tmp = tmp_path_factory.mktemp("bench")
    out = tmp / "out" / "core.json"
    work = tmp / "tables"
    argv = ["--quick", "-n", "5000", "-m", "500", "-k", str(K), "--buckets", "4",
            "--check-sample", "500", "--out", str(out), "--workdir", str(work), "--quiet"]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        rc = bench.main(argv)
    return rc, json.loads(out.read_text()), printed.getvalue(), work


def _expected_steps(k: int) -> list[str]:
    return (["bulk_insert"] + [f"upsert#{i}" for i in range(1, k + 1)]
            + ["snapshot_read", "read_optimized_read", "delete", "read_2cols_after_delete"])


def test_every_step_is_reported_with_positive_throughput(run):
    rc, result, printed, work = run
    assert "rows/s" in printed and "correctness:" in printed
    assert result["config"]["rows"] == 5000 and result["config"]["batches"] == K
    steps = {(s["table"], s["step"]): s for s in result["steps"]}
    for table in ("mor", "cow"):
        for name in _expected_steps(K):
            s = steps.get((table, name))
            assert s is not None, f"{table} {name} missing from {sorted(steps)}"
            assert s["rows"] > 0 and s["seconds"] > 0 and s["rows_per_s"] > 0, s
            assert s["time_ratio"] > 0 and s["per_row_ratio"] > 0, s
            if s["kind"] == "write":
                assert s["bytes_written"] > 0 and s["files_added"] > 0, s
    assert steps[("mor", "upsert#1")]["updates"] == 5  # 1% of 500
    assert steps[("mor", "upsert#1")]["inserts"] == 495
    assert any(s["table"] == "baseline" and s["kind"] == "write" for s in result["steps"])
    for kind in ("write", "read"):
        assert result["baseline"][kind]["seconds"] > 0
    assert not work.exists() or not any(work.iterdir()), "tables are removed without --keep"


def test_correctness_checks_ran(run):
    rc, result, _, _ = run
    checks = {(c["table"], c["check"]) for c in result["checks"]}
    for table in ("mor", "cow"):
        for when in ("after_upserts", "after_delete"):
            for check in ("row_count", "unique_keys", "latest_ts"):
                assert (table, f"{check}_{when}") in checks
        assert (table, "deleted_keys_absent") in checks
    assert all(c["sampled_keys"] > 0 for c in result["checks"] if c["check"].startswith("latest_ts"))
    # The run exits 1 exactly when a check failed.
    assert result["correct"] == all(c["passed"] for c in result["checks"])
    assert rc == (0 if result["correct"] else 1)


@pytest.mark.parametrize("table", ["mor", "cow"])
def test_correctness_checks_pass(run, table):
    _, result, _, _ = run
    failed = [c for c in result["checks"] if c["table"] == table and not c["passed"]]
    assert not failed, failed


def test_model_keys_are_unique_and_uuid_shaped(bench):
    keys = bench.make_keys(np.arange(10_000), seed=7).to_pylist()
    assert len(set(keys)) == len(keys)
    assert all(len(k) == 36 and [len(p) for p in k.split("-")] == [8, 4, 4, 4, 12] for k in keys)
    assert bench.make_keys(np.arange(10), seed=7).to_pylist() == keys[:10]
    assert bench.make_keys(np.arange(10), seed=8).to_pylist() != keys[:10]


def test_model_keeps_the_highest_ts(bench):
    model = bench.Model(3)
    model.initial(100)
    before = dict(model.latest)
    batch, info = model.upsert_batch(50, update_fraction=0.5, late_fraction=0.5)
    assert info["updates"] == 25 and info["inserts"] == 25 and info["late_updates"] > 0
    assert len(model.latest) == 125
    for k, ts in zip(batch.column("uuid").to_pylist(), batch.column("ts").to_pylist()):
        assert model.latest[k] == max(ts, before.get(k, ts))
    gone = model.delete_batch(10)
    assert len(model.latest) == 115 and not set(gone.column("uuid").to_pylist()) & set(model.latest)
