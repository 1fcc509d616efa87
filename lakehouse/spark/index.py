"""The SIMPLE and BLOOM index lookups as Spark jobs: where does each incoming key live today?

Both end as a left outer join of the incoming records with the stored keys of candidate base
files, read on the executors (each file once), as Hudi's Spark indexes do:

* SIMPLE reads the record keys of every base file in the partitions the batch touches (all
  partitions for GLOBAL_SIMPLE) and joins.
* BLOOM first gathers each candidate file's key range (footer only), pairs every incoming key
  with the files whose range holds it, shuffles the pairs by file, and per file probes the bloom
  filter and reads the stored keys only for files where a key may be; the matches are joined.

The result is the keyed DataFrame plus LOC_PARTITION, LOC_FILE_ID (and LOC_ORDERING for global
indexes under event-time ordering): the same columns :func:`lakehouse.write.index.lookup.join_locations`
gives the Python path, so :func:`lakehouse.write.assign.route` handles both alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse.config import IndexType
from lakehouse.file_group.file_slice import BaseFile, FileSlice
from lakehouse.columns import KEY, PARTITION
from lakehouse.meta_client import TableMetaClient
from lakehouse.storage import Storage, get_storage
from lakehouse.write.context import WriteContext
from lakehouse.write.index import tag_location
from lakehouse.write.index.lookup import (LOC_FILE_ID, LOC_ORDERING, LOC_PARTITION, base_file_keys,
                                          read_footer)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

LOC_KEY = "__lh_loc_key"
_FILE = "__lh_file"


@dataclass
class IndexJob:
    """What the lookup tasks need; pickled into them."""

    path: str
    context: WriteContext  # the write's: the table's config, no table opened on the executors
    files: list[BaseFile]
    ordering: str | None  # stored ordering values are needed (global index, event time)
    merged: bool  # keys of merged file slices (MOR: a key deleted in a log is gone)
    slices: dict[tuple[str, str], FileSlice]

    def storage(self) -> Storage:
        return get_storage(self.path)

    def source(self):
        storage = self.storage()
        if self.merged:
            # A meta client over the store and the write's table config: no hoodie.properties
            # read; the timeline is the store's now, as a reader's would be.
            meta = TableMetaClient(storage, self.context.config)
            return tag_location.merged_keys(meta, self.context, meta.active.load(), self.slices, self.ordering)
        return base_file_keys(storage, self.ordering)


def _loc_schema(job: IndexJob, ordering_type) -> str:
    cols = [f"{LOC_KEY} string", f"{LOC_PARTITION} string", f"{LOC_FILE_ID} string"]
    if job.ordering:
        cols.append(f"{LOC_ORDERING} {ordering_type.simpleString()}")
    return ", ".join(cols)


def _as_loc(t: pa.Table, job: IndexJob, ordering_arrow: pa.DataType | None) -> pa.RecordBatch:
    cols = {LOC_KEY: t.column("k").cast(pa.string()), LOC_PARTITION: t.column(LOC_PARTITION).cast(pa.string()),
            LOC_FILE_ID: t.column(LOC_FILE_ID).cast(pa.string())}
    if job.ordering:
        cols[LOC_ORDERING] = (t.column(LOC_ORDERING).cast(ordering_arrow) if LOC_ORDERING in t.column_names
                              else pa.nulls(t.num_rows, ordering_arrow))
    return pa.Table.from_pydict(cols).combine_chunks().to_batches()


def _file_ids(spark, n: int) -> "DataFrame":
    par = spark.sparkContext.defaultParallelism
    return spark.range(n).selectExpr(f"cast(id as int) as {_FILE}").repartition(max(1, min(n, par * 2)))


def _stored_keys(spark, job: IndexJob, ordering_spark, ordering_arrow) -> "DataFrame":
    """SIMPLE: every candidate file's stored keys."""
    def per_task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        source = job.source()
        for b in batches:
            files = [job.files[i] for i in b.column(0).to_pylist()]
            if files:
                yield from _as_loc(source(files), job, ordering_arrow)
    return _file_ids(spark, len(job.files)).mapInArrow(per_task, _loc_schema(job, ordering_spark))


def _key_ranges(spark, job: IndexJob) -> list[tuple[str | None, str | None]]:
    """Each candidate file's (min, max) record key from its footer, read on the executors."""
    def per_task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        storage = job.storage()
        for b in batches:
            idx = b.column(0).to_pylist()
            footers = [read_footer(storage, job.files[i]) for i in idx]
            yield pa.record_batch({_FILE: pa.array(idx, pa.int32()),
                                   "lo": pa.array([f.min_key for f in footers], pa.string()),
                                   "hi": pa.array([f.max_key for f in footers], pa.string())})
    rows = _file_ids(spark, len(job.files)).mapInArrow(
        per_task, f"{_FILE} int, lo string, hi string").collect()
    out: list[tuple[str | None, str | None]] = [(None, None)] * len(job.files)
    for r in rows:
        out[r[_FILE]] = (r["lo"], r["hi"])
    return out


