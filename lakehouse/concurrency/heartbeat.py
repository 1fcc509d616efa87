"""Writer heartbeats: how one writer tells another's pending instant from a failed one.

With several writers a pending instant is usually someone's write in progress, so "roll back
every pending write" (EAGER) would destroy live work. Each writer instead keeps
``.hoodie/.heartbeat/<instant>`` fresh while it works on that instant (Hudi's layout); a pending
instant whose heartbeat is older than ``interval * (misses + 1)``, or absent, belongs to a writer
that died, and the next writer rolls it back (LAZY). The heartbeat is written *before* the
instant's requested file, so no other writer ever sees a live instant without one.

The time inside the file comes from an injected clock (not the file's mtime, which differs per
machine and store), so expiry is tested without sleeping.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Callable

from lakehouse.storage.base import Storage
from lakehouse import layout

Clock = Callable[[], float]


def heartbeat_path(instant_time: str) -> str:
    return f"{layout.HEARTBEAT}/{instant_time}"


class Heartbeats:
    """Beats for the instants this process works on, and the liveness check for everyone's."""

    def __init__(self, storage: Storage, *, interval_s: float, misses: int,
                 clock: Clock = time.time) -> None:
        self.storage = storage
        self.interval_s = interval_s
        self.expiry_s = interval_s * (misses + 1)
        self.clock = clock
        self._beating: dict[str, tuple[threading.Event, threading.Thread]] = {}
        self._guard = threading.Lock()

    def beat(self, instant_time: str) -> None:
        self.storage.write(heartbeat_path(instant_time),
                           json.dumps({"ts": self.clock()}).encode())

    def start(self, instant_time: str) -> None:
        """Beat now, then every interval from a daemon thread until :meth:`stop`."""
        self.beat(instant_time)
        stop = threading.Event()

        def run() -> None:
            while not stop.wait(self.interval_s):
                try:
                    self.beat(instant_time)
                except Exception:  # noqa: BLE001 - a missed beat is tolerated; misses decide
                    pass

        thread = threading.Thread(target=run, name=f"heartbeat-{instant_time}", daemon=True)
        with self._guard:
            self._beating[instant_time] = (stop, thread)
        thread.start()

    def stop(self, instant_time: str, *, delete: bool = True) -> None:
        with self._guard:
            beating = self._beating.pop(instant_time, None)
        if beating is not None:
            beating[0].set()
            beating[1].join()  # a beat in flight must not bring the file back after the delete
        if delete:
            self.storage.delete(heartbeat_path(instant_time))

    def last_beat(self, instant_time: str) -> float | None:
        try:
            return float(json.loads(self.storage.read(heartbeat_path(instant_time)))["ts"])
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError):
            # A torn beat is still a sign of life: judge by when the file was last written.
            info = self.storage.info(heartbeat_path(instant_time))
            return info.mtime_ns / 1e9 if info is not None and info.mtime_ns else None

    def is_expired(self, instant_time: str) -> bool:
        """True when no writer has shown life for ``instant_time`` within the tolerated misses."""
        last = self.last_beat(instant_time)
        return last is None or self.clock() - last > self.expiry_s

    def stop_all(self) -> None:
        for t in list(self._beating):
            self.stop(t, delete=False)
