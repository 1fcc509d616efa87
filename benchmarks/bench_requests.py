"""Requests per step against an S3 API server: lakehouse's default Merge-On-Read table and
delta-rs, at several partition counts (issue 43: requests that follow the work).

An S3 API server (moto's, on 127.0.0.1, started and stopped here by PID) logs every request it
serves, one line each; the requests of a step are the lines it added. For each partition count P
(``--partitions``, 4 and 64): the table is loaded with ``--rows`` rows spread over P partitions,
updated once, compacted and cleaned (a table's first compaction plan and first clean list it
whole), then each step runs on its own and is counted: an upsert of 100 rows into one partition (with its Iceberg
publish; then another split into the Hudi commit and the Iceberg publish), a read filtered to one
partition, a compaction of what the upserts left and a clean retaining one commit (the slices that
compaction replaced). The same rows
and steps go to delta-rs (merge into one partition, a filtered read, optimize, vacuum) on the
same server. ``--check`` fails unless issue 43's targets hold (:data:`TARGETS`, and one-partition
steps costing the same at every P).

``python benchmarks/bench_requests.py`` (``make bench-requests``); writes
``bench-out/requests.json`` and prints a table of requests per step and kind (GET, PUT, LIST,
HEAD, DELETE, POST).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter
from typing import Callable

import numpy as np
import pyarrow as pa

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

CREDENTIALS = {"s3.access-key-id": "testing", "s3.secret-access-key": "testing", "s3.region": "us-east-1"}
_LINE = re.compile(r'"(?:\x1b\[[0-9;]*m)*([A-Z]+) ([^ ]+) HTTP/1\.[01]')


class Server:
    """moto's S3 server on a free port of 127.0.0.1; its log counts requests."""

    def __init__(self, workdir: pathlib.Path) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.log = workdir / "s3-server.log"
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
                                         stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=2).close()
                break
            except urllib.error.HTTPError:
                break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError(f"the S3 API server did not start: {self.log.read_text()[-2000:]}")
                time.sleep(0.1)
        self.offset = self.log.stat().st_size

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=10)

    def bucket(self) -> str:
        import boto3
        name = f"bench-{uuid.uuid4().hex[:12]}"
        boto3.client("s3", endpoint_url=self.endpoint, region_name=CREDENTIALS["s3.region"],
                     aws_access_key_id=CREDENTIALS["s3.access-key-id"],
                     aws_secret_access_key=CREDENTIALS["s3.secret-access-key"]).create_bucket(Bucket=name)
        return name

    def requests_since_mark(self) -> Counter:
        """Requests served since the last call, by kind (a GET with a list query is a LIST)."""
        time.sleep(0.05)  # the server writes its line as it answers; let the last one land
        with open(self.log, "rb") as f:
            f.seek(self.offset)
            text = f.read().decode("utf-8", "replace")
            self.offset = f.tell()
        out: Counter = Counter()
        for m in _LINE.finditer(text):
            method, path = m.groups()
            if method == "GET" and ("list-type" in path or "delimiter=" in path or "prefix=" in path):
                method = "LIST"
            out[method] += 1
        return out

    def count(self, fn: Callable[[], object]) -> tuple[Counter, float]:
        self.requests_since_mark()
        t0 = time.perf_counter()
        fn()
        took = time.perf_counter() - t0
        return self.requests_since_mark(), took


def rows(n: int, partitions: int, ts: int, start: int = 0, only: int | None = None) -> pa.Table:
    ids = np.arange(start, start + n)
    part = np.full(n, only) if only is not None else ids % partitions
    return pa.table({"id": [f"k{i:08d}" for i in ids], "p": [f"p{p:03d}" for p in part],
                     "ts": np.full(n, ts, dtype=np.int64), "v": ids.astype(np.float64) * 0.5})


def run_lakehouse(server: Server, partitions: int, n: int) -> dict:
    import lakehouse
    from lakehouse.iceberg import background
    from lakehouse.storage import get_storage
    storage = get_storage(f"s3://{server.bucket()}/t", {"s3.endpoint": server.endpoint, **CREDENTIALS})
    t = lakehouse.create_table(storage, name="t", table_type="MERGE_ON_READ", record_key="id",
                               partition_by="p", ordering_field="ts")
    retain_one = {"hoodie.cleaner.commits.retained": "1"}
    t.upsert(rows(n, partitions, 1))
    t.upsert(rows(n, partitions, 2))  # every file group has logs: the table's first compaction
    t.compact(force=True)             # plan and the first clean of what it replaced (they look
    t.upsert(rows(10, partitions, 2, only=1))  # at every partition) are behind us
    t.clean(options=retain_one)
    background.wait_all()
    steps = {}
    steps["upsert_one_partition"] = server.count(lambda: (t.upsert(rows(100, partitions, 3, only=0)),
                                                          background.wait_all()))
    # The same upsert's two parts: the Hudi commit (Iceberg publishing held back), then the
    # Iceberg publish of it.
    from lakehouse import meta_sync
    from lakehouse.iceberg.publish import sync_iceberg
    configured = meta_sync.configured
    meta_sync.configured = lambda meta: ()
    try:
        steps["upsert_hudi_commit"] = server.count(lambda: t.upsert(rows(100, partitions, 4, only=0)))
    finally:
        meta_sync.configured = configured
    steps["upsert_iceberg_publish"] = server.count(lambda: sync_iceberg(t))
    steps["read_one_partition"] = server.count(lambda: t.read(filters=[("p", "=", "p000")]))
    steps["compaction"] = server.count(lambda: (t.compact(force=True), background.wait_all()))
    t.upsert(rows(10, partitions, 5, only=0))  # the compaction's commit is retained no longer
    background.wait_all()
    steps["clean"] = server.count(lambda: (t.clean(options=retain_one), background.wait_all()))
    return {k: {"requests": sum(c.values()), "by_kind": dict(c), "seconds": s} for k, (c, s) in steps.items()}


