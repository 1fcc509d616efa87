"""The table's schema at an instant, found as Hudi's ``TableSchemaResolver`` finds it: the schema
the latest completed write (at or before the instant) recorded in its commit metadata, else the
one the table was created with (``hoodie.table.create.schema``).

Every part that needs the schema (reads, writes checking a batch, compaction, the Iceberg
publish) asks here, on a timeline it already holds, instead of building a query reader that lists
the timeline again. Commit metadata is cached by :class:`~lakehouse.timeline.active.ActiveTimeline`;
the Avro-to-Arrow conversion is cached per schema text, so a timeline's schema is worked out once.
"""

from __future__ import annotations

import functools
import json

import pyarrow as pa

from lakehouse.columns import META_FIELDS
from lakehouse.config import TableConfig
from lakehouse.schema import avro_to_arrow_schema
from lakehouse.timeline.active import ActiveTimeline, Timeline

META_SCHEMA = pa.schema([pa.field(n, pa.string()) for n in META_FIELDS])


def with_meta_fields(schema: pa.Schema) -> pa.Schema:
    """``schema`` with Hudi's five meta fields first (as every Hudi file and read has them)."""
    fields = [f for f in META_SCHEMA]
    fields += [f for f in schema if f.name not in META_FIELDS]
    return pa.schema(fields)


def table_avro_schema(active: ActiveTimeline, config: TableConfig, timeline: Timeline,
                      as_of: str | None = None) -> str | None:
    """The table's Avro schema (JSON text) as of ``as_of`` (default: the latest) on ``timeline``;
    None for a table created without one and never written."""
    writes = timeline.completed_writes()
    if as_of is not None:
        writes = writes.before_or_on(as_of)
    for inst in reversed(writes.instants):
        schema = active.commit_metadata(inst).schema
        if schema:
            return schema
    return config.create_schema


def table_schema(active: ActiveTimeline, config: TableConfig, timeline: Timeline,
                 as_of: str | None = None) -> pa.Schema:
    """:func:`table_avro_schema` in Arrow types, the meta fields first (only them when none)."""
    avro = table_avro_schema(active, config, timeline, as_of)
    return arrow_schema_of(avro) if avro else META_SCHEMA


def recorded_schema(active: ActiveTimeline, config: TableConfig, timeline: Timeline) -> pa.Schema | None:
    """The latest schema as the writer records it (no meta fields added); None before any."""
    avro = table_avro_schema(active, config, timeline)
    return _arrow_of(avro) if avro else None


@functools.lru_cache(maxsize=64)
def arrow_schema_of(avro: str) -> pa.Schema:
    """An Avro schema text in Arrow types, with the meta fields."""
    return with_meta_fields(_arrow_of(avro))


@functools.lru_cache(maxsize=64)
def _arrow_of(avro: str) -> pa.Schema:
    return avro_to_arrow_schema(json.loads(avro))
