"""Lakehouse beside delta-rs, pyiceberg and plain parquet on the same generated data.

Run ``python benchmarks/bench_peers.py`` (``make bench``, after bench_core) for N=1M, M=50k, K=3;
``--quick`` for a smoke run; ``-n 1000000,5000000`` adds a larger size (lakehouse MOR and
delta-rs, see ``--scale-engines``) for the scale targets; ``--help`` for every option. Each engine runs in its
own process, so its peak memory is its own; every process regenerates the same rows from the
seed of bench_core's generator. Steps are checked against bench_core's in-memory model (row
count, a whole-table checksum of (key, ts), the latest ts of sampled keys); a disagreement makes
the run exit 1 after the results are written. See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import shutil
import subprocess
import sys
import tempfile
import time

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:  # run as a script from a checkout without `pip install -e .`
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks.peers import report  # noqa: E402
from benchmarks.peers.engines import ENGINES, Lakehouse, expected_steps  # noqa: E402
from benchmarks.peers.targets import evaluate  # noqa: E402

PEERS = ("delta-rs", "pyiceberg")  # engines the timeout guards: they are not ours to fix


# --- one engine process ----------------------------------------------------------------------

def _child_argv(args: argparse.Namespace, engine: str, n: int, run: int, events: pathlib.Path,
                work: pathlib.Path) -> list[str]:
    argv = [sys.executable, str(pathlib.Path(__file__).resolve()), "--engine", engine,
            "--child-rows", str(n), "--run", str(run), "--events", str(events), "--workdir", str(work),
            "-m", str(args.batch_rows), "-k", str(args.batches), "--delete-rows", str(args.delete_rows),
            "--update-fraction", repr(args.update_fraction), "--late-fraction", repr(args.late_fraction),
            "--seed", str(args.seed), "--check-sample", str(args.check_sample),
            "--read-repeats", str(args.read_repeats)]
    if args.buckets:
        argv += ["--buckets", str(args.buckets)]
    if budget_step(args, engine, n):
        argv += ["--memory-budget-mb", repr(args.memory_budget_mb)]
    return argv + (["--keep"] if args.keep else []) + (["-q"] if args.quiet else [])


def budget_step(args: argparse.Namespace, engine: str, n: int) -> bool:
    """The upsert under a memory budget runs once: in lakehouse MOR's process at the first size."""
    return engine == "lakehouse-mor" and n == args.rows[0] and args.memory_budget_mb > 0


def _read_events(path: pathlib.Path) -> list[dict]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:  # a line cut short by a kill
            pass
    return out


def run_engine(args: argparse.Namespace, engine: str, n: int, run: int, work: pathlib.Path) -> dict:
    events_path = work / f"events-{engine}-{n}-{run}.jsonl"
    events_path.unlink(missing_ok=True)
    timeout = args.peer_timeout if engine in PEERS and args.peer_timeout > 0 else None
    log(args, f"{engine} (N={n:,}{f', run {run}' if engine == 'floor' else ''})")
    t0 = time.perf_counter()
    proc = subprocess.Popen(_child_argv(args, engine, n, run, events_path, work))
    status, reason = "ok", ""
    try:
        rc = proc.wait(timeout=timeout)
        if rc != 0:
            status, reason = "error", f"exit status {rc}"
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        status = "timed_out"
    events = _read_events(events_path)
    record = {"engine": engine, "n": n, "run": run, "status": status,
              "seconds": round(time.perf_counter() - t0, 2)}
    for e in events:
        if e["event"] == "start":
            record.update(versions=e["versions"], per_step_memory=e["per_step_memory"])
        elif e["event"] == "data":
            record.update(data_checksum=e["data_checksum"], rss_after_data_mib=e["rss_after_data_mib"])
        elif e["event"] == "done":
            record["peak_rss_mib"] = e["peak_rss_mib"]
        elif e["event"] == "error":
            reason = e["message"]
    steps = [_strip(e) for e in events if e["event"] == "step"]
    if status == "timed_out":
        last = steps[-1]["step"] if steps else "before the first step"
        reason = f"stopped after --peer-timeout {timeout:g}s; last step done: {last}"
    record["reason"] = reason
    checks = []
    for e in events:
        if e["event"] == "check":
            c = _strip(e, keep_process=True)
            c["engine"] = c.pop("table")
            checks.append(c)
    return {"run": record, "steps": steps, "checks": checks}


