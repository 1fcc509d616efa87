"""Timeline snapshots (latest state per instant) and the ActiveTimeline transitions, on
hand-made ``.hoodie`` folders and on the timelines Apache Hudi wrote, compared with what the
``hudi`` package (hudi-rs) reports for the same folders."""

from __future__ import annotations

import json
import random
from datetime import datetime, timedelta, timezone

import pytest

from lakehouse.layout import METAFOLDER
from lakehouse.errors import CorruptFileError, InstantNotFoundError, TimelineError
from lakehouse.storage import LocalStorage
from lakehouse.timeline.active import ActiveTimeline, Timeline
from lakehouse.timeline.commit_metadata import CommitMetadata
from lakehouse.timeline.instant import Action, Instant, State
from lakehouse.timeline.instant_time import InstantTimeGenerator

R, I, C = State.REQUESTED, State.INFLIGHT, State.COMPLETED


def t(n: int) -> str:
    return f"2025010100000{n:04d}"


# A timeline with one instant in every interesting situation; file names as Hudi writes them.
NAMES = [
    f"{t(1)}.commit.requested", f"{t(1)}.inflight", f"{t(1)}.commit",                 # done write
    f"{t(2)}.deltacommit.requested", f"{t(2)}.deltacommit.inflight",                  # failed/pending
    f"{t(3)}.compaction.requested", f"{t(3)}.compaction.inflight", f"{t(3)}.commit",  # done compaction
    f"{t(4)}.clean.requested", f"{t(4)}.clean.inflight", f"{t(4)}.clean",
    f"{t(5)}.compaction.requested",                                                   # pending compaction
    f"{t(6)}.replacecommit.requested", f"{t(6)}.replacecommit.inflight", f"{t(6)}.replacecommit",
    f"{t(7)}.rollback.requested", f"{t(7)}.rollback.inflight", f"{t(7)}.rollback",
    f"{t(8)}.deltacommit.requested", f"{t(8)}.deltacommit.inflight", f"{t(8)}.deltacommit",
    f"{t(9)}.commit.requested",
    "hoodie.properties", ".aux", ".temp", "archived", f"{t(9)}.commit.requested.1a2b.tmp",
]


def test_snapshot_keeps_the_latest_state_whatever_the_listing_order():
    expected = [
        Instant(t(1), Action.COMMIT, C), Instant(t(2), Action.DELTA_COMMIT, I),
        Instant(t(3), Action.COMMIT, C), Instant(t(4), Action.CLEAN, C),
        Instant(t(5), Action.COMPACTION, R), Instant(t(6), Action.REPLACE_COMMIT, C),
        Instant(t(7), Action.ROLLBACK, C), Instant(t(8), Action.DELTA_COMMIT, C),
        Instant(t(9), Action.COMMIT, R)]
    rng = random.Random(3)
    for _ in range(20):
        names = NAMES[:]
        rng.shuffle(names)
        tl = Timeline.from_file_names(names)
        assert list(tl) == expected
        assert tl.compaction_times == {t(3), t(5)}


def test_snapshot_queries():
    tl = Timeline.from_file_names(NAMES)
    assert len(tl) == 9
    assert tl.first.time == t(1) and tl.last.time == t(9)
    assert [i.time for i in tl.completed()] == [t(1), t(3), t(4), t(6), t(7), t(8)]
    assert [i.time for i in tl.pending()] == [t(2), t(5), t(9)]
    assert [i.time for i in tl.pending_compactions()] == [t(5)]
    # Writes carry data: the completed compaction (a commit) counts, clean/rollback do not.
    assert tl.completed_write_times == {t(1), t(3), t(6), t(8)}
    assert [i.time for i in tl.completed_writes()] == [t(1), t(3), t(6), t(8)]
    assert [i.time for i in tl.write_timeline()] == [t(1), t(2), t(3), t(5), t(6), t(8), t(9)]
    assert tl.is_compaction(t(3)) and tl.is_compaction(t(5)) and not tl.is_compaction(t(1))
    assert tl.is_completed(t(1)) and not tl.is_completed(t(2)) and not tl.is_completed("x")
    assert tl.get(t(6)) == Instant(t(6), Action.REPLACE_COMMIT, C) and tl.get(t(0)) is None
    assert [i.time for i in tl.before_or_on(t(3))] == [t(1), t(2), t(3)]
    assert [i.time for i in tl.after(t(7))] == [t(8), t(9)]
    assert [i.time for i in tl.filter(actions=[Action.DELTA_COMMIT])] == [t(2), t(8)]
    assert [i.time for i in tl.filter(actions=[Action.DELTA_COMMIT], states=[C])] == [t(8)]
    # Sub-timelines keep knowing which commits were compactions.
    assert tl.completed().is_compaction(t(3))


