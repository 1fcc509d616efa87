"""Bucket index: a record's file group is its bucket's (:mod:`lakehouse.bucket_identifier`), one
file group per bucket and partition, found by the bucket number its file id starts with."""

from __future__ import annotations

from lakehouse.file_group.file_slice import FileSlice
from lakehouse.file_group.naming import bucket_of_file_id


def existing_buckets(slices: list[FileSlice]) -> dict[tuple[str, int], FileSlice]:
    out: dict[tuple[str, int], FileSlice] = {}
    for s in slices:
        b = bucket_of_file_id(s.file_id)
        if b is not None:
            out[(s.partition, b)] = s
    return out
