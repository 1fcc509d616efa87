"""Iceberg metadata published by every commit, compaction, clean and rollback on its own (no
sync call), checked with pyiceberg: by default in the table's background publisher
(lakehouse.iceberg.background), with ``hoodie.meta.sync.iceberg.async=false`` before the commit
returns; a publish that fails never fails the commit, and the next one catches up."""

from __future__ import annotations

import pyarrow as pa
import pytest

import lakehouse
from lakehouse import faults
from lakehouse.iceberg import ICEBERG_ROOT, background
from tests.iceberg.iceberg_oracle import (
    assert_every_snapshot_is_its_instant,
    assert_same_table,
    iceberg_read,
    static_table,
    view_read,
)


def batch(ids, ts, city="paris"):
    return pa.table({"id": ids, "city": [city] * len(ids), "ts": [ts] * len(ids),
                     "v": [f"v{ts}"] * len(ids)})


def check(table, what, *, wait=True):
    """pyiceberg, from the table's Iceberg folder alone, reads what lakehouse reads (once the
    table's background publisher is done, unless ``wait`` is false)."""
    if wait:
        assert background.wait(table.storage.uri(), timeout=120)
    location = table.storage.uri(ICEBERG_ROOT)
    ice = iceberg_read(location)
    ours = view_read(table)
    assert_same_table(ice, ours, what)
    return static_table(location)


@pytest.mark.parametrize("asynchronous", [True, False], ids=["background", "inline"])
@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_every_completed_instant_publishes_its_snapshot(tmp_path, table_type, asynchronous):
    table = lakehouse.create_table(str(tmp_path), name="hook", table_type=table_type,
                                   record_key="id", partition_by="city", ordering_field="ts",
                                   options={"hoodie.cleaner.commits.retained": "1",
                                            "hoodie.meta.sync.iceberg.async": str(asynchronous).lower()})

    def check(table, what):  # inline: published before the commit returned, nothing to wait for
        return globals()["check"](table, what, wait=asynchronous)

    table.upsert(batch(["a", "b"], 1))
    check(table, "after the first commit")
    table.upsert(batch(["b", "c"], 2, city="rome"))
    table.delete(pa.table({"id": ["a"], "city": ["paris"]}))
    check(table, "after upserts and a delete")
    if table_type == "MERGE_ON_READ":
        table.compact(force=True)
        st = check(table, "after compaction")
        assert st.properties["lakehouse.iceberg.view"] == "snapshot"  # the default
    table.upsert(batch(["c"], 3, city="rome"))
    table.clean()
    st = check(table, "after a clean")
    assert_every_snapshot_is_its_instant(table, table.storage.uri(ICEBERG_ROOT))
    last = table.timeline.completed_writes().last.time
    assert st.current_snapshot().summary["hudi.instant"] == last
    table.rollback()  # the latest completed write
    st = check(table, "after rolling the latest write back")
    assert st.current_snapshot().summary["hudi.instant"] != last


def test_it_can_be_turned_off(tmp_path):
    table = lakehouse.create_table(str(tmp_path), name="off", record_key="id", partition_by="city",
                                   ordering_field="ts",
                                   options={"hoodie.meta.sync.iceberg.enabled": "false"})
    table.upsert(batch(["a"], 1))
    assert not table.storage.exists(ICEBERG_ROOT)


@pytest.mark.iceberg_failure_ok
def test_a_failed_publish_never_fails_the_commit_and_the_next_catches_up(tmp_path, monkeypatch, caplog):
    # Inline publishing: an injected fault reaches the writer (in the background publisher it
    # is logged: the test below).
    table = lakehouse.create_table(str(tmp_path), name="late", record_key="id",
                                   partition_by="city", ordering_field="ts",
                                   options={"hoodie.meta.sync.iceberg.async": "false"})
    import lakehouse.iceberg.publish as publish
    real = publish.sync_iceberg
    monkeypatch.setattr(publish, "sync_iceberg", lambda t, **kw: (_ for _ in ()).throw(OSError("store down")))
    first = table.upsert(batch(["a"], 1))
    assert table.timeline.is_completed(first) and "store down" in caplog.text
    assert not table.storage.exists(ICEBERG_ROOT)
    monkeypatch.setattr(publish, "sync_iceberg", real)
    # A crash half way through publishing (manifests written, no metadata version) is the same.
    faults.activate("iceberg.mid_publish", "raise")
    try:
        with pytest.raises(faults.InjectedFault):
            table.upsert(batch(["b"], 2))
    finally:
        faults.reset()
    table.upsert(batch(["c"], 3))
    check(table, "after catching up")
    ids = assert_every_snapshot_is_its_instant(table, table.storage.uri(ICEBERG_ROOT))
    assert first in ids and len(ids) == 3


