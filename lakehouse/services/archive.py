"""Archival: keep the active timeline bounded.

When the active timeline holds more than ``hoodie.keep.max.commits`` completed commits, the
oldest instants (every action) are moved to ``.hoodie/archived/`` until
``hoodie.keep.min.commits`` commits remain, as Hudi's archiver does (timeline layout 1): a log
file ``.commits_.archive.<n>_1-0-1`` of Avro data blocks holding HoodieArchivedMetaEntry records.
Archival never passes a pending instant, a savepoint, or the last clean's earliest retained
commit, so time travel and incremental reads inside the retained range keep working; files of
archived commits stay readable because files older than the active timeline count as committed.
"""

from __future__ import annotations

import io
import json
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator

import fastavro

from lakehouse.config import ArchivalConfig
from lakehouse.errors import CorruptFileError
from lakehouse.faults import fault_point
from lakehouse.log.block import BlockType, HeaderKey, encode_block
from lakehouse.log.reader import read_log_blocks
from lakehouse.timeline.active import ActiveTimeline, Timeline
from lakehouse.timeline.avro_files import CleanMetadata, deserialize
from lakehouse.timeline.avro_schemas import AvroKind, parsed_schema, schema
from lakehouse.timeline.instant import Action, Instant, State

if TYPE_CHECKING:
    from lakehouse.meta_client import TableMetaClient

_ARCHIVE_PREFIX = ".commits_.archive."


@dataclass(frozen=True)
class ArchiveResult:
    archived: tuple[str, ...] = ()
    archive_file: str | None = None
    reason: str = ""

    def to_json(self) -> dict:
        return {"action": "archive", "archived": list(self.archived), "file": self.archive_file,
                "reason": self.reason}


def _fill(record_schema: dict, value: dict | None, names: dict[str, dict]) -> dict | None:
    """A JSON document shaped as an Avro record: known fields copied, the rest defaulted."""
    if value is None:
        return None
    out = {}
    for f in record_schema["fields"]:
        v = value.get(f["name"], f.get("default"))
        out[f["name"]] = _fit(f["type"], v, names)
    return out


def _fit(t: Any, v: Any, names: dict[str, dict]) -> Any:
    if isinstance(t, list):
        if v is None:
            return None
        for branch in t:
            if branch != "null":
                return _fit(branch, v, names)
        return None
    if isinstance(t, str) and t in names:
        t = names[t]
    if isinstance(t, dict):
        if t.get("type") == "record":
            names[t["name"]] = t
            return _fill(t, v if isinstance(v, dict) else {}, names)
        if t.get("type") == "array":
            return [_fit(t["items"], x, names) for x in (v or [])]
        if t.get("type") == "map":
            return {k: _fit(t["values"], x, names) for k, x in (v or {}).items()}
        return _fit(t.get("type"), v, names)
    if t in ("long", "int"):
        return int(v) if v is not None else 0
    if t in ("double", "float"):
        return float(v) if v is not None else 0.0
    if t == "boolean":
        return bool(v)
    if t == "string":
        return None if v is None else (v if isinstance(v, str) else json.dumps(v))
    return v


def _named_types(s: Any, names: dict[str, dict]) -> None:
    if isinstance(s, list):
        for x in s:
            _named_types(x, names)
    elif isinstance(s, dict):
        if s.get("type") in ("record", "enum", "fixed") and "name" in s:
            names[s["name"]] = s
            names[f"org.apache.hudi.avro.model.{s['name']}"] = s
        for k in ("fields", "type", "items", "values"):
            if k in s:
                _named_types(s[k], names)


def _entry(meta: "TableMetaClient", inst: Instant) -> dict:
    """The HoodieArchivedMetaEntry of one completed instant."""
    entry_schema = schema(AvroKind.ARCHIVED_META_ENTRY)
    names: dict[str, dict] = {}
    _named_types(entry_schema, names)
    fields = {f["name"]: f for f in entry_schema["fields"]}
    raw = meta.active.read(inst)
    action = inst.action
    rec: dict[str, Any] = {f: None for f in fields}
    rec.update(commitTime=inst.time, actionType=str(action), version=1, actionState="COMPLETED")
    if action in (Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT, Action.COMPACTION):
        doc = json.loads(raw or b"{}")
        key = "hoodieReplaceCommitMetadata" if action is Action.REPLACE_COMMIT else "hoodieCommitMetadata"
        rec[key] = _fit(fields[key]["type"], doc, names)
        if action is Action.COMPACTION:
            rec["actionType"] = "commit"
    elif action is Action.CLEAN:
        rec["hoodieCleanMetadata"] = deserialize(AvroKind.CLEAN_METADATA, raw, meta.active.path(inst))
    elif action is Action.ROLLBACK:
        rec["hoodieRollbackMetadata"] = deserialize(AvroKind.ROLLBACK_METADATA, raw, meta.active.path(inst))
    elif action is Action.SAVEPOINT:
        rec["hoodieSavePointMetadata"] = deserialize(AvroKind.SAVEPOINT_METADATA, raw, meta.active.path(inst))
    return rec


def _encode_entries(entries: list[dict]) -> bytes:
    parsed = parsed_schema(AvroKind.ARCHIVED_META_ENTRY)
    body = io.BytesIO()
    body.write(struct.pack(">ii", 3, len(entries)))
    for e in entries:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, e)
        body.write(struct.pack(">i", buf.tell()))
        body.write(buf.getvalue())
    header = {HeaderKey.SCHEMA: json.dumps(schema(AvroKind.ARCHIVED_META_ENTRY)),
              HeaderKey.INSTANT_TIME: entries[-1]["commitTime"] if entries else ""}
    return encode_block(BlockType.AVRO_DATA, header, body.getvalue())


