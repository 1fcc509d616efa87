"""Publishing Iceberg metadata for Copy-On-Write and Merge-On-Read tables, partitioned or not:
pyiceberg (and Daft) read exactly lakehouse's snapshot at every published instant (its
read-optimized read, for a Merge-On-Read table published with that view), and an in-memory model
and hudi-rs agree."""

from __future__ import annotations

import pyarrow as pa
import pytest

import lakehouse
from lakehouse.iceberg import METADATA_DIR, VERSION_HINT, sync_iceberg
from tests.iceberg.iceberg_oracle import (MANUAL_SYNC, assert_every_snapshot_is_its_instant, assert_same_table,
                                          iceberg_read, shows_read_optimized, static_table, sync_and_compare)
from tests.interop.hudi_oracle import hudi_read
from tests.model.oracle import Oracle

COLS = ["id", "city", "ts", "v"]
# (table type, partitioned, the Iceberg view of a Merge-On-Read table: None, the default)
LAYOUTS = [("COPY_ON_WRITE", p, None) for p in (True, False)] + \
    [("MERGE_ON_READ", p, v) for v in ("read_optimized", None) for p in (True, False)]


class Fixture:
    def __init__(self, path, table_type: str, partitioned: bool, **options) -> None:
        self.path = path
        self.table = lakehouse.create_table(str(path), name="ice", table_type=table_type, record_key="id",
                                            partition_by="city" if partitioned else None,
                                            ordering_field="ts", options={**MANUAL_SYNC, **options})
        self.model = Oracle("EVENT_TIME_ORDERING", "id", "ts")
        self.ts = 0

    def rows(self, keys):
        self.ts += 1
        return [{"id": k, "city": "sf" if k < "m" else "la", "ts": self.ts, "v": f"{k}@{self.ts}"} for k in keys]

    def insert(self, keys) -> str:
        rows = self.rows(keys)
        t = self.table.insert(pa.Table.from_pylist(rows))
        self.model.upsert(rows, t)
        return t

    def upsert(self, keys) -> str:
        rows = self.rows(keys)
        t = self.table.upsert(pa.Table.from_pylist(rows))
        self.model.upsert(rows, t)
        return t

    def delete(self, keys) -> str:
        t = self.table.delete(pa.table({"id": keys, "city": ["sf" if k < "m" else "la" for k in keys]}))
        self.model.delete(keys, t)
        return t

    def assert_model(self, res) -> None:
        """The whole table as the model has it."""
        got = sorted(iceberg_read(res).select(COLS).to_pylist(), key=lambda r: r["id"])
        assert got == self.model.rows(columns=COLS)


@pytest.fixture(params=LAYOUTS, ids=[f"{tt}-{'part' if p else 'flat'}{'-' + (v or 'default') if tt == 'MERGE_ON_READ' else ''}"
                                              for tt, p, v in LAYOUTS])
def fx(request, tmp_path):
    tt, partitioned, view = request.param
    return Fixture(tmp_path / "t", tt, partitioned, **({"hoodie.meta.sync.iceberg.view": view} if view else {}))