@pytest.mark.iceberg_failure_ok
def test_a_failed_background_publish_is_logged_and_the_next_commit_catches_up(tmp_path, monkeypatch, caplog):
    table = lakehouse.create_table(str(tmp_path), name="late", record_key="id",
                                   partition_by="city", ordering_field="ts")
    import lakehouse.iceberg.publish as publish
    real = publish.sync_iceberg
    monkeypatch.setattr(publish, "sync_iceberg", lambda t, **kw: (_ for _ in ()).throw(OSError("store down")))
    first = table.upsert(batch(["a"], 1))
    assert background.wait(table.storage.uri(), timeout=120)
    assert table.timeline.is_completed(first) and "store down" in caplog.text
    assert not table.storage.exists(ICEBERG_ROOT)
    monkeypatch.setattr(publish, "sync_iceberg", real)
    second = table.upsert(batch(["b"], 2))
    check(table, "after catching up")
    ids = assert_every_snapshot_is_its_instant(table, table.storage.uri(ICEBERG_ROOT))
    assert first in ids and second in ids


def test_the_background_publisher_bounds_the_lag_and_sync_waits_for_it(tmp_path, monkeypatch):
    """Commits faster than their publishing: each still gets its snapshot; a writer more than
    MAX_BEHIND commits ahead waits for the publisher; sync_iceberg waits for it."""
    import threading
    import time

    import lakehouse.iceberg.publish as publish
    from lakehouse.iceberg import sync_iceberg

    table = lakehouse.create_table(str(tmp_path), name="lag", record_key="id",
                                   partition_by="city", ordering_field="ts")
    gate = threading.Event()
    real = publish.sync_iceberg
    runs = []

    def slow(meta, **kw):
        if threading.current_thread().name.startswith("iceberg-publisher"):
            runs.append(threading.current_thread().name)
            gate.wait(60)
        return real(meta, **kw)

    monkeypatch.setattr(publish, "sync_iceberg", slow)
    monkeypatch.setattr(background, "MAX_BEHIND", 2)
    done = []

    def writer():
        for i in range(5):
            done.append(table.upsert(batch([f"k{i}"], i)))
            if i == 0:  # the publisher has started its first run (held at the gate)
                deadline = time.monotonic() + 30
                while not runs and time.monotonic() < deadline:
                    time.sleep(0.01)

    w = threading.Thread(target=writer)
    w.start()
    w.join(5)
    # The first publish is held: the writer got MAX_BEHIND commits past it and waits.
    assert w.is_alive() and len(done) == 1 + background.MAX_BEHIND
    gate.set()
    w.join(60)
    assert not w.is_alive() and len(done) == 5
    monkeypatch.setattr(publish, "sync_iceberg", real)
    res = sync_iceberg(table)  # waits for the publisher, then finds nothing left
    assert res.published == ()
    ids = assert_every_snapshot_is_its_instant(table, table.storage.uri(ICEBERG_ROOT))
    assert set(done) <= set(ids)
    assert len(runs) < 5  # commits that came during a run were published by the next one


def test_a_publish_whose_timeline_moves_under_it_starts_over(tmp_path, monkeypatch):
    """Archival, a clean or a rollback in another writer may take an instant or a file while a
    publish reads it: the publish starts over from the timeline as it is now, as a lost race
    for the metadata version does."""
    from lakehouse.errors import InstantNotFoundError
    from lakehouse.iceberg import sync_iceberg
    from lakehouse.timeline.active import ActiveTimeline

    table = lakehouse.create_table(str(tmp_path), name="moved", record_key="id", partition_by="city",
                                   ordering_field="ts", options={"hoodie.meta.sync.iceberg.enabled": "false"})
    table.upsert(batch(["a"], 1))
    table.upsert(batch(["b"], 2))
    real = ActiveTimeline.commit_metadata
    gone = []

    def once(self, inst):
        if not gone:
            gone.append(inst.time)
            raise InstantNotFoundError(f"{inst.time} does not exist")
        return real(self, inst)

    monkeypatch.setattr(ActiveTimeline, "commit_metadata", once)
    res = sync_iceberg(table)
    assert gone and len(res.published) == 2
    check(table, "after starting over")


