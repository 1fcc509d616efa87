"""Table locks: a provider interface and a lock kept in the table's own storage.

The storage lock needs only the storage's atomic create. It is a sequence of lease files under
``.hoodie/.locks/``: ``lock-<n>.json`` says who took lease ``n`` and until when. Whoever
creates ``lock-<n+1>`` first holds the lock; that is allowed when lease ``n`` was released
(``lock-<n>.released`` exists) or has expired. The holder renews its lease by rewriting its own
``lock-<n>.heartbeat`` (only the holder writes it, so no race), and before acting on the lock
checks that it still holds it: no newer lease exists and its own has not run out. A taker whose
listing was stale (the number it created had been forgotten) sees a newer lease right after
creating its own and gives it up, so a number is never held twice. The lease
number is a fencing token: it only grows. A holder that stalls past its lease loses the lock to
the next writer and learns so at its next check (:class:`LockLostError`), before committing.

On an object store each step is a request, and every write takes the lock twice; a lock cycle
costs three (a listing, the lease, its release), two when this provider gave the lock back less
than half a lease ago with more than half its lease left (nobody can have taken that lease over,
so it is the newest: the next number is created without a listing; every _FORGET_AT numbers a
take lists anyway, to forget the old ones). Old leases are forgotten in batches, one delete
request for many, and only once the store's own clock (the files' modification times) says they
ended a lease's length before the newest: a taker whose listing and create lie less than half a
lease apart (by a clock that runs on through a suspend, and by the wall clock) cannot have
created a forgotten number, so only a slower one lists again to find out. A holder's check reads
nothing while its lease has more than half its length to run: a taker takes over only a lease
run out by its own clock, so writers' clocks must agree within half a lease (30 s by default),
which NTP keeps far tighter.
A lease whose holder was a process of this machine that no longer exists (a killed task) is
taken over at once rather than when it runs out.

Times come from an injected clock, so expiry and takeover are tested without sleeping.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Callable, Protocol

from lakehouse.errors import FileAlreadyExistsError, LockError, LockLostError, LockTimeoutError
from lakehouse.storage.base import Storage
from lakehouse import layout

_LEASE = re.compile(r"^lock-(\d{12})\.json$")
_ANY = re.compile(r"^lock-(\d{12})\.")
# Old leases are deleted once this many have piled up: one batch delete, rarely.
_FORGET_AT = 8
Clock = Callable[[], float]


@dataclass(frozen=True)
class Lease:
    number: int  # the fencing token
    owner: str
    token: str
    expires_at: float


class LockProvider(Protocol):
    """What the committer needs of a lock: take it, keep it, check it, give it back."""

    def acquire(self, timeout_s: float | None = None) -> Lease: ...

    def renew(self, lease: Lease) -> Lease: ...

    def check(self, lease: Lease) -> None: ...

    def release(self, lease: Lease) -> None: ...


def default_owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{threading.get_ident()}"


def _boot_id() -> str | None:
    """This boot of this machine (Linux): two machines never share one, where host names and the
    root pid namespace's inode may be alike."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip() or None
    except OSError:
        return None


def _this_process() -> tuple[str, int, int | None, str | None]:
    """(host name, pid, pid namespace, boot id): a pid names a process only within its
    namespace, on one boot of one machine."""
    try:
        pidns: int | None = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        pidns = None
    return socket.gethostname(), os.getpid(), pidns, _boot_id()


def _boottime() -> float:
    """A clock that runs on while the machine is suspended (a plain monotonic one stops)."""
    try:
        return time.clock_gettime(time.CLOCK_BOOTTIME)  # type: ignore[attr-defined]
    except (AttributeError, OSError):
        return time.monotonic()


