"""Row filters on reads, given as DNF tuples or as a ``pyarrow.compute`` Expression: applied to
the merged records (a base record filtered out may have been updated into the filter's range
by a log, and the other way round), so a filtered read equals the unfiltered read, filtered."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lakehouse


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
