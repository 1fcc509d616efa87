"""lakehouse: Apache Hudi (table version 6) Copy-On-Write and Merge-On-Read tables in Python."""

from lakehouse.errors import LakehouseError
from lakehouse.table import Table, create_table, open_table

__all__ = ["LakehouseError", "Table", "create_table", "open_table"]
__version__ = "0.1.0"
