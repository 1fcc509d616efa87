"""The summary of a published snapshot: what the instant changed, in Iceberg's words (its
operation and counts), and which Hudi instant, action and operation it shows."""

from __future__ import annotations

from lakehouse.iceberg.builder import SnapshotStats
from lakehouse.iceberg.metadata import INSTANT_KEY, Snapshot
from lakehouse.iceberg.replay import InstantChanges
from lakehouse.timeline.instant import Instant


def operation(stats: SnapshotStats, changes: InstantChanges) -> str:
    """Iceberg's snapshot operation for what an instant changed in the view."""
    if stats.added_delete_files or stats.removed_delete_files:
        # The snapshot view's row files and position deletes: rows replaced (or only removed).
        return "overwrite" if stats.added_files or stats.deleted_files else "delete"
    if stats.added_files and stats.deleted_files:
        # Clustering rewrites rows without changing them: Iceberg's "replace".
        return "replace" if changes.operation.upper() == "CLUSTER" else "overwrite"
    if stats.added_files:
        return "append"
    if stats.deleted_files:
        return "delete"
    return "replace"  # e.g. a MOR delta commit of log files only: the view did not change


def snapshot_summary(inst: Instant, changes: InstantChanges, stats: SnapshotStats,
                     parent: Snapshot | None) -> dict[str, str]:
    """The summary of the snapshot of ``inst``: Iceberg's counts (the totals carried from
    ``parent``), and the Hudi instant, action and operation it shows."""
    def total(key: str) -> int:
        return int(parent.summary.get(key, "0")) if parent is not None else 0

    return {
        "operation": operation(stats, changes),
        INSTANT_KEY: inst.time,
        "hudi.action": "compaction" if changes.compaction else str(inst.action),
        "hudi.operation": changes.operation,
        "added-data-files": str(stats.added_files),
        "deleted-data-files": str(stats.deleted_files),
        "added-records": str(stats.added_records),
        "deleted-records": str(stats.deleted_records),
        "added-files-size": str(stats.added_size),
        "removed-files-size": str(stats.deleted_size),
        "changed-partition-count": str(stats.changed_partitions),
        "total-data-files": str(total("total-data-files") + stats.added_files - stats.deleted_files),
        "total-records": str(total("total-records") + stats.added_records - stats.deleted_records),
        "total-files-size": str(total("total-files-size") + stats.added_size - stats.deleted_size),
        "added-delete-files": str(stats.added_delete_files),
        "added-position-delete-files": str(stats.added_delete_files),
        "added-position-deletes": str(stats.added_position_deletes),
        "removed-delete-files": str(stats.removed_delete_files),
        "removed-position-delete-files": str(stats.removed_delete_files),
        "removed-position-deletes": str(stats.removed_position_deletes),
        "total-delete-files": str(total("total-delete-files") + stats.added_delete_files
                                  - stats.removed_delete_files),
        "total-position-deletes": str(total("total-position-deletes") + stats.added_position_deletes
                                      - stats.removed_position_deletes),
        "total-equality-deletes": "0",
    }
