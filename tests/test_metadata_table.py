"""A Hudi metadata table, which lakehouse does not keep up, is dropped before a lakehouse commit
lands, as Hudi's writers drop it under hoodie.metadata.enable=false
(HoodieTable.maybeDeleteMetadataTable); the Java Hudi judge (tests/judges) shows why."""

from __future__ import annotations

import pyarrow as pa
import pytest

import lakehouse
from lakehouse.layout import METADATA_TABLE as METADATA_FOLDER, PROPERTIES as HOODIE_PROPERTIES
from lakehouse.metadata_table import drop_metadata_table
from lakehouse.properties import format_properties, parse_properties, read_table_config


def table(tmp_path):
    t = lakehouse.create_table(str(tmp_path / "t"), name="t", record_key="id", ordering_field="ts",
                               partition_by="p")
    t.upsert(pa.table({"id": ["a", "b"], "ts": [1, 1], "p": ["x", "y"]}))
    return t


def java_made_metadata_table(t, *, named: bool = True, folder: bool = True) -> None:
    """What a Java Hudi writer with the metadata table on leaves: the table's folder and
    hoodie.table.metadata.partitions=files in hoodie.properties."""
    if folder:
        t.storage.write(f"{METADATA_FOLDER}/.hoodie/hoodie.properties", b"hoodie.table.name=t_metadata\n")
        t.storage.write(f"{METADATA_FOLDER}/files/.files-0000_00000000000000010.log.1_0-0-0", b"x")
    if named:
        props = parse_properties(t.storage.read(HOODIE_PROPERTIES))
        props["hoodie.table.metadata.partitions"] = "files"
        props["hoodie.table.metadata.partitions.inflight"] = ""
        t.storage.write(HOODIE_PROPERTIES, format_properties(props).encode())


@pytest.mark.parametrize("named, folder", [(True, True), (False, True), (True, False)])
def test_a_lakehouse_commit_drops_the_metadata_table_first(tmp_path, named, folder):
    t = table(tmp_path)
    java_made_metadata_table(t, named=named, folder=folder)
    t = lakehouse.open_table(t.path)
    t.upsert(pa.table({"id": ["c"], "ts": [2], "p": ["z"]}))
    assert t.storage.list(METADATA_FOLDER) == []
    config = read_table_config(t.storage)  # checksum and all: still a valid hoodie.properties
    assert "hoodie.table.metadata.partitions" not in config.extra
    assert sorted(t.read().column("id").to_pylist()) == ["a", "b", "c"]


def test_a_compaction_commit_drops_it_too(tmp_path):
    """Every action completes through lakehouse.commit.complete: a compaction adds base files
    the metadata table would not know, as a write adds logs."""
    t = table(tmp_path)
    t.upsert(pa.table({"id": ["a"], "ts": [2], "p": ["x"]}))  # logs to compact
    java_made_metadata_table(t)
    before = len(t.timeline.completed().instants)
    t.compact(force=True)
    assert len(t.timeline.completed().instants) == before + 1
    assert t.storage.list(METADATA_FOLDER) == []
    assert "hoodie.table.metadata.partitions" not in read_table_config(t.storage).extra


def test_no_metadata_table_rewrites_nothing(tmp_path):
    t = table(tmp_path)
    props = t.storage.read(HOODIE_PROPERTIES)
    assert drop_metadata_table(t.meta_client) is False
    t.upsert(pa.table({"id": ["c"], "ts": [2], "p": ["z"]}))
    assert t.storage.read(HOODIE_PROPERTIES) == props
