"""The table's schema at an instant, as Hudi's TableSchemaResolver finds it: the latest completed
write's recorded schema at or before the instant, else ``hoodie.table.create.schema``."""

from __future__ import annotations

import pyarrow as pa

import lakehouse
from lakehouse.columns import META_FIELDS
from lakehouse.timeline.schema_resolver import (META_SCHEMA, arrow_schema_of, recorded_schema, table_avro_schema,
                                                table_schema)


def test_the_schema_follows_the_writes_that_changed_it(tmp_path):
    t = lakehouse.create_table(str(tmp_path / "t"), name="t", record_key="id", ordering_field="ts")
    active, config = t.active, t.config
    assert table_avro_schema(active, config, active.load()) is None  # created without a schema
    assert table_schema(active, config, active.load()) == META_SCHEMA
    assert recorded_schema(active, config, active.load()) is None
    t.upsert(pa.table({"id": ["a"], "ts": [1]}))
    first = active.load().completed_writes().last.time
    t.upsert(pa.table({"id": ["b"], "ts": [2], "note": ["added"]}))  # a new column
    timeline = active.load()
    now = table_schema(active, config, timeline)
    assert now.names == [*META_FIELDS, "id", "ts", "note"]
    assert table_schema(active, config, timeline, first).names == [*META_FIELDS, "id", "ts"]
    assert recorded_schema(active, config, timeline).names == ["id", "ts", "note"]
    assert t.schema() == now and t.schema(first) == table_schema(active, config, timeline, first)


def test_the_create_schema_answers_before_the_first_write(tmp_path):
    schema = pa.schema([("id", pa.string()), ("v", pa.float64())])
    t = lakehouse.create_table(str(tmp_path / "t"), name="t", record_key="id", schema=schema)
    assert table_schema(t.active, t.config, t.active.load()).names == [*META_FIELDS, "id", "v"]


def test_a_schema_text_is_converted_once():
    avro = ('{"type":"record","name":"r","fields":[{"name":"id","type":"string"},'
            '{"name":"n","type":["null","long"],"default":null}]}')
    assert arrow_schema_of(avro) is arrow_schema_of(avro)
    assert arrow_schema_of(avro).names == [*META_FIELDS, "id", "n"]