# Issue 43's targets: requests per step on the default Merge-On-Read table, the same at every
# partition count for the steps that touch one partition.
TARGETS = {"upsert_one_partition": 25, "read_one_partition": 10}  # the upsert with its Iceberg publish
SAME_AT_EVERY_P = ("upsert_one_partition", "upsert_hudi_commit", "upsert_iceberg_publish",
                   "read_one_partition", "compaction", "clean")


def check(results: list[dict]) -> list[str]:
    """What misses the targets (empty: all met)."""
    ours = [r for r in results if r["engine"] == "lakehouse"]
    problems = []
    for r in ours:
        for step, most in TARGETS.items():
            got = r["steps"][step]["requests"]
            if got > most:
                problems.append(f"P={r['partitions']}: {step} made {got} requests (target <= {most})")
    for step in SAME_AT_EVERY_P:
        counts = {r["partitions"]: r["steps"][step]["requests"] for r in ours}
        if len(set(counts.values())) > 1:
            problems.append(f"{step} depends on the partition count: {counts}")
    return problems


def run_delta(server: Server, partitions: int, n: int) -> dict:
    from deltalake import DeltaTable, write_deltalake
    uri = f"s3://{server.bucket()}/t"
    opts = {"AWS_ENDPOINT_URL": server.endpoint, "AWS_ACCESS_KEY_ID": CREDENTIALS["s3.access-key-id"],
            "AWS_SECRET_ACCESS_KEY": CREDENTIALS["s3.secret-access-key"], "AWS_REGION": CREDENTIALS["s3.region"],
            "AWS_ALLOW_HTTP": "true", "AWS_S3_ALLOW_UNSAFE_RENAME": "true"}
    write_deltalake(uri, rows(n, partitions, 1), partition_by=["p"], storage_options=opts)

    def upsert():
        src = rows(100, partitions, 2, only=0)
        (DeltaTable(uri, storage_options=opts).merge(src, "t.id = s.id AND t.p = s.p AND t.p = 'p000'",
                                                     source_alias="s", target_alias="t")
         .when_matched_update_all().when_not_matched_insert_all().execute())
    steps = {"upsert_one_partition": server.count(upsert),
             "read_one_partition": server.count(lambda: DeltaTable(uri, storage_options=opts).to_pyarrow_table(
                 filters=[("p", "=", "p000")])),
             "compaction": server.count(lambda: DeltaTable(uri, storage_options=opts).optimize.compact(
                 partition_filters=[("p", "=", "p000")])),
             "clean": server.count(lambda: DeltaTable(uri, storage_options=opts).vacuum(
                 retention_hours=0, enforce_retention_duration=False, dry_run=False))}
    return {k: {"requests": sum(c.values()), "by_kind": dict(c), "seconds": s} for k, (c, s) in steps.items()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--partitions", default="4,64", help="partition counts (4,64)")
    p.add_argument("--rows", type=int, default=20_000, help="rows loaded first (20000)")
    p.add_argument("--out", default=str(REPO / "bench-out" / "requests.json"))
    p.add_argument("--check", action="store_true",
                   help="exit 1 unless lakehouse meets the request targets (TARGETS, and the same "
                        "count at every partition count for one-partition steps)")
    args = p.parse_args(argv)
    counts = [int(x) for x in args.partitions.split(",")]
    work = pathlib.Path(tempfile.mkdtemp(prefix="bench-requests-"))
    server = Server(work)
    results = []
    try:
        for n_parts in counts:
            for engine, run in (("lakehouse", run_lakehouse), ("delta-rs", run_delta)):
                try:
                    steps = run(server, n_parts, args.rows)
                except ImportError as e:
                    print(f"{engine}: skipped ({e})")
                    continue
                results.append({"engine": engine, "partitions": n_parts, "steps": steps})
    finally:
        server.stop()
    for r in results:
        cells = ", ".join(f"{k} {v['requests']} ({' '.join(f'{m}:{c}' for m, c in sorted(v['by_kind'].items()))})"
                          for k, v in r["steps"].items())
        print(f"{r['engine']:<10} P={r['partitions']:<4} {cells}")
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    problems = check(results)
    out.write_text(json.dumps({"rows": args.rows, "results": results, "missed": problems}, indent=2))
    for line in problems:
        print(f"MISSED: {line}")
    return 1 if args.check and problems else 0


if __name__ == "__main__":
    sys.exit(main())
