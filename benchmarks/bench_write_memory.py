"""A write of 10x ``write.task.max.size`` on every write path: its peak memory, in a fresh process.

Each path (table type, index, operation) gets a table loaded with ``--load`` x the budget of
bench_core's trips rows, then one write of ``--times`` x the budget (half updates of loaded keys,
half new keys, for the upserts) given as an Arrow stream (a ``RecordBatchReader`` over a
generator: the batch never exists whole in the writer's process). The write runs in a process
of its own, with the budget, and its peak is the kernel's high-water mark (VmHWM, reset through
``/proc/self/clear_refs`` just before the write) over the resident memory just before it. The
process has made a small write of the same kind first (:func:`_warm_up`): the code a first write
pages in is a fixed cost, not the budget's; what it added is reported (``warm_up_mib``). A twin
table gets the same write with no budget (taken whole) in another process: the two tables must
read back the same (a digest of every row's key, partition, ``ts`` and ``fare``), with no key
twice (a difference fails the run). Target: peak over the start < 2x the budget on every path.

The ``spark-*`` paths write through Spark's executors (local[2], from parquet files of the batch):
their peak is the largest of a write task's, each over its Python worker's resident memory as
the task began, after a small write of the same kind through the same workers
(:func:`_warm_up_spark`; Spark reuses a Python worker across tasks and jobs by default).

``python benchmarks/bench_write_memory.py`` (part of ``make bench``); ``--quick`` for a smoke run;
``--paths cow-simple-upsert,...`` for some paths. Results: stdout and ``bench-out/write_memory.json``.
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
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.bench_core import CITIES, CITY_WEIGHTS, KEY, ORDERING, PARTITION, make_rows, remove_tables  # noqa: E402

# name -> (table type, index (None: the table type's default), operation)
PATHS = {
    "mor-bucket-upsert": ("MERGE_ON_READ", None, "upsert"),  # the default table
    "cow-simple-upsert": ("COPY_ON_WRITE", None, "upsert"),  # the default Copy-On-Write table
    "cow-bloom-upsert": ("COPY_ON_WRITE", "BLOOM", "upsert"),
    "cow-bucket-upsert": ("COPY_ON_WRITE", "BUCKET", "upsert"),
    "mor-simple-upsert": ("MERGE_ON_READ", "SIMPLE", "upsert"),
    "cow-insert": ("COPY_ON_WRITE", None, "insert"),
    "cow-bulk-insert": ("COPY_ON_WRITE", None, "bulk_insert"),
    "cow-insert-overwrite": ("COPY_ON_WRITE", None, "insert_overwrite"),
    # Spark executors' write tasks (lakehouse.spark.write, local[2]): the peak of the Python
    # worker running a write task, over its resident memory when the task began.
    "spark-mor-bucket-upsert": ("MERGE_ON_READ", None, "upsert"),
    "spark-cow-simple-upsert": ("COPY_ON_WRITE", None, "upsert"),
}
SEED = 17
TARGET = 2.0  # peak over the start, in budgets


def _row_bytes() -> float:
    sample = _rows(np.arange(20000), 1)
    return sample.nbytes / sample.num_rows


def _rows(ids: np.ndarray, ts: int) -> pa.Table:
    rng = np.random.default_rng(SEED + int(ids[0]) if len(ids) else SEED)
    w = CITY_WEIGHTS / CITY_WEIGHTS.sum()
    city = np.searchsorted(np.cumsum(w), (ids * 0.6180339887) % 1.0)  # a key's city is fixed
    return make_rows(rng, ids, np.minimum(city, len(CITIES) - 1), np.full(len(ids), ts, np.int64), SEED)


def _batch_ids(loaded: int, n: int, op: str) -> np.ndarray:
    if op != "upsert":  # new keys only (an insert or overwrite of the same rows)
        return np.arange(loaded, loaded + n, dtype=np.int64)
    upd = np.arange(0, loaded, 2, dtype=np.int64)[: n // 2]  # every other loaded key
    return np.concatenate([upd, np.arange(loaded, loaded + n - len(upd), dtype=np.int64)])


def _stream(ids: np.ndarray, ts: int, batch_rows: int) -> pa.RecordBatchReader:
    schema = _rows(ids[:1], ts).schema

    def gen():
        for off in range(0, len(ids), batch_rows):
            yield from _rows(ids[off:off + batch_rows], ts).to_batches()
    return pa.RecordBatchReader.from_batches(schema, gen())


def digest(table) -> dict:
    t = table.read(columns=[KEY, PARTITION, ORDERING, "fare"]).sort_by(KEY).combine_chunks()
    h = hashlib.sha256()
    for col in t.columns:
        for buf in col.chunks[0].buffers() if col.num_chunks else []:
            if buf is not None:
                h.update(buf)
    distinct = len(set(t.column(KEY).to_pylist())) if t.num_rows else 0
    return {"rows": t.num_rows, "distinct_keys": distinct, "sha256": h.hexdigest()[:16]}


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def run_child(args) -> dict:
    """One process: ``setup`` loads a table, ``write`` makes the measured write."""
    import lakehouse
    ttype, index, op = PATHS[args.path]
    budget = args.budget_mb * (1 << 20)
    per_row = _row_bytes()
    loaded = int(args.load * budget / per_row)
    if args.role == "setup":
        t = lakehouse.create_table(args.table, name="bench", table_type=ttype, record_key=KEY,
                                   partition_by=PARTITION, ordering_field=ORDERING, index=index)
        t.write(_stream(np.arange(loaded, dtype=np.int64), 1, 65536), "upsert")
        return {"loaded_rows": loaded}
    n = int(args.times * budget / per_row)
    ids = _batch_ids(loaded, n, op)
    t = lakehouse.open_table(args.table)
    opts = {"write.task.max.size": args.budget_mb} if args.mode == "chunked" else {}
    if args.path.startswith("spark-"):
        out = run_spark_write(args, t, ids, op, opts, per_row)
        return {"rows": len(ids), "batch_mib": round(len(ids) * per_row / 2**20, 1), **out, "table": digest(t)}
    stream = _stream(ids, 2, max(1024, int(budget / 16 / per_row)))
    cold = _status_kib("VmRSS")
    _warm_up(args, opts)
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    start = _status_kib("VmRSS")
    began = time.perf_counter()
    t.write(stream, op, options=opts)
    seconds = time.perf_counter() - began
    peak = max(_status_kib("VmHWM"), _status_kib("VmRSS"))
    return {"rows": len(ids), "batch_mib": round(len(ids) * per_row / 2**20, 1),
            "start_mib": round(start / 1024, 1), "warm_up_mib": round((start - cold) / 1024, 1), "peak_mib": round(peak / 1024, 1),
            "peak_over_start_mib": round((peak - start) / 1024, 1), "seconds": round(seconds, 2),
            "table": digest(t)}


def _measured_write_task(marks: str):
    """Spark's write task (lakehouse.spark.write._write_task), noting in ``marks`` each task's
    peak (VmHWM, reset as the task begins) over its worker's resident memory then. Pickled by
    value into the workers, where it runs."""
    def make(job):
        from lakehouse.spark import write as w
        real = w.__dict__["_bench_real_write_task"](job)

        def per_task(batches):
            import uuid
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
            start = _status_kib("VmRSS")
            yield from real(batches)
            peak = max(_status_kib("VmHWM"), _status_kib("VmRSS"))
            with open(os.path.join(marks, uuid.uuid4().hex), "w") as f:
                json.dump({"start_kib": start, "peak_kib": peak}, f)
        return per_task
    return make


def run_spark_write(args, t, ids: np.ndarray, op: str, opts: dict, per_row: float) -> dict:
    """The write through Spark's executors, from parquet files of the batch (the driver never
    holds it); returns the largest peak of a write task over its start."""
    from lakehouse.spark import write as w
    from lakehouse.spark.session import build_session
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = os.pathsep.join([str(REPO)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    work = pathlib.Path(tempfile.mkdtemp(prefix="bench-write-memory-spark-"))
    try:
        rows_per_file = max(1024, int(args.budget_mb * (1 << 20) / 16 / per_row))
        for i, off in enumerate(range(0, len(ids), rows_per_file)):
            import pyarrow.parquet as pq
            pq.write_table(_rows(ids[off:off + rows_per_file], 2), str(work / f"in-{i:05d}.parquet"))
        spark = build_session("bench-write-memory", master="local[2]", ui=False)
        _warm_up_spark(spark, args, opts, work)
        marks = work / "marks"
        marks.mkdir()
        w._bench_real_write_task = w._write_task
        w._write_task = _measured_write_task(str(marks))
        try:
            began = time.perf_counter()
            w.write_dataframe(t, spark.read.parquet(str(work / "in-*.parquet")), op, options=opts)
            seconds = time.perf_counter() - began
        finally:
            w._write_task = w._bench_real_write_task
            spark.stop()
        tasks = [json.loads(m.read_text()) for m in marks.iterdir()]
        worst = max(tasks, key=lambda x: x["peak_kib"] - x["start_kib"])
        return {"tasks": len(tasks), "start_mib": round(worst["start_kib"] / 1024, 1),
                "peak_mib": round(worst["peak_kib"] / 1024, 1), "warm_up_mib": None,
                "peak_over_start_mib": round((worst["peak_kib"] - worst["start_kib"]) / 1024, 1),
                "seconds": round(seconds, 2)}
    finally:
        remove_tables(work)


def _warm_up_spark(spark, args, opts: dict, work: pathlib.Path) -> None:
    """:func:`_warm_up` for Spark's Python workers (reused across tasks and jobs, as by default):
    a small write of the same kind in several tasks, so that each worker has written before.
    Their growth is not measured (a worker's start is its resident memory as a task begins)."""
    import lakehouse
    from lakehouse.spark.write import write_dataframe
    ttype, index, op = PATHS[args.path]
    t = lakehouse.create_table(str(work / "warm"), name="warm", table_type=ttype, record_key=KEY,
                               partition_by=PARTITION, ordering_field=ORDERING, index=index)
    t.write(_rows(np.arange(4000, dtype=np.int64), 1), "upsert")
    batch = _rows(_batch_ids(4000, 4000, op), 2)
    write_dataframe(t, spark.createDataFrame(batch).repartition(4), op,
                    options={"write.task.max.size": 0.0625} if opts else {})


def _warm_up(args, opts: dict) -> None:
    """The same kind of write, small, on a table of its own, so that the measured write does
    not count the code its first write pages in (the parquet and IPC writers, compute
    kernels: a fixed ~10 MiB any writer process pays once, whatever its budget). Taken in
    chunks like the measured write, so the same code runs."""
    import gc
    import lakehouse
    from lakehouse.write.memory import release_unused
    ttype, index, op = PATHS[args.path]
    work = tempfile.mkdtemp(prefix="bench-write-memory-warm-")
    try:
        t = lakehouse.create_table(work + "/t", name="warm", table_type=ttype, record_key=KEY,
                                   partition_by=PARTITION, ordering_field=ORDERING, index=index)
        t.write(_stream(np.arange(2000, dtype=np.int64), 1, 500), "upsert")
        ids = _batch_ids(2000, 2000, op)
        t.write(_stream(ids, 2, 250), op, options={"write.task.max.size": 0.0625} if opts else {})
    finally:
        remove_tables(work)
    gc.collect()
    release_unused()


def _child(path: str, role: str, table: str, args, mode: str = "chunked") -> dict:
    cmd = [sys.executable, __file__, "--child", role, "--path", path, "--table", table, "--mode", mode,
           "--budget-mb", repr(args.budget_mb), "--load", repr(args.load), "--times", repr(args.times)]
    env = dict(os.environ)
    if args.allocator == "jemalloc":
        # Arrow's C++ code allocates from its default pool (mimalloc) whatever
        # pyarrow.set_memory_pool says: jemalloc for all of it, its decay set to zero by the
        # write (lakehouse.write.memory).
        env["ARROW_DEFAULT_MEMORY_POOL"] = "jemalloc"
        # Every arena's decay at zero from the start: pyarrow's jemalloc_set_decay_ms only
        # reaches arenas created after it, and a Spark worker's exist before its write task
        # (its freed pages then waited up to a second: spark-cow-simple-upsert 2.1x -> 1.7x).
        env["JE_ARROW_MALLOC_CONF"] = "dirty_decay_ms:0,muzzy_decay_ms:0"
    elif args.allocator == "system":
        # glibc's allocator, with fewer arenas than its one per thread.
        env["ARROW_DEFAULT_MEMORY_POOL"] = "system"
        env["MALLOC_ARENA_MAX"] = "2"
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"{path} {role} {mode} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--budget-mb", type=float, default=None, help="write.task.max.size (default 16; --quick 4)")
    p.add_argument("--times", type=float, default=10.0, help="the write, in budgets (default 10)")
    p.add_argument("--load", type=float, default=5.0, help="the table before it, in budgets (default 5)")
    p.add_argument("--paths", default=",".join(PATHS), help="comma-separated: " + ", ".join(PATHS))
    p.add_argument("--allocator", choices=["jemalloc", "system", "default"], default="jemalloc",
                   help="Arrow's allocator in the measured processes: jemalloc (ARROW_DEFAULT_MEMORY_POOL="
                        "jemalloc and JE_ARROW_MALLOC_CONF=dirty_decay_ms:0,muzzy_decay_ms:0, the default "
                        "here and the README's advice), system (=system, with "
                        "MALLOC_ARENA_MAX=2) or Arrow's default (mimalloc, which keeps freed pages)")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--out", default=str(REPO / "bench-out" / "write_memory.json"))
    p.add_argument("--child", choices=["setup", "write"], help=argparse.SUPPRESS)
    p.add_argument("--path", help=argparse.SUPPRESS)
    p.add_argument("--table", help=argparse.SUPPRESS)
    p.add_argument("--mode", default="chunked", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.budget_mb is None:
        args.budget_mb = 4.0 if args.quick else 16.0
    if args.child:
        args.role = args.child
        print(json.dumps(run_child(args)))
        return 0
    paths = [x for x in args.paths.split(",") if x]
    unknown = [x for x in paths if x not in PATHS]
    if unknown:
        p.error(f"unknown path(s) {unknown}; known: {', '.join(PATHS)}")
    results, ok = [], True
    work = pathlib.Path(tempfile.mkdtemp(prefix="bench-write-memory-"))
    try:
        for name in paths:
            chunked, whole = str(work / f"{name}-chunked"), str(work / f"{name}-whole")
            _child(name, "setup", chunked, args)
            shutil.copytree(chunked, whole)
            c = _child(name, "write", chunked, args, "chunked")
            w = _child(name, "write", whole, args, "whole")
            ratio = c["peak_over_start_mib"] / args.budget_mb
            same = c["table"] == w["table"]
            unique = c["table"]["rows"] == c["table"]["distinct_keys"]
            passed = ratio < TARGET and same and unique
            ok &= same and unique  # correctness fails the run; the memory target is reported
            results.append({"path": name, "budget_mib": args.budget_mb, "chunked": c, "whole": w,
                            "peak_in_budgets": round(ratio, 2), "same_table_as_whole": same,
                            "unique_keys": unique, "passed": passed})
            warm = "    -" if c["warm_up_mib"] is None else f"{c['warm_up_mib']:5.1f}"
            print(f"{name:22s} batch {c['batch_mib']:7.1f} MiB  warm-up +{warm} MiB  "
                  f"peak +{c['peak_over_start_mib']:7.1f} MiB "
                  f"= {ratio:4.2f}x budget ({c['seconds']:6.1f} s)  whole: +{w['peak_over_start_mib']:7.1f} MiB "
                  f"({w['seconds']:6.1f} s)  same table: {same}  {'ok' if passed else 'FAILED'}", flush=True)
    finally:
        remove_tables(work)
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"target_peak_in_budgets": TARGET, "times": args.times, "load": args.load,
                               "allocator": args.allocator,
                               "results": results}, indent=2))
    print(f"target: peak < {TARGET}x write.task.max.size ({args.budget_mb} MiB); {out}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
