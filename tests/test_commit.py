"""lakehouse.commit: one commit path for every action, with its post-commit hooks."""

from __future__ import annotations

import logging

import pyarrow as pa

import lakehouse
from lakehouse.commit import post_commit_hook
from lakehouse.meta_client import TableMetaClient


def _batch(ids, ts):
    return pa.table({"id": [f"k{i}" for i in ids], "p": ["a" if i % 2 else "b" for i in ids],
                     "ts": [ts] * len(ids), "v": [i * ts for i in ids]})


def _table(path, **options):
    return lakehouse.create_table(str(path), name="t", record_key="id", partition_by="p",
                                  ordering_field="ts", options={"hoodie.cleaner.commits.retained": 1,
                                                                **options})


def test_every_action_completes_through_the_commit_path_and_runs_the_hooks(tmp_path):
    t = _table(tmp_path / "t")
    calls: list[tuple[str, ...]] = []

    def record(meta, instants):
        assert isinstance(meta, TableMetaClient) and meta.path == t.path
        # A hook runs once the instant is durable: the timeline shows it completed.
        assert all(meta.timeline.is_completed(i.time) for i in instants)
        calls.append(tuple(f"{i.action}" for i in instants))

    with post_commit_hook(record):
        for ts in range(1, 4):
            t.upsert(_batch(range(10), ts))
        assert calls == [("deltacommit",)] * 3
        del calls[:]
        assert t.compact(force=True).committed
        assert calls == [("compaction",)]
        del calls[:]
        t.upsert(_batch(range(5), 9))
        assert t.clean().files_deleted > 0
        assert calls == [("deltacommit",), ("clean",)]
        del calls[:]
        sp = t.create_savepoint()
        assert calls == [("savepoint",)]
        del calls[:]
        t.upsert(_batch(range(3), 10))
        t.rollback()
        assert calls == [("deltacommit",), ("rollback",)]
        del calls[:]
        t.upsert(_batch(range(3), 11))
        t.upsert(_batch(range(3), 12))
        del calls[:]
        t.restore(sp.instant)
        # A restore's rollbacks complete one by one; its hooks run once, at the end.
        assert calls == [("rollback", "rollback")]
        del calls[:]
        t.delete_partitions(["a"])
        assert calls == [("replacecommit",)]
    t.upsert(_batch(range(3), 13))
    assert len(calls) == 1  # unregistered at the end of the block


def test_a_failing_hook_never_fails_the_commit(tmp_path, caplog):
    t = _table(tmp_path / "t")

    def broken(meta, instants):
        raise RuntimeError("hook down")
    with post_commit_hook(broken), caplog.at_level(logging.WARNING, "lakehouse.commit"):
        first = t.upsert(_batch(range(3), 1))
    assert t.timeline.is_completed(first) and "hook down" in caplog.text
    assert t.read().num_rows == 3


def test_with_several_writers_the_hooks_run_after_the_lock_is_released(tmp_path):
    """Iceberg publishing (the default hook) has its own optimistic protocol: it must not keep
    other writers waiting for the table lock."""
    _table(tmp_path / "t", **{"hoodie.write.concurrency.mode": "OPTIMISTIC_CONCURRENCY_CONTROL"})
    t = lakehouse.open_table(str(tmp_path / "t"))
    held: list[bool] = []

    def record(meta, instants):
        held.append(meta.transactions.lease is not None)
    with post_commit_hook(record):
        t.upsert(_batch(range(3), 1))
        t.upsert(_batch(range(3), 2))
        t.rollback()
    assert held == [False, False, False]
