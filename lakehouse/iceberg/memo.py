"""What one process keeps between Iceberg publishes, of files that never change.

A writer that publishes after each of its commits would otherwise read the same files again at
every commit: the record keys of the base files its upserts hit, the manifests of the partitions
they touch, the decision columns of the log files already published. Each of these files is
immutable once written and its name is never reused (base and log files carry their instant
and a write token, overlay files and manifests a random part; a Hudi log file another writer
appends to changes size, which is part of its key), so a kept copy is never stale. Bounded, least
recently used first out; thread-safe (file groups are published in parallel).
"""

from __future__ import annotations

import os
import threading
from typing import Any, Callable, Hashable, TypeVar

from cachetools import LRUCache

V = TypeVar("V")



def memory_limit() -> int | None:
    """The memory this process may use: the machine's, or its container's (cgroup v2 or v1)
    limit when lower; None where neither can be read."""
    limits: list[int] = []
    try:
        limits.append(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        pass
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path) as f:
                text = f.read().strip()
        except OSError:
            continue
        if text.isdigit():
            limits.append(int(text))
    limits = [x for x in limits if x > 0]
    return min(limits) if limits else None


def arrow_budget(limit: int | None) -> int:
    """What the Arrow memo may hold: a sixteenth of ``limit``, at least 256 MiB and at most
    2 GiB. A file group's keys take ~60 bytes per row with their index and deciding columns, so
    the publisher of a 5M-row table needs ~300 MiB to look nothing up twice (a budget below the
    table's keys reads them again at every commit)."""
    if limit is None:
        return 256 << 20
    return max(256 << 20, min(2 << 30, limit // 16))


# Arrow data (record keys, decision columns) kept per process: ~110 ms of reading per 1M uuid
# keys saved per base file and commit.
ARROW_BYTES = arrow_budget(memory_limit())
# Decoded manifests (one entry per data or delete file) and manifest lists kept per process.
MANIFESTS = 4096


def _nbytes(value: Any) -> int:
    return max(1, int(getattr(value, "nbytes", 0) or 0))


class Memo:
    """A bounded, thread-safe map from a file's identity to what was read from it."""

    def __init__(self, cache: LRUCache) -> None:
        self._cache = cache
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> Any:
        with self._lock:
            return self._cache.get(key)

    def put(self, key: Hashable, value: Any) -> None:
        with self._lock:
            try:
                self._cache[key] = value
            except ValueError:  # larger than the whole budget: not kept
                pass

    def get_or_load(self, key: Hashable, load: Callable[[], V]) -> V:
        """The kept value, or ``load()``'s (kept). Two threads may load the same file at once;
        both get equal values, the first is kept."""
        value = self.get(key)
        if value is None:
            value = load()
            self.put(key, value)
        return value

    def clear(self) -> None:
        with self._lock:
            self._cache.clear()

    def after_fork(self) -> None:
        # A forked child may have been forked while another thread held the lock.
        self._lock = threading.Lock()


# Arrow arrays and tables, by byte size.
ARROW = Memo(LRUCache(ARROW_BYTES, getsizeof=_nbytes))
# Decoded manifest entries and manifest lists, by count.
METADATA = Memo(LRUCache(MANIFESTS))

os.register_at_fork(after_in_child=lambda: (ARROW.after_fork(), METADATA.after_fork()))