def test_empty_timeline():
    tl = Timeline.from_file_names(["hoodie.properties"])
    assert len(tl) == 0 and tl.first is None and tl.last is None
    assert tl.completed_write_times == frozenset()


# --- the fixtures, against hudi-rs -----------------------------------------------------------


def _v6_tables(fixture_tables):
    return {n: p for n, p in fixture_tables.items() if n.rsplit("/", 1)[-1].startswith("v6_")}


@pytest.mark.interop
def test_completed_instants_of_fixtures_equal_hudi_rs(fixture_tables):
    hudi = pytest.importorskip("hudi")
    for name, root in _v6_tables(fixture_tables).items():
        ours = ActiveTimeline(LocalStorage(str(root))).load().completed()
        theirs_tl = hudi.HudiTableBuilder.from_base_uri(str(root)).build().get_timeline()
        for action, getter in [(Action.COMMIT, "get_completed_commits"),
                               (Action.DELTA_COMMIT, "get_completed_deltacommits"),
                               (Action.REPLACE_COMMIT, "get_completed_replacecommits")]:
            theirs = sorted(i.timestamp for i in getattr(theirs_tl, getter)())
            assert theirs == sorted(i.time for i in ours.filter(actions=[action])), (name, action)
            assert all(i.action == action.value for i in getattr(theirs_tl, getter)())


@pytest.mark.interop
def test_rollback_fixture_timeline(fixture_tables):
    root = fixture_tables["sample_table/mor/parquet/v6_nonpartitioned_rollback"]
    tl = ActiveTimeline(LocalStorage(str(root))).load()
    # The rolled-back delta commit's files are gone from .hoodie; the rollback instant is there.
    assert [(i.time, i.action, i.state) for i in tl] == [
        ("20250126040823628", Action.DELTA_COMMIT, C),
        ("20250126040936578", Action.ROLLBACK, C),
        ("20250126060846931", Action.DELTA_COMMIT, C)]
    assert tl.completed_write_times == {"20250126040823628", "20250126060846931"}


@pytest.mark.interop
def test_fixture_commit_metadata_reads(fixture_tables):
    root = fixture_tables["sample_table/cow/v6_simplekeygen_nonhivestyle_overwritetable"]
    active = ActiveTimeline(LocalStorage(str(root)))
    tl = active.load()
    replace = tl.filter(actions=[Action.REPLACE_COMMIT]).last
    meta = active.commit_metadata(replace)
    assert meta.replaced_file_ids() and meta.operation_type == "INSERT_OVERWRITE_TABLE"
    assert active.commit_metadata(replace) is meta  # completed files never change: cached


# --- ActiveTimeline ------------------------------------------------------------------------


class _Clock:
    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def active(tmp_path) -> ActiveTimeline:
    clock = _Clock(datetime(2030, 1, 1, tzinfo=timezone.utc))
    return ActiveTimeline(LocalStorage(str(tmp_path)), InstantTimeGenerator(clock))


def _files(tmp_path) -> set[str]:
    return {p.name for p in (tmp_path / METAFOLDER).iterdir() if p.is_file()}


