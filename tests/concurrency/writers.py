"""The multi-writer workload, shared by the thread and process scenarios: writer ``w``'s commit
``i`` is a deterministic batch, so an oracle can replay whatever was acknowledged.

Run as a script it is one writer process: ``python writers.py PATH W N OVERLAP`` prints one JSON
line per commit attempt's outcome.
"""

from __future__ import annotations

import json
import sys

import pyarrow as pa

POOL = 40  # keys shared by every writer when they overlap


def batch(w: int, i: int, overlap: bool) -> tuple[str, pa.Table]:
    """(operation, rows) of writer ``w``'s commit ``i``."""
    if overlap:
        nums = sorted({(i * 5 + j * 2 + w * 3) % POOL for j in range(5)})
        ids = [f"k{n}" for n in nums]
    else:
        nums = sorted({(i * 3 + j) % 17 for j in range(5)})
        ids = [f"w{w}-{n}" for n in nums]
    parts = [f"p{int(x.rsplit('-', 1)[-1].lstrip('k')) % 3}" for x in ids]
    if i % 6 == 5:
        return "delete", pa.table({"id": ids[:2], "p": parts[:2]})
    return "upsert", pa.table({"id": ids, "p": parts, "ts": [i] * len(ids),
                               "v": [f"w{w}-c{i}"] * len(ids)})


def run_writer(table, w: int, n: int, overlap: bool, report) -> None:
    from lakehouse.errors import CommitConflictError
    for i in range(n):
        op, rows = batch(w, i, overlap)
        try:
            t = table.write(rows, op)
        except CommitConflictError as e:
            report({"w": w, "i": i, "conflict": str(e), "winner": e.winner,
                    "file_groups": [list(fg) for fg in e.file_groups], "keys": list(e.keys)})
        else:
            report({"w": w, "i": i, "instant": t})


def expected_state(acked: list[dict], overlap: bool) -> dict[tuple[str, str], str]:
    """Replay acknowledged commits in instant order: with the table lock allocating instants,
    that is the order in which they took effect for any key two of them share."""
    state: dict[tuple[str, str], str] = {}
    for a in sorted(acked, key=lambda a: a["instant"]):
        op, rows = batch(a["w"], a["i"], overlap)
        for r in rows.to_pylist():
            if op == "delete":
                state.pop((r["p"], r["id"]), None)
            else:
                state[(r["p"], r["id"])] = r["v"]
    return state


if __name__ == "__main__":
    from lakehouse.table import open_table
    path, w, n, overlap = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
    run_writer(open_table(path), w, n, overlap, lambda d: print(json.dumps(d), flush=True))
