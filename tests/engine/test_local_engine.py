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