def _bloom_matches(keyed: "DataFrame", job: IndexJob, global_: bool, ordering_spark,
                   ordering_arrow) -> "DataFrame":
    spark = keyed.sparkSession
    ranges = _key_ranges(spark, job)
    by_partition: dict[str, list[int]] = {}
    for i, bf in enumerate(job.files):
        by_partition.setdefault(bf.partition, []).append(i)
    lo = [r[0] for r in ranges]
    hi = [r[1] for r in ranges]
    groups = [(None, list(range(len(job.files))))] if global_ else list(by_partition.items())

    def pairs(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            keys, parts = b.column(0), b.column(1)
            out_k, out_f = [], []
            for partition, files in groups:
                in_part = (np.ones(len(keys), bool) if partition is None else
                           pc.fill_null(pc.equal(parts, partition), False).to_numpy(zero_copy_only=False))
                if not in_part.any():
                    continue
                for i in files:
                    mask = in_part
                    if lo[i] is not None and hi[i] is not None:
                        rng = pc.and_(pc.greater_equal(keys, lo[i]), pc.less_equal(keys, hi[i]))
                        mask = mask & pc.fill_null(rng, False).to_numpy(zero_copy_only=False)
                    hit = np.flatnonzero(mask)
                    if len(hit):
                        out_k.append(keys.take(pa.array(hit)))
                        out_f.append(np.full(len(hit), i, np.int32))
            if out_k:
                yield pa.record_batch({KEY: pa.concat_arrays(out_k), _FILE: pa.array(np.concatenate(out_f))})

    def check(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        t = pa.Table.from_batches(list(batches), schema=pa.schema([(KEY, pa.string()), (_FILE, pa.int32())]))
        if t.num_rows == 0:
            return
        storage = job.storage()
        source = job.source()
        t = t.sort_by(_FILE)
        files = t.column(_FILE).to_numpy()
        starts = np.flatnonzero(np.r_[True, files[1:] != files[:-1]])
        ends = np.r_[starts[1:], len(files)]
        for s, e in zip(starts.tolist(), ends.tolist()):
            bf = job.files[int(files[s])]
            probe = pc.unique(t.column(KEY).slice(s, e - s).combine_chunks())
            bloom = read_footer(storage, bf).bloom
            if bloom is not None:
                probe = probe.filter(pa.array(bloom.might_contain(probe)))
                if len(probe) == 0:
                    continue
            stored = source([bf])
            yield from _as_loc(stored.filter(pc.is_in(stored.column("k"), value_set=probe)), job, ordering_arrow)

    tasks = max(1, min(len(job.files), spark.sparkContext.defaultParallelism * 4))
    return (keyed.select(KEY, PARTITION).mapInArrow(pairs, f"{KEY} string, {_FILE} int")
            .repartition(tasks, _FILE).mapInArrow(check, _loc_schema(job, ordering_spark)))


def tag(keyed: "DataFrame", job: IndexJob, index: IndexType, ordering_type: pa.DataType | None) -> "DataFrame":
    """``keyed`` with the stored location(s) of each record's key (null where it is new). A key
    stored in two file groups (as plain inserts may leave it) tags its record twice."""
    from pyspark.sql import functions as F  # noqa: PLC0415
    from pyspark.sql.pandas.types import from_arrow_type  # noqa: PLC0415
    from pyspark.sql.types import StringType  # noqa: PLC0415
    spark = keyed.sparkSession
    ordering_spark = from_arrow_type(ordering_type) if job.ordering else StringType()
    global_ = index.is_global
    if not job.files:
        cols = [F.lit(None).cast("string").alias(LOC_PARTITION), F.lit(None).cast("string").alias(LOC_FILE_ID)]
        if job.ordering:
            cols.append(F.lit(None).cast(ordering_spark).alias(LOC_ORDERING))
        return keyed.select("*", *cols)
    if index in (IndexType.BLOOM, IndexType.GLOBAL_BLOOM):
        stored = _bloom_matches(keyed, job, global_, ordering_spark, ordering_type)
    else:
        stored = _stored_keys(spark, job, ordering_spark, ordering_type)
    cond = keyed[KEY] == stored[LOC_KEY]
    if not global_:
        cond = cond & (keyed[PARTITION] == stored[LOC_PARTITION])
    return keyed.join(stored, cond, "left_outer").drop(LOC_KEY)


__all__ = ["IndexJob", "tag", "LOC_KEY"]
