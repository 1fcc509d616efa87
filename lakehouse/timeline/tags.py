"""Who made an instant: tags (``KEY=VALUE``) kept in its extra metadata, and the instant that
carries given tags.

A scheduler that runs a step as a separate process (an Airflow task submitting a Spark job) tags
the instant the step creates with its run's identity. It then finds that instant on the timeline
instead of parsing the job's output, and a table's page can show which task run made each
instant. Tags live where Hudi keeps extra metadata: a write's commit metadata (also on its
inflight file), a compaction plan's and a cleaner plan's ``extraMetadata`` (and the completed
clean's, which copies it).
"""

from __future__ import annotations

from typing import Iterable, Mapping

from lakehouse.errors import ConfigError, LakehouseError
from lakehouse.timeline.active import ActiveTimeline, Timeline
from lakehouse.timeline.avro_files import CleanerPlan, CleanMetadata, CompactionPlan
from lakehouse.timeline.commit_metadata import CommitMetadata
from lakehouse.timeline.instant import WRITE_ACTIONS, Action, Instant, State


def parse_tags(pairs: Iterable[str]) -> dict[str, str]:
    """``KEY=VALUE`` strings as a dict; a pair without ``=`` or with an empty key is refused."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq or not key.strip():
            raise ConfigError(f"tag {pair!r} is not KEY=VALUE", help="pass tags as --tag KEY=VALUE")
        out[key.strip()] = value
    return out


def _plan(active: ActiveTimeline, inst: Instant, cls):
    req = Instant(inst.time, inst.action, State.REQUESTED)
    raw = active.read(req)
    return cls.from_bytes(raw, active.path(req)) if raw else None


def instant_extra(active: ActiveTimeline, inst: Instant, timeline: Timeline | None = None) -> dict[str, str]:
    """The extra metadata of ``inst`` in its current state ({} where it has none, or its file
    cannot be read: tags are for finding and showing, never a reason to fail)."""
    try:
        if inst.action is Action.COMPACTION:
            plan = _plan(active, inst, CompactionPlan)
            return dict(plan.extra_metadata) if plan else {}
        if inst.action in WRITE_ACTIONS:
            out: dict[str, str] = {}
            if inst.is_completed and timeline is not None and timeline.is_compaction(inst.time):
                plan = _plan(active, Instant(inst.time, Action.COMPACTION, State.REQUESTED), CompactionPlan)
                out.update(plan.extra_metadata if plan else {})
            if inst.is_completed:
                out.update(active.commit_metadata(inst).extra_metadata)
            elif inst.is_inflight:
                raw = active.read(inst)
                if raw:
                    out.update(CommitMetadata.from_bytes(raw, active.path(inst)).extra_metadata)
            return out
        if inst.action is Action.CLEAN:
            if inst.is_completed:
                raw = active.read(inst)
                return dict(CleanMetadata.from_bytes(raw, active.path(inst)).extra_metadata) if raw else {}
            plan = _plan(active, inst, CleanerPlan)
            return dict(plan.extra_metadata) if plan else {}
    except LakehouseError:
        return {}
    return {}


def task_run(tags: Mapping[str, str], prefix: str) -> dict[str, str] | None:
    """The task run that ``tags`` name under ``prefix`` (``airflow.`` made the instant,
    ``airflow.commit.`` committed it): dag_id, run_id, task_id, try_number; None if incomplete."""
    dag, run, task = (tags.get(prefix + k) for k in ("dag_id", "run_id", "task_id"))
    if not (dag and run and task):
        return None
    return {"dag_id": dag, "run_id": run, "task_id": task, "try_number": tags.get(prefix + "try_number", "")}


def find_tagged(active: ActiveTimeline, tags: Mapping[str, str], actions: Iterable[Action],
                timeline: Timeline | None = None, limit: int = 200) -> Instant | None:
    """The newest instant of ``actions`` whose extra metadata holds every tag (only the newest
    ``limit`` instants are read: a step looks for what it has just made)."""
    timeline = timeline if timeline is not None else active.load()
    wanted = set(actions)
    for inst in reversed(timeline.instants[-limit:]):
        action = Action.COMPACTION if inst.is_completed and timeline.is_compaction(inst.time) else inst.action
        if action not in wanted:
            continue
        extra = instant_extra(active, inst, timeline)
        if all(extra.get(k) == v for k, v in tags.items()):
            return inst
    return None


__all__ = ["parse_tags", "instant_extra", "find_tagged"]
