"""Partition specs and values: Hudi partition paths become typed Iceberg partition values (or,
where the path does not hold the plain values, no partitioning), and pyiceberg's partition
pruning returns exactly the rows lakehouse's filtered read returns."""

from __future__ import annotations

import datetime as dt
import decimal

import pyarrow as pa
import pytest

import lakehouse
from tests.iceberg.iceberg_oracle import (MANUAL_SYNC, assert_every_snapshot_is_its_instant, assert_same_table,
                                          iceberg_read, static_table, sync_and_compare, view_read)


def _create(path, partition_by, **kw):
    kw["options"] = {**MANUAL_SYNC, **kw.get("options", {})}
    return lakehouse.create_table(str(path), name="p", table_type=kw.pop("table_type", "COPY_ON_WRITE"),
                                  record_key="id", partition_by=partition_by, ordering_field="ts", **kw)


def _files(res) -> dict[str, tuple[int, dict]]:
    """Data file name -> (spec id, partition values), as pyiceberg reads the manifests."""
    st = static_table(res)
    out = {}
    for task in st.scan().plan_files():
        out[task.file.file_path.rsplit("/", 1)[-1]] = (task.file.spec_id, task.file.partition)
    return out


def _check_filters(res, table, filters: list[tuple[str, str]]) -> None:
    for expr, (col, value) in filters:
        ours = view_read(table, filters=[(col, "=", value)] if value is not None else None)
        if value is None:
            ours = ours.filter(pa.compute.is_null(ours.column(col)))
        assert_same_table(iceberg_read(res, row_filter=expr), ours, f"filter {expr}")


def test_typed_values_of_several_columns_and_pruning(tmp_path):
    t = _create(tmp_path / "t", ["day", "n", "amt", "ok"], hive_style_partitioning=True)
    rows = []
    for i in range(8):
        rows.append({"id": f"k{i}", "ts": i, "day": dt.date(2024, 1, 1 + i % 2), "n": i % 3,
                     "amt": decimal.Decimal(f"{i % 2}.50"), "ok": i % 2 == 0})
    schema = pa.schema([("id", pa.string()), ("ts", pa.int64()), ("day", pa.date32()), ("n", pa.int64()),
                        ("amt", pa.decimal128(6, 2)), ("ok", pa.bool_())])
    t.insert(pa.Table.from_pylist(rows, schema=schema))
    res = sync_and_compare(t, "typed partitions")
    spec = static_table(res).spec()
    assert [f.name for f in spec.fields] == ["day", "n", "amt", "ok"]
    assert all(str(f.transform) == "identity" for f in spec.fields)
    for name, (spec_id, part) in _files(res).items():
        assert spec_id == 0
        row = next(r for r in view_read(t).to_pylist() if r["_hoodie_file_name"] == name)
        # The partition tuple holds the column values of the file's rows, typed (pyiceberg keeps
        # a date as days since the epoch).
        assert list(part) == [(row["day"] - dt.date(1970, 1, 1)).days, row["n"], row["amt"], row["ok"]]
    _check_filters(res, t, [("n == 2", ("n", 2)), ("day == '2024-01-02'", ("day", dt.date(2024, 1, 2))),
                            ("ok == true", ("ok", True)), ("amt == 1.50", ("amt", decimal.Decimal("1.50")))])


def test_url_encoded_values(tmp_path):
    t = _create(tmp_path / "t", "grp", hive_style_partitioning=True,
                options={"hoodie.datasource.write.partitionpath.urlencode": "true"})
    groups = ["a/b", "x=y", "50%", "plain", "sp ace"]
    t.insert(pa.table({"id": [f"k{i}" for i in range(5)], "ts": list(range(5)), "grp": groups}))
    res = sync_and_compare(t, "url-encoded partitions")
    assert sorted(p[0] for _, p in _files(res).values()) == sorted(groups)
    _check_filters(res, t, [(f"grp == '{g}'", ("grp", g)) for g in ("a/b", "x=y", "50%")])


