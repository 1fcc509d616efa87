"""Iceberg metadata after every completed instant: the table's meta sync tool (lakehouse.meta_sync).

The instant is durable before this runs, so publishing never fails it: an error is logged and
the next commit (or ``lakehouse iceberg-sync``) catches up, since :func:`sync_iceberg` publishes
everything not yet published. It runs outside the table lock (publishing has its own optimistic
protocol: an atomic create of the next metadata version), by default in the table's background
publisher (lakehouse.iceberg.background).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Sequence

from lakehouse.errors import CorruptFileError
from lakehouse.faults import InjectedFault, fault_point
from lakehouse.errors import IcebergSyncError
from lakehouse.iceberg import background, catalog, publish
from lakehouse.iceberg.store import MetadataStore
from lakehouse.timeline.instant import Instant

if TYPE_CHECKING:
    from lakehouse.field_schema import Schema
    from lakehouse.timeline.active import Timeline
    from lakehouse.meta_client import TableMetaClient

log = logging.getLogger("lakehouse.iceberg")


def after_commit(meta: "TableMetaClient", instants: Sequence[Instant] = ()) -> None:
    """Bring the Iceberg metadata up to date with every instant completed so far (so
    ``instants``, the ones just completed, need no separate treatment), in the table's
    background publisher unless ``hoodie.meta.sync.iceberg.async`` is off; never raises (but
    for injected faults)."""
    config = publish.iceberg_config(meta)
    if not config.enabled:
        return
    fault_point("iceberg.before_publish")
    # The committer's timeline, read under the lock, saves listing .hoodie again.
    timeline = meta.timeline_after(instants) if instants else None
    if config.asynchronous:
        # The publisher works with a meta client of its own: the writer goes on with this one.
        background.submit(meta.storage.uri(), lambda: publish_now(meta.fresh(), timeline))
        return
    publish_now(meta, timeline)


def publish_now(meta: "TableMetaClient", timeline: "Timeline | None" = None) -> None:
    """Publish everything unpublished (as of ``timeline``, where given: sync_iceberg) and move
    the catalog pointer; never raises (but for injected faults)."""
    config = publish.iceberg_config(meta)
    try:
        result = publish.sync_iceberg(meta, timeline=timeline)
    except InjectedFault:
        raise
    except IcebergSyncError as e:
        log.info("%s: no Iceberg metadata: %s", meta.storage.uri(), e.message)
        return
    except Exception:  # noqa: BLE001 - the commit is durable; the next sync catches up
        log.warning("%s: publishing Iceberg metadata failed; the next commit retries",
                    meta.storage.uri(), exc_info=True)
        return
    if result.metadata_location is None:
        return
    try:
        entry = catalog.catalog_entry(config, meta.config.name, meta.config.database_name)
        if entry is not None:
            catalog.register(entry, meta.storage.uri(), result.metadata_location)
    except Exception:  # noqa: BLE001 - the commit is durable; the next publish moves the pointer
        log.warning("%s: registering the table in the Iceberg catalog failed; the next commit "
                    "retries", meta.storage.uri(), exc_info=True)


class IcebergSync:
    """The Iceberg publisher as a meta sync tool (lakehouse.meta_sync.ICEBERG names it)."""

    def after_commit(self, meta: "TableMetaClient", instants: Sequence[Instant]) -> None:
        after_commit(meta, instants)

    def published_schema(self, meta: "TableMetaClient") -> "tuple[Schema, int] | None":
        """The current schema of the published metadata and its last column id."""
        try:
            md = MetadataStore(meta.storage).load()[1]
        except CorruptFileError:
            return None  # unreadable metadata gets published afresh: numbering starts over too
        return (md.schema(), md.last_column_id) if md is not None else None
