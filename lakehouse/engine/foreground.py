"""Foreground work of this process, which its background services yield to.

A table's Iceberg publisher (lakehouse.iceberg.background) runs in a thread of the writing
process, beside the writes that follow the commit it publishes. Python threads share one
interpreter lock and the machine's cores: a publisher working while the next write runs slows
that write down by about the publisher's own CPU time. Writes mark themselves here; a
background service checks :func:`busy` between its steps and waits (for a bounded time) while
a write runs, so the write runs at the speed it has with nothing in the background and the
service catches up between writes.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from typing import Callable, Iterator

_cond = threading.Condition()
_active = 0


@contextlib.contextmanager
def running() -> Iterator[None]:
    """Mark foreground work (a write) for as long as the block runs; nests."""
    global _active
    with _cond:
        _active += 1
    try:
        yield
    finally:
        with _cond:
            _active -= 1
            if not _active:
                _cond.notify_all()


def busy() -> bool:
    return _active > 0


def wait_idle(timeout: float, stop: Callable[[], bool] = lambda: False, poll: float = 0.01) -> float:
    """Wait until no foreground work runs, ``stop()`` holds, or ``timeout`` seconds passed
    (``stop`` is checked every ``poll`` seconds); the seconds waited."""
    start = time.monotonic()
    deadline = start + timeout
    with _cond:
        while _active and not stop():
            left = deadline - time.monotonic()
            if left <= 0:
                break
            _cond.wait(min(left, poll))
    return time.monotonic() - start


def _after_fork_in_child() -> None:
    # A forked child runs none of its parent's writes, and may have been forked mid-wait.
    global _cond, _active
    _cond, _active = threading.Condition(), 0


os.register_at_fork(after_in_child=_after_fork_in_child)