def test_a_process_forked_while_a_publish_runs_neither_hangs_nor_waits_for_it(tmp_path, monkeypatch):
    """multiprocessing's default on Linux forks: the child has none of the parent's threads, so
    it must not wait for the parent's publisher at exit, nor find a lock it held taken."""
    import os
    import threading

    import lakehouse.iceberg.publish as publish

    table = lakehouse.create_table(str(tmp_path), name="fork", record_key="id", partition_by="city",
                                   ordering_field="ts")
    gate = threading.Event()
    real = publish.sync_iceberg
    monkeypatch.setattr(publish, "sync_iceberg", lambda meta, **kw: gate.wait(60) and real(meta, **kw))
    table.upsert(batch(["a"], 1))  # its publish is held at the gate
    assert not background.wait(table.storage.uri(), timeout=0)
    pid = os.fork()
    if pid == 0:  # the child: nothing to wait for, and the memo usable
        from lakehouse.iceberg import memo
        ok = background.wait_all(timeout=5) and memo.ARROW.get(("x",)) is None
        os._exit(0 if ok else 1)
    deadline = 0
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        deadline += 1
        assert deadline < 300, "the forked child hung"
        threading.Event().wait(0.05)
    gate.set()
    assert os.waitstatus_to_exitcode(status) == 0
    check(table, "after the fork")


@pytest.fixture()
def publisher_spy(monkeypatch):
    """(paused, published): set when the publisher starts waiting for the process's writes and
    when it starts publishing."""
    import threading

    import lakehouse.iceberg.publish as publish
    from lakehouse.engine import foreground

    paused, published = threading.Event(), threading.Event()
    real_wait, real_sync = foreground.wait_idle, publish.sync_iceberg

    def wait_idle(*args, **kwargs):
        paused.set()
        return real_wait(*args, **kwargs)

    def sync(meta, **kw):
        if threading.current_thread().name.startswith("iceberg-publisher"):
            published.set()
        return real_sync(meta, **kw)

    monkeypatch.setattr(foreground, "wait_idle", wait_idle)
    monkeypatch.setattr(publish, "sync_iceberg", sync)
    return paused, published


def test_the_publisher_yields_to_a_write_of_its_process_until_it_ends(tmp_path, monkeypatch, publisher_spy):
    """The next write after a commit runs without the commit's publishing beside it
    (lakehouse.engine.foreground): the publisher waits for it, then publishes."""
    from lakehouse.engine import foreground

    paused, published = publisher_spy
    monkeypatch.setattr(background, "MAX_YIELD_SECONDS", 600.0)
    table = lakehouse.create_table(str(tmp_path), name="yields", record_key="id", partition_by="city",
                                   ordering_field="ts")
    with foreground.running():  # a write of this process runs (as a Spark or Airflow task's would)
        table.upsert(batch(["a", "b"], 1))
        assert paused.wait(60)
        assert not published.is_set()
    assert published.wait(60)
    check(table, "after the write ended")


def test_waiting_for_the_publisher_stops_its_yielding(tmp_path, monkeypatch, publisher_spy):
    """sync_iceberg, a test, the process's exit: whoever waits for the publisher does not wait
    for the yielding too (a write that waits for it would otherwise wait for itself)."""
    from lakehouse.engine import foreground

    paused, published = publisher_spy
    monkeypatch.setattr(background, "MAX_YIELD_SECONDS", 600.0)
    table = lakehouse.create_table(str(tmp_path), name="urgent", record_key="id", partition_by="city",
                                   ordering_field="ts")
    with foreground.running():
        table.upsert(batch(["a"], 1))
        assert paused.wait(60)
        assert background.wait(table.storage.uri(), timeout=60)
        assert published.is_set()
    check(table, "after the wait")


def test_the_publisher_yields_for_a_bounded_time(tmp_path, monkeypatch, publisher_spy):
    """Writes that never stop do not starve the Iceberg view: past MAX_YIELD_SECONDS a run
    publishes beside them."""
    from lakehouse.engine import foreground

    paused, published = publisher_spy
    monkeypatch.setattr(background, "MAX_YIELD_SECONDS", 0.05)
    table = lakehouse.create_table(str(tmp_path), name="bounded", record_key="id", partition_by="city",
                                   ordering_field="ts")
    with foreground.running():
        table.upsert(batch(["a"], 1))
        assert paused.wait(60)
        assert published.wait(60)  # the write still runs
    check(table, "after the bounded yield")


def test_a_write_is_foreground_work_of_its_process(tmp_path, monkeypatch):
    from lakehouse.engine import foreground
    from lakehouse.write.client import WriteClient

    seen = []
    real = WriteClient.prepare

    def prepare(self, *args, **kwargs):
        seen.append(foreground.busy())
        return real(self, *args, **kwargs)

    monkeypatch.setattr(WriteClient, "prepare", prepare)
    table = lakehouse.create_table(str(tmp_path), name="fg", record_key="id", partition_by="city",
                                   ordering_field="ts", options={"hoodie.meta.sync.iceberg.enabled": "false"})
    table.upsert(batch(["a"], 1))
    table.delete(pa.table({"id": ["a"], "city": ["paris"]}))
    assert seen == [True, True] and not foreground.busy()
