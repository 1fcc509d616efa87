"""Bucket index: a record's file group is its bucket's, found from its key alone.

Two engines (``hoodie.index.bucket.engine``):

* SIMPLE: ``hoodie.bucket.index.num.buckets`` buckets per partition, a key's bucket its hash
  modulo that count (:mod:`lakehouse.bucket_identifier`); a bucket's file group is the one whose
  file id starts with the zero-padded bucket number.
* CONSISTENT_HASHING: each partition has a hash ring (:mod:`lakehouse.consistent_hashing`) that
  clustering resizes; a key's bucket is the ring node at or above its hash, and the node names
  its file group (``fileIdPrefix-0``).

A :class:`BucketLayout` answers both the same way for the writers: each row's bucket number in
its partition, the file slices that hold buckets, and a new bucket's file id. It is frozen and
picklable (the Spark writer ships it to its executors).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse.bucket_identifier import record_buckets
from lakehouse.columns import KEY, PARTITION
from lakehouse.consistent_hashing import HashingMetadata, record_hashes
from lakehouse.errors import ClusteringUpdateError, UnsupportedTableError
from lakehouse.file_group.file_slice import FileSlice
from lakehouse.file_group.naming import bucket_file_id, bucket_of_file_id

if TYPE_CHECKING:
    from lakehouse.config import TableConfig


def existing_buckets(slices: list[FileSlice]) -> dict[tuple[str, int], FileSlice]:
    """SIMPLE engine: the slices holding buckets, by (partition, bucket number)."""
    out: dict[tuple[str, int], FileSlice] = {}
    for s in slices:
        b = bucket_of_file_id(s.file_id)
        if b is not None:
            out[(s.partition, b)] = s
    return out


@dataclass(frozen=True)
class BucketLayout:
    """How a bucket-index write finds buckets: by the table's bucket count (``rings`` None) or
    by the hash rings of the partitions it writes (consistent hashing)."""

    rings: Mapping[str, HashingMetadata] | None = None
    # File groups that pending clusterings rewrite: a record whose bucket is one is refused
    # (Hudi's SparkRejectUpdateStrategy), before the buffers or the spill take it.
    clustering: Mapping[tuple[str, str], str] = field(default_factory=dict)

    def ring(self, partition: str) -> HashingMetadata:
        assert self.rings is not None
        ring = self.rings.get(partition)
        if ring is None:  # the writer loads the ring of every partition its batch has
            raise KeyError(f"no hash ring loaded for partition {partition!r}")
        return ring

    def buckets(self, rows: pa.Table, config: "TableConfig") -> np.ndarray:
        """Each row's bucket number in its partition (rows with KEY and PARTITION)."""
        if self.rings is None:
            out = record_buckets(rows, rows.column(KEY), config)
        else:
            out = np.zeros(rows.num_rows, dtype=np.int32)
            if rows.num_rows:
                hashes = record_hashes(rows.column(KEY), config.bucket_hash_fields, config.record_key_fields)
                parts = pc.dictionary_encode(rows.column(PARTITION).combine_chunks())
                codes = parts.indices.to_numpy(zero_copy_only=False)
                for code, partition in enumerate(parts.dictionary.to_pylist()):
                    sel = np.flatnonzero(codes == code)
                    out[sel] = self.ring(partition).locate(hashes[sel])
        if self.clustering:
            self.check_not_clustering(rows, out)
        return out

    def check_not_clustering(self, rows: pa.Table, buckets: np.ndarray) -> None:
        pairs = pa.table({"p": rows.column(PARTITION), "b": pa.array(buckets)}).group_by(["p", "b"]).aggregate([])
        pairs = zip(pairs.column("p").to_pylist(), pairs.column("b").to_pylist())
        busy = sorted((p, fid) for p, b in pairs for fid in [self.file_id_of(p, b)]
                      if fid is not None and (p, fid) in self.clustering)
        if busy:
            t = self.clustering[busy[0]]
            raise ClusteringUpdateError(
                f"{len(busy)} bucket(s) of this write are being rewritten by clustering {t}: "
                f"{', '.join(f'{p}/{f}' for p, f in busy[:5])}",
                help="nothing of this write is visible; write again once the clustering is committed "
                     f"(`lakehouse clustering run <table>` finishes it), or roll it back "
                     f"(`lakehouse rollback <table> {t}`)",
                clustering=t, file_groups=tuple(busy))

    def file_id_of(self, partition: str, bucket: int) -> str | None:
        """The file id a bucket's file group has, where it is fixed by the layout (consistent
        hashing); None for the SIMPLE engine (a random suffix per new file group)."""
        if self.rings is None:
            return None
        return self.ring(partition).nodes[bucket].file_id

    def existing(self, slices: list[FileSlice]) -> dict[tuple[str, int], FileSlice]:
        """The slices holding buckets, by (partition, bucket number)."""
        if self.rings is None:
            return existing_buckets(slices)
        by_id = {p: {n.file_id: i for i, n in enumerate(r.nodes)} for p, r in self.rings.items()}
        out: dict[tuple[str, int], FileSlice] = {}
        for s in slices:
            if s.partition not in by_id:
                continue
            i = by_id[s.partition].get(s.file_id)
            if i is None:
                # Its keys would be written a second time, into the bucket the ring names.
                where = f"partition {s.partition!r}'s" if s.partition else "the table's"
                raise UnsupportedTableError(
                    f"file group {s.file_id} is not a bucket of {where} hash ring "
                    "(hoodie.index.bucket.engine=CONSISTENT_HASHING): the table was written with "
                    "another index or engine",
                    help="set hoodie.index.bucket.engine back to what wrote the table, or copy its rows "
                         "into a new table")
            out[(s.partition, i)] = s
        return out

    def new_file_id(self, partition: str, bucket: int) -> str:
        """The file id of a bucket's first file group."""
        fid = self.file_id_of(partition, bucket)
        return fid if fid is not None else bucket_file_id(bucket)
