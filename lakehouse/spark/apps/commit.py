"""``commit TABLE [--instant T]``: complete what is ready to complete, oldest first.

- an inflight write whose phase 1 recorded complete results (``upsert(..., commit=False)``, an
  ingest job's phase 1) is committed with :meth:`Table.commit`;
- with several writers (``hoodie.write.concurrency.mode=OPTIMISTIC_CONCURRENCY_CONTROL``) each
  commit is checked for conflicts under the table lock: a write that overlaps one committed since
  it started is rolled back and reported as failed with ``conflict`` (the winning instant and the
  file groups or keys), while the others are committed;
- an inflight compaction whose execution recorded its results is committed with
  ``commit_compaction`` (which puts the plan back to requested when a result is missing or
  failed: that is reported as a failure), and an inflight clustering with
  ``commit_clustering`` likewise.

Anything else pending is left alone and listed as skipped: a write without complete results or a
compaction without results may still be running in another process. ``--instant T`` restricts it
to T. Driver only: no SparkContext is started.
"""

from __future__ import annotations

import argparse
from typing import Any

from lakehouse.errors import CommitConflictError, InstantNotFoundError, LakehouseError
from lakehouse.services.clustering import commit_clustering
from lakehouse.services.compaction import commit_compaction
from lakehouse.services.results import read_results
from lakehouse.spark.apps import FAILED, NOTHING, OK, add_tag_arg, new_parser, run_app
from lakehouse.timeline.tags import parse_tags
from lakehouse.table import Table, open_table
from lakehouse.timeline.instant import Action, Instant

NEEDS_SESSION = False  # Spark starts only if there is work for executors (SparkEngine)
APP = "commit"
_WRITES = (Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT)


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--instant", metavar="T", help="commit only this instant")
    add_tag_arg(p)


def _candidates(table: Table, only: str | None) -> list[Instant]:
    timeline = table.timeline
    pending = [i for i in timeline.pending()
               if i.is_inflight and (i.action in _WRITES or i.action is Action.COMPACTION)]
    if only is None:
        return pending
    inst = timeline.get(str(only))
    if inst is None:
        raise InstantNotFoundError(f"instant {only} is not on the timeline",
                                   help="it may have been rolled back; `lakehouse timeline` lists the instants")
    return [i for i in pending if i.time == inst.time]


def _write_ready(table: Table, inst: Instant) -> str:
    """Why the write cannot be committed yet ('' if it can)."""
    return table.write_ready(inst.time)


def _commit_write(table: Table, inst: Instant, tags: dict[str, str]) -> dict[str, Any]:
    meta = table.commit(inst.time, extra_metadata=tags)
    stats = meta.write_stats()
    return {"instant": inst.time, "action": str(inst.action), "operation": meta.operation_type,
            "files": len(stats), "rows": sum(s.num_writes for s in stats),
            "inserts": sum(s.num_inserts for s in stats), "updates": sum(s.num_update_writes for s in stats),
            "deletes": sum(s.num_deletes for s in stats),
            "bytes": sum(s.file_size_in_bytes for s in stats)}


def _commit_clustering(table: Table, inst: Instant, tags: dict[str, str]) -> dict[str, Any] | None:
    if read_results(table.storage, inst.time, "clustering") is None:
        return None
    res = commit_clustering(table, inst.time, extra_metadata=tags)
    if not res.committed:
        return {"committed": False, "reason": res.reason}
    return {"committed": True, "row": {"instant": inst.time, "action": "clustering", "operation": "CLUSTER",
                                       "files": res.files_written, "rows": res.rows}}


def run(args: argparse.Namespace) -> dict[str, Any]:
    table = open_table(args.table)
    cands = _candidates(table, args.instant)
    tags = parse_tags(args.tag)
    committed: list[dict[str, Any]] = []
    skipped: list[dict[str, str]] = []
    failed: list[dict[str, str]] = []
    for inst in cands:
        try:
            if inst.action is Action.COMPACTION:
                if read_results(table.storage, inst.time) is None:
                    skipped.append({"instant": inst.time, "action": "compaction",
                                    "reason": "its execution has recorded no results (still running, "
                                              "or crashed: run compaction-execute again)"})
                    continue
                res = commit_compaction(table, inst.time, extra_metadata=tags)
                if res.committed:
                    committed.append({"instant": inst.time, "action": "compaction", "operation": "COMPACT",
                                      "files": res.operations, "rows": res.rows})
                else:
                    failed.append({"instant": inst.time, "action": "compaction", "reason": res.reason})
            elif table.timeline.is_clustering(inst.time):
                committed_or_failed = _commit_clustering(table, inst, tags)
                if committed_or_failed is None:
                    skipped.append({"instant": inst.time, "action": "clustering",
                                    "reason": "its execution has recorded no results (still running, "
                                              "or crashed: run clustering-execute again)"})
                elif committed_or_failed.get("committed"):
                    committed.append(committed_or_failed["row"])
                else:
                    failed.append({"instant": inst.time, "action": "clustering",
                                   "reason": committed_or_failed["reason"]})
            elif why := _write_ready(table, inst):
                skipped.append({"instant": inst.time, "action": str(inst.action), "reason": why})
            else:
                committed.append(_commit_write(table, inst, tags))
        except CommitConflictError as e:
            # Definitely failed and rolled back: the writer has to write its batch again (an
            # ingest's source checkpoint did not move, so its next run does).
            failed.append({"instant": inst.time, "action": str(inst.action), "reason": e.message,
                           "conflict": {"winner": e.winner, "keys": list(e.keys[:20]),
                                        "file_groups": [list(fg) for fg in e.file_groups[:20]]}})
        except LakehouseError as e:
            # One instant that cannot be committed does not keep the others from being committed.
            failed.append({"instant": inst.time, "action": str(inst.action), "reason": e.message})
    doc: dict[str, Any] = {
        "instant": committed[-1]["instant"] if committed else None, "action": "commit",
        "committed": committed, "skipped": skipped, "failed": failed,
        "rows": sum(c["rows"] for c in committed)}
    if failed:
        return {**doc, "status": FAILED,
                "reason": "; ".join(f"{f['instant']}: {f['reason']}" for f in failed[:5])}
    if committed:
        return {**doc, "status": OK}
    if args.instant is not None and not skipped:
        inst = table.timeline.get(str(args.instant))
        why = "already completed" if inst is not None and inst.is_completed else \
            f"{inst} is not an inflight write or compaction"
        return {**doc, "instant": args.instant, "status": NOTHING, "reason": why}
    reason = "; ".join(f"{s['instant']}: {s['reason']}" for s in skipped[:5])
    return {**doc, "status": NOTHING, "reason": reason or "nothing is inflight"}


def main(argv: list[str], spark=None) -> int:
    return run_app(APP, argv, new_parser(APP, __doc__, configure), run)
