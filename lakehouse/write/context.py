"""What every step of one write reads: the table's config, the write's config, the key
generator and merge rules that follow from them, and the column ids of its instant.

As Hudi's action executors take narrow, fixed inputs (``BaseActionExecutor(context, config,
table, instantTime)``) instead of calling back into the write client, preparation, assignment,
the write buffers, the spill and the file handles take a :class:`WriteContext`. It is frozen (a
change, like a table's first write fixing its bucket count, is a new context) and picklable: the
Spark writer ships it to its executors, which then need no table opened to key, route and write
their rows. I/O (the store, the timeline, the lock) stays with the meta client.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np
import pyarrow as pa

from lakehouse.config import IndexType, TableConfig, WriteConfig
from lakehouse.consistent_hashing import HashingMetadata
from lakehouse.field_ids import FieldIds
from lakehouse.io.handles import HandleContext, schema_json, writes_bloom
from lakehouse.io.markers import Markers
from lakehouse.keygen import KeyGenerator
from lakehouse.merge import MergeSpec
from lakehouse.schema import arrow_to_avro_schema
from lakehouse.storage.base import Storage
from lakehouse.timeline.schema_resolver import with_meta_fields
from lakehouse.write.bucket_layout import BucketLayout
from lakehouse.write.operation import Operation


@dataclass(frozen=True)
class WriteContext:
    config: TableConfig
    write_config: WriteConfig
    # The ids of the instant's columns (lakehouse.field_ids), put on its base files; None until
    # the instant has them.
    field_ids: FieldIds | None = None
    # File groups a pending clustering rewrites, by that clustering's instant: they take no
    # inserts, and an update or delete of a record in one is refused (assign.update_target).
    clustering: Mapping[tuple[str, str], str] = field(default_factory=dict)
    # How the bucket index finds each record's file group (with the partitions' hash rings on a
    # consistent-hashing table, loaded for the partitions the write goes to).
    buckets: BucketLayout = field(default_factory=BucketLayout)
    # Derived from config: the table's key generator and partition spec, its merge rules.
    keygen: KeyGenerator = field(init=False, repr=False, compare=False)
    spec: MergeSpec = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "keygen", KeyGenerator(self.config))
        object.__setattr__(self, "spec", MergeSpec(self.config.merge_mode, self.config.ordering_field))

    def adopting(self, config: TableConfig) -> "WriteContext":
        """This context for the table's config ``config`` (its bucket count or key generator
        just fixed by a first write)."""
        return dataclasses.replace(self, config=config)

    def for_instant(self, ids: FieldIds | None) -> "WriteContext":
        """This context with the column ids of the instant being written."""
        return dataclasses.replace(self, field_ids=ids)

    def for_clustering(self, file_groups: Mapping[tuple[str, str], str]) -> "WriteContext":
        """This context with the file groups pending clusterings rewrite (on the write's view)."""
        fgs = dict(file_groups)
        return dataclasses.replace(self, clustering=fgs, buckets=dataclasses.replace(self.buckets, clustering=fgs))

    def with_rings(self, rings: Mapping[str, HashingMetadata]) -> "WriteContext":
        """This context routing by the hash rings of the partitions it writes (consistent
        hashing; lakehouse.write.bucket_layout)."""
        return dataclasses.replace(self, buckets=dataclasses.replace(self.buckets, rings=dict(rings)))

    def record_buckets(self, rows: pa.Table) -> np.ndarray:
        """Each row's bucket in its partition (BUCKET index)."""
        return self.buckets.buckets(rows, self.config)

    def buffered(self, op: Operation) -> bool:
        """Whether ``op`` is written through bounded write buffers (lakehouse.write.buffer): on
        Merge-On-Read with the BUCKET index every record's file group is known from its key and
        every write appends, so a batch can be taken in chunks."""
        return self.config.is_mor and self.config.index_type is IndexType.BUCKET and not op.replaces

    def handle_context(self, storage: Storage, data_schema: pa.Schema, instant_time: str, *,
                       stage: int = 0, attempt: int = 0, op: Operation | None = None) -> HandleContext:
        """What the file handles of ``instant_time`` share (``stage``/``attempt``: a Spark task's,
        for its write token; ``op``: the write's operation)."""
        avro = arrow_to_avro_schema(data_schema, self.config.name, with_meta_fields=True)
        ids: Mapping[tuple[str, ...], int] | None = self.field_ids.paths if self.field_ids else None
        return HandleContext(storage=storage, markers=Markers(storage, instant_time),
                             instant_time=instant_time, schema=with_meta_fields(data_schema),
                             avro_schema=avro, avro_schema_json=schema_json(avro),
                             config=self.write_config, spec=self.spec, stage=stage, attempt=attempt,
                             bloom=writes_bloom(self.write_config, self.config.index_type),
                             key_fields=self.config.record_key_fields,
                             # Hudi's HoodieMergeHandleFactory: an operation that does not change
                             # records (insert) with allow.duplicate.on.inserts gets a concat handle.
                             concat_inserts=op is Operation.INSERT and self.write_config.allow_duplicates_on_insert,
                             field_ids=ids)
