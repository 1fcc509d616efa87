"""lakehouse.inspect.schema_history: the columns a table has and the writes that changed them,
from the commit metadata's schema (what every Hudi write records), checked against the schema
a read returns."""

from __future__ import annotations

import pyarrow as pa
import pytest

import lakehouse
from lakehouse.columns import META_FIELDS
from lakehouse.inspect.schema_history import schema_history
from lakehouse.inspect.timeline import instant_facts


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_a_write_that_adds_a_column_is_in_the_history(tmp_path, table_type):
    t = lakehouse.create_table(str(tmp_path / "t"), name="t", table_type=table_type, record_key="id",
                               partition_by="p", ordering_field="ts")
    first = t.upsert(pa.table({"id": [1, 2], "p": ["a", "b"], "ts": [1, 1], "v": ["x", "y"]}))
    t.upsert(pa.table({"id": [2], "p": ["b"], "ts": [2], "v": ["z"]}))  # same schema: no change
    added = t.upsert(pa.table({"id": [3], "p": ["a"], "ts": [3], "v": ["w"], "amount": [1.5]}))
    if table_type == "MERGE_ON_READ":
        t.compact(force=True)  # a compaction rewrites files, not the schema: not a change
    h = schema_history(instant_facts(t, archived=True))

    read = t.read().schema
    assert [c["name"] for c in h["columns"]] == [f.name for f in read if f.name not in META_FIELDS]
    assert {c["name"]: c["type"] for c in h["columns"]}["amount"] == "double"
    assert h["since"] == added
    assert [c["instant"] for c in h["changes"]] == [first, added]
    assert [a["name"] for a in h["changes"][0]["added"]] == ["id", "p", "ts", "v"]
    assert h["changes"][1]["added"] == [{"name": "amount", "type": "double", "nullable": True}]
    assert h["changes"][1]["dropped"] == [] and h["changes"][1]["changed"] == []


def test_an_empty_table_has_no_columns_yet(tmp_path):
    t = lakehouse.create_table(str(tmp_path / "t"), name="t", record_key="id")
    assert schema_history(instant_facts(t)) == {"columns": [], "since": None, "changes": []}
