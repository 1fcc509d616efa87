"""lakehouse.commit: one lifecycle for every action (request, start, complete under the lock, the
lease checked), with its post-commit hooks: the meta sync tools the table's options turn on and the
meta client's own."""

from __future__ import annotations

import logging

import pyarrow as pa

import lakehouse
import pytest

from lakehouse import commit, meta_sync
from lakehouse.errors import ConfigError, LockLostError
from lakehouse.meta_client import TableMetaClient
from lakehouse.timeline.instant import Action


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

    t.meta_client.post_commit_hooks.append(record)
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
    t.meta_client.post_commit_hooks.remove(record)
    t.upsert(_batch(range(3), 13))
    assert len(calls) == 1
    # The hooks are the meta client's: another client of the same table runs none of them.
    lakehouse.open_table(t.path).upsert(_batch(range(3), 14))
    assert len(calls) == 1


def test_a_failing_hook_never_fails_the_commit(tmp_path, caplog):
    t = _table(tmp_path / "t")

    def broken(meta, instants):
        raise RuntimeError("hook down")
    t.meta_client.post_commit_hooks.append(broken)
    with caplog.at_level(logging.WARNING, "lakehouse.commit"):
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
    t.meta_client.post_commit_hooks.append(record)
    t.upsert(_batch(range(3), 1))
    t.upsert(_batch(range(3), 2))
    t.rollback()
    assert held == [False, False, False]


def test_the_iceberg_sync_tool_is_loaded_from_the_tables_options(tmp_path):
    """As Hudi runs the sync tools its config names (HoodieSyncConfig's
    hoodie.meta.sync.client.tool.class): hoodie.meta.sync.iceberg.enabled, stored with the table,
    turns the Iceberg publisher on or off per table; the table format names it by reference."""
    on = _table(tmp_path / "on")
    off = _table(tmp_path / "off", **{"hoodie.meta.sync.iceberg.enabled": "false"})
    assert [type(x).__name__ for x in meta_sync.configured(on.meta_client)] == ["IcebergSync"]
    assert meta_sync.configured(off.meta_client) == ()
    on.upsert(_batch(range(3), 1))
    off.upsert(_batch(range(3), 1))
    from lakehouse.iceberg import background
    background.wait_all()  # published by the table's background publisher
    assert (tmp_path / "on" / ".hoodie" / "iceberg" / "metadata" / "v1.metadata.json").exists()
    assert not (tmp_path / "off" / ".hoodie" / "iceberg").exists()
    # What a tool published seeds the column ids of a table whose commits record none.
    schema, last = meta_sync.published_schema(on.meta_client)
    assert last == schema.highest_field_id and "v" in {f.name for f in schema.fields}
    assert meta_sync.published_schema(off.meta_client) is None


def test_lifecycle_steps_under_the_lock_check_the_lease_first(tmp_path):
    """request, start and complete under commit.exclusive check the lease before they touch the
    timeline: a holder whose lease ran out (a stalled process) changes nothing."""
    t = _table(tmp_path / "t", **{"hoodie.write.concurrency.mode": "OPTIMISTIC_CONCURRENCY_CONTROL"})
    meta = lakehouse.open_table(t.path).meta_client
    req = commit.request(meta, Action.CLEAN, b"")
    inflight = commit.start(meta, commit.request(meta, Action.CLEAN, b""))

    def timeline_files():
        return sorted(p.name for p in (tmp_path / "t" / ".hoodie").iterdir() if p.is_file())
    before = timeline_files()

    def expire():
        raise LockLostError("lease expired")
    with commit.exclusive(meta):
        meta.transactions.check = expire
        for step in (lambda: commit.request(meta, Action.CLEAN, b""), lambda: commit.start(meta, req),
                     lambda: commit.complete(meta, inflight, b"")):
            with pytest.raises(LockLostError):
                step()
    assert timeline_files() == before
    # Outside a hold there is no lease to check (a clean and a savepoint complete outside the lock).
    assert commit.start(meta, req).is_inflight


def test_hooks_of_what_completes_under_the_lock_run_once_it_is_released(tmp_path):
    t = _table(tmp_path / "t")
    seen: list[tuple[bool, int]] = []
    t.meta_client.post_commit_hooks.append(
        lambda meta, instants: seen.append((meta.holds_lock(), len(instants))))
    with commit.exclusive(t.meta_client):
        t.upsert(_batch(range(3), 1))
        t.upsert(_batch(range(3), 2))
        assert seen == []
    assert seen == [(False, 2)]
    with pytest.raises(RuntimeError), commit.exclusive(t.meta_client):
        t.upsert(_batch(range(3), 3))
        raise RuntimeError("the block failed: its hooks are skipped, as a crash would")
    assert seen == [(False, 2)]


def test_a_sync_tool_that_cannot_be_loaded_is_a_config_error_naming_it():
    meta_sync.load.cache_clear()
    with pytest.raises(ConfigError, match="lakehouse.nowhere:Tool") as e:
        meta_sync.load("lakehouse.nowhere:Tool")
    assert "hoodie.meta.sync.iceberg.enabled=false" in e.value.help
