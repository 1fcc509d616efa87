import threading
import time

import pytest

from lakehouse.engine import LocalEngine
from lakehouse.errors import ConfigError


def square(x):
    return x * x


@pytest.mark.parametrize("kind", ["threads", "processes"])
def test_map_keeps_order(kind):
    assert LocalEngine(kind, 2).map(square, range(20)) == [x * x for x in range(20)]


def test_parallelism_bounds_concurrency():
    running, peak, lock = [0], [0], threading.Lock()

    def work(_):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.01)
        with lock:
            running[0] -= 1

    LocalEngine("threads", 8).map(work, range(30), parallelism=3)
    assert 1 < peak[0] <= 3


def test_failure_propagates():
    def boom(x):
        if x == 3:
            raise ValueError("item 3")
        return x

    with pytest.raises(ValueError, match="item 3"):
        LocalEngine("threads", 2).map(boom, range(6))


def test_bad_settings():
    with pytest.raises(ConfigError):
        LocalEngine("gpu")
    with pytest.raises(ConfigError):
        LocalEngine("threads", 0)


# --- SharedThreads: the pool the Iceberg publisher maps on after every commit -----------------

def test_shared_threads_keep_order_and_reuse_their_threads():
    from lakehouse.engine import SharedThreads
    engine = SharedThreads("test-shared", 3)
    names: set[str] = set()

    def work(x):
        names.add(threading.current_thread().name)
        time.sleep(0.002)
        return x * x

    for _ in range(5):
        assert engine.map(work, range(12)) == [x * x for x in range(12)]
    # Five maps of twelve items ran on the same three threads, none started per map.
    assert len(names) <= 3 and all(n.startswith("test-shared") for n in names)


def test_shared_threads_raise_the_first_failure_after_every_item_finished():
    from lakehouse.engine import SharedThreads
    engine = SharedThreads("test-shared-fail", 2)
    done = []

    def work(x):
        if x == 1:
            raise ValueError("item 1")
        time.sleep(0.02)
        done.append(x)

    with pytest.raises(ValueError, match="item 1"):
        engine.map(work, range(6))
    assert sorted(done) == [0, 2, 3, 4, 5]


def test_a_map_from_inside_a_shared_task_runs_in_that_task_instead_of_waiting_for_the_pool():
    """Two workers, two tasks each mapping again on the same pool: waiting for free workers
    would never end."""
    from lakehouse.engine import SharedThreads
    engine = SharedThreads("test-shared-nested", 2)
    out: list = []
    t = threading.Thread(target=lambda: out.append(engine.map(lambda x: engine.map(square, range(x)), [3, 4])))
    t.start()
    t.join(10)
    assert not t.is_alive() and out == [[[0, 1, 4], [0, 1, 4, 9]]]


def test_a_forked_child_starts_its_own_shared_threads():
    import os
    from lakehouse.engine import SharedThreads
    engine = SharedThreads("test-shared-fork", 2)
    assert engine.map(square, range(4)) == [0, 1, 4, 9]  # the parent's threads are running
    pid = os.fork()
    if pid == 0:  # the child: the parent's pool has no threads here; a map must not hang
        try:
            ok = engine.map(square, range(4)) == [0, 1, 4, 9]
        finally:
            os._exit(0 if ok else 1)
    deadline = time.monotonic() + 20
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    if done[0] == 0:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        pytest.fail("the child's map waited for threads only its parent has")
    assert os.WEXITSTATUS(done[1]) == 0
