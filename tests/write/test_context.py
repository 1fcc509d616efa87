"""lakehouse.write.context: the frozen, picklable context every step of a write reads (as Hudi's
action executors take narrow inputs: BaseActionExecutor(context, config, table, instantTime))."""

from __future__ import annotations

import dataclasses
import pickle

import pyarrow as pa
import pytest

import lakehouse
from lakehouse.config import IndexType
from lakehouse.write.client import WriteClient
from lakehouse.write.context import WriteContext
from lakehouse.write.operation import Operation


def _batch(n=6):
    return pa.table({"id": [f"k{i}" for i in range(n)], "p": ["a", "b"] * (n // 2), "ts": list(range(n))})


def test_the_context_is_frozen_and_a_pickled_one_keys_and_writes_alike(tmp_path):
    t = lakehouse.create_table(str(tmp_path / "t"), name="t", record_key="id", partition_by="p",
                               ordering_field="ts")
    client = WriteClient(t.meta_client, {"hoodie.parquet.max.file.size": 4 * 1024 * 1024,
                                         "hoodie.parquet.small.file.limit": 1024 * 1024})
    ctx = client.context
    with pytest.raises(dataclasses.FrozenInstanceError):
        ctx.config = None  # type: ignore[misc]
    shipped = pickle.loads(pickle.dumps(ctx))  # what a Spark executor gets
    assert shipped == ctx and shipped.write_config.max_file_size == 4 * 1024 * 1024
    rows = _batch()
    assert shipped.keygen.record_keys(rows).to_pylist() == ctx.keygen.record_keys(rows).to_pylist()
    assert (shipped.keygen.partition_paths(rows, row_offset=0).to_pylist()
            == ctx.keygen.partition_paths(rows, row_offset=0).to_pylist())
    assert shipped.spec == ctx.spec and shipped.spec.uses_ordering


def test_a_change_is_a_new_context_the_client_adopts(tmp_path):
    """A default Merge-On-Read table's first write fixes its bucket count (bucket_sizing.settle):
    the client works on with a new context; the one a step already holds stays as it was."""
    t = lakehouse.create_table(str(tmp_path / "t"), name="t", record_key="id", partition_by="p")
    client = WriteClient(t.meta_client)
    before = client.context
    assert before.config.index_type is IndexType.BUCKET
    client.write(_batch(), "upsert")
    assert client.context is not before and client.config is client.context.config
    assert client.context.keygen.config is client.context.config
    assert before.config.extra.get("lakehouse.bucket.index.num.buckets.auto") == "true"
    assert "lakehouse.bucket.index.num.buckets.auto" not in client.context.config.extra


def test_the_instants_column_ids_ride_on_the_context_to_the_handles(tmp_path):
    t = lakehouse.create_table(str(tmp_path / "t"), name="t", record_key="id", partition_by="p",
                               ordering_field="ts")
    client = WriteClient(t.meta_client)
    schema = _batch().schema
    ids = client.assign_field_ids(schema, t.timeline)
    plain = client.context.handle_context(client.storage, schema, "20260101000000000", op=Operation.UPSERT)
    numbered = client.context.for_instant(ids).handle_context(client.storage, schema, "20260101000000000")
    assert plain.field_ids is None
    assert numbered.field_ids == ids.paths and numbered.field_ids[("id",)] > 0
    # insert with hoodie.merge.allow.duplicate.on.inserts keeps both versions (Hudi's concat handle)
    dup = dataclasses.replace(client.context, write_config=dataclasses.replace(
        client.write_config, allow_duplicates_on_insert=True))
    assert dup.handle_context(client.storage, schema, "1", op=Operation.INSERT).concat_inserts
    assert not dup.handle_context(client.storage, schema, "1", op=Operation.UPSERT).concat_inserts
    assert isinstance(client.context, WriteContext)
