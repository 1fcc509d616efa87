"""Another process's step run beside the one under test, in a thread of its own: started at a
chosen point (a hook), it runs until it ends or waits for the table lock, and the test goes on
from there. Whether it had to wait is what tells a step taken under the lock from one taken
without it."""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

from lakehouse.concurrency.lock import StorageLockProvider


class Aside:
    def __init__(self, monkeypatch, name: str = "aside") -> None:
        self.name = name
        self.waited = threading.Event()
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        self._out: dict[str, Any] = {}
        real = StorageLockProvider.try_acquire

        def try_acquire(provider):
            lease = real(provider)
            if lease is None and threading.current_thread().name == self.name:
                self.waited.set()
            return lease
        monkeypatch.setattr(StorageLockProvider, "try_acquire", try_acquire)

    @property
    def started(self) -> bool:
        return self._thread is not None

    def start(self, fn: Callable[[], Any], timeout_s: float = 60.0) -> None:
        """Run ``fn`` aside until it ends or waits for the lock."""
        def run():
            try:
                self._out["value"] = fn()
            except BaseException as e:  # noqa: BLE001 - handed to join()
                self._out["error"] = e
            finally:
                self._done.set()
        self._thread = threading.Thread(target=run, name=self.name, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not (self.waited.is_set() or self._done.is_set()) and time.monotonic() < deadline:
            time.sleep(0.002)

    def join(self, timeout_s: float = 120.0) -> Any:
        """``fn``'s result (its error raised here)."""
        assert self._thread is not None
        self._thread.join(timeout_s)
        assert not self._thread.is_alive(), f"{self.name} did not end"
        if "error" in self._out:
            raise self._out["error"]
        return self._out.get("value")
