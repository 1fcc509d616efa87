"""Execution engines: how services run their work items in parallel.

Services see only :class:`Engine.map`. The local engine runs on threads (pyarrow and file I/O
release the GIL) or processes; the Spark issue adds an engine backed by Spark tasks.
"""

from __future__ import annotations

import abc
import os
import threading
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures import wait as wait_all
from typing import Callable, Iterable, Sequence, TypeVar

import numpy as np
import pyarrow as pa

from lakehouse.errors import ConfigError

T = TypeVar("T")
R = TypeVar("R")


class Engine(abc.ABC):
    @abc.abstractmethod
    def map(self, fn: Callable[[T], R], items: Sequence[T] | Iterable[T],
            parallelism: int | None = None) -> list[R]:
        """``[fn(x) for x in items]``, in order, with up to ``parallelism`` running at once.

        The first failure is raised after the running items finish; ``fn`` and the items must be
        picklable for engines that ship work to other processes or machines.
        """


class LocalEngine(Engine):
    def __init__(self, kind: str = "threads", parallelism: int | None = None) -> None:
        if kind not in ("threads", "processes"):
            raise ConfigError(f"local engine kind {kind!r} is not threads or processes",
                              help="use LocalEngine('threads') or LocalEngine('processes')")
        if parallelism is not None and parallelism < 1:
            raise ConfigError(f"parallelism {parallelism} must be at least 1", help="pass 1 or more")
        self.kind = kind
        self.parallelism = parallelism or os.cpu_count() or 1

    def map(self, fn, items, parallelism=None):
        items = list(items)
        n = min(len(items), parallelism or self.parallelism)
        if n <= 1:
            return [fn(x) for x in items]
        pool_cls = ThreadPoolExecutor if self.kind == "threads" else ProcessPoolExecutor
        with pool_cls(max_workers=n) as pool:
            return list(pool.map(fn, items))


class SharedThreads(Engine):
    """Maps on a pool of threads started once per process and kept: for short work that runs
    after every commit (the Iceberg publish), where starting a pool's threads for each map costs
    more than the work on a busy machine (each start waits for the new thread to be scheduled).

    The pool is bounded, so a task that maps on the same pool would wait for workers its own
    siblings hold: a map from inside one of its tasks runs in that task, one item at a time."""

    def __init__(self, name: str, workers: int) -> None:
        self.name = name
        self.workers = workers
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        _shared.append(self)

    def _executor(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix=self.name)
            return self._pool

    def map(self, fn, items, parallelism=None):
        items = list(items)
        if len(items) <= 1 or threading.current_thread().name.startswith(self.name):
            return [fn(x) for x in items]
        futures = [self._executor().submit(fn, x) for x in items]
        wait_all(futures)  # the first failure is raised once every item has finished
        return [f.result() for f in futures]

    def _forget(self) -> None:
        self._pool, self._lock = None, threading.Lock()


_shared: list[SharedThreads] = []


def _after_fork_in_child() -> None:
    # A forked child has none of its parent's threads: its pools start afresh.
    for engine in _shared:
        engine._forget()


os.register_at_fork(after_in_child=_after_fork_in_child)

_default: Engine | None = None


def default_engine() -> Engine:
    global _default
    if _default is None:
        _default = LocalEngine()
    return _default


def parallel_take(table, indices, min_rows: int = 200_000):
    """``table.take(indices)`` in row ranges on threads (Arrow releases the GIL): a big take of
    string columns is memory-bound and otherwise runs on one core while the others wait."""
    n = len(indices)
    workers = min(os.cpu_count() or 1, 8, max(1, n // min_rows))
    if workers <= 1:
        return table.take(indices)
    bounds = np.linspace(0, n, workers + 1).astype(int)
    parts = [indices[a:b] for a, b in zip(bounds[:-1], bounds[1:])]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return pa.concat_tables(pool.map(table.take, parts))
