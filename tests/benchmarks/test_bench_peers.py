"""Smoke test of benchmarks/bench_peers.py: tiny sizes, every engine, no timing assertions."""

from __future__ import annotations

import contextlib
import io
import json

import pyarrow as pa
import pytest

from benchmarks import bench_peers
from benchmarks.bench_core import KEY, ORDERING, Model
from benchmarks.peers import checks, targets
from benchmarks.peers.engines import ENGINES, Lakehouse, expected_steps

N, M, K = 5000, 500, 2


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """One tiny run of every installed engine: (exit code, JSON result, stdout, output folder)."""
    tmp = tmp_path_factory.mktemp("peers")
    out = tmp / "out" / "peers.json"
    argv = ["-n", str(N), "-m", str(M), "-k", str(K), "--check-sample", "500", "--memory-budget-mb", "0.5",
            "--out", str(out), "--workdir", str(tmp / "tables"), "--quiet"]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        rc = bench_peers.main(argv)
    return rc, json.loads(out.read_text()), printed.getvalue(), out


def _skip_if_missing(engine: str) -> None:
    missing = ENGINES[engine].missing()
    if missing:
        pytest.skip(f"{engine} needs {', '.join(missing)}, which is not installed")


@pytest.mark.parametrize("engine", list(ENGINES))
def test_every_step_is_reported(run, engine):
    _skip_if_missing(engine)
    _, result, _, _ = run
    mine = [r for r in result["runs"] if r["engine"] == engine]
    assert mine and all(r["status"] == "ok" for r in mine), mine
    assert all(r["peak_rss_mib"] > 0 for r in mine)
    with_hudi = Lakehouse.other_readers_available()
    steps = {(s["engine"], s["step"]): s for s in result["steps"]}
    for label, names in expected_steps(engine, K, with_hudi_rs=with_hudi,
                                       budget_step=engine == "lakehouse-mor").items():
        for name in names:
            s = steps.get((label, name))
            assert s is not None, f"{label} {name} missing from {sorted(steps)}"
            assert s["rows"] > 0 and s["seconds"] > 0 and s["rows_per_s"] > 0, s
            if name == "load" or name.startswith(("upsert", "delete")):
                assert s["bytes_written"] > 0 and s["files_added"] > 0, s
            if name == "upsert_10x_budget":  # ten times write.task.max.size, its peak measured
                # (RSS as the kernel counts it lags by a few pages per thread: 1 MiB of slack)
                assert s["batch_mib"] >= 9 * s["budget_mib"] and s["peak_rss_mib"] >= s["rss_start_mib"] - 1, s
    if engine != "floor":
        upserts = [s for s in result["steps"] if s["engine"] == engine and s["step"].startswith("upsert#")]
        assert [s["updates"] for s in upserts] == [5] * K  # 1% of 500
        assert all(s["batch_parquet_bytes"] > 0 and s["batch_alone_seconds"] > 0 for s in upserts)


@pytest.mark.parametrize("engine", list(ENGINES))
def test_correctness_checks_ran_and_pass(run, engine):
    _skip_if_missing(engine)
    _, result, _, _ = run
    mine = [c for c in result["checks"] if c["process"] == engine]
    whens = ["after_load", "after_compaction"] if engine == "floor" else ["after_upserts", "after_delete", "at_end"]
    for when in whens:
        for check in ("row_count", "unique_keys", "latest_ts", "checksum"):
            assert any(c["check"] == f"{check}_{when}" and c["engine"] == engine for c in mine), (check, when)
    failed = [c for c in mine if not c["passed"]]
    assert not failed, failed


