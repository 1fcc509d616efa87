"""Iceberg metadata after every completed instant, as a post-commit step.

The instant is durable before this runs, so publishing never fails it: an error is logged and
the next commit (or ``lakehouse iceberg-sync``) catches up, since :func:`sync_iceberg` publishes
everything not yet published. It runs outside the table lock: publishing has its own optimistic
protocol (an atomic create of the next metadata version).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Sequence

from lakehouse.config import IcebergConfig
from lakehouse.faults import InjectedFault, fault_point
from lakehouse.iceberg.errors import IcebergSyncError
from lakehouse.iceberg import publish
from lakehouse.timeline.instant import Instant

if TYPE_CHECKING:
    from lakehouse.meta_client import TableMetaClient

log = logging.getLogger("lakehouse.iceberg")


def enabled(meta: "TableMetaClient") -> bool:
    return IcebergConfig.from_options(meta.options(None, "iceberg")).enabled


def after_commit(meta: "TableMetaClient", instants: Sequence[Instant] = ()) -> None:
    """Bring the Iceberg metadata up to date with every instant completed so far (so
    ``instants``, the ones just completed, need no separate treatment); never raises (but for
    injected faults). A post-commit hook of lakehouse.commit."""
    if not enabled(meta):
        return
    try:
        fault_point("iceberg.before_publish")
        publish.sync_iceberg(meta)
    except InjectedFault:
        raise
    except IcebergSyncError as e:
        log.info("%s: no Iceberg metadata: %s", meta.storage.uri(), e.message)
    except Exception:  # noqa: BLE001 - the commit is durable; the next sync catches up
        log.warning("%s: publishing Iceberg metadata failed; the next commit retries",
                    meta.storage.uri(), exc_info=True)
