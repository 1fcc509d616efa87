"""Sources read a few ahead on threads, their items handed out in source order."""

from __future__ import annotations

import random
import threading
import time

import pytest

from lakehouse.read.read_ahead import read_ahead


def source(i: int, n: int, log: list, delay: bool = False):
    def items():
        for j in range(n):
            if delay:
                time.sleep(random.random() / 500)  # producers finish in any order
            log.append((i, j))
            yield (i, j)
    return items


@pytest.mark.parametrize("workers", [1, 2, 4])
def test_items_come_out_in_source_order_whatever_the_threads_do(workers):
    log: list = []
    got = list(read_ahead([source(i, 5, log, delay=True) for i in range(7)], workers=workers))
    assert got == [(i, j) for i in range(7) for j in range(5)]


def test_at_most_the_workers_queues_are_produced_ahead_of_the_reader():
    log: list = []
    it = read_ahead([source(i, 100, log) for i in range(10)], workers=2, depth=2)
    first = next(it)
    time.sleep(0.3)  # let the producers run as far as they may
    # Each of the 2 running sources: its queue of 2, one item blocked on the full queue, and
    # the one the reader holds.
    assert first == (0, 0)
    assert len(log) <= 2 * (2 + 1) + 1
    assert {i for i, _ in log} <= {0, 1}
    it.close()


def test_a_reader_that_leaves_early_stops_the_producers():
    log: list = []
    before = threading.active_count()
    it = read_ahead([source(i, 1000, log) for i in range(10)], workers=2)
    assert next(it) == (0, 0)
    it.close()
    assert threading.active_count() == before
    produced = len(log)
    time.sleep(0.2)
    assert len(log) == produced


def test_a_failing_source_raises_in_the_reader_after_the_items_before_it():
    log: list = []

    def broken():
        yield (1, 0)
        raise ValueError("damaged slice")

    it = read_ahead([source(0, 3, log), broken, source(2, 3, log)], workers=2)
    got = []
    with pytest.raises(ValueError, match="damaged slice"):
        for x in it:
            got.append(x)
    assert got == [(0, 0), (0, 1), (0, 2), (1, 0)]


def test_no_sources():
    assert list(read_ahead([], workers=2)) == []
