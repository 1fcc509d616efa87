"""A file slice's log records held within ``hoodie.memory.merge.max.size``: log files read one at
a time past the budget, the held versions merged down whenever they pass it."""

from __future__ import annotations

import dataclasses

import pyarrow as pa
import pytest

import lakehouse
from lakehouse.log.block import encode_rollback_command_block
from lakehouse.read.file_slice_reader import collect_slice, read_file_slice


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
