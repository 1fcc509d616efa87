"""lakehouse.engine.foreground: the mark a write sets for the process's background services."""

from __future__ import annotations

import threading

from lakehouse.engine import foreground


def test_running_nests_and_ends_with_its_outermost_block():
    assert not foreground.busy()
    with foreground.running():
        with foreground.running():
            assert foreground.busy()
        assert foreground.busy()
    assert not foreground.busy()


def test_running_ends_when_its_block_raises():
    try:
        with foreground.running():
            raise KeyError("x")
    except KeyError:
        pass
    assert not foreground.busy()


def test_wait_idle_returns_when_the_work_ends():
    started, release = threading.Event(), threading.Event()

    def work():
        with foreground.running():
            started.set()
            release.wait(60)

    t = threading.Thread(target=work)
    t.start()
    assert started.wait(30)
    waited: list[float] = []
    w = threading.Thread(target=lambda: waited.append(foreground.wait_idle(60)))
    w.start()
    w.join(0.1)
    assert w.is_alive()  # still waiting: the work runs
    release.set()
    w.join(60)
    t.join(60)
    assert waited and waited[0] < 60 and not foreground.busy()


def test_wait_idle_stops_when_told_and_at_its_timeout():
    stop = threading.Event()
    with foreground.running():
        threading.Timer(0.05, stop.set).start()
        assert foreground.wait_idle(60, stop=stop.is_set) < 60
        assert foreground.wait_idle(0.02) >= 0.02  # nobody ends the work: the timeout does
    assert foreground.wait_idle(60) < 60  # idle: at once
