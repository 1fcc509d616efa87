"""The one error the Iceberg publisher adds to lakehouse's hierarchy."""

from __future__ import annotations

from lakehouse.errors import LakehouseError


class IcebergSyncError(LakehouseError):
    """The table (or its Iceberg metadata) is in a state the publisher cannot map to Iceberg."""
