"""Checkpoints carried from commit to commit, so that what a source or a streaming query applied
stays on the active timeline whatever other writers, cleans and archival do.

An ingest (``lakehouse.ingest.state.<source>``) and a streaming query
(``_hudi_streaming_sink_checkpoint``, a map of query identifier to batch id) record their progress
in the extra metadata of the commit that applies it. Once other writers' commits push that
commit out to the archive, a reader of the active timeline alone would find nothing and apply
every file (or batch) again. So every commit lakehouse completes copies the carried keys of the
commit before it that it does not set itself (Hudi's ``hoodie.write.meta.key.prefixes``,
``TransactionUtils.overrideWithLatestCommitMetadata``; lakehouse carries its own keys always,
and the prefixes that option lists too). Sink maps are merged identifier by identifier.

Where a value came from is kept (``lakehouse.carried.origins``: key -> the instant that wrote it),
so a value whose origin was rolled back is not believed: the origin must be completed on the
active timeline or older than its first instant (archived). The origins key is written on every
commit, also as the mark that the commit carries: a lookup walks back past commits without it
(other programs' writers) and stops at the first with it."""

from __future__ import annotations

import json
from typing import Callable, Iterable, Iterator, Mapping

from lakehouse.timeline.active import ActiveTimeline, Timeline

SINK_CHECKPOINT_KEY = "_hudi_streaming_sink_checkpoint"
INGEST_STATE_PREFIX = "lakehouse.ingest.state."
ORIGINS_KEY = "lakehouse.carried.origins"
CARRIED_PREFIXES = (INGEST_STATE_PREFIX, SINK_CHECKPOINT_KEY)


def sink_map(value: str | None) -> dict[str, str]:
    """A sink checkpoint value as a map (empty when absent or not a JSON map: such a value is
    reported where it is read, not carried)."""
    if not value:
        return {}
    try:
        doc = json.loads(value)
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in doc.items()} if isinstance(doc, dict) else {}


def _carried(key: str, prefixes: Iterable[str]) -> bool:
    return key != ORIGINS_KEY and any(key.startswith(p) for p in (*CARRIED_PREFIXES, *prefixes))


def origins(extra: Mapping[str, str]) -> dict[str, str]:
    try:
        doc = json.loads(extra.get(ORIGINS_KEY) or "{}")
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in doc.items()} if isinstance(doc, dict) else {}


def carry_forward(active: ActiveTimeline, timeline: Timeline, extra: Mapping[str, str],
                  prefixes: Iterable[str] = (), *, in_order: bool = False) -> dict[str, str]:
    """``extra`` (a commit's own extra metadata) with the carried keys of the commits before it
    that it does not set, and their origins. Called under the table lock, on the timeline that
    lock guards. Per key the value with the newest origin is carried. With several writers a
    commit may complete after one with a later instant time, so every active commit is read
    (their metadata is cached); ``in_order`` (one writer, whose writes complete in instant
    order): the newest commit that carries already holds every value, and the walk stops there."""
    prefixes = tuple(prefixes)
    out = dict(extra)
    own_sink = sink_map(out.get(SINK_CHECKPOINT_KEY))
    best: dict[str, tuple[str, str | None, str]] = {}  # key -> (origin, identifier, value)
    for inst in reversed(timeline.completed_writes().instants):
        prev = active.commit_metadata(inst).extra_metadata
        came_from = origins(prev)
        complete = ORIGINS_KEY in prev  # it carried everything completed before it
        for k, v in prev.items():
            if not _carried(k, prefixes):
                continue
            pairs = [(f"{k}/{i}", i, b) for i, b in sink_map(v).items()] if k == SINK_CHECKPOINT_KEY \
                else [(k, None, v)]
            for key, ident, value in pairs:
                origin = came_from.get(key, inst.time)
                if origin != inst.time and not believable(timeline, origin):
                    complete = False  # rolled back: an older commit may hold the value that stands
                    continue
                if (ident in own_sink) if ident is not None else (key in out):
                    continue  # the commit's own value
                if key not in best or origin > best[key][0]:
                    best[key] = (origin, ident, value)
        if in_order and complete:
            break
    own_origins = {}
    merged_sink: dict[str, str] = {}
    for key, (origin, ident, value) in best.items():
        own_origins[key] = origin
        if ident is not None:
            merged_sink[ident] = value
        else:
            out[key] = value
    own_value = out.get(SINK_CHECKPOINT_KEY)
    if own_value and not own_sink:
        # Not a map: left as the writer gave it, for its reader to report.
        own_origins = {k: v for k, v in own_origins.items() if not k.startswith(SINK_CHECKPOINT_KEY + "/")}
    elif merged_sink:
        out[SINK_CHECKPOINT_KEY] = json.dumps({**merged_sink, **own_sink})
    out[ORIGINS_KEY] = json.dumps(own_origins, sort_keys=True, separators=(",", ":"))
    return out


def believable(timeline: Timeline, origin: str) -> bool:
    """Whether a value written by ``origin`` still stands: its commit is completed on the active
    timeline, or archived (older than every instant there). Otherwise it was rolled back."""
    if timeline.get(origin) is not None:
        inst = timeline.get(origin)
        return inst.is_completed
    first = timeline.instants[0].time if timeline.instants else None
    return first is not None and origin < first


def values(active: ActiveTimeline, timeline: Timeline, match: Callable[[str], bool],
           archived: Callable[[], Iterator[tuple[str, Mapping[str, str]]]] | None = None, *,
           in_order: bool = False) -> list[tuple[str, str, str, Mapping[str, str]]]:
    """(origin, key, value, the commit's extra metadata) of every key ``match`` accepts on the
    active timeline's completed writes, values whose origin was rolled back left out; if there are
    none, those of ``archived()`` ((instant, extra metadata) of archived commits). Callers take the
    newest origin per key: with several writers a commit may complete after one with a later
    instant time, so no single commit is sure to hold the newest value and every commit is read.
    ``in_order`` (one writer: its writes complete in instant order, and a compaction completing
    late carries theirs): the newest commit that carries, if it holds no rolled-back value, holds
    every value, and the walk stops there. Sink maps come per identifier, keyed
    ``_hudi_streaming_sink_checkpoint/<identifier>``."""
    def of(inst_time: str, extra: Mapping[str, str], check: bool,
           dropped: list[bool]) -> Iterator[tuple[str, str, str, Mapping[str, str]]]:
        came_from = origins(extra)
        for k, v in extra.items():
            if k == SINK_CHECKPOINT_KEY:
                items = [(f"{k}/{ident}", json.dumps({ident: batch})) for ident, batch in sink_map(v).items()]
                if not items and v:
                    items = [(k, v)]  # not a map: the reader reports it
            else:
                items = [(k, v)]
            for key, value in items:
                if not match(key):
                    continue
                origin = came_from.get(key, inst_time)
                if check and origin != inst_time and not believable(timeline, origin):
                    dropped.append(True)
                    continue
                yield origin, key, value, extra

    found: list[tuple[str, str, str, Mapping[str, str]]] = []
    for inst in reversed(timeline.completed_writes().instants):
        extra = active.commit_metadata(inst).extra_metadata
        dropped: list[bool] = []
        found += of(inst.time, extra, True, dropped)
        if in_order and ORIGINS_KEY in extra and not dropped:
            break
    if found or archived is None:
        return found
    return [v for inst_time, extra in archived() for v in of(inst_time, extra, False, [])]