def test_json_has_every_engine_target_and_output(run):
    rc, result, printed, out = run
    installed = [e for e in ENGINES if not ENGINES[e].missing()]
    assert {r["engine"] for r in result["runs"]} == set(installed)
    assert set(result["skipped"]) == set(ENGINES) - set(installed)
    assert [t["target"] for t in result["targets"]] == [t.key for t in targets.TARGETS]
    for t in result["targets"]:
        assert t["threshold"] and t["detail"]
        if t["target"] in ("mor_upsert_scale", "mor_upsert_vs_delta_merge_large") or t["target"].endswith("_large"):
            assert t["measured"] is None and t["met"] is None  # one size only
        elif len(installed) == len(ENGINES):
            assert t["measured"] >= 0 and t["met"] in (True, False), t
    assert any(c["check"] == "same_data" and c["passed"] for c in result["checks"])
    assert result["correct"] and rc == 0
    assert "targets" in printed and "correctness:" in printed
    assert "| target |" in out.with_suffix(".md").read_text()
    if result.get("chart"):
        assert out.with_suffix(".png").stat().st_size > 0


def test_read_targets_are_lakehouse_over_delta_rs_on_the_same_step():
    def step(engine, name, seconds, n=1000):
        return {"engine": engine, "step": name, "kind": "read", "n": n, "seconds": seconds, "rows": 1,
                "rows_per_s": 1 / seconds}
    steps = [step("lakehouse-mor", "key_lookup", 0.004), step("delta-rs", "key_lookup", 0.05),
             step("lakehouse-mor", "read_optimized_read", 0.2), step("delta-rs", "snapshot_read", 0.1),
             step("lakehouse-mor", "key_lookup", 0.02, n=5000), step("delta-rs", "key_lookup", 0.1, n=5000)]
    got = {t["target"]: t for t in targets.evaluate(steps, [1000, 5000])}
    assert got["mor_key_lookup_vs_delta"]["measured"] == pytest.approx(0.08) and got["mor_key_lookup_vs_delta"]["met"]
    assert got["mor_key_lookup_vs_delta_large"]["measured"] == pytest.approx(0.2)
    assert got["mor_key_lookup_vs_delta_large"]["met"] is False
    # The read-optimized read is held against delta-rs's (only) read of the whole table.
    assert got["mor_read_optimized_vs_delta"]["measured"] == pytest.approx(2.0)
    assert got["cow_range_vs_delta"]["met"] is None and "not measured" in got["cow_range_vs_delta"]["detail"]


def test_a_peer_past_its_timeout_is_reported_with_what_it_did(tmp_path):
    _skip_if_missing("delta-rs")
    out = tmp_path / "peers.json"
    with contextlib.redirect_stdout(io.StringIO()):
        rc = bench_peers.main(["-n", "2000", "-m", "200", "-k", "1", "--engines", "delta-rs",
                               "--peer-timeout", "0.2", "--no-chart", "--out", str(out), "--quiet"])
    result = json.loads(out.read_text())
    [r] = result["runs"]
    assert r["status"] == "timed_out" and "--peer-timeout" in r["reason"]
    assert rc == 0  # slow is reported, not a failure; only a wrong answer or an error is


def test_plan_runs_the_floor_around_the_engines_and_scale_engines_at_further_sizes():
    args = bench_peers.parse_args(["-n", "1000,5000", "--engines", "floor,lakehouse-mor,lakehouse-cow"])
    assert args.rows == [1000, 5000]
    scale = [(e, 5000, 1) for e in ("lakehouse-mor", "lakehouse-mor-ro", "delta-rs") if not ENGINES[e].missing()]
    assert bench_peers.plan(args) == [("floor", 1000, 1), ("lakehouse-mor", 1000, 1),
                                      ("lakehouse-cow", 1000, 1), ("floor", 1000, 2)] + scale
    # The upsert under a memory budget: once, in lakehouse MOR's run at the first size.
    assert [bench_peers.budget_step(args, e, n) for e, n, _ in bench_peers.plan(args)] == \
        [False, True, False, False] + [False] * len(scale)


def test_memory_target_is_the_steps_peak_over_the_rss_before_it_against_the_budget():
    step = {"engine": "lakehouse-mor", "step": "upsert_10x_budget", "kind": "write", "n": 1000, "seconds": 2.0,
            "rows": 10, "rows_per_s": 5, "bytes_written": 1, "files_added": 40, "budget_mib": 64.0,
            "batch_mib": 640.0, "rss_start_mib": 1000.0, "peak_rss_mib": 1100.0}
    [mem] = [t for t in targets.evaluate([step], [1000]) if t["target"] == "mor_budget_memory"]
    assert mem["measured"] == pytest.approx(100 / 64, abs=1e-3) and mem["met"] is True
    [mem] = [t for t in targets.evaluate([{**step, "peak_rss_mib": 1200.0}], [1000])
             if t["target"] == "mor_budget_memory"]
    assert mem["met"] is False


