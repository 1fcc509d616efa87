"""Serving time of the Lakehouse view's pages over a registry of 10 tables of 1,000 instants each
(most archived, as Hudi's archival leaves a long-lived table): one is written, the nine others are
copies of it (copytree keeps the files' times, so their timelines are alike).

Each table is a Merge-On-Read table with defaults written as a scheduler would: small upserts,
a compaction every 5 delta commits, a clean and an archival after each compaction. The pages are
served by the view's FastAPI app in this process (no network, no Airflow login), each one cold
(the first request, the process's caches of completed instants emptied) and warm (the median of 5 later requests). The
baseline, measured in the same run, is what ``lakehouse timeline --archived --json`` and
``lakehouse stats --json`` cost on the same table: the ratios say what the page adds.

``python benchmarks/bench_view.py`` (``make bench-view``); ``--quick`` for a smoke run.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import statistics
import sys
import tempfile
import time

import pyarrow as pa

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import lakehouse  # noqa: E402
from lakehouse.iceberg import background  # noqa: E402


def _batch(n: int, rows: int) -> pa.Table:
    keys = [f"k{(n * 37 + i) % (rows * 20):07d}" for i in range(rows)]
    return pa.table({"id": keys, "p": [f"p{hash(k) % 4}" for k in keys], "ts": [n] * rows,
                     "v": [float(n)] * rows})


def build(path: str, instants: int, rows: int = 50) -> int:
    t = lakehouse.create_table(path, name=os.path.basename(path), table_type="MERGE_ON_READ",
                               record_key="id", partition_by="p", ordering_field="ts")
    made, n = 0, 0
    while made < instants:
        n += 1
        t.upsert(_batch(n, rows))
        made += 1
        if n % 5 == 0:
            t.compact(force=True)
            made += 1
            if t.clean().instant:
                made += 1
            t.archive()
    background.wait_all()  # published to Iceberg (in the background) before it is copied
    return made


def _reset() -> None:
    """Empty the process's caches of completed instants (what a fresh api-server starts with)."""
    from lakehouse.inspect import health as health_mod
    from lakehouse.inspect import timeline as timeline_mod
    timeline_mod._FACTS.clear()  # noqa: SLF001 - a benchmark resets the process cache on purpose
    timeline_mod._ARCHIVED.clear()  # noqa: SLF001
    health_mod._ARCHIVED_REPLAY.clear()  # noqa: SLF001


def _time(fn, warm: int = 5) -> dict[str, float]:
    _reset()
    t0 = time.perf_counter()
    fn()
    cold = time.perf_counter() - t0
    runs = []
    for _ in range(warm):
        t0 = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t0)
    return {"cold_ms": round(cold * 1000, 1), "warm_ms": round(statistics.median(runs) * 1000, 1)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="3 tables of 100 instants (a smoke run)")
    ap.add_argument("--out", default=str(REPO / "bench-out" / "view.json"))
    args = ap.parse_args()
    big_n, tables = (100, 3) if args.quick else (1000, 10)
    work = tempfile.mkdtemp(prefix="lakehouse-bench-view-")
    t0 = time.perf_counter()
    made = {"big": build(f"{work}/big", big_n)}
    for k in range(1, tables):
        shutil.copytree(f"{work}/big", f"{work}/t{k}")
        made[f"t{k}"] = made["big"]
    print(f"built {tables} tables of {made['big']} instants in {time.perf_counter() - t0:.0f} s")
    reg = pathlib.Path(work) / "tables.yaml"
    reg.write_text("tables:\n" + "".join(
        f"  {name}:\n    path: {work}/{name}\n    record_key: id\n    source: {{kind: files, dir: {work}/in}}\n"
        for name in made))
    os.environ["LAKEHOUSE_REGISTRY"] = str(reg)
    from fastapi.testclient import TestClient

    from lakehouse.airflow.ui.app import create_app
    from lakehouse.inspect import stats as stats_mod
    from lakehouse.inspect import timeline as timeline_mod
    client = TestClient(create_app(auth=False))

    def get(path: str) -> None:
        r = client.get(path)
        assert r.status_code == 200, (path, r.status_code, r.text[:300])

    big = lakehouse.open_table(f"{work}/big")
    facts = timeline_mod.instant_facts(big, archived=True)
    instant = next(f.row["time"] for f in reversed(facts) if f.row["action"] == "compaction")
    baseline = _time(lambda: (timeline_mod.timeline_rows(lakehouse.open_table(f"{work}/big"), archived=True),
                              stats_mod.table_stats(lakehouse.open_table(f"{work}/big"))))
    pages = {"tables page (/)": "/", "table page (/tables/big)": "/tables/big",
             "table JSON (/api/tables/big)": "/api/tables/big",
             "instant page (a compaction)": f"/tables/big/instants/{instant}",
             "tables JSON (/api/tables)": "/api/tables"}
    results = {name: _time(lambda p=path: get(p)) for name, path in pages.items()}
    doc = {"tables": tables, "instants_big": made["big"], "archived_big": sum(f.row["archived"] for f in facts),
           "baseline_cli_ms": baseline, "pages": {
               k: {**v, "warm_vs_cli": round(v["warm_ms"] / max(baseline["warm_ms"], 0.1), 2)}
               for k, v in results.items()}}
    width = max(map(len, pages))
    print(f"baseline: lakehouse timeline --archived --json + stats --json on 'big': "
          f"{baseline['cold_ms']} ms cold, {baseline['warm_ms']} ms warm")
    for k, v in doc["pages"].items():
        print(f"{k:<{width}}  cold {v['cold_ms']:>8.1f} ms  warm {v['warm_ms']:>8.1f} ms  "
              f"(warm {v['warm_vs_cli']:.2f}x the CLI's)")
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
