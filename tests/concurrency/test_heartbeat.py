"""Writer heartbeats on an injected clock: alive within interval x (misses + 1), expired after,
absent means failed, a torn beat still counts as a sign of life."""

from __future__ import annotations

import time

from lakehouse.concurrency.heartbeat import Heartbeats, heartbeat_path
from lakehouse.storage.local import LocalStorage


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_expiry_follows_interval_and_tolerated_misses(tmp_path):
    clock = Clock()
    beats = Heartbeats(LocalStorage(str(tmp_path)), interval_s=10, misses=2, clock=clock)
    assert beats.is_expired("20300101000000000"), "an instant without a heartbeat is not live"
    beats.beat("20300101000000000")
    clock.now += 30  # exactly three intervals: the tolerated misses, not more
    assert not beats.is_expired("20300101000000000")
    clock.now += 0.5
    assert beats.is_expired("20300101000000000")
    beats.beat("20300101000000000")
    assert not beats.is_expired("20300101000000000")


def test_a_torn_beat_falls_back_to_the_file_time(tmp_path):
    storage = LocalStorage(str(tmp_path))
    beats = Heartbeats(storage, interval_s=10, misses=0)
    storage.write(heartbeat_path("20300101000000000"), b'{"ts": 17')
    assert not beats.is_expired("20300101000000000")


def test_started_beats_keep_going_until_stopped(tmp_path):
    storage = LocalStorage(str(tmp_path))
    beats = Heartbeats(storage, interval_s=0.05, misses=0)
    beats.start("20300101000000000")
    first = beats.last_beat("20300101000000000")
    deadline = time.time() + 5
    while beats.last_beat("20300101000000000") == first and time.time() < deadline:
        time.sleep(0.01)
    assert beats.last_beat("20300101000000000") > first, "the heartbeat thread did not beat"
    beats.stop("20300101000000000")
    assert not storage.exists(heartbeat_path("20300101000000000"))
    time.sleep(0.15)
    assert not storage.exists(heartbeat_path("20300101000000000")), "a stopped heartbeat came back"
