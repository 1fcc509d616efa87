"""Reading a few sources ahead on threads, handing their items out in order.

A streamed scan reads file slices one after another; the slice being handed out and the next
one can be decoded and merged at the same time (Arrow's kernels release the GIL), as Arrow's
dataset scanner reads a few fragments ahead. Each source runs on a thread of its own, feeding a
queue of at most ``depth`` items, so what the read holds stays bounded by ``workers`` sources'
queued items whatever the sources' sizes; items come out in source order, so a streamed read
returns the same rows in the same order however the threads run.
"""

from __future__ import annotations

import queue
import threading
from typing import Callable, Iterable, Iterator, TypeVar

T = TypeVar("T")

_DONE = object()
_POLL_S = 0.1  # how often a producer blocked on a full queue looks whether the reader left


class _Failed:
    def __init__(self, error: BaseException) -> None:
        self.error = error


def read_ahead(sources: Iterable[Callable[[], Iterator[T]]], *, workers: int, depth: int = 2) -> Iterator[T]:
    """The items of each source in turn, with up to ``workers`` sources producing at once."""
    pending = iter(sources)
    stop = threading.Event()
    running: list[tuple[queue.Queue, threading.Thread]] = []

    def produce(source: Callable[[], Iterator[T]], out: queue.Queue) -> None:
        def put(item: object) -> bool:
            while not stop.is_set():
                try:
                    out.put(item, timeout=_POLL_S)
                    return True
                except queue.Full:
                    continue
            return False

        try:
            for item in source():
                if not put(item):
                    return
        except BaseException as e:  # noqa: BLE001 - handed to the reader, raised there
            put(_Failed(e))
            return
        put(_DONE)

    def start_next() -> bool:
        source = next(pending, None)
        if source is None:
            return False
        out: queue.Queue = queue.Queue(maxsize=depth)
        t = threading.Thread(target=produce, args=(source, out), daemon=True, name="lakehouse-read-ahead")
        t.start()
        running.append((out, t))
        return True

    try:
        for _ in range(max(1, workers)):
            if not start_next():
                break
        while running:
            out, t = running[0]
            while True:
                item = out.get()
                if item is _DONE:
                    break
                if isinstance(item, _Failed):
                    raise item.error
                yield item
            running.pop(0)
            t.join()
            start_next()
    finally:
        stop.set()  # a reader that left early: the producers stop at their next item
        for _, t in running:
            t.join()
