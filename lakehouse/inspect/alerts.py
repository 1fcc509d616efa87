"""Conditions on a table that someone should act on, each with what to do:

- ``compaction_backlog``: more delta commits wait in logs than twice the compaction trigger
  (hoodie.compact.inline.max.delta.commits, or the registry's ``after_commits``): compaction is
  not keeping up, and snapshot reads merge ever more logs.
- ``stuck_instant``: a pending instant whose writer shows no life: its heartbeat
  (``.hoodie/.heartbeat/<instant>``, Hudi's layout) is older than
  hoodie.client.heartbeat.interval_in_ms × (hoodie.client.heartbeat.tolerable.misses + 1), or it
  has none and it has been pending that long.
- ``clean_overdue``: more commits completed since the last clean than the cleaner retains
  (hoodie.cleaner.commits.retained + 1 for KEEP_LATEST_COMMITS, as CleanPlanner also keeps the
  version before the earliest retained commit; hoodie.cleaner.fileversions.retained;
  hoodie.cleaner.hours.retained for KEEP_LATEST_BY_HOURS) and a clean planned now (a dry run,
  with the same effective options as the service's) would delete something: file versions
  beyond the retention are still kept, and storage grows. A Merge-On-Read table's slices become
  cleanable only once a compaction is older than the retained commits, so commits alone (a clean
  that found nothing, and wrote no instant) are not overdue.

Read from the timeline (``instant_facts``) and the health replay, never written.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone
from typing import Any, Mapping

from lakehouse.concurrency.heartbeat import Heartbeats
from lakehouse.config import CleanConfig, CompactionConfig, ConcurrencyConfig
from lakehouse.inspect.timeline import Fact
from lakehouse.services.clean import plan_clean
from lakehouse.table import Table
from lakehouse.timeline.instant_time import parse_instant_time

WARNING, CRITICAL = "warning", "critical"


@dataclass(frozen=True)
class Alert:
    kind: str
    severity: str
    message: str
    help: str
    instant: str | None = None
    value: float | None = None
    threshold: float | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _age_s(instant: str, now: float) -> float | None:
    try:
        return now - parse_instant_time(instant).timestamp()
    except ValueError:
        return None


def _mins(s: float) -> str:
    return f"{s / 60:.0f} min" if s < 5400 else f"{s / 3600:.1f} h"


def compaction_backlog(table: Table, last_point: Mapping[str, Any] | None, trigger: int,
                       now: float) -> Alert | None:
    if table.config.table_type.value != "MERGE_ON_READ" or not last_point:
        return None
    waiting = last_point["uncompacted_commits"]
    if waiting < 2 * trigger:
        return None
    oldest = last_point["oldest_uncompacted"]
    age = _age_s(oldest, now) if oldest else None
    return Alert("compaction_backlog", CRITICAL if waiting >= 4 * trigger else WARNING,
                 f"{waiting} delta commits wait in {last_point['log_files']} log files "
                 f"({last_point['log_bytes']:,} bytes) for compaction, the oldest {oldest}"
                 + (f" ({_mins(age)} ago)" if age is not None else "")
                 + f"; compaction is triggered every {trigger}",
                 "run the table's compaction DAG (or `lakehouse compaction run`), and check why its "
                 "runs were skipped or failed",
                 instant=oldest, value=waiting, threshold=2 * trigger)


def stuck_instants(table: Table, facts: list[Fact], concurrency: ConcurrencyConfig, now: float) -> list[Alert]:
    beats = Heartbeats(table.storage, interval_s=concurrency.heartbeat_interval_ms / 1000,
                       misses=concurrency.heartbeat_misses, clock=lambda: now)
    out = []
    for f in facts:
        r = f.row
        if r["state"] == "completed" or r.get("archived"):
            continue
        last = beats.last_beat(r["time"])
        since = (r["start_ns"] / 1e9) if r.get("start_ns") else None
        quiet = now - last if last is not None else (now - since if since is not None else None)
        if quiet is None or quiet <= beats.expiry_s:
            continue
        what = "no heartbeat" if last is None else f"its last heartbeat {_mins(quiet)} ago"
        out.append(Alert(
            "stuck_instant", WARNING,
            f"{r['action']} {r['time']} is {r['state']} with {what} (a writer shows life every "
            f"{beats.interval_s:.0f} s; {beats.expiry_s:.0f} s without one means it died)",
            "its next write or service run rolls a dead writer's instant back; `lakehouse rollback "
            f"{r['time']}` does it now" if r["action"] not in ("compaction", "clean") else
            f"`lakehouse {r['action']} run` resumes the plan, or the table's {r['action']} DAG's next run",
            instant=r["time"], value=round(quiet), threshold=beats.expiry_s))
    return out


def clean_overdue(facts: list[Fact], clean: CleanConfig, now: float,
                  command: str = "`lakehouse clean run`") -> Alert | None:
    """The alert when more commits (or hours) than the retention passed since the last clean;
    ``command``: the CLI its help names (alerts: with the registry's options)."""
    done = [f.row for f in facts if f.row["state"] == "completed"]
    cleans = [r for r in done if r["action"] == "clean"]
    last_clean = cleans[-1]["time"] if cleans else None
    since = [r for r in done if r["action"] in ("commit", "deltacommit", "replacecommit", "compaction")
             and (last_clean is None or r["time"] > last_clean)]
    if clean.policy == "KEEP_LATEST_BY_HOURS":
        if not since or last_clean is None and len(since) < 2:
            return None
        ref = last_clean or since[0]["time"]
        age = _age_s(ref, now)
        limit = clean.hours_retained * 3600
        if age is None or age <= limit:
            return None
        return Alert("clean_overdue", WARNING,
                     f"no clean for {_mins(age)} (since {ref}), longer than hoodie.cleaner.hours.retained "
                     f"({clean.hours_retained} h): file versions older than the retention are still kept",
                     f"run the table's clean DAG (or {command})", instant=last_clean,
                     value=round(age), threshold=limit)
    if clean.policy == "KEEP_LATEST_COMMITS":
        # CleanPlanner keeps the latest version before the earliest retained commit as well, so
        # a version leaves the retention only after commits.retained + 1 newer commits.
        key, setting, limit = "hoodie.cleaner.commits.retained", clean.commits_retained, clean.commits_retained + 1
    else:
        key, setting = "hoodie.cleaner.fileversions.retained", clean.file_versions_retained
        limit = setting
    if len(since) <= limit:
        return None
    return Alert("clean_overdue", WARNING,
                 f"{len(since)} commits completed since " + (f"the last clean ({last_clean})" if last_clean
                                                              else "the table began, with no clean")
                 + f"; with {key}={setting} file versions beyond the retention are kept until a clean runs",
                 f"run the table's clean DAG (or {command}), and check its schedule",
                 instant=last_clean, value=len(since), threshold=limit)


def alerts(table: Table, facts: list[Fact], last_point: Mapping[str, Any] | None, *,
           options: Mapping[str, Any] | None = None, compaction_after: int | None = None,
           now: float | None = None) -> list[Alert]:
    """Every alert of ``table`` (``options``: the registry's service options over the table's;
    ``compaction_after``: the registry's compaction trigger, when it has one)."""
    now = time.time() if now is None else now
    opts = table.options(options, "the Lakehouse view")
    trigger = compaction_after or CompactionConfig.from_options(opts).max_delta_commits
    out = [a for a in (compaction_backlog(table, last_point, trigger, now),) if a]
    out += stuck_instants(table, facts, ConcurrencyConfig.from_options(opts), now)
    cfg = CleanConfig.from_options(opts)
    if (c := clean_overdue(facts, cfg, now, _clean_command(table, options))) is not None:
        planned = plan_clean(table.meta_client, cfg, now=datetime.fromtimestamp(now, timezone.utc), dry_run=True)
        if planned.planned:
            out.append(replace(c, message=f"{c.message}: a clean now would delete {len(planned.files):,} "
                                          f"file(s), {planned.bytes:,} bytes"))
    return out


def _clean_command(table: Table, options: Mapping[str, Any] | None) -> str:
    """The CLI that cleans as the service does: the registry's cleaning options given, since the
    CLI otherwise plans with the table's own."""
    given = " ".join(f"--option {k}={v}" for k, v in sorted((options or {}).items())
                     if k.startswith("hoodie.clean"))
    return f"`lakehouse clean run {table.path}{' ' + given if given else ''}`"


__all__ = ["Alert", "alerts", "compaction_backlog", "stuck_instants", "clean_overdue"]
