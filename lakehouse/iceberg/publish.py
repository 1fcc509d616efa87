"""Bring a table's Iceberg metadata up to date with its Hudi timeline: :func:`sync_iceberg`.

Each completed commit, delta commit, compaction or replace commit becomes one Iceberg snapshot of
the table as of that instant, published in timeline order; the snapshot summary names the
instant (``hudi.instant``). A snapshot shows the table's base files (the read-optimized view;
for a Copy-On-Write table the whole table) and, for a Merge-On-Read table published with the
snapshot view, the rows of its logs too (:mod:`lakehouse.iceberg.snapshot_view`). One call
publishes everything new as one metadata version:

- snapshots of instants that were rolled back are removed (with every snapshot after them, whose
  content included the rolled-back files; instants among those that are still completed are
  published again on top of what remains);
- after a clean, rollback or restore (anything that deletes data files), every snapshot is
  checked against a listing of the table and the ones referring to deleted files are expired;
  instants whose snapshots were expired (or that could not be published because their files were
  already gone) are remembered in ``lakehouse.iceberg.retired-instants`` so they are never
  published again;
- otherwise a commit's work is proportional to what it changed: one instant's commit metadata
  and the manifests of the partitions it touched (see :mod:`lakehouse.iceberg.builder`). Only
  the first publication, and one after archival took instants this publisher never saw, list
  the table to find the files of archived instants (:mod:`lakehouse.iceberg.replay`).

Snapshots are timestamped with their instant time (Hudi's instants are UTC milliseconds), so an
Iceberg "as of timestamp" read matches a Hudi "as of instant" read. An instant that completes
after later instants were published (a compaction finishing late) is published last: its
snapshot is the state once it completed.
"""

from __future__ import annotations

import logging
import random
import secrets
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lakehouse.config import IcebergConfig, IcebergView, TableConfig
from lakehouse.faults import fault_point
from lakehouse.errors import CorruptFileError, FileAlreadyExistsError, InstantNotFoundError
from lakehouse import layout
from lakehouse.iceberg import background, overlay
from lakehouse.iceberg.builder import PartitionChange, SnapshotWriter
from lakehouse.iceberg.snapshot_view import SnapshotView
from lakehouse.iceberg.store import partition_key
from lakehouse.errors import IcebergSyncError
from lakehouse.iceberg.manifest import DataFile
from lakehouse.iceberg.identifier import identified
from lakehouse.iceberg.metrics import from_footer, name_ids
from lakehouse.iceberg.metadata import LogEntry, Snapshot, TableMetadata
from lakehouse.iceberg.summary import snapshot_summary
from lakehouse.iceberg.partition import PartitionMapper, PartitionSpec, choose_spec
from lakehouse.iceberg.replay import (BaseFileWrite, InstantChanges, archived_base_files,
                                      existing_data_files, instant_changes, read_footer,
                                      removal_fingerprint, removal_names, removed_scope, rolled_back)
from lakehouse import field_ids
from lakehouse.field_schema import Schema, arrow_to_iceberg, check_evolution, name_mapping
from lakehouse.iceberg.store import MetadataStore, metadata_file
from lakehouse.meta_client import meta_client_of
from lakehouse.timeline.active import Timeline
from lakehouse.timeline.instant import Instant
from lakehouse.timeline.instant_time import parse_instant_time

if TYPE_CHECKING:
    from lakehouse.meta_client import TableMetaClient

VIEW_PROPERTY = "lakehouse.iceberg.view"
RETIRED_PROPERTY = "lakehouse.iceberg.retired-instants"
CHECKED_PROPERTY = "lakehouse.iceberg.removals-checked"
# The removals (cleans, rollbacks, restores) checked: the next check lists only the partitions
# newer ones deleted files in.
SEEN_PROPERTY = "lakehouse.iceberg.removals-seen"
NAME_MAPPING_PROPERTY = "schema.name-mapping.default"
MAX_ATTEMPTS = 25
# Iceberg's default for write.metadata.previous-versions-max.
METADATA_LOG_MAX = 100


