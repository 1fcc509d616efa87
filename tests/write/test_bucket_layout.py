"""The bucket index's file groups: one per bucket and partition, by the file id's bucket number."""

from __future__ import annotations

from lakehouse.file_group.file_slice import FileSlice
from lakehouse.file_group.naming import bucket_file_id
from lakehouse.write.bucket_layout import existing_buckets


def test_existing_buckets_by_partition_and_number():
    s1 = FileSlice("p", bucket_file_id(3), "20250101000000000")
    s2 = FileSlice("q", bucket_file_id(3), "20250101000000000")
    s3 = FileSlice("p", "abcdef01-0000-4000-8000-000000000000-0", "20250101000000000")
    assert existing_buckets([s1, s2, s3]) == {("p", 3): s1, ("q", 3): s2}
    # Plain UUID file ids are not buckets (unless their first 8 hex digits happen to be decimal).
    assert existing_buckets([FileSlice("p", "1234abcd-0000-4000-8000-000000000000-0",
                                       "20250101000000000")]) == {}
