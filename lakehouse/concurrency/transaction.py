"""The table lock as writers use it: taken once per thread (re-entrant), renewed while held,
checked (fencing) right before the step that publishes.

The provider comes from ``hoodie.write.lock.provider``: the storage lock by default, or any
importable class taking ``(storage, config)`` that implements
:class:`~lakehouse.concurrency.lock.LockProvider` (a lock service outside the store: the only way
to run several writers on a store without an atomic create).
"""

from __future__ import annotations

import importlib
import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterator

from lakehouse.concurrency.lock import Clock, Lease, LockProvider, StorageLockProvider
from lakehouse.config import STORAGE_LOCK_PROVIDER, ConcurrencyConfig
from lakehouse.errors import ConfigError, LockLostError
from lakehouse.storage.base import Storage


def make_provider(storage: Storage, config: ConcurrencyConfig, *, clock: Clock = time.time,
                  sleep: Callable[[float], None] = time.sleep) -> LockProvider:
    if config.lock_provider == STORAGE_LOCK_PROVIDER:
        if not storage.atomic_create:
            raise ConfigError(
                f"{storage.uri()} has no atomic create, which the storage lock and concurrent "
                "commits rely on",
                help="configure hoodie.write.lock.provider with a lock outside the store, or "
                     "keep hoodie.write.concurrency.mode=SINGLE_WRITER")
        return StorageLockProvider(storage, lease_s=config.lock_lease_s,
                                   poll_s=config.lock_poll_ms / 1000.0, clock=clock, sleep=sleep)
    module, _, name = config.lock_provider.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as e:
        raise ConfigError(f"hoodie.write.lock.provider={config.lock_provider!r} cannot be "
                          f"imported: {e}", help="install the module or fix the class path") from None
    return cls(storage, config)


def loadable(class_path: str) -> bool:
    """Whether the lock provider ``class_path`` can be loaded in this process."""
    if class_path == STORAGE_LOCK_PROVIDER:
        return True
    module, _, name = class_path.rpartition(".")
    try:
        return hasattr(importlib.import_module(module), name)
    except Exception:  # noqa: BLE001 - not loadable here, whatever the module raised
        return False


class TransactionManager:
    """Holds the table lock for this process's writers."""

    def __init__(self, storage: Storage, config: ConcurrencyConfig, *,
                 provider: LockProvider | None = None, clock: Clock = time.time) -> None:
        self.config = config
        self.provider = provider or make_provider(storage, config, clock=clock)
        self.wait_s = config.lock_wait_ms / 1000.0
        self._local = threading.local()

    @property
    def lease(self) -> Lease | None:
        return getattr(self._local, "lease", None)

    @contextmanager
    def lock(self) -> Iterator[Lease]:
        """The table lock for the block; nested use in one thread shares the outer hold."""
        if self.lease is not None:
            self._local.depth += 1
            try:
                yield self.lease
            finally:
                self._local.depth -= 1
            return
        lease = self.provider.acquire(self.wait_s)
        self._local.lease, self._local.depth = lease, 1
        stop = threading.Event()
        renewer = threading.Thread(target=self._renew, args=(lease, stop), daemon=True,
                                   name=f"lock-renew-{lease.number}")
        renewer.start()
        try:
            yield lease
        except BaseException:
            self._end(lease, stop, renewer, quiet=True)
            raise
        self._end(lease, stop, renewer, quiet=False)

    def _end(self, lease: Lease, stop: threading.Event, renewer: threading.Thread, *,
             quiet: bool) -> None:
        stop.set()
        renewer.join()
        self._local.lease = None
        try:
            self.provider.release(lease)
        except Exception:  # noqa: BLE001
            if not quiet:  # a failed release must not hide the error that ended the hold
                raise

    def _renew(self, lease: Lease, stop: threading.Event) -> None:
        # A third of the lease: two renewals may fail (a slow store) before the lease runs out.
        period = max(getattr(self.provider, "lease_s", 60.0) / 3.0, 0.05)
        while not stop.wait(period):
            try:
                lease = self.provider.renew(lease)
            except LockLostError:
                return  # check() tells the holder before it publishes anything
            except Exception:  # noqa: BLE001 - a failed renewal is retried next period
                continue

    def check(self) -> None:
        """Raise :class:`LockLostError` unless this thread still holds the lock with at least
        a quarter of a lease to go: what follows (one atomic create or delete) must end before a
        taker may come. A quarter: the renewer renews every third of a lease, so one failed
        renewal (a slow store) still leaves more than that, and no holder fails for it."""
        lease = self.lease
        if lease is None:
            raise LockLostError("the table lock is not held here",
                                help="publish only inside TransactionManager.lock()")
        if isinstance(self.provider, StorageLockProvider):
            self.provider.check(lease, margin_s=self.provider.lease_s / 4)
        else:
            self.provider.check(lease)