def _strip(e: dict, keep_process: bool = False) -> dict:
    drop = {"event"} | (set() if keep_process else {"process"})
    return {k: v for k, v in e.items() if k not in drop}


# --- the whole comparison --------------------------------------------------------------------

def plan(args: argparse.Namespace) -> list[tuple[str, int, int]]:
    """(engine, N, run): at the first size every engine, with the floor before and after the
    others (its faster run is the reference, so a slow spell does not flatter anyone); at any
    further size only the scale engines."""
    first, more = args.rows[0], args.rows[1:]
    out = []
    if "floor" in args.engines:
        out.append(("floor", first, 1))
    out += [(e, first, 1) for e in args.engines if e != "floor"]
    if "floor" in args.engines:
        out.append(("floor", first, 2))
    out += [(e, n, 1) for n in more for e in args.scale_engines]
    return out


def same_data_checks(runs: list[dict], checks: list[dict]) -> list[dict]:
    """Every process of a size must have generated the same rows and batches: their initial
    data and the model's expected checksums at each point must agree."""
    out = []
    for n in sorted({r["n"] for r in runs}):
        seen = {r["data_checksum"] for r in runs if r["n"] == n and "data_checksum" in r}
        expected: dict[str, set] = {}
        for c in checks:
            if c["n"] == n and c["check"].startswith("checksum_"):
                expected.setdefault(c["check"], set()).add(c["expected"])
        disagree = sorted(k for k, v in expected.items() if len(v) > 1)
        out.append({"process": "all", "engine": "all", "n": n, "run": 0, "check": "same_data",
                    "passed": len(seen) <= 1 and not disagree,
                    "initial_checksums": len(seen), "disagreeing": disagree})
    return out


def notes(args: argparse.Namespace, runs: list[dict], steps: list[dict]) -> list[str]:
    out = []
    for r in runs:
        if r["status"] != "ok":
            out.append(f"{r['engine']} (N={r['n']:,}): {r['status']}: {r['reason']}")
    if args.skipped:
        out += [f"{e}: skipped: {why}" for e, why in args.skipped.items()]
    if "lakehouse-mor" in args.engines and "hudi" in args.missing_optional:
        out.append("hudi-rs reads skipped: the hudi package is not installed")
    for s in steps:
        if s["step"] == "clean" and s["engine"].startswith("lakehouse") and s.get("files_deleted") == 0:
            out.append(f"{s['engine']} clean deleted nothing: {s.get('reason', '')}")
        if s["step"] == "compaction" and s["files_added"] == 0:
            out.append(f"{s['engine']} compaction (N={s['n']:,}) found nothing to compact and wrote nothing")
    if args.late_fraction > 0:
        out.append(f"{args.late_fraction:.0%} of updates carry an older ts and must lose: delta-rs by its "
                   "merge predicate, pyiceberg by dropping them before Table.upsert (timed)")
    out.append("peak RSS includes each process's generated rows and model ('RSS after data')")
    return list(dict.fromkeys(out))  # the same remark from several sizes, once


def machine() -> dict:
    cpu, mem = "", 0
    try:
        cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                    if line.startswith("model name")), "")
        mem = next((int(line.split()[1]) for line in open("/proc/meminfo")
                    if line.startswith("MemTotal")), 0)
    except OSError:
        pass
    nproc = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"nproc": nproc, "cpu_model": cpu or platform.processor(), "memory_gib": round(mem / 2**20, 1),
            "python": platform.python_version(), "platform": platform.platform()}