def test_full_lifecycle_of_a_cow_write(active, tmp_path):
    req = active.create_requested(Action.COMMIT)
    assert req == Instant(req.time, Action.COMMIT, R)
    assert _files(tmp_path) == {f"{req.time}.commit.requested"}
    inflight = active.transition(req, I, b'{"x": 1}')
    assert (tmp_path / METAFOLDER / f"{req.time}.inflight").read_bytes() == b'{"x": 1}'
    meta = CommitMetadata(operation_type="UPSERT")
    done = active.transition(inflight, C, meta.to_bytes())
    assert _files(tmp_path) == {f"{req.time}.commit.requested", f"{req.time}.inflight",
                                f"{req.time}.commit"}
    tl = active.load()
    assert list(tl) == [done]
    assert active.commit_metadata(done).operation_type == "UPSERT"


def test_compaction_completes_as_a_commit(active, tmp_path):
    req = active.create_requested(Action.COMPACTION, b"plan")
    done = active.transition(active.transition(req, I), C, b"{}")
    assert f"{req.time}.commit" in _files(tmp_path)
    tl = active.load()
    assert tl.get(req.time).action is Action.COMMIT and tl.is_compaction(req.time)
    assert done.is_completed


def test_new_instants_are_above_everything_on_the_timeline(tmp_path):
    storage = LocalStorage(str(tmp_path))
    # Another writer left an instant far in the future of our (stuck) clock.
    storage.create(f"{METAFOLDER}/29991231235959998.clean", b"")
    clock = _Clock(datetime(2030, 1, 1, tzinfo=timezone.utc))
    active = ActiveTimeline(storage, InstantTimeGenerator(clock))
    a = active.create_requested(Action.COMMIT)
    b = active.create_requested(Action.COMMIT)
    assert a.time == "29991231235959999" and b.time > a.time


def test_requested_at_an_explicit_taken_time_fails(active, tmp_path):
    req = active.create_requested(Action.DELTA_COMMIT)
    with pytest.raises(TimelineError) as err:
        active.create_requested(Action.DELTA_COMMIT, time=req.time)
    assert "Help:" in str(err.value)
    # Another action at the same time is a second instant at that time: refused as well, and
    # its file withdrawn (the snapshot keeps one instant per time and would hide one of them).
    with pytest.raises(TimelineError):
        active.create_requested(Action.CLEAN, time=req.time)
    assert _files(tmp_path) == {f"{req.time}.deltacommit.requested"}


def test_create_requested_retries_when_its_time_is_taken(tmp_path):
    storage = LocalStorage(str(tmp_path))
    clock = _Clock(datetime(2030, 1, 1, tzinfo=timezone.utc))
    first = ActiveTimeline(storage, InstantTimeGenerator(clock)).create_requested(Action.COMMIT)
    b = ActiveTimeline(storage, InstantTimeGenerator(clock))
    loads = []
    real_load = b.load

    def load():
        loads.append(1)
        # B listed the timeline just before A's instant appeared: it proposes A's millisecond.
        return Timeline(()) if len(loads) == 1 else real_load()

    b.load = load
    second = b.create_requested(Action.COMMIT)
    assert len(loads) == 2
    assert second.time > first.time
    assert {i.time for i in real_load()} == {first.time, second.time}


def test_transitions_only_move_forward(active):
    req = active.create_requested(Action.COMMIT)
    inflight = active.transition(req, I)
    with pytest.raises(TimelineError):
        active.transition(inflight, R)
    with pytest.raises(TimelineError):
        active.transition(inflight, I)
    # A second process moving the same instant loses.
    with pytest.raises(TimelineError) as err:
        active.transition(req, I)
    assert "already exists" in str(err.value)


def test_overwrite_replaces_a_pending_state_only(active, tmp_path):
    req = active.create_requested(Action.DELTA_COMMIT)
    inflight = active.transition(req, I, b"old")
    active.overwrite(inflight, b"new")
    assert active.read(inflight) == b"new"
    done = active.transition(inflight, C, b"{}")
    with pytest.raises(TimelineError):
        active.overwrite(done, b"{}")
    assert active.read(done) == b"{}"