def archive_files(active: ActiveTimeline) -> list:
    """The archived timeline's files (``FileInfo``), in no particular order."""
    return [i for i in active.storage.list(active.archive_path) if i.name.startswith(_ARCHIVE_PREFIX)]


def read_archived(meta: "TableMetaClient") -> list[dict]:
    """Every archived entry, oldest first (for the CLI and tests)."""
    parsed = parsed_schema(AvroKind.ARCHIVED_META_ENTRY)
    out: list[dict] = []
    files = sorted(archive_files(meta.active),
                   key=lambda i: int(i.name[len(_ARCHIVE_PREFIX):].split("_")[0]))
    for info in files:
        for block in read_log_blocks(meta.storage.read(info.path), meta.storage.uri(info.path)):
            if block.block_type is not BlockType.AVRO_DATA:
                continue
            content = io.BytesIO(block.content)
            _, count = struct.unpack(">ii", content.read(8))
            for _ in range(count):
                (n,) = struct.unpack(">i", content.read(4))
                try:
                    out.append(fastavro.schemaless_reader(io.BytesIO(content.read(n)), parsed, None))
                except Exception as e:  # fastavro raises many types on garbage
                    raise CorruptFileError(meta.storage.uri(info.path), f"bad archived entry: {e!r}") from e
    return sorted(out, key=lambda e: e["commitTime"] or "")


def archived_extras(meta: "TableMetaClient") -> Iterator[tuple[str, dict[str, str]]]:
    """(instant, extra metadata) of every archived write, newest first: where the progress of a
    source or a streaming query is looked for once the active timeline holds none
    (:mod:`lakehouse.timeline.carried`)."""
    for entry in reversed(read_archived(meta)):
        doc = entry.get("hoodieCommitMetadata") or entry.get("hoodieReplaceCommitMetadata")
        if isinstance(doc, dict) and doc.get("extraMetadata"):
            yield entry["commitTime"], {str(k): str(v) for k, v in doc["extraMetadata"].items()}


def _boundary(meta: "TableMetaClient", timeline: Timeline, cfg: ArchivalConfig) -> tuple[str | None, str]:
    """The instant time before which instants may be archived, and why it stops there."""
    commits = timeline.completed_writes().instants
    if len(commits) <= cfg.max_commits:
        return None, f"{len(commits)} of {cfg.max_commits} commits on the active timeline"
    limit, why = commits[len(commits) - cfg.min_commits].time, f"keeping {cfg.min_commits} commits"
    pending = timeline.pending().instants
    if pending and pending[0].time < limit:
        limit, why = pending[0].time, f"pending instant {pending[0].time}"
    savepoints = timeline.completed().filter(actions=[Action.SAVEPOINT]).instants
    if savepoints and savepoints[0].time < limit:
        limit, why = savepoints[0].time, f"savepoint {savepoints[0].time}"
    cleans = timeline.completed().filter(actions=[Action.CLEAN]).instants
    keep = None
    if cleans:
        inst = cleans[-1]
        last_clean = CleanMetadata.from_bytes(meta.active.read(inst), meta.active.path(inst))
        keep = last_clean.earliest_commit_to_retain or inst.time
        if last_clean.earliest_commit_to_retain and keep < limit:
            limit, why = keep, f"the last clean retains from {keep}"
    # A replace commit (a clustering, an insert overwrite) stays until a clean has deleted the
    # file groups it replaced: archived, its list of them would be lost and readers would see
    # old and new groups side by side (Hudi's ClusteringUtils.getOldestInstantToRetainForClustering:
    # from the first replace commit at or after the last clean's earliest retained commit, or
    # the first of all before any clean).
    replaces = timeline.filter(actions=[Action.REPLACE_COMMIT]).instants
    first = next((i for i in replaces if keep is None or i.time >= keep), None)
    if first is not None and first.time < limit:
        limit, why = first.time, (f"replace commit {first.time} stays until a clean deletes the "
                                  "file groups it replaced")
    return limit, why


def archive(meta: "TableMetaClient", config: ArchivalConfig | None = None) -> ArchiveResult:
    cfg = config or ArchivalConfig.from_options(meta.options(None, "archive"))
    if not cfg.services_enabled:
        return ArchiveResult(reason="table services are off (hoodie.table.services.enabled=false)")
    timeline = meta.timeline
    limit, why = _boundary(meta, timeline, cfg)
    if limit is None:
        return ArchiveResult(reason=f"nothing to archive: {why}")
    victims = [i for i in timeline.completed() if i.time < limit]
    if not victims:
        return ArchiveResult(reason=f"nothing to archive before {limit} ({why})")
    existing = archive_files(meta.active)
    version = 1 + max((int(i.name[len(_ARCHIVE_PREFIX):].split("_")[0]) for i in existing), default=0)
    name = f"{meta.active.archive_path}/{_ARCHIVE_PREFIX}{version}_1-0-1"
    meta.storage.create(name, _encode_entries([_entry(meta, i) for i in victims]))
    fault_point("archive.after_write")
    # Completed files go last: an interrupted archival leaves instants that are both archived
    # and active, which readers tolerate, never an instant whose state regressed.
    for inst in victims:
        for state in (State.REQUESTED, State.INFLIGHT):
            meta.storage.delete(meta.active.path(inst.with_state(state)))
            if inst.action is Action.COMMIT and timeline.is_compaction(inst.time):
                meta.storage.delete(meta.active.path(Instant(inst.time, Action.COMPACTION, state)))
        meta.storage.delete(meta.active.path(inst))
    return ArchiveResult(tuple(i.time for i in victims), name, reason=f"stopped at {limit}: {why}")