log = logging.getLogger("lakehouse.iceberg")

@dataclass(frozen=True)
class SyncResult:
    metadata_location: str | None  # URI of the current metadata file (None: nothing published yet)
    versions_written: tuple[int, ...] = ()
    published: tuple[tuple[str, int], ...] = ()  # (instant time, snapshot id), in publishing order
    rolled_back: tuple[str, ...] = ()  # instants whose snapshots went because they were rolled back
    expired: tuple[str, ...] = ()  # instants whose snapshots went because a clean deleted files
    skipped: tuple[str, ...] = ()  # instants not published: their files were already deleted
    current_instant: str | None = None

    @property
    def snapshot_ids(self) -> dict[str, int]:
        return dict(self.published)


def _check_supported(config: TableConfig) -> None:
    problems = []
    fmt = str(config.extra.get("hoodie.table.base.file.format", "PARQUET")).upper()
    if fmt != "PARQUET":
        problems.append(f"its base files are {fmt}, not PARQUET")
    if not config.populate_meta_fields:
        problems.append("it does not store the _hoodie_* meta columns")
    if config.drop_partition_columns:
        problems.append("its base files leave out the partition columns")
    if config.extra.get("hoodie.bootstrap.base.path"):
        problems.append("it is a bootstrapped table (its data lives in another table's files)")
    if config.version not in (5, 6):
        problems.append(f"it has table version {config.version}")
    if problems:
        raise IcebergSyncError(f"table {config.name} cannot be published as Iceberg: " + "; ".join(problems),
                               help="Iceberg metadata is published for version 6 tables with parquet "
                                    "base files and meta columns, as lakehouse writes them")


def _instant_ms(t: str) -> int:
    return int(parse_instant_time(t).timestamp() * 1000)