def test_delete_instant(active, tmp_path):
    req = active.create_requested(Action.COMMIT)
    done = active.transition(active.transition(req, I), C, b"{}")
    active.delete_instant(done.time, Action.COMMIT)
    assert _files(tmp_path) == {f"{done.time}.commit"}  # completed kept unless asked
    active.delete_instant(done.time, Action.COMMIT, include_completed=True)
    assert _files(tmp_path) == set()
    active.delete_instant(done.time, Action.COMMIT)  # nothing left: no error
    assert len(active.load()) == 0


def test_read_of_a_missing_instant(active):
    with pytest.raises(InstantNotFoundError) as err:
        active.read(Instant("20300101000000000", Action.COMMIT, C))
    assert "20300101000000000.commit" in str(err.value)


def test_corrupt_commit_metadata_names_the_file(active, tmp_path):
    req = active.create_requested(Action.COMMIT)
    done = active.transition(active.transition(req, I), C, b"{not json")
    with pytest.raises(CorruptFileError) as err:
        active.commit_metadata(done)
    assert f"{done.time}.commit" in str(err.value)


def test_load_ignores_folders_and_foreign_files(active, tmp_path):
    req = active.create_requested(Action.COMMIT)
    (tmp_path / METAFOLDER / ".temp" / req.time).mkdir(parents=True)
    (tmp_path / METAFOLDER / "archived").mkdir()
    (tmp_path / METAFOLDER / "hoodie.properties").write_text("hoodie.table.name=t\n")
    (tmp_path / METAFOLDER / f"{req.time}.commit.deadbeef.tmp").write_bytes(b"")
    assert list(active.load()) == [req]


def test_clock_behind_the_timeline_still_moves_forward(tmp_path):
    clock = _Clock(datetime(2030, 1, 1, tzinfo=timezone.utc))
    active = ActiveTimeline(LocalStorage(str(tmp_path)), InstantTimeGenerator(clock))
    times = []
    for step in range(5):
        times.append(active.create_requested(Action.DELTA_COMMIT).time)
        clock.now -= timedelta(hours=1)  # the clock jumps back after every instant
    assert times == sorted(times) and len(set(times)) == 5
    assert json.dumps(times)  # plain strings


def test_a_timeline_with_an_instant_it_just_wrote_equals_the_listing(active, tmp_path):
    """What a writer adds to the timeline it read (Timeline.with_instant) is what listing it again
    shows: its own new instant, a newer state of one, a compaction's plan."""
    a = active.create_requested(Action.DELTA_COMMIT)
    a_done = active.transition(active.transition(a, I), C, b'{"operationType": "UPSERT"}')
    before = active.load()
    b = active.create_requested(Action.DELTA_COMMIT, timeline=before)
    assert b.time > a_done.time and before.with_instant(b) == active.load()
    c = active.create_requested(Action.COMPACTION, b"plan")
    tl = active.load()
    c_inflight = active.transition(c, I)
    assert tl.with_instant(c_inflight) == active.load()
    assert tl.with_instant(c_inflight).pending_compactions().instants == (c_inflight,)


def test_a_completed_write_is_not_read_back_and_listings_name_what_they_saw(active, tmp_path):
    req = active.create_requested(Action.DELTA_COMMIT)
    meta = CommitMetadata(operation_type="UPSERT", extra_metadata={"k": "v"})
    done = active.transition(active.transition(req, I), C, meta.to_bytes())
    (tmp_path / METAFOLDER / f"{done.time}.deltacommit").write_bytes(b"not read back")
    assert active.commit_metadata(done).extra_metadata == {"k": "v"}
    (tmp_path / METAFOLDER / ".temp").mkdir()
    listing = active.load_listing()
    assert listing.timeline == active.load() and ".temp" in listing.folders
    assert f"{req.time}.deltacommit.requested" in listing.files
    other = ActiveTimeline(LocalStorage(str(tmp_path)))
    with pytest.raises(CorruptFileError):
        other.commit_metadata(done)  # another reader reads the file (here, spoilt)
    other.share_caches(active)
    assert other.commit_metadata(done).extra_metadata == {"k": "v"}
