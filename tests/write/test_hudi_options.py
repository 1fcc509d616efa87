"""Write options with Hudi's names that lakehouse used to accept and ignore, now doing what Hudi
does with them (each test names the Hudi class or config it follows)."""

from __future__ import annotations

import hashlib
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lakehouse
from lakehouse.errors import ConfigError
from lakehouse.log.reader import read_log_file
from lakehouse.services.archive import read_archived
from lakehouse.storage import get_storage
from tests.write.test_operations import files, hrows, rows


def _batch(ids, ts=1, city="sf"):
    return pa.table({"id": [f"k{i:05d}" for i in ids], "city": [city] * len(ids), "ts": [ts] * len(ids),
                     "v": [i * 10 + ts for i in ids]})


def _digest(path) -> str:
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def test_mor_inserts_go_to_the_smallest_base_files_only(tmp_path):
    """Hudi's SparkUpsertDeltaCommitPartitioner.getSmallFileCandidates (an index that cannot index
    log files): base files without logs under hoodie.parquet.small.file.limit, smallest first,
    at most hoodie.merge.small.file.group.candidates.limit (default 1) of them take inserts
    through a merge; the other inserts go to new file groups."""
    p = tmp_path / "t"
    sizing = {"hoodie.parquet.max.file.size": 60_000, "hoodie.parquet.small.file.limit": 50_000,
              "hoodie.copyonwrite.record.size.estimate": 40, "hoodie.parquet.bloom.filter.enabled": "false"}
    t = lakehouse.create_table(str(p), name="s", record_key="id", partition_by="city", ordering_field="ts",
                               index="SIMPLE", options=sizing)
    for n, start in ((200, 0), (300, 1000), (400, 2000)):  # three small base files, three sizes
        t.bulk_insert(_batch(range(start, start + n)))
    before = {f: _digest(f) for f in files(p, lambda n: n.endswith(".parquet"))}
    smallest = min(before, key=os.path.getsize)
    t.insert(_batch(range(5000, 7000), ts=2))  # more than the smallest file has room for
    after = {f: _digest(f) for f in files(p, lambda n: n.endswith(".parquet"))}
    rewritten = {f for f in before if os.path.basename(f).split("_")[0] in
                 {os.path.basename(g).split("_")[0] for g in after if g not in before}}
    assert rewritten == {smallest}, "only the smallest base file takes inserts"
    assert len([g for g in after if g not in before]) > 1  # the rest went to new file groups
    assert len(rows(t)) == 900 + 2000 and hrows(p) == rows(t)

    q = tmp_path / "two"
    t = lakehouse.create_table(str(q), name="s", record_key="id", partition_by="city", ordering_field="ts",
                               index="SIMPLE",
                               options={**sizing, "hoodie.merge.small.file.group.candidates.limit": 2})
    for n, start in ((200, 0), (300, 1000), (400, 2000)):
        t.bulk_insert(_batch(range(start, start + n)))
    before = {f: _digest(f) for f in files(q, lambda n: n.endswith(".parquet"))}
    t.insert(_batch(range(5000, 7000), ts=2))
    after = {f for f in files(q, lambda n: n.endswith(".parquet"))}
    new_ids = {os.path.basename(g).split("_")[0] for g in after if g not in before}
    rewritten = {f for f in before if os.path.basename(f).split("_")[0] in new_ids}
    assert rewritten == set(sorted(before, key=os.path.getsize)[:2])


