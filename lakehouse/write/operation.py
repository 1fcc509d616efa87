"""The kinds a write deals in: the operation a batch is written with, and how a file group takes
its records.

As Hudi's ``WriteOperationType`` (the operation, recorded on the commit as ``operationType``) and
``BucketType`` with the handle its write task opens (``HoodieCreateHandle``, ``HoodieMergeHandle``,
``HoodieAppendHandle``).
"""

from __future__ import annotations

import enum


class Operation(enum.StrEnum):
    INSERT = "insert"
    UPSERT = "upsert"
    BULK_INSERT = "bulk_insert"
    DELETE = "delete"
    INSERT_OVERWRITE = "insert_overwrite"  # the batch's partitions: replaced by it
    INSERT_OVERWRITE_TABLE = "insert_overwrite_table"  # every partition: the table becomes the batch
    DELETE_PARTITION = "delete_partition"  # the batch's partitions (only its keys matter): dropped

    @property
    def operation_type(self) -> str:
        return self.name

    @property
    def replaces(self) -> bool:
        """A replacecommit: file groups replaced as a whole (Hudi's WriteOperationType)."""
        return self in (Operation.INSERT_OVERWRITE, Operation.INSERT_OVERWRITE_TABLE, Operation.DELETE_PARTITION)

    @property
    def keys_only(self) -> bool:
        """Only the batch's key and partition columns matter."""
        return self in (Operation.DELETE, Operation.DELETE_PARTITION)


class TargetKind(enum.StrEnum):
    """How a file group takes its records (Hudi's BucketType INSERT is a create; UPDATE a merge
    on Copy-On-Write, an append on Merge-On-Read)."""

    CREATE = "create"  # a new file group: a new base file
    MERGE = "merge"  # the base file rewritten with the records merged in
    APPEND = "append"  # the records appended to the slice's log
