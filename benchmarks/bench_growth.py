"""A default Merge-On-Read table that starts small and grows (issue 43's scenario).

For each bucket engine (the table's default first, then the other for comparison): create the
table with no options but ``hoodie.parquet.max.file.size`` (1 MiB by default here, to see at
small scale what 120 MiB files do at 120x the rows), write one row, time 2k-row upserts into
the small table, grow it by ``--grow`` rows (in 4 batches), compact and (consistent hashing)
cluster, then time the same 2k-row upserts into the grown table. Reported: the largest base
file against the split threshold (``hoodie.bucket.index.split.threshold`` x the max file size),
file groups per partition, and the ratio of the 2k upsert's time grown / small (each the median
of 3 in the same process). lakehouse's read and hudi-rs's must equal an in-memory model of every
key's latest ``ts``, or the run exits 1.

``python benchmarks/bench_growth.py`` (400k rows, ~1 min); ``--grow 5000000 --max-file-size 0``
(the default 120 MiB files; ``make bench``); ``--quick`` for a smoke run. Writes
``bench-out/growth.json``.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.bench_core import CITIES, make_rows  # noqa: E402

MiB = 1024 * 1024
UPSERT_ROWS = 2000


def rows(ids: np.ndarray, ts: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    return make_rows(rng, ids, ids % len(CITIES), np.full(len(ids), ts), 7)


def timed_upserts(table, next_id: int, known: int, ts: int, model: dict) -> tuple[float, int]:
    """Median time of 3 upserts of 2k rows (half updates of known ids where there are any)."""
    times = []
    rng = np.random.default_rng(ts)
    for r in range(3):
        updates = rng.choice(known, size=min(known, UPSERT_ROWS // 2), replace=False) if known else np.array([], int)
        inserts = np.arange(next_id, next_id + UPSERT_ROWS - len(updates))
        next_id += len(inserts)
        ids = np.concatenate([updates, inserts]).astype(np.int64)
        batch = rows(ids, ts + r, ts + r)
        t0 = time.perf_counter()
        table.upsert(batch)
        times.append(time.perf_counter() - t0)
        model.update(zip(batch.column("uuid").to_pylist(), batch.column("ts").to_pylist()))
    return statistics.median(times), next_id


def check(path: pathlib.Path, model: dict) -> dict:
    import lakehouse
    from lakehouse.iceberg import background
    background.wait_all()
    ours = lakehouse.open_table(str(path)).read(columns=["uuid", "ts"])
    got = dict(zip(ours.column("uuid").to_pylist(), ours.column("ts").to_pylist()))
    out = {"lakehouse_equals_model": got == model and ours.num_rows == len(model)}
    try:
        from tests.interop.hudi_oracle import hudi_read
        h = hudi_read(path)
        hd = dict(zip(h.column("uuid").to_pylist(), h.column("ts").to_pylist()))
        out["hudi_rs_equals_model"] = hd == model and h.num_rows == len(model)
    except ImportError:
        out["hudi_rs_equals_model"] = None
    return out


def run(engine: str, args: argparse.Namespace, root: pathlib.Path) -> dict:
    import lakehouse
    from lakehouse.iceberg import background
    path = root / engine.lower()
    opts = {"hoodie.parquet.small.file.limit": 0} if args.max_file_size else {}
    if args.max_file_size:
        opts["hoodie.parquet.max.file.size"] = args.max_file_size
    if engine != args.default_engine:
        opts["hoodie.index.bucket.engine"] = engine
    t = lakehouse.create_table(str(path), name="growth", table_type="MERGE_ON_READ", record_key="uuid",
                               partition_by="city", ordering_field="ts", options=opts)
    cfg = t.meta_client.config
    model: dict = {}
    first = rows(np.array([0]), 1, 1)
    t.upsert(first)
    model.update(zip(first.column("uuid").to_pylist(), first.column("ts").to_pylist()))
    small, next_id = timed_upserts(t, 1, 1, 10, model)
    grown_ids = next_id
    t0 = time.perf_counter()
    for b in range(4):
        ids = np.arange(next_id, next_id + args.grow // 4)
        next_id += len(ids)
        batch = rows(ids, 20 + b, 20 + b)
        t.upsert(batch)
        model.update(zip(batch.column("uuid").to_pylist(), batch.column("ts").to_pylist()))
    grow_s = time.perf_counter() - t0
    background.wait_all()
    t0 = time.perf_counter()
    t.compact(force=True)
    compact_s = time.perf_counter() - t0
    cluster_s = None
    if cfg.consistent_hashing:
        t0 = time.perf_counter()
        t.cluster(force=True)
        cluster_s = time.perf_counter() - t0
    background.wait_all()
    t = lakehouse.open_table(str(path))
    max_file = t.meta_client.options(None, "bench").get("hoodie.parquet.max.file.size", str(120 * MiB))
    slices = t.file_system_view().latest_slices()
    big, grown_fgs = max(s.base_size for s in slices), len(slices)
    grown, next_id = timed_upserts(t, next_id, grown_ids, 40, model)
    out = {"engine": engine, "default": engine == args.default_engine,
           "max_file_size": int(max_file), "split_threshold_bytes": int(2.0 * int(max_file)),
           "largest_base_file": big, "file_groups": grown_fgs, "partitions": len(CITIES),
           "upsert_2k_small_s": small, "upsert_2k_grown_s": grown, "grown_over_small": grown / small,
           "grow_s": grow_s, "compact_s": compact_s, "cluster_s": cluster_s}
    out.update(check(path, model))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--grow", type=int, default=400_000, help="rows the table grows by (400000)")
    p.add_argument("--max-file-size", type=int, default=MiB,
                   help="hoodie.parquet.max.file.size (1 MiB; 0: the default 120 MiB)")
    p.add_argument("--quick", action="store_true", help="40k rows")
    p.add_argument("--out", default=str(REPO / "bench-out" / "growth.json"))
    args = p.parse_args(argv)
    if args.quick:
        args.grow = 40_000
    args.default_engine = default_engine()
    engines = [args.default_engine] + [e for e in ("CONSISTENT_HASHING", "SIMPLE") if e != args.default_engine]
    root = pathlib.Path(tempfile.mkdtemp(prefix="bench-growth-"))
    try:
        results = [run(e, args, root) for e in engines]
    finally:
        shutil.rmtree(root, ignore_errors=True)
    for r in results:
        print(f"{r['engine']:<19}{' (default)' if r['default'] else '          '} largest base file "
              f"{r['largest_base_file'] / MiB:6.2f} MiB (split threshold {r['split_threshold_bytes'] / MiB:.0f} MiB), "
              f"{r['file_groups']} file groups; 2k upsert grown/small {r['grown_over_small']:.2f}x "
              f"({r['upsert_2k_small_s'] * 1000:.0f} -> {r['upsert_2k_grown_s'] * 1000:.0f} ms); "
              f"model: lakehouse {r['lakehouse_equals_model']}, hudi-rs {r['hudi_rs_equals_model']}")
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"grow": args.grow, "results": results}, indent=2))
    ok = all(r["lakehouse_equals_model"] and r["hudi_rs_equals_model"] is not False for r in results)
    return 0 if ok else 1


def default_engine() -> str:
    """The bucket engine a MERGE_ON_READ table created with no options gets."""
    import lakehouse
    with tempfile.TemporaryDirectory() as d:
        t = lakehouse.create_table(d + "/t", name="probe", table_type="MERGE_ON_READ", record_key="id")
        return t.meta_client.config.bucket_engine.value


if __name__ == "__main__":
    sys.exit(main())