@pytest.mark.parametrize("allow", [False, True])
def test_inserts_into_an_existing_file_group_keep_duplicates_only_when_allowed(tmp_path, allow):
    """hoodie.merge.allow.duplicate.on.inserts (HoodieMergeHandleFactory: an insert, which does
    not change records, gets a HoodieConcatHandle): the old records and the inserted ones are
    both written, a key in both kept twice; off (Hudi 0.14's default) they merge by key."""
    p = tmp_path / "t"
    t = lakehouse.create_table(str(p), name="d", record_key="id", partition_by="city", ordering_field="ts",
                               table_type="COPY_ON_WRITE",
                               options={"hoodie.merge.allow.duplicate.on.inserts": allow})
    t.insert(_batch([1, 2], ts=1))
    t.insert(_batch([2, 3], ts=2))
    got = rows(t, ("id", "v"))
    want = [("k00001", 11), ("k00002", 21), ("k00002", 22), ("k00003", 32)] if allow else \
        [("k00001", 11), ("k00002", 22), ("k00003", 32)]
    assert got == want == hrows(p, ("id", "v"))
    t.upsert(_batch([1], ts=3))  # an upsert still merges
    assert ("k00001", 13) in rows(t, ("id", "v")) and ("k00001", 11) not in rows(t, ("id", "v"))


def test_parquet_block_size_is_the_row_group_size(tmp_path):
    """hoodie.parquet.block.size: Hudi's parquet row group size in bytes (HoodieStorageConfig)."""
    sizes = {}
    for label, opts in (("default", {}), ("small", {"hoodie.parquet.block.size": 20_000})):
        p = tmp_path / label
        t = lakehouse.create_table(str(p), name="b", record_key="id", partition_by="city", ordering_field="ts",
                                   table_type="COPY_ON_WRITE", options=opts)
        t.bulk_insert(_batch(range(5000)))
        (f,) = files(p, lambda n: n.endswith(".parquet"))
        sizes[label] = pq.ParquetFile(f).metadata.num_row_groups
        assert len(rows(t)) == 5000 and hrows(p) == rows(t)
    assert sizes["default"] == 1 and sizes["small"] >= 5


def test_log_data_blocks_are_bounded_by_their_own_size(tmp_path):
    """hoodie.logfile.data.block.max.size (HoodieAppendHandle cuts a block once its records reach
    it); the log file rolls over by hoodie.logfile.max.size, a separate limit."""
    p = tmp_path / "t"
    t = lakehouse.create_table(str(p), name="l", record_key="id", ordering_field="ts",
                               options={"hoodie.bucket.index.num.buckets": 1,
                                        "hoodie.logfile.data.block.max.size": 8192})
    t.upsert(_batch(range(10)))
    t.upsert(_batch(range(2000), ts=2))
    (log,) = files(p, lambda n: ".log." in n)
    blocks = [b for b in read_log_file(get_storage(str(p)), os.path.relpath(log, p)) if b.is_data]
    assert len(blocks) > 3
    assert rows(t) == sorted((f"k{i:05d}", i * 10 + 2) for i in range(2000)) == hrows(p)


def test_the_archive_goes_to_hoodie_archivelog_folder(tmp_path):
    """hoodie.archivelog.folder (HoodieTableConfig.ARCHIVELOG_FOLDER): the archived timeline's
    folder under .hoodie (HoodieTableMetaClient.getArchivePath)."""
    p = tmp_path / "t"
    t = lakehouse.create_table(str(p), name="a", record_key="id", ordering_field="ts",
                               table_type="COPY_ON_WRITE",
                               options={"hoodie.archivelog.folder": "history", "hoodie.keep.min.commits": 2,
                                        "hoodie.keep.max.commits": 3, "hoodie.cleaner.commits.retained": 1})
    for ts in range(1, 8):
        t.upsert(_batch(range(5), ts))
        t.clean()
    res = t.archive()
    assert res.archived
    assert os.listdir(p / ".hoodie" / "history") and not (p / ".hoodie" / "archived").exists()
    assert {e["commitTime"] for e in read_archived(t)} >= set(res.archived)
    with pytest.raises(lakehouse.errors.InstantNotFoundError, match="archived"):
        t.read(as_of=res.archived[0])


def test_an_option_hudi_does_not_have_is_refused():
    """hoodie.index.log.inserts is no Hudi key (an index says whether it can index log files):
    it used to be accepted and ignored."""
    with pytest.raises(ConfigError, match="hoodie.index.log.inserts"):
        lakehouse.create_table("/tmp/never-created", name="x", record_key="id", ordering_field="ts",
                               options={"hoodie.index.log.inserts": True})
    assert not os.path.exists("/tmp/never-created")
