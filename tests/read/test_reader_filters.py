"""Row filters on reads, given as DNF tuples or as a ``pyarrow.compute`` Expression: applied to
the merged records (a base record filtered out may have been updated into the filter's range
by a log, and the other way round), so a filtered read equals the unfiltered read, filtered."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lakehouse
from lakehouse.iceberg import background
from lakehouse.read.reader import filters_to_expression


def _table(path, table_type):
    t = lakehouse.create_table(str(path), name="f", table_type=table_type, record_key="id",
                               ordering_field="ts", partition_by="p")
    t.upsert(pa.table({"id": ["a", "b", "c", "d"], "p": ["x", "x", "y", "y"], "ts": [1] * 4,
                       "v": [1, 5, 5, 1]}))
    # a: out of the range -> in; b: in -> out; c: deleted; d: untouched, out.
    t.upsert(pa.table({"id": ["a", "b"], "p": ["x", "x"], "ts": [2, 2], "v": [7, 0]}))
    t.delete(pa.table({"id": ["c"], "p": ["y"]}))
    return t


def _ids(t: pa.Table) -> list[str]:
    return sorted(t.column("id").to_pylist())


@pytest.mark.parametrize("table_type", ["MERGE_ON_READ", "COPY_ON_WRITE"])
@pytest.mark.parametrize("form", ["tuples", "expression"])
def test_filters_apply_to_the_merged_records(tmp_path, table_type, form):
    t = _table(tmp_path / "t", table_type)
    f = [("v", ">", 2)] if form == "tuples" else pc.field("v") > 2
    every = t.read(columns=["id", "v"])
    assert _ids(t.read(columns=["id", "v"], filters=f)) == \
        _ids(every.filter(pc.greater(every.column("v"), 2))) == ["a"]
    on_p = [("p", "=", "y")] if form == "tuples" else pc.field("p") == "y"
    assert _ids(t.read(columns=["id"], filters=on_p)) == ["d"]
    ro = t.read(columns=["id", "v"], read_optimized=True)
    assert _ids(t.read(columns=["id", "v"], filters=f, read_optimized=True)) == \
        _ids(ro.filter(pc.greater(ro.column("v"), 2)))
    first = t.timeline.completed_writes().first.time
    changes = t.read_changes(first, columns=["id", "v"])
    assert _ids(t.read_changes(first, columns=["id", "v"], filters=f)) == \
        _ids(changes.filter(pc.greater(changes.column("v"), 2)))


@pytest.mark.parametrize("layout", [
    {"partition_by": "p"},
    {"partition_by": "p", "options": {"hoodie.datasource.write.hive_style_partitioning": "true"}},
    {"partition_by": "p", "options": {"hoodie.datasource.write.partitionpath.urlencode": "true"}},
    {"partition_by": ["p", "n"]},
])
def test_a_read_pinning_the_partition_values_lists_those_folders_alone(tmp_path, listed_data_folders, layout):
    """As Hudi's file index lists only the partition path prefix that equality filters give
    (hoodie.datasource.read.file.index.listing.partition-path-prefix.analysis.enabled): a read
    of one of many partitions lists one folder, and returns what the whole table's filtered read
    does."""
    layout = dict(layout)
    options = layout.pop("options", {})
    multi = isinstance(layout["partition_by"], list)
    nests = "urlencode" in str(options)  # '/' escaped: one folder (plain, it nests a folder deeper)
    t = lakehouse.create_table(str(tmp_path / "t"), name="f", table_type="MERGE_ON_READ", record_key="id",
                               ordering_field="ts", options=options, **layout)
    # A space, a nested (or escaped) '/', an escaped character, the default partition.
    ps = ["a", "b c", "d/e" if nests else "d-e", "f:g", ""]
    # and nulls (i % 6 == 5), which share the default partition with the empty strings.
    rows = [{"id": f"k{i}", "p": ps[i % 6] if i % 6 < 5 else None, "n": i // 6 % 3, "ts": 1, "v": i}
            for i in range(60)]
    t.upsert(pa.Table.from_pylist(rows))
    t.upsert(pa.Table.from_pylist([dict(r, ts=2, v=-r["v"]) for r in rows[:20]]))
    background.wait_all()  # the Iceberg publishing lists the table too
    every = t.read(columns=["id", "p", "n", "v"])
    listed = listed_data_folders
    for p in [*ps, "absent"]:
        for f in ([("p", "=", p), ("n", "in", [1, 2])] if multi else [("p", "=", p)],
                  [("p", "in", [p, "a"]), ("n", "=", 0)] if multi else [("p", "in", [p, "a"])]):
            listed.clear()
            got = t.read(columns=["id", "p", "n", "v"], filters=f)
            expect = every.filter(filters_to_expression(f, every.schema))
            assert sorted(got.to_pylist(), key=lambda r: r["id"]) == \
                sorted(expect.to_pylist(), key=lambda r: r["id"]), f
            pinned = {v for c, op, v in f if c == "p" for v in ([v] if op == "=" else v)}
            combos = len(pinned) * (2 if multi and f[1][1] == "in" else 1)
            if p == "absent":
                # A folder that is no partition: the whole table is listed (its folders may be
                # named otherwise than its properties say), then pruned.
                assert "" in listed, (f, listed)
            else:
                assert len(listed) == combos, (f, listed)
    listed.clear()
    t.read(filters=[("p", ">", "a")])  # a range pins no value: the whole table, then pruned
    assert "" in listed
    # An `in` naming None matches the nulls, which live in the default partition.
    for f in ([("p", "in", ["a", None])], [("p", "in", [None])]):
        got = t.read(columns=["id", "p", "n", "v"], filters=f)
        expect = every.filter(filters_to_expression(f, every.schema))
        assert sorted(got.to_pylist(), key=lambda r: r["id"]) == \
            sorted(expect.to_pylist(), key=lambda r: r["id"]), f
    assert every.filter(filters_to_expression([("p", "in", [None])], every.schema)).num_rows == 10


def test_a_read_pinning_a_partition_of_a_type_whose_folder_text_may_differ_lists_the_table(
        tmp_path, listed_data_folders):
    """Folders another writer named (Java Hudi's text for a date, say) must not be missed: only
    string and integer partition values are turned into folder names."""
    import datetime
    t = lakehouse.create_table(str(tmp_path / "t"), name="f", table_type="MERGE_ON_READ", record_key="id",
                               ordering_field="ts", partition_by="d")
    t.upsert(pa.table({"id": ["a", "b"], "d": [datetime.date(2024, 1, 1), datetime.date(2024, 1, 2)],
                       "ts": [1, 1]}))
    background.wait_all()
    listed_data_folders.clear()
    got = t.read(filters=[("d", "=", datetime.date(2024, 1, 1))])
    assert got.column("id").to_pylist() == ["a"] and "" in listed_data_folders