def run_all(args: argparse.Namespace) -> dict:
    work = pathlib.Path(args.workdir) if args.workdir else pathlib.Path(tempfile.mkdtemp(prefix="lakehouse-peers-"))
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    runs, steps, checks = [], [], []
    try:
        for engine, n, run in plan(args):
            got = run_engine(args, engine, n, run, work)
            runs.append(got["run"])
            steps += got["steps"]
            checks += got["checks"]
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    checks += same_data_checks(runs, checks)
    for r in runs:
        r["expected_steps"] = expected_steps(r["engine"], args.batches,
                                             with_hudi_rs="hudi" not in args.missing_optional,
                                             budget_step=budget_step(args, r["engine"], r["n"]))
    ok_runs = all(r["status"] in ("ok", "timed_out") for r in runs)
    return {
        "benchmark": "peers",
        "config": {"rows": args.rows, "batch_rows": args.batch_rows, "batches": args.batches,
                   "update_fraction": args.update_fraction, "late_fraction": args.late_fraction,
                   "delete_rows": args.delete_rows, "buckets": args.buckets,
                   "memory_budget_mb": args.memory_budget_mb, "seed": args.seed,
                   "check_sample": args.check_sample, "engines": args.engines,
                   "scale_engines": args.scale_engines, "peer_timeout": args.peer_timeout,
                   "quick": args.quick, "workdir": str(work) if args.keep else None},
        "machine": machine(),
        "skipped": args.skipped,
        "ops": {e: ENGINES[e].ops for e in args.engines},
        "runs": runs,
        "steps": steps,
        "checks": checks,
        "targets": evaluate(steps, args.rows),
        "correct": bool(checks) and all(c["passed"] for c in checks) and ok_runs,
        "notes": notes(args, runs, steps),
        "total_seconds": round(time.perf_counter() - t0, 2),
    }


def log(args: argparse.Namespace, msg: str) -> None:
    if not args.quiet:
        print(msg, file=sys.stderr, flush=True)


