"""Whether a table service's planner would find its trigger met now, decided by the same rules
and counts it applies (no lock taken, nothing written): for a scheduler that starts the planner
only when it has something to plan, instead of starting it after every commit to hear "not yet".

What it promises: a service said not to be due would not have planned at that moment. A service
said to be due may still plan nothing: where a rule needs what only a listing of the file slices
tells (a strategy on log bytes) it counts as due and its planner decides, and a clustering whose
trigger is met may find no file group worth rewriting.

It is asked when a commit completes (the ingest task announces the services due), as Hudi's
writers schedule a compaction after a commit. A time-based compaction trigger (TIME_ELAPSED,
NUM_OR_TIME, NUM_AND_TIME) whose time runs out between two commits is therefore seen at the next
commit: a table whose writes stop with logs waiting needs its compaction on a cron too (the
registry's ``compaction: {after_commits: K, cron: ...}``) to be compacted by time.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Mapping

from lakehouse.config import ClusteringConfig, CompactionConfig
from lakehouse.errors import ConfigError
from lakehouse.meta_client import meta_client_of
from lakehouse.services.clustering.plan import last_clustering, require_clusterable
from lakehouse.services.compaction.partitions import last_compaction
from lakehouse.services.compaction.plan import trigger
from lakehouse.timeline.instant import Action
from lakehouse.timeline.instant_time import parse_instant_time

if TYPE_CHECKING:
    from lakehouse.meta_client import TableMetaClient

#: Compaction trigger strategies whose rule weighs log bytes (known only from a listing).
_BY_BYTES = ("LOG_BYTES", "NUM_OR_LOG_BYTES")


@dataclass(frozen=True)
class Due:
    due: bool
    reason: str


def compaction_due(table: "TableMetaClient | object", options: Mapping[str, str] | None = None, *,
                   now: datetime | None = None) -> Due:
    """Whether schedule_compaction's trigger (hoodie.compact.inline.trigger.strategy and its
    counts, ``options`` over the table's) fires now."""
    meta = meta_client_of(table)
    if not meta.config.is_mor:
        return Due(False, "a Copy-On-Write table has nothing to compact")
    cfg = CompactionConfig.from_options(meta.options(options, "compaction"))
    if not cfg.services_enabled:
        return Due(False, "table services are off (hoodie.table.services.enabled=false)")
    timeline = meta.timeline
    last = last_compaction(timeline)
    deltas = [i.time for i in timeline.completed().filter(actions=[Action.DELTA_COMMIT])
              if last is None or i.time > last]
    since = last or (deltas[0] if deltas else None)
    now = now or datetime.now(timezone.utc)
    seconds = (now - parse_instant_time(since)).total_seconds() if since else 0.0
    if cfg.trigger_strategy in _BY_BYTES:
        return Due(True, f"{cfg.trigger_strategy} weighs log bytes: the planner decides")
    t = trigger(cfg, len(deltas), seconds, 0)
    return Due(t.fire, t.reason)


def clustering_due(table: "TableMetaClient | object", options: Mapping[str, str] | None = None) -> Due:
    """Whether schedule_clustering's trigger (hoodie.clustering.async.max.commits commits since
    the last clustering, ``options`` over the table's) is met."""
    meta = meta_client_of(table)
    try:
        require_clusterable(meta)
    except ConfigError as e:
        return Due(False, e.message)
    cfg = ClusteringConfig.from_options(meta.options(options, "clustering"))
    if not cfg.services_enabled:
        return Due(False, "table services are off (hoodie.table.services.enabled=false)")
    timeline = meta.timeline
    last = last_clustering(meta, timeline)
    commits = [i for i in timeline.completed_writes()
               if (last is None or i.time > last) and not timeline.is_compaction(i.time)]
    return Due(len(commits) >= cfg.max_commits,
               f"{len(commits)} of {cfg.max_commits} commits since the last clustering")


__all__ = ["Due", "compaction_due", "clustering_due"]
