"""One Iceberg snapshot's manifests, from its parent's manifests and one instant's file changes.

Manifests are kept per Hudi partition: a manifest's name carries a hash of the partition path,
so a commit reads and rewrites only the manifests of the partitions it touched and carries every
other manifest into the new manifest list as it is. In a touched partition:

- when only new file groups arrived (an insert into fresh file groups, the usual MOR insert), a
  new manifest of ADDED entries joins the partition's manifests (nothing is read);
- otherwise the partition's manifests are read and merged into one: EXISTING entries for files
  that stay (keeping the snapshot and sequence numbers that added them), DELETED entries for
  base files superseded or file groups retired, ADDED entries for the new base files. A
  partition that collected many appended manifests is merged the same way.

A DELETED entry only matters to the snapshot that wrote it; later merges drop it.

The snapshot view of a Merge-On-Read table adds each file group's overlay (row files and
position delete files, :mod:`lakehouse.iceberg.overlay`): a delta commit only adds overlay
files (appended manifests again, a data one and a delete one), and a change that removes some
(a compaction, a retired file group) merges the partition, dropping the files it names.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Callable

from lakehouse.engine import SharedThreads
from lakehouse.file_group.naming import BaseFileName
from lakehouse.errors import IcebergSyncError
from lakehouse.iceberg import memo, overlay
from lakehouse.iceberg.manifest import (ADDED, DELETED, EXISTING, DataFile, Entry, ManifestFile,
                                        read_manifest, read_manifest_list, write_manifest,
                                        write_manifest_list)
from lakehouse.iceberg.partition import PartitionSpec
from lakehouse.iceberg.replay import BaseFileWrite
from lakehouse.field_schema import Schema
from lakehouse.iceberg.store import MetadataStore

# Manifests written at once (durable creates: on a local disk each waits for two fsyncs).
_WRITERS = 8
_ENGINE = SharedThreads("iceberg-manifests", _WRITERS)
# A partition gathering more appended manifests than this gets them merged on its next change.
MAX_MANIFESTS_PER_PARTITION = 8
_MANIFEST_NAME = re.compile(r"^m-([0-9a-f]{16})-s(\d+)-")


@dataclass
class PartitionChange:
    """What one instant does to one Hudi partition's base files (by file id)."""

    adds: dict[str, BaseFileWrite] = field(default_factory=dict)
    removes: set[str] = field(default_factory=set)
    # The partition's files become exactly ``adds`` (a rebuild from a listing).
    replace_all: bool = False
    # The snapshot view's files (lakehouse.iceberg.overlay): added, and removed by URI.
    overlay_adds: list[tuple[int, DataFile]] = field(default_factory=list)
    overlay_removes: set[str] = field(default_factory=set)

    @property
    def only_new_groups(self) -> bool:
        """Nothing leaves the partition: its new entries can go in manifests of their own."""
        return not self.removes and not self.replace_all and not self.overlay_removes \
            and all(w.new_group for w in self.adds.values())


@dataclass
class GroupFiles:
    """One file group's live files in a snapshot: its base file and its overlay."""

    base: tuple[int, DataFile] | None = None
    rows: list[tuple[int, DataFile]] = field(default_factory=list)
    deletes: list[tuple[int, DataFile]] = field(default_factory=list)

    @property
    def overlay(self) -> list[tuple[int, DataFile]]:
        return self.rows + self.deletes

    @property
    def data_files(self) -> list[tuple[int, DataFile]]:
        """The files a position delete may target: the base file, then the row files in order."""
        rows = sorted(self.rows, key=lambda r: r[1].path.rsplit("/", 1)[-1])
        return ([self.base] if self.base else []) + rows


@dataclass(frozen=True)
class SnapshotStats:
    added_files: int = 0
    added_records: int = 0
    added_size: int = 0
    deleted_files: int = 0
    deleted_records: int = 0
    deleted_size: int = 0
    changed_partitions: int = 0
    added_delete_files: int = 0
    added_position_deletes: int = 0
    removed_delete_files: int = 0
    removed_position_deletes: int = 0


def _file_id(uri: str) -> tuple[str, str]:
    name = uri.rsplit("/", 1)[-1]
    parsed = BaseFileName.parse(name)
    if parsed is None:
        raise IcebergSyncError(f"the Iceberg metadata lists {uri}, which is not a Hudi base file",
                               help="only lakehouse publishes this table's Iceberg metadata: "
                                    "delete the metadata folder and publish again")
    return parsed.file_id, parsed.instant_time