def _holder_gone(doc: dict | None) -> bool:
    """Whether the lease ``doc`` was taken by a process of this machine (same boot, host name
    and pid namespace) that no longer exists: a killed task's lease need not run out (a minute
    in which nobody writes). A pid taken again by a new process only means waiting."""
    host, pid, pidns, boot = _this_process()
    if doc is None or pidns is None or boot is None or doc.get("boot") != boot \
            or doc.get("pidns") != pidns or doc.get("host") != host \
            or not isinstance(doc.get("pid"), int) or doc["pid"] == pid:
        return False
    try:
        os.kill(doc["pid"], 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False  # exists, another user's
    return False


class StorageLockProvider:
    """A lease-based lock in the table's storage (see the module docstring)."""

    def __init__(self, storage: Storage, *, owner: str | None = None, lease_s: float = 60.0,
                 poll_s: float = 0.1, clock: Clock = time.time,
                 sleep: Callable[[float], None] = time.sleep,
                 monotonic: Clock = _boottime) -> None:
        if lease_s <= 0 or poll_s <= 0:
            raise LockError(f"lease ({lease_s} s) and poll interval ({poll_s} s) must be positive",
                            help="set hoodie.write.lock.* to positive durations")
        self.storage = storage
        self.owner = owner or default_owner()
        self.lease_s = lease_s
        self.poll_s = poll_s
        self.clock = clock
        self.sleep = sleep
        self.monotonic = monotonic
        self._released: set[int] = set()  # leases given back here: their check always looks
        # The lease last given back here while nobody could have taken it over, and when (by
        # both clocks): for half a lease it is known to be the newest without a listing.
        self._gave_back: tuple[int, float, float] | None = None
        self._listed = 0  # the newest lease the last listing here showed

    # --- files ---------------------------------------------------------------------------------

    @staticmethod
    def _name(n: int, suffix: str = ".json") -> str:
        return f"lock-{n:012d}{suffix}"

    @classmethod
    def _path(cls, n: int, suffix: str = ".json") -> str:
        return f"{layout.LOCKS}/{cls._name(n, suffix)}"

    def _folder(self) -> tuple[int, frozenset[str], dict[str, int | None]]:
        """The newest lease number, the names in the lock folder and each file's modification
        time (the store's clock): one listing, from which the state of the newest lease is read
        without asking for each of its files."""
        mtimes = {i.name: i.mtime_ns for i in self.storage.list(layout.LOCKS) if not i.is_dir}  # absent: empty
        names = frozenset(mtimes)
        return max((int(m.group(1)) for n in names if (m := _LEASE.match(n))), default=0), names, mtimes

    def _latest(self) -> int:
        return self._folder()[0]

    def _expiry(self, n: int) -> float | None:
        """When lease ``n`` runs out (None: released or unreadable as a lease, i.e. free)."""
        return self._state(n)[0]

    def _state(self, n: int, names: frozenset[str] | None = None) -> tuple[float | None, dict | None]:
        """When lease ``n`` runs out (as :meth:`_expiry`) and its lease document, if readable.
        ``names``: a listing of the lock folder taken after lease ``n`` was (files it does not
        name are not read; a heartbeat is written a third of a lease after the lease, so a
        fresh listing that lacks it means there is none yet)."""
        if n == 0:
            return None, None
        if names is not None and self._name(n, ".released") in names or \
                names is None and self.storage.exists(self._path(n, ".released")):
            return None, None
        expires, lease_doc = 0.0, None
        for suffix in (".json", ".heartbeat"):
            if names is not None and self._name(n, suffix) not in names:
                continue
            try:
                doc = json.loads(self.storage.read(self._path(n, suffix)))
                expires = max(expires, float(doc["expires_at"]))
            except FileNotFoundError:
                continue
            except (ValueError, KeyError, TypeError):
                continue  # a torn heartbeat: the lease file still tells
            if suffix == ".json":
                lease_doc = doc
        return expires, lease_doc

    # --- the protocol ----------------------------------------------------------------------------

    def _create_lease(self, n: int, took_over: bool) -> Lease | None:
        """Lease ``n + 1`` created (None: someone else was faster)."""
        lease = Lease(n + 1, self.owner, uuid.uuid4().hex, self.clock() + self.lease_s)
        host, pid, pidns, boot = _this_process()
        try:
            self.storage.create(self._path(lease.number), json.dumps(
                {"owner": lease.owner, "token": lease.token, "expires_at": lease.expires_at,
                 "took_over": n if took_over else None,
                 "host": host, "pid": pid, "pidns": pidns, "boot": boot}).encode())
        except FileAlreadyExistsError:
            return None
        return lease

    def _fresh(self, since: float, since_wall: float) -> bool:
        """Whether less than half a lease passed since ``since`` by both clocks."""
        return self.monotonic() - since < self.lease_s / 2 and abs(self.clock() - since_wall) < self.lease_s / 2

    def try_acquire(self) -> Lease | None:
        gave_back, self._gave_back = self._gave_back, None
        # Every _FORGET_AT leases a taker lists anyway, to forget the old ones.
        if gave_back is not None and gave_back[0] - self._listed < _FORGET_AT \
                and self._fresh(gave_back[1], gave_back[2]):
            # The lease this provider gave back is the newest (as a listing taken then would
            # show), so the next number is taken without listing. Had someone made and
            # forgotten that number since, a lease's length would have passed since our release
            # (:meth:`_forget_old`), and less than half of one has: as a prompt taker's listing.
            lease = self._create_lease(gave_back[0], False)
            if lease is not None and self._fresh(gave_back[1], gave_back[2]):
                return lease
            if lease is not None:  # too slow to be sure: look, as any slow taker does
                return self._verified(lease)
        started, started_wall = self.monotonic(), self.clock()
        n, names, mtimes = self._folder()
        self._listed = n
        expiry, doc = self._state(n, names)
        if expiry is not None and expiry > self.clock() and not _holder_gone(doc):
            return None
        lease = self._create_lease(n, expiry is not None)
        if lease is None:
            return None  # someone else was faster
        if self._fresh(started, started_wall):
            # No lease younger than a lease's length is forgotten (:meth:`_forget_old`): the
            # number just created cannot have been one.
            self._forget_old(n, mtimes)
            return lease
        return self._verified(lease)

    def _verified(self, lease: Lease) -> Lease | None:
        """``lease``, created on knowledge too old to be sure it was not a forgotten number,
        if a listing shows it is the newest (else given back)."""
        try:
            latest, names, mtimes = self._folder()
            stale = latest != lease.number
        except BaseException:
            # Not knowing whether the lease holds, give it back rather than leave it to expire
            # (a minute in which nobody else writes).
            with contextlib.suppress(Exception):
                self._give_back(lease, newest=False)
            raise
        if stale:
            # Our listing was stale and the number we took had been forgotten already: a newer
            # lease exists, so ours is void. Numbers only grow; give this one back and retry.
            self._give_back(lease, newest=False)
            return None
        self._forget_old(lease.number - 1, mtimes)
        return lease

    def acquire(self, timeout_s: float | None = None) -> Lease:
        deadline = self.clock() + (timeout_s if timeout_s is not None else self.lease_s * 2)
        while True:
            lease = self.try_acquire()
            if lease is not None:
                return lease
            if self.clock() >= deadline:
                n = self._latest()
                holder = self._holder(n)
                raise LockTimeoutError(
                    f"the table lock is held by {holder} (lease {n}); gave up after "
                    f"{timeout_s if timeout_s is not None else self.lease_s * 2:.1f} s",
                    help="retry later, or wait until that writer finishes; a crashed holder's "
                         "lease expires by itself")
            self.sleep(self.poll_s)

    def check(self, lease: Lease, *, margin_s: float = 0.0) -> None:
        """Raise :class:`LockLostError` unless ``lease`` is the newest and has more than
        ``margin_s`` to run."""
        if lease.expires_at - self.clock() > max(self.lease_s / 2, margin_s) \
                and lease.number not in self._released:
            return  # nobody takes a lease over before it runs out (module docstring)
        latest = self._latest()
        if latest > lease.number:
            raise LockLostError(f"lease {lease.number} of {lease.owner} was taken over by "
                                f"{self._holder(latest)}",
                                help="do not commit: another writer holds the lock; retry the operation")
        if lease.expires_at > self.clock() + margin_s:
            return  # renewals only move a lease's end later: no need to read it back
        expiry = self._expiry(lease.number)
        if expiry is None or expiry <= self.clock() + margin_s:
            raise LockLostError(f"lease {lease.number} of {lease.owner} expired"
                                + (f" or has less than {margin_s:.1f} s to run" if margin_s else ""),
                                help="this process stalled or could not renew its lease (a slow "
                                     "store); nothing was changed after that: run the step again")

    def renew(self, lease: Lease) -> Lease:
        self.check(lease)
        renewed = Lease(lease.number, lease.owner, lease.token, self.clock() + self.lease_s)
        self.storage.write(self._path(lease.number, ".heartbeat"),
                           json.dumps({"owner": lease.owner, "token": lease.token,
                                       "expires_at": renewed.expires_at}).encode())
        return renewed

    def release(self, lease: Lease) -> None:
        # With more than half its length to run nobody can have taken the lease over (as in
        # check): it is the newest, whatever the folder holds.
        self._give_back(lease, newest=lease.expires_at - self.clock() > self.lease_s / 2)

    def _give_back(self, lease: Lease, *, newest: bool) -> None:
        if len(self._released) > 256:
            self._released = {n for n in self._released if n > lease.number - 64}
        self._released.add(lease.number)
        self._gave_back = None
        try:
            self.storage.create(self._path(lease.number, ".released"), lease.token.encode())
        except FileAlreadyExistsError:
            pass
        if newest:
            self._gave_back = (lease.number, self.monotonic(), self.clock())

    # --- housekeeping ------------------------------------------------------------------------------

    def _holder(self, n: int) -> str:
        try:
            return str(json.loads(self.storage.read(self._path(n)))["owner"])
        except (FileNotFoundError, ValueError, KeyError):
            return "an unknown writer"

    def _forget_old(self, n: int, mtimes: dict[str, int | None]) -> None:
        """Delete the files of leases older than lease ``n`` (its holder may still look for
        lease n+1 to learn it lost) once :data:`_FORGET_AT` have piled up, and only those whose
        files all are a lease's length older than the newest file in the folder. Housekeeping:
        a failure leaves them to the next holder."""
        if n <= 1 or not mtimes or any(t is None for t in mtimes.values()):
            return
        newest = max(t for t in mtimes.values() if t is not None)
        horizon = newest - int(self.lease_s * 1e9)
        by_lease: dict[int, list[str]] = {}
        for name in mtimes:
            m = _ANY.match(name)
            if m and int(m.group(1)) < n:
                by_lease.setdefault(int(m.group(1)), []).append(name)
        old = [names for names in by_lease.values() if all((mtimes[x] or 0) <= horizon for x in names)]
        if len(old) < _FORGET_AT:
            return
        try:
            self.storage.delete_many(sorted(f"{layout.LOCKS}/{x}" for names in old for x in names))
        except Exception:  # noqa: BLE001 - housekeeping: the next holder forgets them
            pass


__all__ = ["LockProvider", "StorageLockProvider", "Lease", "LockError", "LockTimeoutError",
           "LockLostError", "default_owner"]
