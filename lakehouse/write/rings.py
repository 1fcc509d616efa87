"""The hash rings a write on a consistent-hashing table routes by (lakehouse.consistent_hashing):
each partition's ring in force, loaded once per table handle until a replace commit may have
changed it, or created as Hudi's ``loadOrCreateMetadata`` does; and the renewed rings of the
partitions an overwrite replaces."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lakehouse.consistent_hashing import HashingMetadata, ring_committed, ring_for_write, write_rings
from lakehouse.file_group.naming import new_file_id_prefix
from lakehouse.timeline.active import Timeline
from lakehouse.timeline.instant import Action

if TYPE_CHECKING:
    from lakehouse.meta_client import TableMetaClient


def rings_for_write(meta: "TableMetaClient", num_buckets: int, partitions: list[str],
                    timeline: Timeline) -> dict[str, HashingMetadata]:
    """The ring in force of each of ``partitions`` on ``timeline`` (created where a partition
    has none yet). Only a replace commit writes a ring past a partition's first (a clustering's
    resize, an overwrite's renewal: in force once completed, deleted with a rolled-back one), so
    while the replace commits on the timeline are as they were, a ring loaded before is still
    the one in force and is not read again (on object storage: a listing and a read a write)."""
    committed = ring_committed(timeline)
    replaces = tuple((i.time, i.state) for i in timeline.filter(actions=[Action.REPLACE_COMMIT]))
    rings = {}
    for p in partitions:
        known = meta.ring_cache.get(p)
        if known is None or known[0] != replaces:
            known = meta.ring_cache[p] = (replaces, ring_for_write(meta.storage, p, num_buckets, committed))
        rings[p] = known[1]
    return rings


def renew_rings(meta: "TableMetaClient", num_buckets: int, loaded: dict[str, HashingMetadata],
                partitions: list[str], t: str, timeline: Timeline) -> dict[str, HashingMetadata]:
    """Renewed rings of the partitions whose every file group instant ``t`` replaces
    (insert_overwrite, delete_partition): the same buckets over new file groups, written as
    ``<t>.hashing_meta``, in force once ``t`` completes (a rollback deletes them)."""
    committed = ring_committed(timeline)
    renewed = {p: (loaded.get(p) or ring_for_write(meta.storage, p, num_buckets, committed)).renewed(t, new_file_id_prefix)
               for p in partitions}
    write_rings(meta.storage, renewed)
    return renewed