class SnapshotWriter:
    """Writes manifests and manifest lists for one sync, remembering what it wrote and read."""

    def __init__(self, store: MetadataStore, specs: dict[int, PartitionSpec], schema: Schema,
                 describe: Callable[[BaseFileWrite], tuple[int, DataFile]]) -> None:
        self.store = store
        self.specs = specs
        self.schema = schema
        self.describe = describe
        self.written: list[str] = []

    # --- reading ---------------------------------------------------------------------------

    def manifests(self, manifest_list: str) -> list[ManifestFile]:
        return memo.METADATA.get_or_load(
            ("list", manifest_list),
            lambda: read_manifest_list(self.store.storage, self.store.relative(manifest_list)))

    def _entries_key(self, m: ManifestFile) -> tuple:
        # Partition values decode by the types the spec takes from the schema.
        spec = self.specs[m.spec_id]
        return ("manifest", m.path, m.spec_id, tuple(str(t) for t in spec.types(self.schema)))

    def entries(self, m: ManifestFile) -> list[Entry]:
        return memo.METADATA.get_or_load(
            self._entries_key(m),
            lambda: read_manifest(self.store.storage, self.store.relative(m.path), m,
                                  spec=self.specs[m.spec_id], schema=self.schema))

    def live_files(self, manifest_list: str) -> set[str]:
        return {e.file.path for m in self.manifests(manifest_list) for e in self.entries(m) if e.is_live}

    def groups(self, manifests: list[ManifestFile], keys: set[str]) -> dict[tuple[str, str], GroupFiles]:
        """The live files of every file group of the partitions ``keys`` (partition_key) names,
        by (partition key, file id)."""
        out: dict[tuple[str, str], GroupFiles] = defaultdict(GroupFiles)
        for m in manifests:
            key = self.key_of(m)
            if key not in keys:
                continue
            for e in self.entries(m):
                if not e.is_live:
                    continue
                name = overlay.parse(e.file.path)
                if name is not None:
                    g = out[name.group]
                    (g.deletes if e.file.is_deletes else g.rows).append((m.spec_id, e.file))
                    continue
                fid, instant = _file_id(e.file.path)
                g = out[(key, fid)]
                if g.base is None or _file_id(g.base[1].path)[1] < instant:
                    g.base = (m.spec_id, e.file)
        return dict(out)

    @staticmethod
    def key_of(m: ManifestFile) -> str:
        match = _MANIFEST_NAME.match(m.path.rsplit("/", 1)[-1])
        if match is None:
            raise IcebergSyncError(f"manifest {m.path} was not written by lakehouse",
                                   help="only lakehouse publishes this table's Iceberg metadata: "
                                        "delete the metadata folder and publish again")
        return match.group(1)

    # --- writing ---------------------------------------------------------------------------

    def _write_manifests(self, jobs: list[tuple[str, list[tuple[int, Entry]]]], snapshot_id: int,
                         sequence_number: int) -> list[ManifestFile]:
        """The manifests of each (partition key, entries), in that order: one per spec and
        content (data and delete files never share one), written at once (each is a durable
        create of its own)."""
        planned: list[tuple[str, int, list[Entry]]] = []
        for key, entries in jobs:
            by_spec: dict[tuple[int, int], list[Entry]] = defaultdict(list)
            for spec_id, e in entries:
                by_spec[(spec_id, e.file.content)].append(e)
            for (spec_id, _), group in sorted(by_spec.items()):
                rel = self.store.new_manifest_path(key, spec_id)
                self.written.append(rel)
                planned.append((rel, spec_id, group))

        def write(job: tuple[str, int, list[Entry]]) -> ManifestFile:
            rel, spec_id, group = job
            return write_manifest(self.store.storage, rel, group, spec=self.specs[spec_id], schema=self.schema,
                                  snapshot_id=snapshot_id, sequence_number=sequence_number)

        out = _ENGINE.map(write, planned)
        for m, (_, _, group) in zip(out, planned):
            # What was written is what a read would give, with inherited numbers filled in.
            memo.METADATA.put(self._entries_key(m), [
                e if e.status != ADDED else Entry(ADDED, snapshot_id, sequence_number, sequence_number, e.file)
                for e in group])
        return out

    def _merge(self, key: str, manifests: list[ManifestFile], change: PartitionChange,
               snapshot_id: int) -> tuple[list[tuple[int, Entry]], list[tuple[int, Entry]], list[tuple[int, DataFile]]]:
        """(kept, deleted, added) entries of a partition after ``change``."""
        live: dict[str, tuple[int, Entry, str]] = {}
        deleted: list[tuple[int, Entry]] = []
        kept_overlay: list[tuple[int, Entry]] = []
        for m in manifests:
            for e in self.entries(m):
                if not e.is_live:
                    continue
                if overlay.parse(e.file.path) is not None:
                    gone = change.replace_all or e.file.path in change.overlay_removes
                    (deleted if gone else kept_overlay).append((m.spec_id, e))
                    continue
                fid, instant = _file_id(e.file.path)
                cur = live.get(fid)
                if cur is None or cur[2] < instant:
                    if cur is not None:  # two live files of one group: only the newer is real
                        deleted.append((cur[0], cur[1]))
                    live[fid] = (m.spec_id, e, instant)
                else:
                    deleted.append((m.spec_id, e))
        added: list[tuple[int, DataFile]] = []
        for fid, w in change.adds.items():
            cur = live.get(fid)
            if cur is not None:
                if cur[1].file.path == self.store.uri(w.path):
                    continue
                if cur[2] > w.instant:  # an older base file than the one published: stale
                    continue
                deleted.append((cur[0], cur[1]))
                del live[fid]
            added.append(self.describe(w))
        removes = set(live) - set(change.adds) if change.replace_all else change.removes
        for fid in removes:
            cur = live.pop(fid, None)
            if cur is not None:
                deleted.append((cur[0], cur[1]))
        kept = [(spec_id, e) for spec_id, e, _ in live.values()] + kept_overlay
        return kept, deleted, added + change.overlay_adds

    def write(self, *, parent_manifests: list[ManifestFile], changes: dict[str, PartitionChange],
              rebuild: bool, snapshot_id: int, parent_id: int | None,
              sequence_number: int) -> tuple[str, list[ManifestFile], SnapshotStats]:
        """Write the snapshot's new manifests and its manifest list; returns the list's URI, the
        manifests it names and what changed. ``changes`` is keyed by :func:`partition_key`; with
        ``rebuild`` a partition missing from it loses all its files."""
        by_key: dict[str, list[ManifestFile]] = defaultdict(list)
        for m in parent_manifests:
            if m.live_files:  # manifests of only DELETED entries served their snapshot
                by_key[self.key_of(m)].append(m)
        touched = set(changes) | (set(by_key) if rebuild else set())
        out = [m for k, ms in by_key.items() if k not in touched for m in ms]
        stats = {f: 0 for f in SnapshotStats.__dataclass_fields__}
        jobs: list[tuple[str, list[tuple[int, Entry]]]] = []
        for key in sorted(touched):
            change = changes.get(key) or PartitionChange(replace_all=True)
            current = by_key.get(key, [])
            if change.only_new_groups and len(current) < MAX_MANIFESTS_PER_PARTITION:
                kept, deleted = [], []
                added = [self.describe(w) for w in change.adds.values()] + change.overlay_adds
                out.extend(current)
            else:
                kept, deleted, added = self._merge(key, current, change, snapshot_id)
                if not added and not deleted:
                    out.extend(current)
            if not added and not deleted:
                continue
            entries = ([(s, Entry(EXISTING, e.snapshot_id, e.sequence_number, e.file_sequence_number, e.file))
                        for s, e in kept]
                       + [(s, Entry(DELETED, snapshot_id, e.sequence_number, e.file_sequence_number, e.file))
                          for s, e in deleted]
                       + [(s, Entry(ADDED, snapshot_id, None, None, f)) for s, f in added])
            jobs.append((key, entries))
            stats["changed_partitions"] += 1
            data_in = [f for _, f in added if not f.is_deletes]
            data_out = [e.file for _, e in deleted if not e.file.is_deletes]
            stats["added_files"] += len(data_in)
            stats["added_records"] += sum(f.record_count for f in data_in)
            stats["added_size"] += sum(f.file_size for f in data_in)
            stats["deleted_files"] += len(data_out)
            stats["deleted_records"] += sum(f.record_count for f in data_out)
            stats["deleted_size"] += sum(f.file_size for f in data_out)
            deletes_in = [f for _, f in added if f.is_deletes]
            deletes_out = [e.file for _, e in deleted if e.file.is_deletes]
            stats["added_delete_files"] += len(deletes_in)
            stats["added_position_deletes"] += sum(f.record_count for f in deletes_in)
            stats["removed_delete_files"] += len(deletes_out)
            stats["removed_position_deletes"] += sum(f.record_count for f in deletes_out)
        out.extend(self._write_manifests(jobs, snapshot_id, sequence_number))
        rel = self.store.new_manifest_list_path(snapshot_id)
        self.written.append(rel)
        write_manifest_list(self.store.storage, rel, out, snapshot_id=snapshot_id, parent_id=parent_id,
                            sequence_number=sequence_number)
        uri = self.store.uri(rel)
        memo.METADATA.put(("list", uri), list(out))
        return uri, out, SnapshotStats(**stats)
