"""insert_overwrite_table and delete_partition: Hudi's replacecommits that replace every file
group of the table, or of the named partitions (SparkInsertOverwriteTableCommitActionExecutor,
SparkDeletePartitionCommitActionExecutor)."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest
from click.testing import CliRunner

import lakehouse
from lakehouse import cli
from lakehouse.errors import ConfigError, LakehouseError
from lakehouse.timeline.avro_files import RequestedReplaceMetadata
from lakehouse.timeline.instant import Action, State
from tests.write.test_operations import files, hrows, rows

TYPES = ["MERGE_ON_READ", "COPY_ON_WRITE"]


def _table(path, table_type, **options):
    return lakehouse.create_table(str(path), name="o", table_type=table_type, record_key="id",
                                  partition_by="city", ordering_field="ts", options=options)


def _batch(ids, city, ts=1, v=None):
    return pa.table({"id": ids, "city": [city] * len(ids), "ts": [ts] * len(ids),
                     "v": [v if v is not None else i for i in range(len(ids))]})


def _replace_metadata(t, instant):
    inst = t.timeline.get(instant)
    meta = t.active.commit_metadata(inst)
    req = inst.with_state(State.REQUESTED)
    requested = RequestedReplaceMetadata.from_bytes(t.active.read(req), t.active.path(req))
    return inst, meta, requested


@pytest.mark.parametrize("table_type", TYPES)
def test_insert_overwrite_table_replaces_every_partition(tmp_path, table_type):
    p = tmp_path / "t"
    t = _table(p, table_type)
    t.upsert(pa.concat_tables([_batch(["a", "b"], "sf"), _batch(["c"], "la")]))
    before = t.timeline.completed_writes().last.time
    instant = t.insert_overwrite_table(_batch(["z"], "sf", ts=2, v=9))
    inst, meta, requested = _replace_metadata(t, instant)
    assert inst.action == Action.REPLACE_COMMIT.value
    assert meta.operation_type == requested.operation_type == "INSERT_OVERWRITE_TABLE"
    assert set(meta.partition_to_replace_file_ids) == {"sf", "la"}  # la had no new data: replaced too
    assert rows(t) == [("z", 9)] == hrows(p)
    assert sorted(r["id"] for r in t.read(as_of=before, columns=["id"]).to_pylist()) == ["a", "b", "c"]
    t.upsert(_batch(["z"], "sf", ts=3, v=10))
    if table_type == "MERGE_ON_READ":
        t.compact(force=True)
    # Replaced file groups go once their replacecommit is older than the earliest commit kept
    # (CleanPlanner.getReplacedFilesEligibleToClean), the emptied partition with them.
    t.clean(options={"hoodie.cleaner.commits.retained": 1})
    assert rows(t) == [("z", 10)] == hrows(p)
    assert not (p / "la").exists()


@pytest.mark.parametrize("table_type", TYPES)
def test_delete_partitions_drops_whole_partitions(tmp_path, table_type):
    p = tmp_path / "t"
    t = _table(p, table_type)
    t.upsert(pa.concat_tables([_batch(["a", "b"], "sf"), _batch(["c"], "la"), _batch(["d"], "ny")]))
    instant = t.delete_partitions(["la"])
    inst, meta, requested = _replace_metadata(t, instant)
    assert inst.action == Action.REPLACE_COMMIT.value and meta.operation_type == "DELETE_PARTITION"
    assert requested.operation_type == "DELETE_PARTITION" and list(meta.partition_to_replace_file_ids) == ["la"]
    assert not list(meta.write_stats())
    assert rows(t) == [("a", 0), ("b", 1), ("d", 0)] == hrows(p)
    # The partitions the rows of a batch name, as Hudi's datasource does without
    # hoodie.datasource.write.partitions.to.delete.
    t.write(pa.table({"id": ["anything"], "city": ["ny"]}), "delete_partition")
    assert rows(t) == [("a", 0), ("b", 1)] == hrows(p)
    t.upsert(_batch(["a"], "sf", ts=2, v=5))
    t.clean(options={"hoodie.cleaner.commits.retained": 1})
    assert not (p / "la").exists() and not (p / "ny").exists() and rows(t) == hrows(p)


def test_delete_partitions_refuses_what_it_cannot_do_before_writing_anything(tmp_path):
    p = tmp_path / "t"
    t = _table(p, "MERGE_ON_READ")
    t.upsert(pa.concat_tables([_batch(["a"], "sf"), _batch(["c"], "la")]))
    t.upsert(_batch(["a"], "sf", ts=2))
    hoodie = sorted(os.listdir(p / ".hoodie"))
    with pytest.raises(ConfigError, match="no partition.*paris"):
        t.delete_partitions(["paris"])
    planned = t.schedule_compaction(force=True)
    assert planned.scheduled
    hoodie = sorted(os.listdir(p / ".hoodie"))
    # SparkDeletePartitionCommitActionExecutor.checkPreconditions: not under a pending compaction.
    with pytest.raises(LakehouseError, match="pending compaction"):
        t.delete_partitions(["sf"])
    assert sorted(os.listdir(p / ".hoodie")) == hoodie
    t.run_compaction(planned.instant)
    t.commit_compaction(planned.instant)
    t.delete_partitions(["sf"])
    assert rows(t) == [("c", 0)]


def test_the_cli_drops_partitions_after_confirmation(tmp_path):
    p = tmp_path / "t"
    t = _table(p, "COPY_ON_WRITE")
    t.upsert(pa.concat_tables([_batch(["a"], "sf"), _batch(["c"], "la")]))
    runner = CliRunner()
    res = runner.invoke(cli.main, ["delete-partitions", str(p), "la"])  # no terminal: refuses
    assert res.exit_code == 2 and "--yes" in res.output and rows(t) == [("a", 0), ("c", 0)]
    res = runner.invoke(cli.main, ["delete-partitions", str(p), "la", "--yes"])
    assert res.exit_code == 0, res.output
    assert rows(t) == [("a", 0)] == hrows(p)
    assert len(files(p, lambda n: n.endswith(".parquet"))) == 2  # until the next clean