def test_a_single_plain_field_whose_values_nest_folders_keeps_its_identity_partitioning(tmp_path):
    """Hudi's quickstart partitions by region/country/city in one field (lakehouse.partition_path
    takes such values at one depth): the folders are the value, so the spec stays identity."""
    t = _create(tmp_path / "t", "grp")
    groups = ["americas/brazil/sao_paulo", "americas/united_states/san_francisco", "asia/india/chennai"]
    t.insert(pa.table({"id": [f"k{i}" for i in range(3)], "ts": list(range(3)), "grp": groups}))
    res = sync_and_compare(t, "nested values of one field")
    assert sorted((spec, p[0]) for spec, p in _files(res).values()) == [(0, g) for g in sorted(groups)]
    _check_filters(res, t, [(f"grp == '{g}'", ("grp", g)) for g in groups[:2]])


def test_the_default_partition_holds_nulls_and_empty_strings(tmp_path):
    t = _create(tmp_path / "t", "city")
    t.insert(pa.table({"id": ["a", "b", "c"], "ts": [1, 2, 3], "city": [None, None, "sf"]}))
    res = sync_and_compare(t, "nulls")
    assert sorted(((s, tuple(p)) for s, p in _files(res).values()), key=repr) == [(0, ("sf",)), (0, (None,))]
    # An empty string joins the nulls in Hudi's default partition (and in their small file):
    # no single partition value describes that file, so it is published unpartitioned.
    t.insert(pa.table({"id": ["d"], "ts": [4], "city": [""]}))
    res = sync_and_compare(t, "nulls and an empty string")
    assert sorted((s, tuple(p)) for s, p in _files(res).values()) == [(0, ("sf",)), (1, ())]
    assert static_table(res).specs()[1].is_unpartitioned()
    _check_filters(res, t, [("city == ''", ("city", "")), ("city == 'sf'", ("city", "sf")),
                            ("city is null", ("city", None))])
    assert_every_snapshot_is_its_instant(t, res)

    only_empty = _create(tmp_path / "e", "city")
    only_empty.insert(pa.table({"id": ["a", "b"], "ts": [1, 2], "city": ["", ""]}))
    res = sync_and_compare(only_empty, "empty strings")
    assert [(s, tuple(p)) for s, p in _files(res).values()] == [(0, ("",))]
    _check_filters(res, only_empty, [("city == ''", ("city", ""))])


def test_two_columns_with_the_complex_key_generator_mor(tmp_path):
    t = _create(tmp_path / "t", ["city", "n"], table_type="MERGE_ON_READ")
    t.insert(pa.table({"id": ["a", "b", "c", "d"], "ts": [1, 2, 3, 4], "city": ["sf", "sf", "la", "la"],
                       "n": pa.array([1, 2, 1, 2], pa.int32())}))
    t.upsert(pa.table({"id": ["a", "e"], "ts": [5, 6], "city": ["sf", "ny"], "n": pa.array([1, 3], pa.int32())}))
    t.compact(force=True)
    res = sync_and_compare(t, "complex key generator")
    assert sorted(tuple(p) for _, p in _files(res).values()) == [("la", 1), ("la", 2), ("ny", 3),
                                                                 ("sf", 1), ("sf", 2)]
    _check_filters(res, t, [("n == 1", ("n", 1)), ("city == 'ny'", ("city", "ny"))])
    assert_every_snapshot_is_its_instant(t, res)


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_timestamp_key_generator_is_unpartitioned(tmp_path, table_type):
    t = _create(tmp_path / "t", "ts", table_type=table_type,
                options={"hoodie.keygen.timebased.timestamp.type": "EPOCHMILLISECONDS",
                         "hoodie.keygen.timebased.output.dateformat": "yyyy/MM/dd"})
    day = 86_400_000
    t.insert(pa.table({"id": ["a", "b", "c"], "ts": [0, day, 2 * day], "v": ["1", "2", "3"]}))
    t.upsert(pa.table({"id": ["a"], "ts": [5], "v": ["4"]}))
    res = sync_and_compare(t, "timestamp-based partitions")
    assert static_table(res).spec().is_unpartitioned()
    assert all(s == 0 and len(p) == 0 for s, p in _files(res).values())
    assert_every_snapshot_is_its_instant(t, res)
