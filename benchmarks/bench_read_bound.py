"""Where a snapshot read of pending logs spends its time, against what no key-based merge can avoid.

A default Merge-On-Read table (no options: the BUCKET index appends every upsert, inserts
included, to the logs) gets N generated trips rows (the data of ``make bench``), then K upserts
of M rows (1% updates), then a delete of M/5 keys. After the K upserts (K rounds of logs, the
issue's measure) and after the delete (K+1 rounds, ``make bench``'s), one process times,
alternating and keeping the fastest of ``--repeats`` runs:

* ``read_optimized``: ``Table.read(read_optimized=True)``, the reference of every ratio;
* ``snapshot``: ``Table.read()``;
* ``decode_base``: the base files decoded as the reader decodes them (string columns of small
  dictionaries through their dictionaries, :mod:`lakehouse.storage.parquet`), nothing else
  (what the read-optimized read costs without the table);
* ``decode_base_and_logs``: the base files and every log block decoded, nothing merged;
* ``merge_free_bound``: that, plus dropping the base records whose key a log block holds
  (hashing every base key, copying the others out, the small-dictionary columns as indices
  and decoded after): the least a reader that merges by key must do. It is not a correct read
  (no merging), only the bound.

The parts run as the reader runs them: one task per file slice on ``os.cpu_count()`` threads.
``python benchmarks/bench_read_bound.py`` (``make bench-read``); ``--quick`` for a smoke run.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

import pyarrow as pa
import pyarrow.compute as pc

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.bench_core import KEY, ORDERING, PARTITION, Model  # noqa: E402

PARTS = ("read_optimized", "snapshot", "decode_base", "decode_base_and_logs", "merge_free_bound")


def _parts(table) -> dict[str, Callable[[], int]]:
    """Each measured part as a function returning the rows it produced."""
    from lakehouse.columns import RECORD_KEY
    from lakehouse.log.block import BlockType, decode_avro_data_block, decode_delete_block, \
        decode_parquet_data_block
    from lakehouse.log.reader import read_log_blocks
    from lakehouse.storage.parquet import decode_dictionaries, read_parquet

    storage = table.storage
    slices = table.file_system_view().latest_slices()
    workers = max(1, min(len(slices), os.cpu_count() or 1, 8))

    def base(fs, keep_dictionaries: bool = False) -> pa.Table:
        # As the reader decodes a base file: small-dictionary string columns through their
        # dictionaries (lakehouse.storage.parquet).
        return read_parquet(pa.BufferReader(storage.read(fs.base_file.path)), keep_dictionaries=keep_dictionaries)

    def logs(fs) -> tuple[list[pa.Table], list[pa.Array]]:
        rows, keys = [], []
        for lf in fs.log_files:
            for b in read_log_blocks(storage.read(lf.path), storage.uri(lf.path)):
                if b.block_type is BlockType.DELETE:
                    keys.extend(decode_delete_block(b).column("record_key").chunks)
                elif b.block_type in (BlockType.PARQUET_DATA, BlockType.AVRO_DATA):
                    decode = decode_parquet_data_block if b.block_type is BlockType.PARQUET_DATA \
                        else decode_avro_data_block
                    rows.append(decode(b))
                    keys.extend(rows[-1].column(RECORD_KEY).chunks)
        return rows, keys

    def base_and_logs(fs) -> int:
        rows, _ = logs(fs)
        return base(fs).num_rows + sum(t.num_rows for t in rows)

    def bound(fs) -> int:
        rows, keys = logs(fs)
        b = base(fs, keep_dictionaries=True)
        # Arrays, not ChunkedArrays, into pa.chunked_array: given ChunkedArrays it converts
        # them value by value in Python (~0.3 ms per 1,000 keys, holding the GIL).
        touched = pc.is_in(b.column(RECORD_KEY), value_set=pa.chunked_array(keys, pa.string()).combine_chunks())
        return decode_dictionaries(b.filter(pc.invert(touched))).num_rows + sum(t.num_rows for t in rows)

    def per_slice(fn: Callable) -> Callable[[], int]:
        def run() -> int:
            with ThreadPoolExecutor(workers) as pool:
                return sum(pool.map(fn, [s for s in slices if s.base_file is not None]))
        return run

    return {"read_optimized": lambda: table.read(read_optimized=True).num_rows,
            "snapshot": lambda: table.read().num_rows,
            "decode_base": per_slice(lambda fs: base(fs).num_rows),
            "decode_base_and_logs": per_slice(base_and_logs),
            "merge_free_bound": per_slice(bound)}


def measure(table, repeats: int) -> dict:
    parts = _parts(table)
    for fn in parts.values():  # the first touch of each part's memory is not what is measured
        fn()
    best: dict[str, float] = {}
    rows: dict[str, int] = {}
    for _ in range(repeats):
        for name, fn in parts.items():
            start = time.perf_counter()
            rows[name] = fn()
            best[name] = min(best.get(name, float("inf")), time.perf_counter() - start)
    ro = best["read_optimized"]
    return {name: {"seconds": round(best[name], 4), "rows": rows[name], "vs_read_optimized": round(best[name] / ro, 2)}
            for name in PARTS}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", "--rows", type=int, default=1_000_000, help="rows of the first write")
    ap.add_argument("-m", "--batch-rows", type=int, default=50_000, help="rows per upsert")
    ap.add_argument("-k", "--batches", type=int, default=3, help="upserts (rounds of logs)")
    ap.add_argument("--repeats", type=int, default=5, help="runs per part; the fastest counts")
    ap.add_argument("--out", default="bench-out/read_bound.json")
    ap.add_argument("--quick", action="store_true", help="20k rows, 1k per upsert, 2 repeats: a smoke run")
    ap.add_argument("--log-format", choices=("parquet", "avro"), default=None,
                    help="hoodie.logfile.data.block.format (default: the table's default, parquet; "
                         "avro is what Java Hudi writes by default)")
    args = ap.parse_args(argv)
    if args.quick:
        args.rows, args.batch_rows, args.repeats = 20_000, 1_000, 2
    import lakehouse

    model = Model(7)
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-read-") as tmp:
        table = lakehouse.create_table(str(pathlib.Path(tmp) / "t"), name="trips", table_type="MERGE_ON_READ",
                                       record_key=KEY, partition_by=PARTITION, ordering_field=ORDERING,
                                       options={"hoodie.logfile.data.block.format": args.log_format}
                                       if args.log_format else None)
        table.bulk_insert(model.initial(args.rows))
        for _ in range(args.batches):
            table.upsert(model.upsert_batch(args.batch_rows, 0.01, 0.1)[0])
        live = [len(model.latest)]
        results.append({"rounds": args.batches, "what": f"{args.batches} upserts", **measure(table, args.repeats)})
        table.delete(model.delete_batch(args.batch_rows // 5))
        results.append({"rounds": args.batches + 1, "what": f"{args.batches} upserts and a delete",
                        **measure(table, args.repeats)})
        live.append(len(model.latest))
    lines = ["| rounds of logs | " + " | ".join(PARTS) + " |", "|---" * (len(PARTS) + 1) + "|"]
    for r in results:
        cells = [f"{r[p]['seconds']:.3f} s ({r[p]['vs_read_optimized']:.2f}x)" for p in PARTS]
        lines.append(f"| {r['rounds']} ({r['what']}) | " + " | ".join(cells) + " |")
    print(f"N={args.rows:,}, M={args.batch_rows:,}, {os.cpu_count()} cores; ratios to the read-optimized read")
    print("\n".join(lines))
    ok = all(r["snapshot"]["rows"] == n for r, n in zip(results, live))
    print("snapshot rows match the model" if ok else "SNAPSHOT ROWS DIFFER FROM THE MODEL")
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"rows": args.rows, "batch_rows": args.batch_rows, "batches": args.batches,
                               "log_format": args.log_format or "parquet",
                               "cores": os.cpu_count(), "results": results, "snapshot_rows_ok": ok}, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