class _Attempt:
    """One try at the next metadata version: reads the state, writes manifests, builds metadata."""

    def __init__(self, meta: "TableMetaClient", store: MetadataStore, version: int, metadata: TableMetadata | None,
                 timeline: Timeline) -> None:
        self.meta = meta
        self.config = meta.config
        self.storage = meta.storage
        self.store = store
        self.version = version
        self.md = metadata
        self.timeline = timeline
        self.schemas: list[Schema] = list(metadata.schemas) if metadata else []
        self.last_column_id = metadata.last_column_id if metadata else 0
        self.schema_id: int | None = metadata.current_schema_id if metadata else None
        self.specs: dict[int, PartitionSpec] = {s.spec_id: s for s in metadata.specs} if metadata else {}
        self.default_spec_id = metadata.default_spec_id if metadata else 0
        self.last_seq = metadata.last_sequence_number if metadata else 0
        self.mapper: PartitionMapper | None = None
        self.missing: set[str] = set()
        # Instants whose snapshot view could not be made: a log or base file of theirs was
        # cleaned (its slice compacted or replaced) before they were published.
        self.unpublishable: list[str] = []
        self._described: dict[str, tuple[int, DataFile]] = {}
        self.writer = SnapshotWriter(store, self.specs, metadata.schema() if metadata else None,
                                     self._describe)
        self.known_ids = field_ids.known(
            meta, timeline, published=lambda: (metadata.schema(), metadata.last_column_id) if metadata else None)
        self.view = _view(meta)
        self.snapshot_view = SnapshotView(meta, timeline, store, self.writer, self._describe, self._partition_of) \
            if self.view is IcebergView.SNAPSHOT else None
        self.orphans: list[str] = []  # overlay files only removed snapshots held: deleted once published
        self.view_published: str | None = self.view.value  # what the metadata's snapshots show

    @property
    def written(self) -> list[str]:
        return self.writer.written

    # --- schemas, specs, files -------------------------------------------------------------

    def _use_schema_as_of(self, t: str) -> Schema:
        arrow = self.meta.schema(t, self.timeline)
        latest = next((s for s in self.schemas if s.schema_id == self.schema_id), None)
        next_id = max((s.schema_id for s in self.schemas), default=-1) + 1
        known = self.known_ids
        floor = max(self.last_column_id, known.last_column_id)
        stored = field_ids.stored_as_of(self.meta, self.timeline, t)
        if stored is not None:
            # The writer numbered the columns (its files carry the ids): its numbering is the
            # schema's, checked against what was published.
            candidate, last = arrow_to_iceberg(arrow, schema_id=next_id, previous=stored.ids.schema,
                                               last_column_id=max(floor, stored.ids.last_column_id),
                                               known=known.ids, check_types=False)
            check_evolution(latest, candidate, f"instant {stored.instant}")
        else:
            # Written before columns were numbered (or by another Hudi writer): numbered here,
            # by the ids the timeline knows where the published schema lacks the column.
            candidate, last = arrow_to_iceberg(arrow, schema_id=next_id, previous=latest,
                                               last_column_id=floor, known=known.ids)
        candidate = identified(candidate, self.config)
        schema = next((s for s in self.schemas if s.same_columns(candidate)), None)
        if schema is None:
            schema = candidate
            self.schemas.append(schema)
            self.last_column_id = last
        if not self.specs:
            self.specs[0] = choose_spec(self.config, schema, 0)
        if schema.schema_id != self.schema_id or self.mapper is None:
            self.mapper = self._mapper(schema, arrow)
        self.schema_id = schema.schema_id
        self.writer.schema = schema
        return schema

    def _mapper(self, schema: Schema, arrow: pa.Schema) -> PartitionMapper:
        try:
            return PartitionMapper(self.config, self.specs[self.default_spec_id], schema, arrow)
        except ValueError as e:
            raise IcebergSyncError(f"the partition spec no longer fits the table schema ({e})",
                                   help="a partition column left the schema: delete the Iceberg "
                                        "metadata folder to publish the table afresh") from None

    def _unpartitioned_spec(self) -> PartitionSpec:
        for s in self.specs.values():
            if s.is_unpartitioned:
                return s
        spec = PartitionSpec(max(self.specs) + 1)
        self.specs[spec.spec_id] = spec
        return spec

    def _describe(self, w: BaseFileWrite) -> tuple[int, DataFile]:
        if w.path in self._described:
            return self._described[w.path]
        footer = read_footer(self.storage, w.path)
        metrics = None
        if footer is None:
            # Gone already (cleaned before it was published): described from the write stats;
            # the snapshots holding it are found unreadable and left out.
            self.missing.add(w.path)
            parquet, size, rows = None, w.size, w.records
        else:
            parquet, size = footer
            rows = parquet.num_rows
            metrics = from_footer(parquet, self.writer.schema, name_ids(self.schemas))
        spec_id, values = self._partition_of(w.partition, parquet)
        out = (spec_id, DataFile(self.storage.uri(w.path), values, rows, size, metrics))
        self._described[w.path] = out
        return out

    def _partition_of(self, partition: str, parquet) -> tuple[int, tuple]:
        """(spec id, partition tuple) of a file of ``partition`` (its footer, or None)."""
        values = self.mapper.values(partition, parquet)
        if values is None:
            return self._unpartitioned_spec().spec_id, ()
        return self.default_spec_id, values

    # --- changes ---------------------------------------------------------------------------

    @staticmethod
    def _patch(changes: InstantChanges) -> dict[str, PartitionChange]:
        out: dict[str, PartitionChange] = defaultdict(PartitionChange)
        for w in changes.writes:
            adds = out[partition_key(w.partition)].adds
            if w.file_id not in adds or adds[w.file_id].instant < w.instant:
                adds[w.file_id] = w
        for partition, fid in changes.replaced:
            out[partition_key(partition)].removes.add(fid)
        return dict(out)

    def _rebuild(self, changes: InstantChanges, published: set[str]) -> dict[str, PartitionChange]:
        """Every partition's files after ``changes``, from a listing of the files older than the
        active timeline and a replay of the published instants on it."""
        state: dict[tuple[str, str], BaseFileWrite] = {}

        def apply(c: InstantChanges) -> None:
            for w in c.writes:
                cur = state.get((w.partition, w.file_id))
                if cur is None or cur.instant <= w.instant:
                    state[(w.partition, w.file_id)] = w
            for key in c.replaced:
                state.pop(key, None)

        for w in archived_base_files(self.storage, self.timeline):
            state[(w.partition, w.file_id)] = w
        for inst in self.timeline.completed_writes():
            if inst.time in published:
                apply(instant_changes(self.meta.active, self.timeline, inst))
        apply(changes)
        out: dict[str, PartitionChange] = defaultdict(lambda: PartitionChange(replace_all=True))
        for (partition, fid), w in state.items():
            out[partition_key(partition)].adds[fid] = w
        return dict(out)

    # --- the attempt -----------------------------------------------------------------------

    def _chain(self) -> tuple[list[Snapshot], list[str]]:
        """The published snapshots in order, without rolled-back instants and all after them;
        and the rolled-back instants."""
        chain = sorted(self.md.snapshots, key=lambda s: s.sequence_number) if self.md else []
        for s in chain:
            if s.instant is None:
                raise IcebergSyncError(f"snapshot {s.snapshot_id} names no Hudi instant: it was not "
                                       "published by lakehouse",
                                       help="only lakehouse may write this table's Iceberg metadata: "
                                            "delete the metadata folder to publish the table afresh")
        gone = rolled_back(self.meta.active, self.timeline, [s.instant for s in chain])
        if not gone:
            return chain, []
        k = next(i for i, s in enumerate(chain) if s.instant in gone)
        return chain[:k], [s.instant for s in chain[k:] if s.instant in gone]

    def _publish(self, chain: list[Snapshot], candidates: list[Instant], rebuild: bool) -> list[Snapshot]:
        """Write a snapshot for each candidate on top of ``chain`` (extended in place)."""
        published = {s.instant for s in chain}
        taken = {s.snapshot_id for s in (self.md.snapshots if self.md else ())}
        parent = chain[-1] if chain else None
        parent_manifests = self.writer.manifests(parent.manifest_list) if parent else []
        newest = max(published, default="")
        last_ts = max((e.timestamp_ms for e in self.md.snapshot_log), default=0) if self.md else 0
        new: list[Snapshot] = []
        for inst in candidates:
            background.pause()
            newest = max(newest, inst.time)
            schema = self._use_schema_as_of(newest)
            changes = instant_changes(self.meta.active, self.timeline, inst)
            parts = self._rebuild(changes, published) if rebuild else self._patch(changes)
            if self.snapshot_view is not None:
                written = len(self.writer.written)
                try:
                    self.snapshot_view.apply(inst, changes, parts, parent_manifests, schema,
                                             name_ids(self.schemas), published, rebuild)
                except FileNotFoundError:
                    if inst is candidates[-1]:
                        raise  # nothing later explains it: the timeline moved (sync_iceberg retries)
                    # A file of this instant is gone: a later instant compacted or replaced its
                    # slice and a clean removed it. The instant is never published (as a snapshot
                    # whose base files were cleaned is not); the next one is made from a listing,
                    # with this instant's surviving files in it.
                    self.store.discard(self.writer.written[written:])
                    del self.writer.written[written:]
                    self.unpublishable.append(inst.time)
                    published.add(inst.time)
                    rebuild = True
                    continue
            sid = 0
            while sid == 0 or sid in taken:
                sid = secrets.randbits(63)
            taken.add(sid)
            self.last_seq += 1
            background.pause()
            uri, manifests, stats = self.writer.write(
                parent_manifests=parent_manifests, changes=parts, rebuild=rebuild, snapshot_id=sid,
                parent_id=parent.snapshot_id if parent else None, sequence_number=self.last_seq)
            # Snapshot times follow instant times, never going back (Iceberg keeps its log in order).
            last_ts = max(last_ts, _instant_ms(inst.time), parent.timestamp_ms if parent else 0)
            snap = Snapshot(sid, parent.snapshot_id if parent else None, self.last_seq, last_ts, uri,
                            schema.schema_id, snapshot_summary(inst, changes, stats, parent))
            chain.append(snap)
            new.append(snap)
            published.add(inst.time)
            parent, parent_manifests, rebuild = snap, manifests, False
        return new

    def _unreadable(self, chain: list[Snapshot], scope: set[str] | None) -> set[int]:
        """Snapshots referring to data files that are gone, by one listing of the table (of the
        partitions in ``scope`` only, where removals since the last check deleted files; None:
        the whole table)."""
        existing = {self.storage.uri(p) for p in existing_data_files(
            self.storage, None if scope is None else sorted(scope))}
        existing |= {self.storage.uri(i.path) for i in self.storage.list(layout.ICEBERG_DATA, recursive=True)}
        base = self.storage.uri().rstrip("/") + "/"
        overlays = base + layout.ICEBERG_DATA + "/"

        def checked(uri: str) -> bool:
            return scope is None or uri.startswith(overlays) or uri[len(base):].rpartition("/")[0] in scope
        out = set()
        for s in chain:
            lost = {f for f in self.writer.live_files(s.manifest_list) if checked(f)} - existing
            if not lost:
                continue
            if s is chain[-1]:
                raise IcebergSyncError(
                    f"the read-optimized view as of {s.instant} refers to {len(lost)} file(s) that "
                    f"no longer exist, e.g. {sorted(lost)[0]}",
                    help="data files were deleted outside lakehouse's clean and rollback; restore "
                         "them, or delete the Iceberg metadata folder to publish afresh")
            out.add(s.snapshot_id)
        return out

    def prepare(self) -> tuple[TableMetadata | None, SyncResult]:
        md, timeline = self.md, self.timeline
        chain, rolled = self._chain()
        first_time = timeline.first.time if timeline.first else None
        retired = set(filter(None, (md.properties.get(RETIRED_PROPERTY, "") if md else "").split(",")))
        # Older than the active timeline: never a candidate again, no need to remember.
        retired = {t for t in retired if first_time is None or t >= first_time}
        published = {s.instant for s in chain}
        candidates = [i for i in timeline.completed_writes() if i.time not in published | retired]
        if md is None and not candidates:
            return None, SyncResult(None)
        fingerprint = removal_fingerprint(timeline)
        verify = md is None or md.properties.get(CHECKED_PROPERTY) != fingerprint
        seen = md.properties.get(SEEN_PROPERTY) if md else None
        scope = None if seen is None or self.missing else removed_scope(
            self.meta.active, timeline, set(filter(None, seen.split(","))))
        old_ids = {s.snapshot_id for s in chain}
        # Without a published parent, or when archival may have taken instants this publisher
        # never saw, the state comes from a listing instead of from commit metadata alone.
        rebuild = not chain or (first_time is not None and chain[-1].instant < first_time)
        old_view = md.properties.get(VIEW_PROPERTY) if md else None
        if chain and old_view != self.view.value:
            # Switched views (or published before the snapshot view): from the next snapshot
            # on, made from a listing, every file group's overlay made afresh (or dropped).
            rebuild = rebuild or bool(candidates)
            if not candidates:
                self.view_published = old_view
        verify = verify or (rebuild and bool(candidates))
        new = self._publish(chain, candidates, rebuild)

        expired: list[str] = []
        skipped: list[str] = []
        if (verify or self.missing) and chain:
            unreadable = self._unreadable(chain, None if self.missing else scope)
            for s in chain:
                if s.snapshot_id in unreadable:
                    (expired if s.snapshot_id in old_ids else skipped).append(s.instant)
            chain = [s for s in chain if s.snapshot_id not in unreadable]
        skipped.extend(self.unpublishable)
        kept_new = [s for s in new if s in chain]
        if not (kept_new or rolled or expired or skipped or verify):
            return None, self._result(md, self.version)
        if rolled or expired or skipped:
            self.orphans = self._orphans(chain)
        retired |= set(expired) | set(skipped)
        new_md = self._metadata(chain, kept_new, retired, fingerprint)
        current = chain[-1] if chain else None
        result = SyncResult(self.store.uri(metadata_file(self.version + 1)), (self.version + 1,),
                            tuple((s.instant, s.snapshot_id) for s in kept_new), tuple(rolled),
                            tuple(expired), tuple(skipped), current.instant if current else None)
        return new_md, result

    def _orphans(self, chain: list[Snapshot]) -> list[str]:
        """Overlay files that only snapshots leaving the metadata hold (rolled back, expired,
        never kept): deleted once the metadata without them is published."""
        kept_ids = {s.snapshot_id for s in chain}
        gone = [s for s in (self.md.snapshots if self.md else ()) if s.snapshot_id not in kept_ids]
        held: set[str] = set()
        for s in chain:
            held |= self.writer.live_files(s.manifest_list)
        out: set[str] = set()
        for s in gone:
            try:
                files = self.writer.live_files(s.manifest_list)
            except CorruptFileError:
                continue  # its manifests are gone already: nothing of it to find
            out |= {f for f in files - held if overlay.parse(f) is not None}
        for rel in self.writer.written:  # written for snapshots this attempt did not keep
            if overlay.parse(rel) is not None and self.storage.uri(rel) not in held:
                out.add(self.storage.uri(rel))
        return sorted(self.store.relative(f) for f in out)

    def _metadata(self, chain: list[Snapshot], kept_new: list[Snapshot], retired: set[str],
                  fingerprint: str) -> TableMetadata:
        md = self.md
        now = int(time.time() * 1000)
        current = chain[-1] if chain else None
        ids = {s.snapshot_id for s in chain}
        log = [e for e in (md.snapshot_log if md else ()) if e.value in ids]
        log += [LogEntry(s.timestamp_ms, s.snapshot_id) for s in kept_new]
        prev_current = md.current_snapshot_id if md else None
        if current is not None and not kept_new and current.snapshot_id != prev_current:
            # Back to an earlier snapshot (a rollback): it is current again from now on.
            log.append(LogEntry(max([now, *(e.timestamp_ms for e in log)]), current.snapshot_id))
        mlog = list(md.metadata_log) if md else []
        if md is not None:
            mlog.append(LogEntry(md.last_updated_ms, self.store.uri(metadata_file(self.version))))
        props = dict(md.properties) if md else {}
        props[VIEW_PROPERTY] = self.view_published
        if self.view_published is None:
            del props[VIEW_PROPERTY]
        props[NAME_MAPPING_PROPERTY] = name_mapping(self.schemas)
        props[CHECKED_PROPERTY] = fingerprint
        props[SEEN_PROPERTY] = ",".join(removal_names(self.timeline))
        props[RETIRED_PROPERTY] = ",".join(sorted(retired))
        if not retired:
            del props[RETIRED_PROPERTY]
        return TableMetadata(
            table_uuid=md.table_uuid if md else str(uuid.uuid4()),
            location=self.storage.uri(),
            last_sequence_number=self.last_seq,
            last_updated_ms=max([now, *(e.timestamp_ms for e in log), md.last_updated_ms if md else 0]),
            last_column_id=self.last_column_id,
            schemas=tuple(self.schemas),
            # The current schema is the current snapshot's: after a rollback, the schema as of
            # the instant now current, as lakehouse reads it.
            current_schema_id=current.schema_id if current else (self.schema_id or 0),
            specs=tuple(sorted(self.specs.values(), key=lambda s: s.spec_id)),
            default_spec_id=self.default_spec_id,
            properties=props,
            current_snapshot_id=current.snapshot_id if current else None,
            snapshots=tuple(chain),
            snapshot_log=tuple(log),
            metadata_log=tuple(mlog[-METADATA_LOG_MAX:]))

    def _result(self, md: TableMetadata | None, version: int) -> SyncResult:
        current = md.current_snapshot if md else None
        return SyncResult(self.store.uri(metadata_file(version)) if version else None,
                          current_instant=current.instant if current else None)


