"""The published history over a table's life: schema evolution, archival, a publisher that lags
behind cleaning, manifest reuse, and the errors a broken metadata folder gives."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

import lakehouse
from lakehouse.errors import CorruptFileError
from lakehouse.iceberg import (
    METADATA_DIR,
    VERSION_HINT,
    IcebergSyncError,
    memo,
    sync_iceberg,
)
from tests.iceberg.iceberg_oracle import (
    MANUAL_SYNC,
    assert_every_snapshot_is_its_instant,
    assert_same_table,
    iceberg_read,
    static_table,
    sync_and_compare,
    view_read,
)
from tests.model.oracle import Oracle


def _create(path, table_type="COPY_ON_WRITE", **options):
    return lakehouse.create_table(str(path), name="h", table_type=table_type, record_key="id",
                                  partition_by="city", ordering_field="ts",
                                  options={**MANUAL_SYNC, **options})


def _batch(keys, ts, city=None, **extra):
    cols = {"id": keys, "city": [city or ("sf" if k < "m" else "la") for k in keys], "ts": [ts] * len(keys),
            "v": [f"{k}@{ts}" for k in keys]}
    cols.update(extra)
    return pa.table(cols)


def _manifests(res, instant):
    st = static_table(res)
    snap = st.metadata.snapshot_by_id(res.snapshot_ids[instant] if instant in res.snapshot_ids else
                                      next(s.snapshot_id for s in st.metadata.snapshots
                                           if s.summary["hudi.instant"] == instant))
    return {m.manifest_path: m for m in snap.manifests(st.io)}


def test_a_new_column_gets_a_new_schema_and_field_id(tmp_path):
    t = _create(tmp_path / "t", "MERGE_ON_READ")
    first = t.insert(_batch(["a", "x"], 1))
    res = sync_and_compare(t, "before the new column")
    old = static_table(res).schema()
    t.insert(_batch(["b", "y"], 2, extra=["e1", "e2"]))
    res = sync_and_compare(t, "after the new column")
    st = static_table(res)
    assert [s.schema_id for s in st.metadata.schemas] == [0, 1]
    new = st.schema()
    assert new.schema_id == 1 and new.find_field("extra").field_id == max(f.field_id for f in old.fields) + 1
    for f in old.fields:
        assert new.find_field(f.name).field_id == f.field_id
    assert st.metadata.snapshot_by_id(res.snapshot_ids[res.published[-1][0]]).schema_id == 1
    # Time travel reads the older snapshot with its own schema, as lakehouse's time travel does.
    assert "extra" not in iceberg_read(res, snapshot_id=[s.snapshot_id for s in st.metadata.snapshots
                                                        if s.summary["hudi.instant"] == first][0]).column_names
    assert_every_snapshot_is_its_instant(t, res)
    mapping = json.loads(st.metadata.properties["schema.name-mapping.default"])
    assert {m["names"][0]: m["field-id"] for m in mapping} == {f.name: f.field_id for f in new.fields}


def test_publishing_after_archival(tmp_path):
    t = _create(tmp_path / "t")
    model = Oracle("EVENT_TIME_ORDERING", "id", "ts")
    archive = {"hoodie.keep.max.commits": 4, "hoodie.keep.min.commits": 2}

    def write(ts, city=None):
        # Every write rewrites the sf and la file groups; a write to another city makes a file
        # group that no later commit touches, so only a listing finds it once archived.
        batch = _batch(["a", "x", f"k{ts}", f"z{ts}"] if city is None else [f"{city}{ts}"], ts, city)
        model.upsert(batch.to_pylist(), t.upsert(batch))

    write(0, "ny")
    for ts in range(1, 7):
        write(ts)
    assert t.archive(archive).archived
    # First publication after archival: archived commits' files come from a listing.
    res = sync_and_compare(t, "first publication after archival")
    assert [i for i, _ in res.published] == [i.time for i in t.timeline.completed_writes()]
    cols = ["id", "city", "ts", "v"]
    assert sorted(iceberg_read(res).select(cols).to_pylist(), key=lambda r: r["id"]) == model.rows(columns=cols)
    assert_every_snapshot_is_its_instant(t, res)
    write(7, "tx")
    for ts in range(8, 14):
        write(ts)
    archived = t.archive(archive).archived
    # Archival passed the last published instant: instants this publisher never saw are gone
    # from the timeline, so their files can only be found by listing.
    assert max(i for i, _ in res.published) in archived
    res = sync_and_compare(t, "publication across an archived gap")
    assert sorted(iceberg_read(res).select(cols).to_pylist(), key=lambda r: r["id"]) == model.rows(columns=cols)
    st = static_table(res)
    active = {i.time for i in t.timeline.completed_writes()}
    assert {i for i, _ in res.published} == active
    for snap in st.metadata.snapshots:
        inst = snap.summary["hudi.instant"]
        got = st.scan(snapshot_id=snap.snapshot_id).to_arrow()
        if inst in active:
            assert_same_table(got, view_read(t, as_of=inst), f"snapshot of {inst}")
        else:  # archived: lakehouse no longer travels there, the model still does
            assert sorted(got.select(cols).to_pylist(), key=lambda r: r["id"]) == model.rows(inst, cols)


def test_a_lagging_publisher_skips_instants_whose_files_were_cleaned(tmp_path):
    t = _create(tmp_path / "t")
    instants = [t.upsert(_batch(["a", "b", "x"], ts)) for ts in range(1, 5)]
    cleaned = t.clean(options={"hoodie.cleaner.commits.retained": 1})
    assert cleaned.files_deleted
    res = sync_and_compare(t, "first publication after a clean")
    assert res.skipped and set(res.skipped) | {i for i, _ in res.published} == set(instants)
    assert res.skipped == tuple(instants[:len(res.skipped)])  # the oldest versions went
    mapping = assert_every_snapshot_is_its_instant(t, res)
    assert set(mapping) == {i for i, _ in res.published}
    assert static_table(res).metadata.properties["lakehouse.iceberg.retired-instants"] == ",".join(res.skipped)
    again = sync_iceberg(t)
    assert again.versions_written == () and again.published == ()


def test_manifests_of_untouched_partitions_are_reused(tmp_path):
    # The read-optimized view: a delta commit of log files changes nothing in it.
    t = _create(tmp_path / "t", "MERGE_ON_READ", **{"hoodie.parquet.small.file.limit": 0,
                                                    "hoodie.index.type": "SIMPLE",
                                                    "hoodie.meta.sync.iceberg.view": "read_optimized"})
    t.insert(_batch(["a", "b", "x", "y"], 1))
    sync_iceberg(t)
    upsert = t.upsert(_batch(["a"], 2))  # a log file: the read-optimized view is unchanged
    res = sync_iceberg(t)
    first = t.timeline.completed_writes().instants[0].time
    assert _manifests(res, upsert).keys() == _manifests(res, first).keys()
    summary = static_table(res).metadata.snapshot_by_id(res.snapshot_ids[upsert]).summary
    assert summary.operation.value == "replace" and summary["added-data-files"] == "0"

    compacted = t.compact(force=True).instant  # rewrites the sf file group only
    res = sync_and_compare(t, "after compaction")
    before, after = _manifests(res, upsert), _manifests(res, compacted)
    assert len(set(after) - set(before)) == 1 and len(set(before) - set(after)) == 1
    (new,) = [after[p] for p in set(after) - set(before)]
    assert (new.added_files_count, new.deleted_files_count, new.existing_files_count) == (1, 1, 0)

    # New file groups only (no small files to fill): each insert appends one manifest; past
    # the limit, the partition's manifests are merged into one.
    counts = []
    for ts in range(3, 13):
        inst = t.insert(_batch([f"c{ts}"], ts))
        res = sync_iceberg(t)
        sf = [m for m in _manifests(res, inst).values()
              if m.partitions[0].lower_bound == b"sf" and m.existing_files_count + m.added_files_count]
        counts.append(len(sf))
    assert max(counts) <= 8 and counts[-1] < max(counts)
    assert_every_snapshot_is_its_instant(t, sync_and_compare(t, "after many appends"))


def test_broken_metadata_gives_typed_errors(tmp_path):
    t = _create(tmp_path / "t")
    t.insert(_batch(["a", "x"], 1))
    res = sync_iceberg(t)
    storage = t.storage

    # A garbled hint is only advice: the versions are found by listing.
    storage.write(VERSION_HINT, b"not a number")
    t.upsert(_batch(["a"], 2))
    res = sync_and_compare(t, "garbled hint")
    assert res.versions_written == (2,) and storage.read(VERSION_HINT) == b"2"

    # A corrupt manifest list is named when a sync needs it.
    st = static_table(res)
    ml = st.metadata.current_snapshot().manifest_list
    rel = ml[len(storage.uri()) + 1:]
    good = storage.read(rel)
    storage.write(rel, b"garbage")
    t.upsert(_batch(["x"], 3))
    # Metadata files never change once written, so a publishing process keeps what it read
    # and wrote (lakehouse.iceberg.memo); a file damaged since is found by the next process.
    memo.METADATA.clear()
    with pytest.raises(CorruptFileError) as e:
        sync_iceberg(t)
    assert e.value.path == ml
    storage.write(rel, good)

    # A corrupt metadata file is named.
    latest = f"{METADATA_DIR}/v2.metadata.json"
    good = storage.read(latest)
    storage.write(latest, b"{not json")
    with pytest.raises(CorruptFileError) as e:
        sync_iceberg(t)
    assert e.value.path == storage.uri(latest)
    storage.write(latest, good)

    # A snapshot someone else added cannot be mapped to an instant.
    doc = json.loads(good)
    doc["snapshots"][-1]["summary"].pop("hudi.instant")
    storage.create(f"{METADATA_DIR}/v3.metadata.json", json.dumps(doc).encode())
    with pytest.raises(IcebergSyncError, match="names no Hudi instant"):
        sync_iceberg(t)


def test_tables_that_cannot_be_published_say_why(tmp_path):
    t = _create(tmp_path / "t")
    t.insert(_batch(["a"], 1))
    t.config = t.config.replace(drop_partition_columns=True)
    with pytest.raises(IcebergSyncError) as e:
        sync_iceberg(t)
    assert "partition columns" in e.value.message and e.value.help
    assert not t.storage.exists(METADATA_DIR + "/v1.metadata.json")


def test_a_compaction_completing_after_later_writes(tmp_path):
    t = _create(tmp_path / "t", "MERGE_ON_READ")
    t.insert(_batch(["a", "b", "x", "y"], 1))
    t.upsert(_batch(["a", "x"], 2))
    compaction = t.schedule_compaction(force=True).instant
    later = t.upsert(_batch(["a", "c", "z"], 3))
    # While the compaction is pending, the view reads the base files it compacts.
    res = sync_and_compare(t, "compaction pending")
    assert compaction not in res.snapshot_ids and later in res.snapshot_ids
    view_then = view_read(t)
    t.run_compaction(compaction)
    t.commit_compaction(compaction)
    res = sync_and_compare(t, "compaction committed after a later write")
    # Published last, though its instant time is earlier: snapshots never change afterwards.
    assert [i for i, _ in res.published] == [compaction] and res.current_instant == compaction
    st = static_table(res)
    assert [s.summary["hudi.instant"] for s in st.metadata.snapshots][-2:] == [later, compaction]
    later_id = next(s.snapshot_id for s in st.metadata.snapshots if s.summary["hudi.instant"] == later)
    assert_same_table(iceberg_read(res, snapshot_id=later_id), view_then, "the snapshot published before")
    assert st.metadata.snapshots[-1].timestamp_ms >= st.metadata.snapshots[-2].timestamp_ms


def test_insert_overwrite_retires_the_partitions_file_groups(tmp_path):
    t = _create(tmp_path / "t")
    t.insert(_batch(["a", "b", "x", "y"], 1))
    t.insert(_batch(["c"], 2, city="ny"))
    overwrite = t.insert_overwrite(_batch(["d"], 3))  # replaces the sf partition only
    res = sync_and_compare(t, "insert overwrite")
    summary = static_table(res).metadata.snapshot_by_id(res.snapshot_ids[overwrite]).summary
    assert summary["hudi.action"] == "replacecommit" and summary.operation.value == "overwrite"
    assert sorted(r["id"] for r in iceberg_read(res).to_pylist()) == ["c", "d", "x", "y"]
    assert_every_snapshot_is_its_instant(t, res)


def test_rolling_back_the_only_instant_leaves_no_current_snapshot(tmp_path):
    t = _create(tmp_path / "t", "MERGE_ON_READ")
    first = t.insert(_batch(["a", "x"], 1))
    sync_iceberg(t)
    t.rollback()
    # Only the rollback is left on the timeline, and it is newer than the instant it undid.
    assert [i.action.value for i in t.timeline] == ["rollback"]
    res = sync_iceberg(t)
    assert res.rolled_back == (first,) and res.current_instant is None and res.versions_written == (2,)
    st = static_table(res)
    assert st.metadata.current_snapshot_id is None and not st.metadata.snapshots
    assert iceberg_read(res).num_rows == 0
    second = t.insert(_batch(["b", "y"], 2))
    res = sync_and_compare(t, "a write after everything was rolled back")
    assert [i for i, _ in res.published] == [second]
    assert_every_snapshot_is_its_instant(t, res)
