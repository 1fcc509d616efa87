"""Timeline file names (layout 1) and instant ordering, against the names in the spec's table
and the files Apache Hudi wrote."""

from __future__ import annotations

import random

import pytest

from lakehouse.errors import TimelineError
from lakehouse.timeline.instant import WRITE_ACTIONS, Action, Instant, State

T = "20250102030405678"
R, I, C = State.REQUESTED, State.INFLIGHT, State.COMPLETED

# Written out from the spec's table, not derived from the code: the expected file of every state.
SPEC_NAMES = {
    (Action.COMMIT, R): f"{T}.commit.requested",
    (Action.COMMIT, I): f"{T}.inflight",
    (Action.COMMIT, C): f"{T}.commit",
    (Action.DELTA_COMMIT, R): f"{T}.deltacommit.requested",
    (Action.DELTA_COMMIT, I): f"{T}.deltacommit.inflight",
    (Action.DELTA_COMMIT, C): f"{T}.deltacommit",
    (Action.COMPACTION, R): f"{T}.compaction.requested",
    (Action.COMPACTION, I): f"{T}.compaction.inflight",
    (Action.COMPACTION, C): f"{T}.commit",
    (Action.CLEAN, R): f"{T}.clean.requested",
    (Action.CLEAN, I): f"{T}.clean.inflight",
    (Action.CLEAN, C): f"{T}.clean",
    (Action.ROLLBACK, R): f"{T}.rollback.requested",
    (Action.ROLLBACK, I): f"{T}.rollback.inflight",
    (Action.ROLLBACK, C): f"{T}.rollback",
    (Action.REPLACE_COMMIT, R): f"{T}.replacecommit.requested",
    (Action.REPLACE_COMMIT, I): f"{T}.replacecommit.inflight",
    (Action.REPLACE_COMMIT, C): f"{T}.replacecommit",
    (Action.SAVEPOINT, I): f"{T}.savepoint.inflight",
    (Action.SAVEPOINT, C): f"{T}.savepoint",
    (Action.RESTORE, R): f"{T}.restore.requested",
    (Action.RESTORE, I): f"{T}.restore.inflight",
    (Action.RESTORE, C): f"{T}.restore",
    (Action.INDEXING, R): f"{T}.indexing.requested",
    (Action.INDEXING, I): f"{T}.indexing.inflight",
    (Action.INDEXING, C): f"{T}.indexing",
    (Action.LOG_COMPACTION, R): f"{T}.logcompaction.requested",
    (Action.LOG_COMPACTION, I): f"{T}.logcompaction.inflight",
}


@pytest.mark.parametrize("action,state", sorted(SPEC_NAMES, key=str))
def test_file_name_matches_spec(action, state):
    assert Instant(T, action, state).file_name == SPEC_NAMES[(action, state)]


@pytest.mark.parametrize("action", list(Action))
@pytest.mark.parametrize("state", list(State))
def test_parse_inverts_file_name(action, state):
    inst = Instant(T, action, state)
    parsed = Instant.parse(inst.file_name)
    if (action, state) == (Action.COMPACTION, C):
        # A finished compaction is indistinguishable from a commit by its file name alone.
        assert parsed == Instant(T, Action.COMMIT, C)
    else:
        assert parsed == inst
    assert parsed.file_name == inst.file_name


def test_bare_inflight_is_a_commit():
    assert Instant.parse(f"{T}.inflight") == Instant(T, Action.COMMIT, I)


def test_legacy_second_precision_times_parse():
    inst = Instant.parse("20190101120000.commit")
    assert inst == Instant("20190101120000", Action.COMMIT, C)
    assert inst.file_name == "20190101120000.commit"


@pytest.mark.parametrize("name", [
    "hoodie.properties", ".aux", "archived", ".temp", "metadata",
    f"{T}.commit.tmp", f"{T}.commit.requested.bak", f".{T}.commit", f"{T}.commit.",
    f"{T}.unknownaction", f"{T}.unknownaction.requested", f"{T}.inflight.requested",
    f"{T}.Commit", f"{T}.commit.completed", "2025010203040.commit", "202501020304056789.commit",
    f"{T[:-1]}x.commit", f"{T}_20250102030406000.commit",  # a version-8 completed name
    f"{T}.commit.{'a' * 8}.tmp", f"{T}.commit.abcdef0123456789.tmp",  # our temporary files
    f".{'0' * 32}.creating",
])
def test_parse_ignores_what_is_not_a_timeline_file(name):
    assert Instant.parse(name) is None


@pytest.mark.parametrize("time", ["", "2025", "2025010203040567", "2025-01-02T03:04", "2025010203040567x"])
def test_bad_instant_times_are_refused(time):
    with pytest.raises(TimelineError) as err:
        Instant(time, Action.COMMIT, C)
    assert "Help:" in str(err.value)


def test_states_and_with_state():
    req = Instant(T, Action.DELTA_COMMIT, R)
    assert req.is_requested and not req.is_inflight and not req.is_completed
    inf = req.with_state(I)
    assert inf.is_inflight and inf.action is Action.DELTA_COMMIT and inf.time == T
    assert inf.with_state(C).is_completed
    assert req.with_state(C) != req  # a new value; instants are immutable
    with pytest.raises(AttributeError):
        req.time = "x"  # type: ignore[misc]


def test_ordering_is_by_time_then_state():
    times = [f"2025010203040{i:04d}" for i in range(0, 30, 3)]
    instants = [Instant(t, a, s) for t in times for a in (Action.COMMIT, Action.CLEAN) for s in State]
    shuffled = instants[:]
    random.Random(7).shuffle(shuffled)
    ordered = sorted(shuffled)
    assert [(i.time, i.state) for i in ordered] == sorted((i.time, i.state) for i in instants)
    # requested < inflight < completed at one time, whatever the action
    a = Instant(T, Action.ROLLBACK, R)
    b = Instant(T, Action.CLEAN, I)
    c = Instant(T, Action.COMMIT, C)
    assert a < b < c and c > a and a <= a and max(a, b, c) is c
    assert Instant("20250102030405677", Action.COMMIT, C) < a


def test_equality_and_hash():
    assert Instant(T, Action.COMMIT, C) == Instant(T, Action.COMMIT, C)
    assert Instant(T, Action.COMMIT, C) != Instant(T, Action.DELTA_COMMIT, C)
    assert len({Instant(T, Action.COMMIT, C), Instant(T, Action.COMMIT, C)}) == 1


def test_write_actions():
    assert WRITE_ACTIONS == {Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT}


@pytest.mark.interop
def test_every_fixture_timeline_file_parses(fixture_tables):
    # Every v6 timeline file Hudi wrote is recognised, and its name is rebuilt identically.
    count = 0
    for name, root in fixture_tables.items():
        if not name.rsplit("/", 1)[-1].startswith("v6_"):
            continue
        for p in (root / ".hoodie").iterdir():
            if p.is_dir() or p.name == "hoodie.properties":
                continue
            inst = Instant.parse(p.name)
            assert inst is not None, p
            assert inst.file_name == p.name, p
            count += 1
    assert count >= 40
