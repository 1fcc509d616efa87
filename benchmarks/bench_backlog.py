"""Memory of merging a large log backlog: one file group, its base file, K rounds of updates to
the same keys left in its logs, then a snapshot read and a compaction, with the default
``hoodie.memory.merge.max.size`` (1 GiB: everything held) and with a small one.

Each (rounds, budget) measurement runs in a fresh process on its own copy of the table, and its
peak is the kernel's high-water mark (VmHWM, reset through ``/proc/self/clear_refs`` just before
the step) minus the RSS at that moment, so imports and the opened table do not count. The read's
peak includes the rows it returns (the same for every budget). The results of every budget must
be equal (row count and a checksum of every (key, value)), or the run exits with status 1.

``python benchmarks/bench_backlog.py`` (``make bench-backlog``); ``--quick`` for a smoke run.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.peers.memory import PeakMemory  # noqa: E402

BUDGET_KEY = "hoodie.memory.merge.max.size"


def _batch(keys: np.ndarray, round_: int) -> pa.Table:
    rng = np.random.default_rng(round_)
    return pa.table({"id": pa.array([f"k{k:09d}" for k in keys]),
                     "ts": pa.array(np.full(len(keys), round_, dtype=np.int64)),
                     "fare": pa.array(rng.uniform(1, 100, len(keys))),
                     "note": pa.array(np.char.add("trip-", (keys % 997).astype(str)))})


def build(root: pathlib.Path, rows: int, rounds: list[int], fraction: float) -> dict[int, pathlib.Path]:
    """One table written round by round, copied aside after each round count asked for."""
    import lakehouse
    from lakehouse.iceberg import background
    path = root / "t"
    t = lakehouse.create_table(str(path), name="backlog", table_type="MERGE_ON_READ", record_key="id",
                               ordering_field="ts", index="BUCKET",
                               options={"hoodie.bucket.index.num.buckets": 1})
    t.bulk_insert(_batch(np.arange(rows), 0))
    rng = np.random.default_rng(7)
    copies = {}
    for r in range(1, max(rounds) + 1):
        keys = np.sort(rng.choice(rows, size=int(rows * fraction), replace=False))
        t.upsert(_batch(keys, r))
        if r in rounds:
            copies[r] = root / f"rounds-{r}"
            background.wait_all()  # its Iceberg publishing (in the background) done before the copy
            shutil.copytree(path, copies[r])
    return copies


def _checksum(t: pa.Table) -> str:
    t = t.sort_by("id")
    h = hashlib.sha256()
    for name in ("id", "ts"):
        for buf in t.column(name).combine_chunks().buffers():
            if buf is not None:
                h.update(buf)
    return h.hexdigest()


def child(path: str, budget: int | None, step: str) -> dict:
    import lakehouse
    options = {BUDGET_KEY: budget} if budget else {}
    t = lakehouse.open_table(path, options=options)
    mem = PeakMemory()
    before = mem.current_mib()
    mem.start_step()
    start = time.perf_counter()
    if step == "read":
        out = t.read(columns=["id", "ts"])
    else:
        t.compact(force=True)
    seconds = time.perf_counter() - start
    peak = mem.end_step()
    if step != "read":
        out = t.read(columns=["id", "ts"])
    return {"step": step, "seconds": round(seconds, 3),
            "peak_over_start_mib": None if peak is None else round(peak - before, 1),
            "rows": out.num_rows, "checksum": _checksum(out)}


def log_mib(path: pathlib.Path) -> float:
    return round(sum(f.stat().st_size for f in path.iterdir() if ".log." in f.name) / 2**20, 1)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=500_000, help="records in the file group")
    ap.add_argument("--rounds", default="2,8,24", help="update rounds left in the logs, comma separated")
    ap.add_argument("--fraction", type=float, default=0.5, help="share of the keys each round updates")
    ap.add_argument("--budget-mib", type=int, default=64, help="the small hoodie.memory.merge.max.size")
    ap.add_argument("--out", default="bench-out/backlog.json")
    ap.add_argument("--quick", action="store_true", help="20k rows, rounds 2,6: a smoke run")
    ap.add_argument("--child", nargs=3, metavar=("PATH", "BUDGET", "STEP"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        path, budget, step = args.child
        print(json.dumps(child(path, int(budget) or None, step)))
        return 0
    rows, rounds = (20_000, [2, 6]) if args.quick else (args.rows, [int(x) for x in args.rounds.split(",")])
    budgets = [("default (1 GiB)", 0), (f"{args.budget_mib} MiB", args.budget_mib << 20)]
    results, ok = [], True
    with tempfile.TemporaryDirectory(prefix="bench-backlog-") as tmp:
        copies = build(pathlib.Path(tmp), rows, rounds, args.fraction)
        from lakehouse.iceberg import background
        background.wait_all()  # the copies are taken whole: no publisher still writing into them
        for r, src in copies.items():
            seen = set()
            for label, budget in budgets:
                row = {"rounds": r, "log_mib": log_mib(src), "budget": label}
                for step in ("read", "compaction"):
                    work = pathlib.Path(tmp) / "work"
                    shutil.rmtree(work, ignore_errors=True)
                    shutil.copytree(src, work)
                    out = subprocess.run([sys.executable, __file__, "--child", str(work), str(budget), step],
                                         capture_output=True, text=True, check=True, cwd=REPO,
                                         env=dict(os.environ, PYTHONPATH=str(REPO)))
                    res = json.loads(out.stdout.strip().splitlines()[-1])
                    row[step] = res
                    seen.add((res["rows"], res["checksum"]))
                results.append(row)
            ok &= len(seen) == 1
    header = "| rounds | log MiB | budget | read s | read peak MiB | compaction s | compaction peak MiB |"
    lines = [header, "|---|---|---|---|---|---|---|"]
    for x in results:
        lines.append(f"| {x['rounds']} | {x['log_mib']} | {x['budget']} | {x['read']['seconds']} | "
                     f"{x['read']['peak_over_start_mib']} | {x['compaction']['seconds']} | "
                     f"{x['compaction']['peak_over_start_mib']} |")
    table = "\n".join(lines)
    print(table)
    print("results equal across budgets" if ok else "RESULTS DIFFER ACROSS BUDGETS")
    pathlib.Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(args.out).write_text(json.dumps({"rows": rows, "fraction": args.fraction,
                                                  "results": results, "equal": ok}, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