def test_inserts_upserts_deletes_compaction_and_clean(fx):
    mor = fx.table.config.is_mor
    fx.insert(["a", "b", "c", "x", "y"])
    res = sync_and_compare(fx.table, "after inserts")
    fx.assert_model(res)  # inserts land in base files for both table types

    fx.upsert(["a", "x", "d"])
    fx.delete(["b", "y"])
    fx.upsert(["a", "z"])
    res = sync_and_compare(fx.table, "after upserts and deletes")
    if not shows_read_optimized(fx.table):
        fx.assert_model(res)  # a Merge-On-Read table's logs too, in the snapshot view
    assert [i for i, _ in res.published] == [i.time for i in fx.table.timeline.completed_writes()][1:]

    if mor:
        done = fx.table.compact(force=True)
        assert done.committed
        res = sync_and_compare(fx.table, "after compaction")
        fx.assert_model(res)  # every file group with logs was compacted: the view is whole again
        assert res.published == ((done.instant, res.snapshot_ids[done.instant]),)
        summary = static_table(res).metadata.snapshot_by_id(res.snapshot_ids[done.instant]).summary
        assert summary["hudi.action"] == "compaction" and summary.operation.value == "overwrite"
    before = static_table(res)
    mapping = assert_every_snapshot_is_its_instant(fx.table, res)
    assert set(mapping) == {i.time for i in fx.table.timeline.completed_writes()}

    fx.upsert(["c", "d"])
    cleaned = fx.table.clean(options={"hoodie.cleaner.commits.retained": 1})
    assert cleaned.files_deleted > 0
    res = sync_and_compare(fx.table, "after clean")
    after = static_table(res)
    kept = {s.snapshot_id for s in after.metadata.snapshots}
    # A snapshot stays exactly when all its files are still there (read through the old metadata).
    for snap in before.metadata.snapshots:
        try:
            before.scan(snapshot_id=snap.snapshot_id).to_arrow()
            readable = True
        except OSError:
            readable = False
        assert (snap.snapshot_id in kept) == readable, snap.summary["hudi.instant"]
    assert res.expired and set(res.expired) == {s.summary["hudi.instant"] for s in before.metadata.snapshots
                                                if s.snapshot_id not in kept}
    assert_every_snapshot_is_its_instant(fx.table, res)
    again = sync_iceberg(fx.table)
    assert again.versions_written == () and again.published == ()


def test_sync_is_idempotent_and_says_what_it_did(fx):
    first_instant = fx.insert(["a", "b", "x"])
    second = fx.upsert(["a", "y"])
    res = sync_iceberg(fx.table)
    assert res.versions_written == (1,)
    assert [i for i, _ in res.published] == [first_instant, second]
    assert res.current_instant == second
    listing = sorted(i.name for i in fx.table.storage.list(METADATA_DIR))
    again = sync_iceberg(lakehouse.open_table(str(fx.path)))
    assert again.versions_written == () and again.published == ()
    assert again.metadata_location == res.metadata_location and again.current_instant == second
    assert sorted(i.name for i in fx.table.storage.list(METADATA_DIR)) == listing
    third = fx.upsert(["b"])
    res = sync_iceberg(fx.table)
    assert res.versions_written == (2,) and [i for i, _ in res.published] == [third]
    # Readers given the folder find the latest version through version-hint.text.
    by_folder = static_table(str(fx.path / ".hoodie" / "iceberg"))
    assert by_folder.metadata_location.endswith("v2.metadata.json")
    assert by_folder.metadata.current_snapshot_id == res.snapshot_ids[third]
    assert_every_snapshot_is_its_instant(fx.table, res)


def test_rolled_back_instants_are_no_longer_current(fx):
    fx.insert(["a", "b", "x"])
    second = fx.upsert(["a", "y"])
    third = fx.upsert(["b", "x", "q"])
    sync_and_compare(fx.table, "before rollback")
    fx.table.rollback()  # the latest completed write
    res = sync_and_compare(fx.table, "after rollback")
    assert res.rolled_back == (third,) and res.current_instant == second and res.published == ()
    st = static_table(res)
    assert third not in {s.summary["hudi.instant"] for s in st.metadata.snapshots}
    assert st.metadata.refs["main"].snapshot_id == st.metadata.current_snapshot_id
    fourth = fx.upsert(["c"])
    res = sync_and_compare(fx.table, "a write after the rollback")
    assert [i for i, _ in res.published] == [fourth]
    assert_every_snapshot_is_its_instant(fx.table, res)


def test_restore_to_a_savepoint(fx):
    first = fx.insert(["a", "b", "x"])
    fx.table.create_savepoint(first)
    fx.upsert(["a", "y"])
    fx.delete(["b"])
    sync_iceberg(fx.table)
    fx.table.restore(first)
    res = sync_and_compare(fx.table, "after restore")
    assert len(res.rolled_back) == 2 and res.current_instant == first
    assert assert_every_snapshot_is_its_instant(fx.table, res).keys() == {first}


