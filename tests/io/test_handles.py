"""Base files and log blocks as the write handles encode them (lakehouse.io.handles)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lakehouse
from tests.write.test_operations import files


def _dictionary_columns(path: str) -> set[str]:
    md = pq.ParquetFile(path).metadata
    rg = md.row_group(0)
    return {rg.column(i).path_in_schema for i in range(rg.num_columns) if rg.column(i).has_dictionary_page}


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_columns_of_distinct_values_are_written_without_a_dictionary(tmp_path, table_type):
    # A dictionary of (nearly) all-distinct values is built up to its page limit and then thrown
    # away; the writer leaves such columns plain and keeps dictionaries where values repeat.
    n = 40_000
    rng = np.random.default_rng(3)
    batch = pa.table({
        "id": [f"k{i:06d}" for i in range(n)],
        "ts": pa.array(rng.integers(0, 1 << 40, n), pa.int64()),
        "lat": rng.uniform(-90, 90, n),
        "city": pa.array(rng.choice(["a", "b", "c"], n)),
        "fare": np.round(rng.gamma(2.0, 12.0, n), 1),  # repeats: ~1,000 distinct values
        "flag": rng.random(n) < 0.5,
        "stops": pa.array([[int(v)] for v in rng.integers(0, 1 << 40, n)], pa.list_(pa.int64())),  # nested: not sampled (no distinct count for lists)
        "p": ["x"] * n,
    })
    table = lakehouse.create_table(str(tmp_path / "t"), name="t", table_type=table_type, record_key="id",
                                   partition_by="p", ordering_field="ts")
    table.bulk_insert(batch)
    [base] = files(tmp_path / "t", lambda name: name.endswith(".parquet"))
    with_dictionary = _dictionary_columns(base)
    assert {"city", "fare", "_hoodie_commit_time", "_hoodie_partition_path"} <= with_dictionary
    assert not with_dictionary & {"ts", "lat", "id", "_hoodie_record_key", "_hoodie_commit_seqno"}
    assert table.read().sort_by("id").select(batch.column_names).equals(batch)


def test_a_small_file_keeps_its_dictionaries(tmp_path):
    # Under twice the sample (16,384 rows) a column is not judged: its dictionary is small anyway.
    n = 1_000
    rng = np.random.default_rng(4)
    batch = pa.table({"id": [f"k{i:04d}" for i in range(n)], "ts": pa.array(rng.integers(0, 1 << 40, n), pa.int64()),
                      "lat": rng.uniform(-90, 90, n), "p": ["x"] * n})
    table = lakehouse.create_table(str(tmp_path / "t"), name="t", table_type="COPY_ON_WRITE", record_key="id",
                                   partition_by="p", ordering_field="ts")
    table.bulk_insert(batch)
    [base] = files(tmp_path / "t", lambda name: name.endswith(".parquet"))
    assert {"ts", "lat"} <= _dictionary_columns(base)


def test_a_bounded_write_packs_its_bloom_filter_and_writes_the_same_footer(tmp_path):
    # lakehouse.write.spill writes base files with packed bloom filters (a bit per bit while
    # the file is open); the footer must be the one a bool-backed filter writes, row growth of
    # Hudi's HoodieDynamicBoundedBloomFilter included (more keys than num_entries).
    import dataclasses

    from lakehouse.io.base_file_writer import BaseFileWriter
    from lakehouse.io.handles import with_meta
    from lakehouse.io.markers import MarkerType
    from lakehouse.write.client import WriteClient

    n = 7_000
    batch = pa.table({"id": [f"k{i:05d}" for i in range(n)], "ts": pa.array(range(n), pa.int64()), "p": ["x"] * n})
    table = lakehouse.create_table(str(tmp_path / "t"), name="t", table_type="COPY_ON_WRITE", record_key="id",
                                   partition_by="p", ordering_field="ts",
                                   options={"hoodie.index.bloom.num_entries": "3000",
                                            "hoodie.bloom.index.filter.dynamic.max.entries": "6000"})
    client = WriteClient(table.meta_client)
    footers = []
    for packed in (False, True):
        ctx = dataclasses.replace(client.context.handle_context(client.storage, batch.schema, "20260101000000000"), packed_bloom=packed)
        w = BaseFileWriter(ctx, "x", f"{'ab'[packed]}0000000-0000-0000-0000-000000000000-0", 0, MarkerType.CREATE)
        assert (w._bloom._bits is None) == packed
        for off in range(0, n, 2_500):
            part = batch.slice(off, 2_500)
            w.write(with_meta(part, instant_time=ctx.instant_time, task=0, partition="x", file_name=str(w.name),
                              keys=part.column("id"), schema=ctx.schema))
        w.close()
        md = pq.ParquetFile(str(tmp_path / "t" / w.path)).metadata.metadata
        footers.append({k: v for k, v in md.items() if k.startswith((b"org.apache.hudi", b"hoodie_"))})
    assert footers[0] == footers[1] and b"org.apache.hudi.bloomfilter" in footers[0]
    bf = lakehouse.bloom_filter.BloomFilter.deserialize(footers[0][b"org.apache.hudi.bloomfilter"],
                                                        footers[0][b"hoodie_bloom_filter_type_code"])
    assert bf.num_rows == 2 and bf.might_contain(batch.column("id")).all()


def test_a_routed_merge_takes_the_new_keys_in_parts_and_writes_what_the_whole_merge_writes(tmp_path):
    # Hudi's HoodieMergeHandle writes the incoming records no old record matched after the old
    # file; a merge too large to hold (lakehouse.write.spill) gets them in parts by key: the
    # same rows and write statistics as the merge given every record at once.
    import pyarrow.compute as pc

    from lakehouse.columns import DELETE, KEY, SEQ, UNCONDITIONAL
    from lakehouse.io.handles import base_file_pieces, merge_base_file
    from lakehouse.write.client import WriteClient

    n = 30_000
    base = pa.table({"id": [f"k{i:06d}" for i in range(n)], "ts": pa.array([1] * n, pa.int64()),
                     "pad": ["x" * 40] * n, "p": ["x"] * n})
    table = lakehouse.create_table(str(tmp_path / "t"), name="t", table_type="COPY_ON_WRITE", record_key="id",
                                   partition_by="p", ordering_field="ts", options={"write.task.max.size": "0.5"})
    table.bulk_insert(base)
    [slice_] = table.file_system_view().latest_slices()
    ids = list(range(0, n, 5)) + list(range(n, n + 9_000))  # updates, then keys the file lacks
    m = len(ids)
    incoming = pa.table({"id": [f"k{i:06d}" for i in ids], "ts": pa.array([2] * m, pa.int64()),
                         "pad": ["y" * 40] * m, "p": ["x"] * m})
    incoming = incoming.append_column(KEY, incoming.column("id")).append_column(
        SEQ, pa.array(range(1, m + 1), pa.int64())).append_column(
        DELETE, pc.equal(pc.bit_wise_and(pa.array(ids), 63), 7)).append_column(UNCONDITIONAL, pa.repeat(False, m))
    client = WriteClient(table.meta_client)
    out = {}
    for routed in (False, True):
        ctx = client.context.handle_context(client.storage, base.schema, f"2026010100000000{int(routed)}")
        if routed:
            at = base_file_pieces(ctx, slice_.base_file.path, incoming.column(KEY).combine_chunks())
            assert at is not None and at.max() > 2 and (at < 0).sum() == 9_000
            new = incoming.filter(pa.array(at < 0))
            parts = [new.slice(i, 2_000) for i in range(0, new.num_rows, 2_000)]
            taken = []

            class Routed:
                def piece(self, index):
                    return incoming.filter(pa.array(at == index))

                def rest(self):
                    for part in parts:
                        taken.append(part.num_rows)
                        yield part
            stat = merge_base_file(ctx, base_slice=slice_, incoming=Routed(), task=0)
            assert taken == [2_000] * 4 + [1_000]
        else:
            stat = merge_base_file(ctx, base_slice=slice_, incoming=incoming, task=0)
        rows = pq.read_table(str(tmp_path / "t" / stat.path), columns=["id", "ts", "pad"])
        out[routed] = (sorted(rows.to_pylist(), key=lambda r: r["id"]),
                       (stat.num_writes, stat.num_inserts, stat.num_update_writes, stat.num_deletes))
    assert out[True] == out[False]
    assert out[True][1][0] == n + 9_000 - sum(1 for i in ids if i & 63 == 7)
