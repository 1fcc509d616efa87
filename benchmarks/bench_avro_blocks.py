"""Decoding and encoding Avro log content: lakehouse's vectorised code against fastavro, in one process.

Java Hudi writes Avro data blocks by default and every delete block is Avro; a table migrated
from Hudi is read through them until it is compacted. This times, alternating and keeping the
fastest of ``--repeats``, CPU per block:

* a data block of ``-m`` records of the trips rows (``bench_core``'s data) written as Avro, as a
  Java writer with ``hoodie.logfile.data.block.format=avro`` (Hudi's default) writes it;
* the same rows with nested values, as a table of a Java pipeline often has them: the
  coordinates as a nullable record, a list of tags, a map of attributes and the fare as a
  decimal (Hudi's Avro schema for them: a record, an array, a map and a fixed decimal);
* a delete block of ``-m`` keys without ordering values, decoded and encoded;
* both data blocks encoded, as every upsert of a writer on the Avro log format encodes them.

Each against the same content through fastavro only (``vectorised=False``), the baseline of its
ratio; both must give the same table (the same bytes) or the run exits 1.
``python benchmarks/bench_avro_blocks.py`` (``make bench-avro``).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time
from typing import Callable

import pyarrow as pa
import pyarrow.compute as pc

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.bench_core import KEY, PARTITION, Model  # noqa: E402


def _cpu(fn: Callable[[], object], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


def _nested(table: pa.Table) -> pa.Table:
    """The trips rows with nested columns: every tenth trip without coordinates."""
    n = table.num_rows
    coords = pa.StructArray.from_arrays([table.column("begin_lat").combine_chunks(),
                                         table.column("begin_lon").combine_chunks()], names=["lat", "lon"],
                                        mask=pa.array([i % 10 == 0 for i in range(n)]))
    payment = table.column("payment_type").combine_chunks().cast(pa.string())
    city = table.column("city").combine_chunks().cast(pa.string())
    tags = pa.ListArray.from_arrays(pa.array(range(0, 2 * n + 1, 2), pa.int32()),
                                    pa.concat_arrays([payment, city]).take(
                                        pa.array([i // 2 + (i % 2) * n for i in range(2 * n)])))
    attrs = pa.MapArray.from_arrays(pa.array(range(0, n + 1), pa.int32()), pa.array(["tip_cents"] * n),
                                    pc.cast(pc.multiply(table.column("tip").combine_chunks(), 100), pa.int64(),
                                            safe=False))
    fare = pc.cast(table.column("fare").combine_chunks(), pa.decimal128(12, 2), safe=False)
    return pa.table({"uuid": table.column("uuid"), "ts": table.column("ts"), "coords": coords,
                     "tags": tags, "attrs": attrs, "fare": fare})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-m", "--records", type=int, default=10_000, help="records per block")
    ap.add_argument("--repeats", type=int, default=9, help="runs of each; the fastest counts")
    ap.add_argument("--out", default="bench-out/avro_blocks.json")
    args = ap.parse_args(argv)

    from lakehouse.log import (decode_avro_data_block, decode_delete_block, encode_avro_data_block,
                               encode_delete_block, read_log_blocks)
    from lakehouse.schema import arrow_to_avro_schema

    rows = Model(7).initial(args.records)
    avro_schema = arrow_to_avro_schema(rows.schema, "trips", with_meta_fields=True)
    n, t = rows.num_rows, "20260101000000000"
    meta = {"_hoodie_commit_time": pa.repeat(t, n).cast(pa.string()),
            "_hoodie_commit_seqno": pa.array([f"{t}_0_{i}" for i in range(n)]),
            "_hoodie_record_key": rows.column(KEY), "_hoodie_partition_path": rows.column(PARTITION),
            "_hoodie_file_name": pa.repeat("00000000-0000-0000-0000-000000000000-0", n).cast(pa.string())}
    table = pa.table({**meta, **{c: rows.column(c) for c in rows.column_names}})
    (data_block,) = read_log_blocks(encode_avro_data_block(table, avro_schema, t))
    nested = _nested(table)
    nested_schema = arrow_to_avro_schema(nested.schema, "trips", with_meta_fields=False)
    (nested_block,) = read_log_blocks(encode_avro_data_block(nested, nested_schema, t))
    keys, parts = rows.column(KEY), rows.column(PARTITION).cast(pa.string())
    (delete_block,) = read_log_blocks(encode_delete_block(keys, parts, None, t, avro_schema))

    cases = {
        "data block decode": (lambda: decode_avro_data_block(data_block),
                              lambda: decode_avro_data_block(data_block, vectorised=False)),
        "nested data block decode": (lambda: decode_avro_data_block(nested_block),
                                     lambda: decode_avro_data_block(nested_block, vectorised=False)),
        "data block encode": (lambda: encode_avro_data_block(table, avro_schema, t),
                              lambda: encode_avro_data_block(table, avro_schema, t, vectorised=False)),
        "nested data block encode": (lambda: encode_avro_data_block(nested, nested_schema, t),
                                     lambda: encode_avro_data_block(nested, nested_schema, t, vectorised=False)),
        "delete block decode": (lambda: decode_delete_block(delete_block),
                                lambda: decode_delete_block(delete_block, vectorised=False)),
        "delete block encode": (lambda: encode_delete_block(keys, parts, None, "1", avro_schema),
                                lambda: encode_delete_block(keys, parts, None, "1", avro_schema, vectorised=False)),
    }
    for name, (fast, reference) in cases.items():
        if not (fast() == reference() if name.endswith("encode") else fast().equals(reference())):
            print(f"{name}: the vectorised and fastavro results differ", file=sys.stderr)
            return 1
    results = []
    for name, (fast, reference) in cases.items():
        fast_s, ref_s = float("inf"), float("inf")
        for _ in range(args.repeats):  # alternating: a noisy moment hits both
            fast_s = min(fast_s, _cpu(fast, 1))
            ref_s = min(ref_s, _cpu(reference, 1))
        results.append({"step": name, "records": args.records, "vectorised_ms": round(fast_s * 1000, 2),
                        "fastavro_ms": round(ref_s * 1000, 2), "x_faster": round(ref_s / fast_s, 1)})
    print(f"{args.records:,} records per block; CPU, fastest of {args.repeats}")
    print("| step | vectorised | fastavro | x faster |\n|---|---|---|---|")
    for r in results:
        print(f"| {r['step']} | {r['vectorised_ms']} ms | {r['fastavro_ms']} ms | {r['x_faster']} |")
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
