"""The key generator of a table created without a schema, chosen by its first write.

``create_table`` gives a table partitioned by one datetime column (a timestamp or a date) Hudi
Flink's timestamp-based key generator, with hourly or daily folders
(:func:`lakehouse.keygen.datetime_partitioning`). Without a schema the column's type is not known
then; the table is marked (:data:`lakehouse.keygen.KEYGEN_AUTO_KEY`) and the first write that
brings the column decides: :func:`choose` takes the decision in memory before the batch is keyed
(nothing is written for a batch that is refused), and :func:`persist` writes it to
``hoodie.properties`` under the table lock, with the instant's other first-write settings, before
any data file. A datetime column switches the table to the timestamp-based key generator, any
other type keeps the simple one. A table that already has writes (a Java writer, or lakehouse's
distributed Spark writer, whose tasks key rows with the stored key generator and so never choose)
keeps what it has; the mark is cleared."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from lakehouse.config import TableConfig
from lakehouse.errors import WriteError
from lakehouse.keygen import KEYGEN_AUTO_KEY, datetime_partitioning
from lakehouse.properties import read_table_config, rewrite_table_config
from lakehouse.write.bucket_sizing import has_writes
from lakehouse.commit import exclusive

if TYPE_CHECKING:
    from lakehouse.meta_client import TableMetaClient
    from lakehouse.timeline.active import ActiveTimeline


def undecided(config: TableConfig) -> bool:
    return config.extra.get(KEYGEN_AUTO_KEY) == "true"


def decided(stored: TableConfig, field_type: pa.DataType | None, written: bool) -> TableConfig:
    """``stored`` with its key generator chosen (the mark cleared)."""
    chosen = None if written or field_type is None else datetime_partitioning(field_type)
    props = {k: v for k, v in stored.to_properties().items() if k != KEYGEN_AUTO_KEY}
    props.update(chosen or {})
    return TableConfig.from_properties(props)


def choose(config: TableConfig, active: "ActiveTimeline", schema: pa.Schema) -> TableConfig | None:
    """In memory: the config with the key generator the table gets if this write is its first
    (``schema``: the batch's), or None where the table has one or the write decides nothing.
    Nothing is written here: :func:`persist` stores it."""
    if not undecided(config):
        return None
    field = config.partition_fields[0] if config.partition_fields else None
    if field is None or field not in schema.names:
        return None  # a write without the column (a delete by key) decides nothing
    return decided(config, schema.field(field).type, has_writes(active))


class ChosenElsewhere(WriteError):
    """The table's key generator was decided by another writer while this write chose one;
    ``stored`` is the table's config now, which the writer adopts before writing again."""

    def __init__(self, message: str, *, stored: TableConfig, help: str | None = None) -> None:
        super().__init__(message, help=help)
        self.stored = stored


def _check_same(stored: TableConfig, config: TableConfig) -> None:
    if stored.key_generator_class != config.key_generator_class:
        raise WriteError(f"the table's key generator was chosen meanwhile by another writer "
                         f"({stored.key_generator_class}); this write keyed its rows otherwise",
                         help="write the batch again")


def persist(meta: "TableMetaClient", config: TableConfig) -> None:
    """Under the table lock, before the instant: the choice :func:`choose` made (``config``) goes
    to ``hoodie.properties``, unless the table was decided meanwhile (by another writer)."""
    with exclusive(meta):
        stored = read_table_config(meta.storage)
        if not undecided(stored):
            _check_same(stored, config)
            return
        if has_writes(meta.active) and config.key_generator_class != stored.key_generator_class:
            raise ChosenElsewhere("another writer wrote into the table while this write chose its key "
                                  "generator; the table keeps the one it has", help="write the batch again",
                                  stored=decided(stored, None, True))
        before = stored.to_properties()
        changed = [k for k, v in config.to_properties().items() if before.get(k) != v]
        meta.check_lock()
        rewrite_table_config(meta.storage, config, may_change=(KEYGEN_AUTO_KEY, *changed),
                             before_data=True)
