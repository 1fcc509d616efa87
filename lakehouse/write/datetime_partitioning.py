"""The key generator of a table created without a schema, chosen by its first write.

``create_table`` gives a table partitioned by one datetime column (a timestamp or a date) Hudi
Flink's timestamp-based key generator, with hourly or daily folders
(:func:`lakehouse.keygen.datetime_partitioning`). Without a schema the column's type is not known
then; the table is marked (:data:`lakehouse.keygen.KEYGEN_AUTO_KEY`) and the first write that
brings the column decides, under the table lock, before any partition path is computed: a
datetime column switches the table to the timestamp-based key generator in ``hoodie.properties``,
any other type keeps the simple one. A table that already has writes (another writer decided, or
a Java writer wrote with the simple key generator) keeps what it has; the mark is cleared."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from lakehouse.config import TableConfig
from lakehouse.keygen import KEYGEN_AUTO_KEY, datetime_partitioning
from lakehouse.properties import read_table_config, rewrite_table_config
from lakehouse.timeline.instant import WRITE_ACTIONS, Action

if TYPE_CHECKING:
    from lakehouse.write.client import WriteClient


def undecided(config: TableConfig) -> bool:
    return config.extra.get(KEYGEN_AUTO_KEY) == "true"


def settle(client: "WriteClient", schema: pa.Schema) -> bool:
    """Decide the key generator from ``schema`` (the first write's batch) if the table waits for
    it; returns whether the client's config changed."""
    if not undecided(client.config):
        return False
    field = client.config.partition_fields[0] if client.config.partition_fields else None
    if field is None or field not in schema.names:
        return False  # a write without the column (a delete by key) decides nothing
    with client.meta.exclusive():
        stored = read_table_config(client.storage)
        if undecided(stored):
            written = any(i.action in WRITE_ACTIONS or i.action is Action.COMPACTION
                          for i in client.active.load())
            chosen = None if written else datetime_partitioning(schema.field(field).type)
            props = {k: v for k, v in stored.to_properties().items() if k != KEYGEN_AUTO_KEY}
            props.update(chosen or {})
            new = TableConfig.from_properties(props)
            client.meta.check_lock()
            rewrite_table_config(client.storage, new, may_change=(KEYGEN_AUTO_KEY, *(chosen or {})),
                                 before_data=True)
            stored = read_table_config(client.storage)
    client.adopt(stored)
    return True
