"""Every v6 table written by Apache Hudi reads here to the rows hudi-rs returns."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute  # noqa: F401
import pytest

import lakehouse
from tests.interop.hudi_oracle import assert_same_rows, hudi_read

pytestmark = pytest.mark.interop

V6 = [
    "quickstart_trips_table/mor/avro/v6_trips_8i1u",
    "quickstart_trips_table/mor/avro/v6_trips_8i3d",
    "sample_table/cow/v6_complexkeygen_hivestyle",
    "sample_table/cow/v6_empty",
    "sample_table/cow/v6_nonpartitioned",
    "sample_table/cow/v6_simplekeygen_hivestyle_no_metafields",
    "sample_table/cow/v6_simplekeygen_nonhivestyle",
    "sample_table/cow/v6_simplekeygen_nonhivestyle_overwritetable",
    "sample_table/cow/v6_timebasedkeygen_nonhivestyle",
    "sample_table/mor/parquet/v6_complexkeygen_hivestyle",
    "sample_table/mor/parquet/v6_empty",
    "sample_table/mor/parquet/v6_nonpartitioned",
    "sample_table/mor/parquet/v6_nonpartitioned_rollback",
    "sample_table/mor/parquet/v6_simplekeygen_hivestyle_no_metafields",
    "sample_table/mor/parquet/v6_simplekeygen_nonhivestyle",
    "sample_table/mor/parquet/v6_simplekeygen_nonhivestyle_overwritetable",
]


def test_every_v6_fixture_is_listed(fixture_tables):
    assert sorted(k for k in fixture_tables if k.rsplit("/", 1)[-1].startswith("v6_")) == sorted(V6)


@pytest.mark.parametrize("name", V6)
def test_snapshot_and_read_optimized_match_hudi(fixture_tables, name):
    path = fixture_tables[name]
    table = lakehouse.open_table(str(path))
    assert_same_rows(table.read(), hudi_read(path), f"{name} snapshot")
    assert_same_rows(table.read(read_optimized=True), hudi_read(path, read_optimized=True),
                     f"{name} read-optimized")


@pytest.mark.parametrize("name", V6)
def test_time_travel_to_every_completed_instant_matches_hudi(fixture_tables, name):
    path = fixture_tables[name]
    table = lakehouse.open_table(str(path))
    for inst in table.timeline.completed_writes():
        assert_same_rows(table.read(as_of=inst.time), hudi_read(path, as_of=inst.time),
                         f"{name} as of {inst.time}")


def test_known_values(fixture_tables):
    t = lakehouse.open_table(str(fixture_tables["quickstart_trips_table/mor/avro/v6_trips_8i1u"]))
    first, second = [i.time for i in t.timeline.completed_writes()]
    fares = {r["rider"]: r["fare"] for r in t.read(columns=["rider", "fare"]).to_pylist()}
    assert fares["rider-D"] == 25.0
    fares = {r["rider"]: r["fare"] for r in t.read(as_of=first, columns=["rider", "fare"]).to_pylist()}
    assert fares["rider-D"] == 33.9
    changes = t.read_changes(first)
    assert changes.column("rider").to_pylist() == ["rider-D"]

    t = lakehouse.open_table(str(fixture_tables["quickstart_trips_table/mor/avro/v6_trips_8i3d"]))
    riders = set(t.read(columns=["rider"]).column("rider").to_pylist())
    assert not riders & {"rider-A", "rider-C", "rider-D"} and len(riders) == 5


def test_partition_filters_prune_and_filter(fixture_tables):
    t = lakehouse.open_table(str(fixture_tables["sample_table/mor/parquet/v6_complexkeygen_hivestyle"]))
    rows = t.read(columns=["id", "name", "isActive"],
                  filters=[("byteField", ">=", 10), ("byteField", "<", 20), ("shortField", "!=", 100)])
    assert sorted(rows.to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "name": "Alice", "isActive": False}, {"id": 3, "name": "Carol", "isActive": True}]
    t = lakehouse.open_table(str(fixture_tables["sample_table/mor/parquet/v6_simplekeygen_nonhivestyle"]))
    rows = t.read(columns=["id", "name", "isActive"], filters=[("byteField", "=", 10)])
    assert sorted(rows.to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "name": "Alice", "isActive": False}, {"id": 3, "name": "Carol", "isActive": True}]


@pytest.mark.parametrize("name", [
    "quickstart_trips_table/mor/avro/v6_trips_8i1u",
    "sample_table/cow/v6_complexkeygen_hivestyle",
    "sample_table/mor/parquet/v6_nonpartitioned_rollback",
])
def test_writing_into_a_table_written_by_hudi(tmp_path, fixture_tables, name):
    import shutil

    from lakehouse.columns import META_FIELDS

    path = tmp_path / "t"
    shutil.copytree(fixture_tables[name], path)
    table = lakehouse.open_table(str(path))
    rows = table.read().drop_columns(list(META_FIELDS))
    ordering = table.config.ordering_field
    changed = rows.slice(0, 2)
    if ordering:
        changed = changed.set_column(changed.schema.get_field_index(ordering), ordering,
                                     pa.compute.add(changed.column(ordering), 1_000_000))
    instant = table.upsert(changed)
    assert table.timeline.get(instant).is_completed
    assert_same_rows(table.read(), hudi_read(path), f"{name} after our upsert")
    keys = [r["_hoodie_record_key"] for r in table.read(columns=["_hoodie_record_key"]).to_pylist()]
    assert len(keys) == len(set(keys)) == rows.num_rows
