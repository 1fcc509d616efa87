"""Instant times: the 17-digit format, strict increase within a process whatever the clock does,
and no duplicates when several processes allocate instants on one table at once."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import textwrap
import threading
import time
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakehouse.layout import METAFOLDER
from lakehouse.storage import LocalStorage
from lakehouse.timeline.active import ActiveTimeline
from lakehouse.timeline.instant import Action, Instant
from lakehouse.timeline.instant_time import (InstantTimeGenerator, format_instant_time,
                                             parse_instant_time)

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
UTC = timezone.utc


class Clock:
    """A clock the test moves by hand."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


# --- format --------------------------------------------------------------------------------


def test_format_known_value():
    # 2025-03-31 03:06:42.808 UTC is the first instant of the v6_trips_8i1u fixture.
    dt = datetime(2025, 3, 31, 3, 6, 42, 808_999, tzinfo=UTC)
    assert format_instant_time(dt) == "20250331030642808"  # milliseconds truncate
    assert parse_instant_time("20250331030642808") == datetime(2025, 3, 31, 3, 6, 42, 808_000, tzinfo=UTC)


def test_format_converts_to_utc():
    plus_two = timezone(timedelta(hours=2))
    assert format_instant_time(datetime(2025, 1, 1, 2, 0, 0, tzinfo=plus_two)) == "20250101000000000"


def test_naive_datetimes_are_utc(monkeypatch):
    # Not the machine's local time: instant times are UTC wherever the writer runs.
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        assert format_instant_time(datetime(2025, 1, 1, 12, 0, 0)) == "20250101120000000"
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()


def test_parse_second_precision_time():
    assert parse_instant_time("20190101120000") == datetime(2019, 1, 1, 12, 0, tzinfo=UTC)


@settings(max_examples=300)
@given(st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59)))
def test_format_parse_round_trip(naive):
    dt = naive.replace(microsecond=naive.microsecond // 1000 * 1000, tzinfo=UTC)
    text = format_instant_time(dt)
    assert len(text) == 17 and text.isdigit()
    assert parse_instant_time(text) == dt
    assert format_instant_time(parse_instant_time(text)) == text


@settings(max_examples=200)
@given(st.lists(st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(9999, 1, 1)),
                min_size=2, max_size=10))