def test_scale_target_compares_the_largest_size_with_the_first():
    def up(n, s):
        return {"engine": "lakehouse-mor", "step": "upsert#1", "kind": "write", "n": n, "seconds": s,
                "rows": 10, "rows_per_s": 10 / s, "bytes_written": 100, "batch_parquet_bytes": 80,
                "batch_alone_seconds": 0.1}
    [scale] = [t for t in targets.evaluate([up(1000, 1.0), up(5000, 1.2)], [1000, 5000])
               if t["target"] == "mor_upsert_scale"]
    assert scale["measured"] == pytest.approx(1.2) and scale["met"] is True
    assert "against the batch written alone: 1.20" in scale["detail"]


def test_checksum_sees_a_changed_ts_and_a_missing_row():
    model = Model(5)
    rows = model.initial(1000)
    assert checks.checksum(rows) == checks.model_checksum(model)
    ts = rows.column(ORDERING).to_pylist()
    ts[123] += 1
    changed = rows.set_column(rows.schema.get_field_index(ORDERING), ORDERING, pa.array(ts, pa.int64()))
    assert checks.checksum(changed) != checks.model_checksum(model)
    assert checks.checksum(rows.slice(1)) != checks.model_checksum(model)
    with pytest.raises(checks.MalformedKeys):
        checks.checksum(pa.table({KEY: ["short"], ORDERING: [1]}))


def test_live_rows_keeps_the_latest_version_of_each_key():
    model = Model(9)
    rows = model.initial(200)
    batch, _ = model.upsert_batch(100, update_fraction=0.5, late_fraction=0.5)
    live = checks.live_rows(pa.concat_tables([rows, batch]), model)
    assert live.num_rows == len(model.latest)
    assert checks.checksum(live) == checks.model_checksum(model)


def test_a_wrong_ts_on_an_unsampled_key_fails_the_checksum(tmp_path):
    import argparse

    from benchmarks.peers.sequence import EngineRunner, Events
    model = Model(3)
    rows = model.initial(2000)
    sampled = set(model.keys(model.sample_ids(10)).to_pylist())
    victim = next(i for i, k in enumerate(rows.column(KEY).to_pylist()) if k not in sampled)
    ts = rows.column(ORDERING).to_pylist()
    ts[victim] += 16
    wrong = rows.set_column(rows.schema.get_field_index(ORDERING), ORDERING, pa.array(ts, pa.int64()))
    events = tmp_path / "events.jsonl"
    runner = EngineRunner(argparse.Namespace(quiet=True, check_sample=10), Events(events, process="x"))
    runner.verify("x", "now", wrong, model)
    by_name = {c["check"]: c["passed"] for c in runner.checks}
    assert by_name["latest_ts_now"] and by_name["row_count_now"]  # what sampling alone would pass
    assert by_name["checksum_now"] is False
    assert len(events.read_text().splitlines()) == len(runner.checks)  # each check went out as an event


def test_snapshot_view_upsert_bytes_count_what_its_background_publisher_wrote_after_them():
    """Each upsert's Iceberg files are written during the next step; the last one's during the
    catch-up that follows the upserts: the bytes target counts them with the upserts."""
    def step(name, written):
        return {"engine": "lakehouse-mor", "step": name, "kind": "write", "n": 1000, "seconds": 0.1,
                "rows": 10, "rows_per_s": 100, "bytes_written": written, "batch_parquet_bytes": 100,
                "batch_alone_seconds": 0.1}
    steps = [step("upsert#1", 120), step("upsert#2", 150), step("iceberg_catch_up", 30)]
    for s in steps[2:]:
        s.pop("batch_parquet_bytes")
    [b] = [t for t in targets.evaluate(steps, [1000]) if t["target"] == "mor_upsert_bytes"]
    assert b["measured"] == pytest.approx(300 / 200)