def test_metadata_says_which_view_it_is(fx):
    fx.insert(["a", "x"])
    fx.upsert(["a"])  # MOR: an update goes to a log file, which the read-optimized view skips
    res = sync_and_compare(fx.table, "with logs")
    props = static_table(res).metadata.properties
    ro = shows_read_optimized(fx.table)
    assert props["lakehouse.iceberg.view"] == ("read_optimized" if ro else "snapshot")
    values = {r["id"]: r["v"] for r in iceberg_read(res).to_pylist()}
    assert values["a"] == ("a@1" if ro else "a@2")


def test_a_merge_on_read_table_shows_the_snapshot_view_by_default(tmp_path):
    """Iceberg readers of a default Merge-On-Read table read its latest commit, logs included
    (issue 42; Apache XTable publishes the read-optimized view, which stays an option)."""
    fx = Fixture(tmp_path / "t", "MERGE_ON_READ", True)
    assert not shows_read_optimized(fx.table)
    fx.insert(["a", "x"])
    fx.upsert(["a", "b"])
    fx.delete(["x"])
    res = sync_iceberg(fx.table)
    assert static_table(res).metadata.properties["lakehouse.iceberg.view"] == "snapshot"
    fx.assert_model(res)


def test_hudi_rs_reads_the_same_after_publishing(fx):
    fx.insert(["a", "b", "x", "y"])
    fx.upsert(["a", "x", "c"])
    fx.delete(["y"])
    before = {ro: hudi_read(fx.path, read_optimized=ro) for ro in (False, True)}
    timeline = [str(i) for i in fx.table.timeline]
    sync_iceberg(fx.table)
    assert fx.table.storage.exists(VERSION_HINT)
    for ro in (False, True):
        assert_same_table(hudi_read(fx.path, read_optimized=ro), before[ro], f"hudi-rs, read_optimized={ro}")
    reopened = lakehouse.open_table(str(fx.path))
    assert [str(i) for i in reopened.timeline] == timeline
    fx.upsert(["b", "z"])  # writing, and reading, go on as before
    res = sync_iceberg(reopened)
    for ro in (False, True):
        assert_same_table(hudi_read(fx.path, read_optimized=ro), reopened.read(read_optimized=ro),
                          f"hudi-rs and lakehouse, read_optimized={ro}")
    # hudi-rs reads the view the metadata shows (no compaction is pending here: hudi-rs 0.5
    # would skip the logs under one).
    assert_same_table(iceberg_read(res), hudi_read(fx.path, read_optimized=shows_read_optimized(fx.table)),
                      "pyiceberg and hudi-rs")


def test_publishing_looks_only_at_the_partitions_the_instants_touched(tmp_path, listed_data_folders):
    """Requests that follow the work (issue 43): the publish of an upsert into one partition
    lists that partition; the publish after a clean lists the partitions the clean deleted in
    (lakehouse.iceberg.replay.removed_scope), not the table; what pyiceberg reads is the table."""
    t = lakehouse.create_table(str(tmp_path / "t"), name="ice", table_type="MERGE_ON_READ", record_key="id",
                               partition_by="p", ordering_field="ts", options=MANUAL_SYNC)
    rows = [{"id": f"k{i}", "p": f"p{i % 8}", "ts": 1, "v": i} for i in range(64)]
    t.upsert(pa.Table.from_pylist(rows))
    t.upsert(pa.Table.from_pylist([dict(r, ts=2) for r in rows]))
    t.compact(force=True)
    t.upsert(pa.Table.from_pylist([dict(rows[1], ts=3)]))
    t.clean(options={"hoodie.cleaner.commits.retained": "1"})
    sync_iceberg(t)  # the first publish and the first check of removals: every partition
    listed = listed_data_folders
    listed.clear()
    t.upsert(pa.Table.from_pylist([dict(r, ts=4, v=-1) for r in rows if r["p"] == "p0"]))
    sync_iceberg(t)
    assert set(listed) == {"p0"}, listed
    t.compact(force=True)  # p0's slices, and p1's (logs of the upsert before the last clean)
    t.upsert(pa.Table.from_pylist([dict(rows[0], ts=5, v=-2)]))
    sync_iceberg(t)
    listed.clear()
    done = t.clean(options={"hoodie.cleaner.commits.retained": "1"})
    assert done.files_deleted
    res = sync_iceberg(t)
    assert set(listed) == {"p0", "p1"}, listed  # the clean's scan and the publish's check
    assert_same_table(iceberg_read(res), t.read(), "after the clean")


