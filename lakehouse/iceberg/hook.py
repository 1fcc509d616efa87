"""Iceberg metadata after every completed instant, as a post-commit step.

The instant is durable before this runs, so publishing never fails it: an error is logged and
the next commit (or ``lakehouse iceberg-sync``) catches up, since :func:`sync_iceberg` publishes
everything not yet published. It runs outside the table lock: publishing has its own optimistic
protocol (an atomic create of the next metadata version).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from lakehouse.config import IcebergConfig, merged_options
from lakehouse.faults import InjectedFault, fault_point
from lakehouse.iceberg.errors import IcebergSyncError

if TYPE_CHECKING:
    from lakehouse.table import Table

log = logging.getLogger("lakehouse.iceberg")


def enabled(table: "Table") -> bool:
    return IcebergConfig.from_options(merged_options(table.config.extra, None, "iceberg")).enabled


def after_commit(table: "Table") -> None:
    """Bring the Iceberg metadata up to date; never raises (but for injected faults)."""
    if not enabled(table):
        return
    from lakehouse.iceberg.publish import sync_iceberg
    try:
        fault_point("iceberg.before_publish")
        sync_iceberg(table)
    except InjectedFault:
        raise
    except IcebergSyncError as e:
        log.info("%s: no Iceberg metadata: %s", table.storage.uri(), e.message)
    except Exception:  # noqa: BLE001 - the commit is durable; the next sync catches up
        log.warning("%s: publishing Iceberg metadata failed; the next commit retries",
                    table.storage.uri(), exc_info=True)
