"""Iceberg publishing beside the writer: one publisher thread per table and process.

As Delta Lake's UniForm converts each commit to Iceberg in a thread of the writing process
after the commit (``IcebergConverter.enqueueSnapshotForConversion``), a commit here hands its
table to the table's publisher and returns: the write does not wait for the Iceberg files
(``hoodie.meta.sync.iceberg.async``, on by default). The publisher runs
:func:`lakehouse.iceberg.publish.sync_iceberg`, which publishes every completed instant not
published yet, each as its own snapshot; a commit arriving while it runs makes it run once more.

How far the Iceberg view lags: by the commits this process completed since the publisher's
current run began. A writer more than :data:`MAX_BEHIND` commits ahead waits for the run to end
(so the lag stays bounded when commits come faster than they publish). The publisher yields to
the process's writes (lakehouse.engine.foreground): between its steps it waits while a write
runs, for up to :data:`MAX_YIELD_SECONDS` per run, so a write that follows a commit runs at the
speed it has with nothing in the background; anyone waiting for the publisher (:func:`wait`, a
writer :data:`MAX_BEHIND` commits ahead, the process's exit) stops the yielding. The process waits for its
publishers when it exits (up to :data:`EXIT_WAIT_SECONDS`), so a job that commits and ends leaves
the Iceberg view at its last commit; a process killed before that leaves it to the next commit
or to ``lakehouse iceberg-sync`` (publishing catches up on everything unpublished).
:func:`wait` (called by ``sync_iceberg``) waits for a table's publisher.
"""

from __future__ import annotations

import atexit
import concurrent.futures.thread  # noqa: F401 - its exit hook first: see _at_exit
import logging
import os
import threading
import time
from typing import Callable

from lakehouse.engine import foreground

log = logging.getLogger("lakehouse.iceberg")

# Commits a writer may complete while its table's publisher runs before it waits for the run.
MAX_BEHIND = 8
# How long one run of a publisher may wait, in all, for the process's writes to end before it
# works beside them: the most yielding adds to how far the Iceberg view lags.
MAX_YIELD_SECONDS = 2.0
# How long an exiting process waits for its publishers.
EXIT_WAIT_SECONDS = 600.0


class _Publisher:
    def __init__(self, key: str) -> None:
        self.key = key
        self.cond = threading.Condition()
        self.thread: threading.Thread | None = None
        self.job: Callable[[], None] | None = None  # the latest request (covers earlier ones)
        self.behind = 0  # commits requested since the running run began
        self.waiters = 0  # threads waiting for the publisher: it stops yielding to writes
        self.yielded = 0.0  # seconds the running run waited for writes

    def submit(self, job: Callable[[], None]) -> None:
        with self.cond:
            self.job = job
            self.behind += 1
            if self.thread is None:
                self.thread = threading.Thread(target=self._run, name=f"iceberg-publisher {self.key}",
                                               daemon=True)
                self.thread.start()
            if self.behind > MAX_BEHIND and self.thread is not None:
                self.waiters += 1
                try:
                    while self.behind > MAX_BEHIND and self.thread is not None:
                        self.cond.wait()
                finally:
                    self.waiters -= 1

    def _run(self) -> None:
        while True:
            with self.cond:
                job, self.job = self.job, None
                self.behind = 0
                if job is None:
                    self.thread = None
                    self.cond.notify_all()
                    return
                self.yielded = 0.0
                self.cond.notify_all()
            _local.publisher = self
            try:
                self.pause()  # the commit's write is still returning: let it
                job()
            except BaseException:  # noqa: BLE001 - a publish never fails the commits; logged
                log.warning("%s: background Iceberg publishing failed; the next commit retries",
                            self.key, exc_info=True)

    def pause(self) -> None:
        """Wait while the process writes, within the run's budget, unless someone waits."""
        left = MAX_YIELD_SECONDS - self.yielded
        if left > 0 and foreground.busy() and not self.waiters:
            self.yielded += foreground.wait_idle(left, stop=lambda: self.waiters > 0)

    def wait(self, timeout: float | None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self.cond:
            if self.thread is threading.current_thread():
                return True  # the publisher itself (its own sync_iceberg)
            self.waiters += 1
            try:
                while self.thread is not None:
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        return False
                    self.cond.wait(left)
            finally:
                self.waiters -= 1
        return True


_publishers: dict[str, _Publisher] = {}
_lock = threading.Lock()
_local = threading.local()  # .publisher: the _Publisher whose thread this is


def pause() -> None:
    """A point between two steps of a publish where a table's publisher thread yields to the
    process's writes (see the module's doc); nothing on any other thread."""
    p = getattr(_local, "publisher", None)
    if p is not None:
        p.pause()


def _forget_after_fork() -> None:
    """A forked child has none of its parent's threads: it must neither wait for their
    publishers (at exit) nor find their locks held."""
    global _lock
    _lock = threading.Lock()
    _publishers.clear()


os.register_at_fork(after_in_child=_forget_after_fork)


def _publisher(key: str) -> _Publisher:
    with _lock:
        p = _publishers.get(key)
        if p is None:
            p = _publishers[key] = _Publisher(key)
        return p


def submit(key: str, job: Callable[[], None]) -> None:
    """Run ``job`` (publish everything unpublished of the table ``key``) in the table's
    publisher thread; a job submitted while one runs replaces any still waiting."""
    _publisher(key).submit(job)


def wait(key: str, timeout: float | None = None) -> bool:
    """Wait until the table ``key`` has no publish running or waiting; False on timeout."""
    with _lock:
        p = _publishers.get(key)
    return True if p is None else p.wait(timeout)


def wait_all(timeout: float | None = EXIT_WAIT_SECONDS) -> bool:
    deadline = None if timeout is None else time.monotonic() + timeout
    with _lock:
        pending = list(_publishers.values())
    ok = True
    for p in pending:
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        ok = p.wait(left) and ok
    return ok


def _at_exit() -> None:
    if not wait_all():
        log.warning("Iceberg publishing was still running at exit: the next commit or "
                    "`lakehouse iceberg-sync` publishes what it had not")


# The wait must run before the interpreter's shutdown stops thread pools from taking work
# (concurrent.futures refuses new futures from its own threading-exit hook, which runs before
# atexit's): a publisher finishing at exit still fans its files out over a pool. Registered
# after concurrent.futures' hook, so it runs before it (they run in reverse order).
_register = getattr(threading, "_register_atexit", None)
if _register is not None:
    _register(_at_exit)
else:  # pragma: no cover - an interpreter without the hook: pools may refuse at exit
    atexit.register(_at_exit)