def iceberg_config(meta: "TableMetaClient") -> IcebergConfig:
    """The table's Iceberg publishing options (lakehouse.config.IcebergConfig)."""
    return IcebergConfig.from_options(meta.options(None, "iceberg"))


def _view(meta: "TableMetaClient") -> IcebergView:
    """What the metadata shows: a Copy-On-Write table's base files are its snapshot."""
    return iceberg_config(meta).view if meta.config.is_mor else IcebergView.SNAPSHOT


def _moved(metadata: TableMetadata, meta: "TableMetaClient") -> bool:
    return metadata.location.rstrip("/") != meta.storage.uri().rstrip("/")


def _knows_published(timeline: Timeline | None, metadata: TableMetadata | None) -> bool:
    """Whether ``timeline`` has the newest instant ``metadata`` published completed: else a
    publish as of it would take the newer instants for rolled back."""
    if timeline is None or metadata is None or not metadata.snapshots:
        return timeline is not None
    newest = max(metadata.snapshots, key=lambda s: s.sequence_number).instant
    return newest is not None and timeline.is_completed(newest)


def sync_iceberg(meta: "TableMetaClient | Any", *, timeline: Timeline | None = None) -> SyncResult:
    """Publish Iceberg metadata for every completed instant of ``meta`` (a meta client, or a
    table over one) not yet published, once this process's background publisher of the table
    (lakehouse.iceberg.background) is done. ``timeline``: a committer's, read under the lock
    (TableMetaClient.timeline_after), published as of instead of listing ``.hoodie``, unless the
    metadata already shows an instant it lacks (then it is older than what others published)."""
    meta = meta_client_of(meta)
    _check_supported(meta.config)
    background.wait(meta.storage.uri())
    store = MetadataStore(meta.storage)
    for attempt in range(MAX_ATTEMPTS):
        version, metadata = store.load(remembered=attempt == 0)
        if metadata is not None and _moved(metadata, meta):
            # The table was copied or moved after publishing: its metadata still names the
            # files at the old place, so readers would get the original's rows (or missing
            # files). Publish the whole history afresh for this location, as a new version.
            log.info("%s: the Iceberg metadata names %s (the table was copied or moved): "
                     "publishing it afresh", meta.storage.uri(), metadata.location)
            metadata = None
        work = None
        try:
            given = timeline if attempt == 0 and _knows_published(timeline, metadata) else None
            work = _Attempt(meta, store, version, metadata, given or meta.active.load())
            new_md, result = work.prepare()
        except (InstantNotFoundError, FileNotFoundError):
            # The timeline moved under this attempt (a rollback, restore, clean or archival of
            # another writer removed an instant or a file it was reading): start over from it.
            if work is not None:
                store.discard(work.written)
            if attempt + 1 == MAX_ATTEMPTS:
                raise
            time.sleep(random.uniform(0, 0.01 * (attempt + 1)))
            continue
        except BaseException:
            if work is not None:
                store.discard(work.written)
            raise
        if new_md is None:
            return result
        try:
            fault_point("iceberg.mid_publish")
            store.publish(version + 1, new_md)
        except FileAlreadyExistsError:
            # Another publisher took this version: start over from its state, which may well
            # hold our instants already.
            store.discard(work.written)
            time.sleep(random.uniform(0, 0.01 * (attempt + 1)))
            continue
        store.discard(work.orphans)
        return result
    raise IcebergSyncError(f"lost the race for the next Iceberg metadata version {MAX_ATTEMPTS} times",
                           help="other publishers keep committing: retry later")