def test_string_order_is_time_order(naives):
    # The timeline sorts instant times as strings; that must be chronological.
    dts = [d.replace(microsecond=d.microsecond // 1000 * 1000, tzinfo=UTC) for d in naives]
    assert sorted(dts) == [parse_instant_time(t) for t in sorted(format_instant_time(d) for d in dts)]


# --- one process ---------------------------------------------------------------------------


def test_stuck_clock_still_gives_increasing_times():
    clock = Clock(datetime(2030, 6, 1, 12, 0, 0, tzinfo=UTC))
    gen = InstantTimeGenerator(clock)
    times = [gen.next() for _ in range(2000)]
    assert times[0] == "20300601120000000"
    # One millisecond apart: the generator does not skip ahead more than needed.
    assert [parse_instant_time(t) for t in times] == [
        clock.now + timedelta(milliseconds=i) for i in range(2000)]


def test_clock_going_backwards():
    clock = Clock(datetime(2030, 6, 1, 12, 0, 0, tzinfo=UTC))
    gen = InstantTimeGenerator(clock)
    times = []
    for step in range(200):
        times.append(gen.next())
        clock.now += timedelta(milliseconds=(-3600_000 if step % 7 == 0 else 3))
    assert all(a < b for a, b in zip(times, times[1:]))


def test_clock_moving_on_is_followed():
    clock = Clock(datetime(2030, 6, 1, 12, 0, 0, tzinfo=UTC))
    gen = InstantTimeGenerator(clock)
    gen.next()
    clock.now += timedelta(seconds=5)
    assert gen.next() == "20300601120005000"


def test_after_is_a_floor():
    clock = Clock(datetime(2030, 6, 1, 12, 0, 0, tzinfo=UTC))
    gen = InstantTimeGenerator(clock)
    assert gen.next(after="20990101000000000") == "20990101000000001"
    assert gen.next() == "20990101000000002"  # and it is remembered
    assert gen.next(after="20000101000000000") == "20990101000000003"


def test_threads_never_share_a_time():
    clock = Clock(datetime(2030, 6, 1, 12, 0, 0, tzinfo=UTC))
    gen = InstantTimeGenerator(clock)
    out: list[list[str]] = [[] for _ in range(8)]
    barrier = threading.Barrier(8)

    def run(i: int) -> None:
        barrier.wait()
        for _ in range(300):
            out[i].append(gen.next())

    threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    flat = [x for xs in out for x in xs]
    assert len(set(flat)) == len(flat) == 2400
    assert all(xs == sorted(xs) for xs in out)


# --- several processes on one table ---------------------------------------------------------

_ALLOCATE = textwrap.dedent("""
    import json, sys, time
    from datetime import datetime, timezone
    from lakehouse.storage import LocalStorage
    from lakehouse.timeline.active import ActiveTimeline
    from lakehouse.timeline.instant import Action
    from lakehouse.timeline.instant_time import InstantTimeGenerator, utc_now
    root, start, action, count, stuck = sys.argv[1:6]
    if stuck == "1":
        # Every process reads the same fixed time: all of them want the same millisecond.
        fixed = datetime(2030, 1, 1, tzinfo=timezone.utc)
        gen = InstantTimeGenerator(lambda: fixed)
    else:
        gen = InstantTimeGenerator(utc_now)
    active = ActiveTimeline(LocalStorage(root), gen)
    while time.time() < float(start):
        pass
    out = [active.create_requested(Action(action)).time for _ in range(int(count))]
    print(json.dumps(out))
""")


def _allocate_in_processes(root, actions, count, stuck) -> list[list[str]]:
    start = time.time() + 2.0
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    procs = [subprocess.Popen(
        [sys.executable, "-c", _ALLOCATE, str(root), str(start), a, str(count), "1" if stuck else "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for a in actions]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        results.append(json.loads(out))
    return results


@pytest.mark.parametrize("stuck", [False, True], ids=["real-clock", "stuck-clock"])
@pytest.mark.parametrize("mixed", [False, True], ids=["same-action", "mixed-actions"])
def test_processes_never_allocate_the_same_time(tmp_path, stuck, mixed):
    actions = (["commit", "deltacommit", "clean", "rollback"] if mixed else ["deltacommit"] * 4)
    count = 25
    results = _allocate_in_processes(tmp_path, actions, count, stuck)
    flat = [t for r in results for t in r]
    assert len(flat) == len(set(flat)) == len(actions) * count
    for r in results:
        assert r == sorted(r) and len(set(r)) == len(r)
    # What is on disk agrees: one requested file per allocated time, nothing else.
    names = sorted(p.name for p in (tmp_path / METAFOLDER).iterdir())
    parsed = [Instant.parse(n) for n in names]
    assert all(p is not None and p.is_requested for p in parsed), names
    assert sorted(p.time for p in parsed) == sorted(flat)
    for action, times in zip(actions, results):
        assert {p.time for p in parsed if p.action.value == action} >= set(times)


@pytest.mark.xfail(strict=True, reason=(
    "Known limitation, documented here: an allocator that is delayed between listing the "
    "timeline and creating its requested file (its create() fsyncs the content first, which can "
    "take milliseconds) lands BELOW an instant another process created in the meantime. Only "
    "identical times are settled atomically without a lock: several writers need "
    "hoodie.write.concurrency.mode=OPTIMISTIC_CONCURRENCY_CONTROL (next test)."))
def test_a_delayed_allocator_does_not_land_below_a_newer_instant(tmp_path):
    storage = LocalStorage(str(tmp_path))
    clock_a = Clock(datetime(2030, 1, 1, 0, 0, 0, tzinfo=UTC))
    clock_b = Clock(datetime(2030, 1, 1, 0, 0, 0, 5000, tzinfo=UTC))  # 5 ms later
    a = ActiveTimeline(storage, InstantTimeGenerator(clock_a))
    b = ActiveTimeline(storage, InstantTimeGenerator(clock_b))
    real_create = storage.create
    newer: list[str] = []

    def slow_create(path, data):
        # While A is still writing its file, B allocates and creates a later instant.
        if not newer:
            storage.create = real_create
            newer.append(b.create_requested(Action.DELTA_COMMIT).time)
        return real_create(path, data)

    storage.create = slow_create
    mine = a.create_requested(Action.DELTA_COMMIT)
    assert newer and mine.time > newer[0], (
        f"A's {mine.time} was created after B's {newer[0]} yet sorts before it")


def test_under_the_table_lock_a_delayed_allocator_stays_below_later_ones(tmp_path):
    """With several writers instants are allocated under the table lock: B, starting while A is
    still creating its file, waits and lands above A."""
    from lakehouse.concurrency.transaction import TransactionManager
    from lakehouse.config import ConcurrencyConfig
    storage = LocalStorage(str(tmp_path))
    cfg = ConcurrencyConfig.from_options({"hoodie.write.concurrency.mode": "OPTIMISTIC_CONCURRENCY_CONTROL",
                                          "hoodie.write.lock.wait_time_ms_between_retry": "5"})
    clock_a = Clock(datetime(2030, 1, 1, 0, 0, 0, tzinfo=UTC))
    clock_b = Clock(datetime(2030, 1, 1, 0, 0, 0, 5000, tzinfo=UTC))
    a = ActiveTimeline(storage, InstantTimeGenerator(clock_a))
    b = ActiveTimeline(storage, InstantTimeGenerator(clock_b))
    a.allocation_guard = TransactionManager(storage, cfg).lock  # two processes: two managers
    b.allocation_guard = TransactionManager(storage, cfg).lock
    real_create = storage.create
    newer: list[str] = []
    other = threading.Thread(target=lambda: newer.append(b.create_requested(Action.DELTA_COMMIT).time))

    created_first: list[str] = []

    def slow_create(path, data):
        if path.endswith(".requested") and not other.is_alive() and not newer:
            other.start()
            time.sleep(0.3)  # B tries to allocate while A is mid-create
            created_first.extend(newer)  # without the lock B is done by now, above A's time
        return real_create(path, data)

    storage.create = slow_create
    mine = a.create_requested(Action.DELTA_COMMIT)
    other.join()
    assert not created_first, f"B created {created_first} while A was allocating {mine.time}"
    assert newer and newer[0] > mine.time, f"B's {newer} landed below A's {mine.time}"