def test_a_publisher_that_lost_the_race_for_its_remembered_version_starts_over(tmp_path):
    """Each process remembers the version it published last (lakehouse.iceberg.store): the next
    publish builds on it after one existence check; when another process published meanwhile,
    the atomic create of the next version fails and the publish reads the store afresh."""
    t = lakehouse.create_table(str(tmp_path / "t"), name="ice", table_type="COPY_ON_WRITE", record_key="id",
                               partition_by="p", ordering_field="ts", options=MANUAL_SYNC)
    t.upsert(pa.table({"id": ["a"], "p": ["x"], "ts": [1]}))
    sync_iceberg(t)
    other = lakehouse.open_table(str(tmp_path / "t"))
    import lakehouse.iceberg.store as store_mod
    t.upsert(pa.table({"id": ["b"], "p": ["x"], "ts": [2]}))
    remembered = dict(store_mod._LATEST)
    sync_iceberg(other)  # publishes v2 and remembers it
    store_mod._LATEST.clear()
    store_mod._LATEST.update(remembered)  # this process "forgets" it: v1 remembered, v2 there
    t.upsert(pa.table({"id": ["c"], "p": ["y"], "ts": [3]}))
    res = sync_iceberg(t)
    assert res.versions_written == (3,) and [i for i, _ in res.published] == [t.timeline.last.time]
    assert_same_table(iceberg_read(res), t.read(), "after the race")


def test_a_publish_on_the_committers_timeline_never_takes_newer_instants_for_rolled_back(tmp_path, monkeypatch):
    """The publish after a commit works on the timeline the commit listed under the lock, with
    its instant completed (TableMetaClient.timeline_after), instead of listing .hoodie again.
    When the metadata already shows an instant that timeline lacks (another writer committed and
    published after it), a publish on it would take that instant for rolled back and drop its
    snapshot: the publisher lists afresh instead."""
    from lakehouse.timeline.active import ActiveTimeline
    t = lakehouse.create_table(str(tmp_path / "t"), name="ice", table_type="MERGE_ON_READ", record_key="id",
                               partition_by="p", ordering_field="ts", options=MANUAL_SYNC)
    t.upsert(pa.table({"id": ["a", "b"], "p": ["x", "y"], "ts": [1, 1]}))
    a = t.upsert(pa.table({"id": ["a"], "p": ["x"], "ts": [2]}))
    after_a = t.meta_client.timeline_after([t.timeline.get(a)])
    assert after_a is not None and after_a.is_completed(a)
    assert [i.time for i in after_a] == [i.time for i in t.timeline]  # what a listing shows
    listings = []
    real = ActiveTimeline.load_listing
    monkeypatch.setattr(ActiveTimeline, "load_listing", lambda self: listings.append(1) or real(self))
    res = sync_iceberg(t, timeline=after_a)
    assert listings == [] and [i for i, _ in res.published][-1] == a
    other = lakehouse.open_table(str(tmp_path / "t"))
    b = other.upsert(pa.table({"id": ["b"], "p": ["y"], "ts": [3]}))
    sync_iceberg(other)  # the metadata now shows b, which after_a lacks
    res = sync_iceberg(t, timeline=after_a)
    assert listings and not res.rolled_back, res
    assert res.current_instant == b
    assert_same_table(iceberg_read(res), t.read(), "after the stale timeline")
