"""Iceberg (format version 2) metadata for lakehouse tables, so Iceberg readers can read them.

:func:`sync_iceberg` publishes one Iceberg snapshot per completed write of the Hudi timeline,
describing the table's read-optimized view (the latest base file of every file group; for a
Copy-On-Write table the full snapshot). The metadata lives under ``<table>/.hoodie/iceberg/``
(see :mod:`lakehouse.iceberg.store` for why); the table property ``lakehouse.iceberg.view`` says
which view it is.
"""

from lakehouse.errors import IcebergSyncError
from lakehouse.iceberg.publish import SyncResult, sync_iceberg
from lakehouse.iceberg.store import ICEBERG_ROOT, METADATA_DIR, VERSION_HINT

__all__ = ["ICEBERG_ROOT", "IcebergSyncError", "METADATA_DIR", "SyncResult", "VERSION_HINT", "sync_iceberg"]
