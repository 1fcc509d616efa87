"""Column names that readers, writers and services share.

Hudi's meta fields lead every record of a table that populates them (``hoodie.populate.meta.
fields``, on for every table lakehouse writes). The helper columns (``__lh_*``) exist only in
memory, while records are merged or routed: they are never written to a file.
"""

from __future__ import annotations

# Hudi's meta fields, in the order they lead a record (HoodieRecord.HOODIE_META_COLUMNS).
COMMIT_TIME = "_hoodie_commit_time"
COMMIT_SEQNO = "_hoodie_commit_seqno"
RECORD_KEY = "_hoodie_record_key"
PARTITION_PATH = "_hoodie_partition_path"
FILE_NAME = "_hoodie_file_name"
META_FIELDS = (COMMIT_TIME, COMMIT_SEQNO, RECORD_KEY, PARTITION_PATH, FILE_NAME)

# A data column Hudi's payloads read as "this record is a delete" (HoodieRecord.HOODIE_IS_DELETED_FIELD).
IS_DELETED = "_hoodie_is_deleted"

# Helper columns of records being merged (lakehouse.merge) or written (lakehouse.write).
KEY = "__lh_key"  # the record key
SEQ = "__lh_seq"  # arrival order: base file first, then log blocks in order, then rows in order
DELETE = "__lh_delete"  # the version is a delete
UNCONDITIONAL = "__lh_unconditional"  # a delete that wins whatever its ordering value
PARTITION = "__lh_partition"  # the record's partition path
BUCKET = "__lh_bucket"  # the record's bucket (BUCKET index)
