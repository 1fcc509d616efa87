"""A file slice's log records held within ``hoodie.memory.merge.max.size``: log files read one at
a time past the budget, the held versions merged down whenever they pass it."""

from __future__ import annotations

import dataclasses

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lakehouse
from lakehouse.log.block import encode_rollback_command_block
from lakehouse.columns import RECORD_KEY
from lakehouse.read.file_slice_reader import collect_slice, merge_over_base_rows, read_base_file, read_file_slice


def table(tmp_path, **options):
    return lakehouse.create_table(str(tmp_path / "t"), name="m", table_type="MERGE_ON_READ", record_key="id",
                                  ordering_field="ts", index="BUCKET",
                                  options={"hoodie.bucket.index.num.buckets": 1, **options})


def batch(keys, ts):
    return pa.table({"id": [f"k{k:05d}" for k in keys], "ts": [ts] * len(keys),
                     "v": [f"{ts}-{k}" for k in keys]})


def context(t, *, budget, visible=None):
    reader = t._reader()
    ctx = reader.slice_read_context(reader.schema(), set(t.timeline.completed_write_times), None, None, True)
    ctx = dataclasses.replace(ctx, merge_max_bytes=budget)
    return ctx if visible is None else dataclasses.replace(ctx, is_visible=visible)


def only_slice(t):
    [s] = t.file_system_view().latest_slices()
    return s


def by_key(tbl):
    return sorted(zip(tbl.column("id").to_pylist(), tbl.column("v").to_pylist()))


def test_a_backlog_of_updates_to_the_same_keys_is_held_as_about_one_round(tmp_path):
    t = table(tmp_path)
    keys = range(2000)
    t.upsert(batch(keys, 0))
    for r in range(1, 13):
        t.upsert(batch(keys, r))
    s = only_slice(t)
    assert len(s.log_files) >= 1
    whole = collect_slice(s, context(t, budget=None))
    assert sum(x.num_rows for x in whole.logs) == 12 * 2000  # every round held
    one_round = whole.logs[0].nbytes
    ctx = context(t, budget=2 * one_round)
    parts = collect_slice(s, ctx)
    assert ctx.stats["log_folds"] > 0
    assert sum(x.num_rows for x in parts.logs) <= 3 * 2000  # a merged round and what came after
    want = by_key(read_file_slice(s, context(t, budget=None)))
    assert want == by_key(read_file_slice(s, context(t, budget=2 * one_round)))
    assert want == sorted((f"k{k:05d}", f"12-{k}") for k in keys)


@pytest.mark.parametrize("budget", [None, 1])
def test_log_files_read_one_at_a_time_still_honour_a_later_rollback_command(tmp_path, budget):
    """A rollback command block may sit in a later log file than the blocks it cancels; read one
    log file at a time, the cancelled blocks come first, so the commands must be known before any
    block is taken (every instant counts as committed here, as archived ones do)."""
    t = table(tmp_path)
    t.upsert(batch(range(10), 1))
    cancelled = t.upsert(batch(range(10), 2))
    t.upsert(batch(range(5), 3))
    s = only_slice(t)
    assert len(s.log_files) == 2
    t.storage.append(s.log_files[-1].path, encode_rollback_command_block("29990101000000000", cancelled))
    s = only_slice(t)
    ctx = context(t, budget=budget, visible=lambda _: True)
    got = by_key(read_file_slice(s, ctx))
    assert got == sorted([(f"k{k:05d}", f"3-{k}") for k in range(5)] +
                         [(f"k{k:05d}", f"1-{k}") for k in range(5, 10)])
    if budget is not None:
        assert ctx.stats["log_folds"] > 0


def test_the_budget_is_a_validated_table_option(tmp_path):
    with pytest.raises(lakehouse.errors.ConfigError, match="hoodie.memory.merge.max.size"):
        table(tmp_path, **{"hoodie.memory.merge.max.size": "0"})


def test_a_process_sets_its_own_budget_when_opening_the_table(tmp_path):
    table(tmp_path)
    t = lakehouse.open_table(str(tmp_path / "t"), options={"hoodie.memory.merge.max.size": 4096})
    assert t._reader().memory.merge_max_size == 4096
    assert lakehouse.open_table(str(tmp_path / "t")).memory.merge_max_size == 1 << 30  # not stored


def test_merging_over_base_rows_the_caller_read_is_the_pinned_snapshot_read(tmp_path):
    # merge_over_base_rows (the Iceberg snapshot view's event-time path) takes the base rows of
    # the keys from its caller, decoded on a few columns; what it gives for each key must be what
    # a snapshot read pinned to those keys gives: late records losing, deletes, a record the logs
    # delete and bring back lower (Hudi's two-level merge lets the base record win then).
    t = table(tmp_path)
    t.bulk_insert(batch(range(20), 10))
    t.upsert(batch([1, 2, 3], 20))
    t.upsert(batch([2], 5))  # late: loses to ts 20
    t.delete(pa.table({"id": ["k00004", "k00005"]}))
    t.upsert(batch([5], 1))  # back after an unconditional delete, below the base record's ts
    t.upsert(batch([30, 31], 7))
    fs = only_slice(t)
    keys = pa.array([f"k{k:05d}" for k in (1, 2, 3, 4, 5, 6, 30)])
    ctx = context(t, budget=None)
    ctx.keys = keys
    whole = read_file_slice(fs, ctx)
    base = read_base_file(t.storage, fs.merged_base_file.path, ctx.schema, None)
    base = base.filter(pc.is_in(base.column(RECORD_KEY), value_set=keys))
    for columns in (None, [RECORD_KEY, "v"]):
        ctx = dataclasses.replace(context(t, budget=None), columns=columns)
        ctx.keys = keys
        got = merge_over_base_rows(fs, base.select(ctx.needed_columns()), ctx)
        assert by_key(got.select(["id", "v"]) if columns is None else
                      got.rename_columns(["id", "v"])) == by_key(whole), columns
    assert dict(by_key(whole))["k00002"] == "20-2" and "k00004" not in dict(by_key(whole))