def _names(value: str, what: str, p: argparse.ArgumentParser) -> list[str]:
    names = [v.strip() for v in value.split(",") if v.strip()]
    bad = [v for v in names if v not in ENGINES]
    if bad or not names:
        p.error(f"{what} takes some of {', '.join(ENGINES)}; got {value!r}")
    return names


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true",
                   help="smoke sizes: N=100k, M=10k, K=2 (explicit sizes still win)")
    p.add_argument("-n", "--rows", default=None,
                   help="rows loaded first, N; a comma-separated list runs the scale engines at the "
                        "further sizes (default 1000000)")
    p.add_argument("-m", "--batch-rows", type=int, default=None, help="rows per upsert batch, M (default 50,000)")
    p.add_argument("-k", "--batches", type=int, default=None, help="upsert batches, K (default 3)")
    p.add_argument("--update-fraction", type=float, default=0.01,
                   help="share of each batch that updates existing keys; the rest are new (default %(default)s)")
    p.add_argument("--late-fraction", type=float, default=0.1,
                   help="share of the updates whose ts is older than the stored one, so they must lose "
                        "(default %(default)s)")
    p.add_argument("--delete-rows", type=int, default=None, help="keys deleted (default M / 5)")
    p.add_argument("--buckets", type=int, default=None,
                   help="tune the lakehouse MOR table: the BUCKET index with this many buckets per "
                        "partition (default: the table a user gets with no options)")
    p.add_argument("--memory-budget-mb", type=float, default=None,
                   help="lakehouse MOR ends with an upsert of 10x this write memory budget "
                        "(write.task.max.size, MB), measuring its peak memory (default 64; --quick 16; "
                        "0 skips it)")
    p.add_argument("--engines", default=",".join(ENGINES),
                   help="engines to run at the first size (default %(default)s)")
    p.add_argument("--scale-engines", default="lakehouse-mor,lakehouse-mor-ro,delta-rs",
                   help="engines to run at the further sizes of -n (default %(default)s)")
    p.add_argument("--peer-timeout", type=float, default=900,
                   help="seconds after which a delta-rs or pyiceberg process is stopped and reported "
                        "as timed out with the steps it finished (0: no limit; default %(default)s)")
    p.add_argument("--read-repeats", type=int, default=3,
                   help="each read step runs this many times and the fastest counts (default %(default)s)")
    p.add_argument("--seed", type=int, default=42, help="data seed (default %(default)s)")
    p.add_argument("--check-sample", type=int, default=20_000,
                   help="keys whose latest ts is checked (default %(default)s)")
    p.add_argument("--out", default=str(REPO_ROOT / "bench-out" / "peers.json"),
                   help="JSON result; the markdown table and the chart go beside it as .md and .png "
                        "(default bench-out/peers.json)")
    p.add_argument("--no-chart", action="store_true", help="do not draw the chart")
    p.add_argument("--workdir", default=None, help="where tables go (default: a temporary folder)")
    p.add_argument("--keep", action="store_true", help="keep the tables after the run")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")
    # Set by the parent for an engine's own process.
    p.add_argument("--engine", default=None, help=argparse.SUPPRESS)
    p.add_argument("--child-rows", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--run", type=int, default=1, help=argparse.SUPPRESS)
    p.add_argument("--events", default=None, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    n, m, k = (100_000, 10_000, 2) if a.quick else (1_000_000, 50_000, 3)
    try:
        a.rows = [int(x.replace("_", "")) for x in a.rows.split(",")] if a.rows else [n]
    except ValueError:
        p.error(f"-n takes a number or a comma-separated list, got {a.rows!r}")
    a.batch_rows = m if a.batch_rows is None else a.batch_rows
    if a.memory_budget_mb is None:  # an engine process makes the step only when told to
        a.memory_budget_mb = 0.0 if a.engine is not None else (16.0 if a.quick else 64.0)
    if a.memory_budget_mb < 0:
        p.error("--memory-budget-mb is a size in MB (0 skips the step)")
    a.batches = k if a.batches is None else a.batches
    a.delete_rows = max(1, a.batch_rows // 5) if a.delete_rows is None else a.delete_rows
    if any(x < 1 for x in a.rows) or a.batch_rows < 1 or a.batches < 0:
        p.error("sizes must be positive")
    if not (0 <= a.update_fraction <= 1 and 0 <= a.late_fraction <= 1):
        p.error("fractions are between 0 and 1")
    if a.engine is not None:
        if a.engine not in ENGINES or a.child_rows is None or a.events is None or a.workdir is None:
            p.error("--engine is for the benchmark's own engine processes")
        return a
    wanted = _names(a.engines, "--engines", p)
    a.skipped = {}
    for e in wanted:
        missing = ENGINES[e].missing()
        if missing:
            a.skipped[e] = f"{', '.join(missing)} not installed (pip install -e '.[bench]')"
    a.engines = [e for e in wanted if e not in a.skipped]
    a.scale_engines = [e for e in _names(a.scale_engines, "--scale-engines", p) if e not in a.skipped]
    a.missing_optional = [] if Lakehouse.other_readers_available() else ["hudi"]
    return a


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.engine is not None:
        from benchmarks.peers.sequence import run_child
        return run_child(args)
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    result = run_all(args)
    if not args.no_chart:
        why = report.write_chart(result, out.with_suffix(".png"))
        result["chart"] = None if why else str(out.with_suffix(".png"))
        if why:
            result["notes"].append(why)
    out.write_text(json.dumps(result, indent=2) + "\n")
    out.with_suffix(".md").write_text(report.format_markdown(result))
    print(report.format_text(result))
    print(f"results: {out} {out.with_suffix('.md')}" + (f" {result['chart']}" if result.get("chart") else ""))
    if not result["correct"]:
        print("CORRECTNESS CHECKS FAILED or an engine failed: see 'checks' and 'runs' in the JSON",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
