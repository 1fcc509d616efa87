"""The storage lock: mutual exclusion through atomic create, leases, renewal, expiry and takeover
(on an injected clock), fencing, and real threads contending for it."""

from __future__ import annotations

import threading
import time

import pytest

from lakehouse.layout import LOCKS as LOCK_DIR
from lakehouse.concurrency.lock import StorageLockProvider
from lakehouse.errors import LockError, LockLostError, LockTimeoutError
from lakehouse.storage import get_storage


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.now += s


@pytest.fixture
def storage(tmp_path):
    return get_storage(str(tmp_path))


def provider(storage, clock, owner, lease_s=10.0):
    return StorageLockProvider(storage, owner=owner, lease_s=lease_s, poll_s=0.5, clock=clock, sleep=clock.sleep)


def test_one_holder_at_a_time_and_release_hands_it_on(storage):
    clock = Clock()
    a, b = provider(storage, clock, "a"), provider(storage, clock, "b")
    la = a.acquire()
    assert b.try_acquire() is None
    with pytest.raises(LockTimeoutError, match="held by a") as e:
        b.acquire(timeout_s=3)
    assert e.value.help and clock.now >= 1_003  # it waited (on the injected clock), then gave up
    a.check(la)
    a.release(la)
    lb = b.acquire(timeout_s=0)
    assert lb.number == la.number + 1  # the fencing token grows
    with pytest.raises(LockLostError, match="taken over by b"):
        a.check(la)


def test_an_expired_lease_is_taken_over_and_its_holder_learns_it(storage):
    clock = Clock()
    a, b = provider(storage, clock, "a"), provider(storage, clock, "b")
    la = a.acquire()
    clock.now += 9
    la = a.renew(la)  # a heartbeat moves the lease on
    clock.now += 9
    assert b.try_acquire() is None  # 18 s after taking it, still held thanks to the renewal
    clock.now += 2
    with pytest.raises(LockLostError, match="expired"):
        a.check(la)  # past its lease: not to be used, even before anyone takes over
    lb = b.try_acquire()
    assert lb is not None and lb.number == la.number + 1
    with pytest.raises(LockLostError, match="taken over"):
        a.renew(la)  # a stalled holder cannot renew its way back
    b.check(lb)


def _age_lock_files(storage, seconds: float) -> None:
    """Move the lock files' modification times back: the store's clock says they are old."""
    import os
    for info in storage.list(LOCK_DIR):
        path = os.path.join(storage.root, info.path) if hasattr(storage, "root") else info.path
        st = os.stat(path)
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns - int(seconds * 1e9)))


def test_old_leases_are_forgotten_in_batches_once_the_store_says_they_are_old(storage):
    clock = Clock()
    p = provider(storage, clock, "p")
    for _ in range(10):
        p.release(p.acquire(timeout_s=0))
        clock.now += 31  # past half a lease: the next take lists (that is where leases are forgotten)
    # Young leases stay, however many: a slow taker's create must never reuse a forgotten number.
    assert {i.name.split(".")[0] for i in storage.list(LOCK_DIR)} == {f"lock-{n:012d}" for n in range(1, 11)}
    _age_lock_files(storage, 60)
    p.release(p.acquire(timeout_s=0))  # lease 11, the first a minute younger than the rest
    assert len({i.name.split(".")[0] for i in storage.list(LOCK_DIR)}) == 11
    clock.now += 31
    p.release(p.acquire(timeout_s=0))  # lease 12: leases 1-10 go in one batch, lease 11 stays
    names = sorted(i.name for i in storage.list(LOCK_DIR))
    assert {n.split(".")[0] for n in names} == {"lock-000000000011", "lock-000000000012"}
    clock.now += 31
    p.release(p.acquire(timeout_s=0))  # fewer than 8 old leases: nothing deleted this time
    assert {i.name.split(".")[0] for i in storage.list(LOCK_DIR)} == {f"lock-{n:012d}" for n in (11, 12, 13)}


def test_nonsense_settings_are_refused(storage):
    with pytest.raises(LockError, match="positive"):
        StorageLockProvider(storage, lease_s=0)


def test_threads_never_hold_it_together(storage):
    """Real time, real atomic creates: four threads take the lock 15 times each."""
    inside = []
    overlaps = []
    taken = []

    def worker(i: int) -> None:
        p = StorageLockProvider(storage, owner=f"t{i}", lease_s=30, poll_s=0.001)
        for _ in range(15):
            lease = p.acquire(timeout_s=60)
            inside.append(i)
            if len(inside) > 1:
                overlaps.append(list(inside))
            taken.append(lease.number)
            time.sleep(0.0005)
            p.check(lease)
            inside.remove(i)
            p.release(lease)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert overlaps == []
    assert sorted(taken) == list(range(1, 61))  # every lease number handed out once


class Jumping(Clock):
    """A clock that moves ``step`` seconds at each look: a stalled process, as a monotonic clock
    sees it, or a machine suspended meanwhile, as the wall clock does."""

    def __init__(self, step: float) -> None:
        super().__init__()
        self.step = step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


@pytest.mark.parametrize("slow", ["monotonic", "wall"])
def test_a_stale_taker_gives_up_a_forgotten_number(storage, slow):
    """A taker whose listing and create lie far apart (a stalled process, a suspended machine)
    may create a lease number that was forgotten meanwhile; it lists again, sees the newer lease
    and does not believe it holds the lock."""
    clock = Clock()
    a = provider(storage, clock, "a")
    for _ in range(10):
        a.release(a.acquire(timeout_s=0))
        clock.now += 31  # each take lists
    _age_lock_files(storage, 60)
    a.release(a.acquire(timeout_s=0))
    clock.now += 31
    held = a.acquire(timeout_s=0)  # lease 12; leases 1-10 are forgotten
    assert not storage.exists(StorageLockProvider._path(2))
    stale = StorageLockProvider(storage, owner="stale", lease_s=10.0, poll_s=0.5,
                                clock=clock if slow == "monotonic" else Jumping(60), sleep=clock.sleep,
                                monotonic=Jumping(60) if slow == "monotonic" else (lambda: 0.0))
    real = stale._folder
    calls = []
    # The first listing predates leases 2-12 (and names none of lease 1's files)
    stale._folder = lambda: (1, frozenset(), {}) if not calls.append(1) and len(calls) == 1 else real()
    assert stale.try_acquire() is None
    assert len(calls) == 2  # it listed again after creating lease 2, and saw lease 12
    assert storage.exists(StorageLockProvider._path(2, ".released"))
    del stale._folder
    a.check(held)  # the real holder still holds it


def test_a_prompt_taker_does_not_list_again(storage):
    clock = Clock()
    a = provider(storage, clock, "a")
    looks = []
    real = a._folder
    a._folder = lambda: looks.append(1) or real()
    lease = a.acquire(timeout_s=0)
    assert looks == [1] and lease.number == 1


def test_a_failed_cleanup_of_old_leases_neither_fails_nor_keeps_the_lock(storage, monkeypatch):
    """Forgetting old leases is housekeeping: a store error there (an S3 503 on DELETE) used to
    fail the acquire with the new lease neither returned nor released, so nobody could take
    the lock until it expired."""
    clock = Clock()
    a, b = provider(storage, clock, "a"), provider(storage, clock, "b")
    for _ in range(10):
        a.release(a.acquire())
        clock.now += 31  # each take lists
    _age_lock_files(storage, 60)
    a.release(a.acquire())
    clock.now += 31
    tried = []

    def flaky(self, paths):
        tried.append(len(paths))
        raise OSError("503 SlowDown")
    monkeypatch.setattr(type(storage), "delete_many", flaky)
    lease = a.acquire()
    monkeypatch.undo()
    assert tried  # it did try to forget
    a.release(lease)
    assert b.try_acquire() is not None


def test_a_lease_whose_standing_cannot_be_checked_is_given_back(storage, monkeypatch):
    clock = Clock()
    a = StorageLockProvider(storage, owner="a", lease_s=10.0, poll_s=0.5, clock=clock,
                            sleep=clock.sleep, monotonic=Jumping(60))  # slow: it looks again
    b = provider(storage, clock, "b")
    calls = []
    real = StorageLockProvider._folder

    def failing_second_look(self):
        calls.append(1)
        if len(calls) == 2:
            raise OSError("503 SlowDown")
        return real(self)
    monkeypatch.setattr(StorageLockProvider, "_folder", failing_second_look)
    with pytest.raises(OSError):
        a.try_acquire()
    monkeypatch.undo()
    assert b.try_acquire() is not None


def _held_by_a_process(storage, *, die: bool):
    """A lease taken by another process of this machine, which then dies (SIGKILL: nothing
    released) or stays alive; returns (the process, its lease number)."""
    import subprocess
    import sys
    code = ("import sys, time\n"
            "from lakehouse.storage import get_storage\n"
            "from lakehouse.concurrency.lock import StorageLockProvider\n"
            f"lease = StorageLockProvider(get_storage({storage.uri()!r}), lease_s=600).acquire()\n"
            "print(lease.number, flush=True)\n"
            "time.sleep(600)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    number = int(proc.stdout.readline())
    if die:
        proc.kill()
        proc.wait()
    return proc, number


def test_the_lease_of_a_killed_process_of_this_machine_is_taken_at_once(storage):
    clock = Clock()  # never reaches the lease's end: only the holder's death frees it
    proc, number = _held_by_a_process(storage, die=True)
    lease = provider(storage, clock, "next").try_acquire()
    assert lease is not None and lease.number == number + 1


def test_a_live_holder_in_another_process_keeps_its_lease(storage):
    clock = Clock()
    proc, _ = _held_by_a_process(storage, die=False)
    try:
        assert provider(storage, clock, "next").try_acquire() is None
    finally:
        proc.kill()
        proc.wait()


def test_a_lease_of_another_machine_is_never_taken_for_a_dead_pid(storage):
    import json
    clock = Clock()
    a = provider(storage, clock, "a")
    lease = a.acquire()
    path = f"{LOCK_DIR}/lock-{lease.number:012d}.json"
    doc = json.loads(storage.read(path))
    storage.write(path, json.dumps({**doc, "host": "elsewhere", "pid": 2 ** 22 + 7}).encode())
    assert provider(storage, clock, "b").try_acquire() is None
    # The same host name and pid namespace (two machines named alike, in their root pid
    # namespaces, whose inode is the same number): another boot is another machine.
    storage.write(path, json.dumps({**doc, "boot": "another-boot", "pid": 2 ** 22 + 7}).encode())
    assert provider(storage, clock, "b").try_acquire() is None
    storage.write(path, json.dumps({**doc, "pid": 2 ** 22 + 7}).encode())  # this boot: taken at once
    assert doc.get("boot") is None or provider(storage, clock, "b").try_acquire() is not None


def test_a_lock_cycle_costs_few_storage_requests(storage):
    """Every write takes the lock (twice, with one writer too), and on an object store each
    request is a round trip: the newest lease's state comes from the folder listing (a released
    lease is not read), and the holder's check reads nothing while its own lease has time to
    run. Before, a cycle cost 16 requests, 10 of them reads and existence checks."""
    clock = Clock()
    a = provider(storage, clock, "a")
    for _ in range(3):
        a.release(a.acquire())
    calls: list[str] = []
    for name in ("list", "read", "exists", "info", "create", "write", "delete"):
        real = getattr(storage, name)

        def counted(path, *args, _real=real, _name=name, **kw):
            calls.append(_name)
            return _real(path, *args, **kw)
        setattr(storage, name, counted)
    lease = a.acquire()
    assert calls == ["create"]  # just given back here: the next number is known without listing
    a.release(lease)
    clock.now += 6
    calls.clear()
    lease = a.acquire()
    assert sorted(calls) == ["create", "list"]  # given back too long ago: one listing, the new lease
    calls.clear()
    a.check(lease, margin_s=2)
    assert calls == []  # more than half its lease to run: nobody may have taken it
    clock.now += 6
    a.check(lease, margin_s=2)
    assert calls == ["list"]  # less than half: the folder tells whether a newer lease exists
    calls.clear()
    clock.now += 3  # less than 2 s to run: now the lease files tell (a renewal may have moved it)
    with pytest.raises(LockLostError, match="expired"):
        a.check(lease, margin_s=2)
    assert "read" in calls
    a.release(lease)



def test_a_taker_that_just_gave_the_lock_back_takes_the_next_number_without_listing(storage):
    """The lease a provider gave back with more than half of it to run is the newest (nobody
    takes a lease over before it runs out), so the next number is created without a listing,
    as Hudi's lock providers skip nothing of the kind; another writer having taken that number
    meanwhile makes it list, and a lease given back late, or a long pause, make it list too."""
    clock = Clock()
    a, b = provider(storage, clock, "a"), provider(storage, clock, "b")
    a.release(a.acquire())
    looks = []
    real = a._folder
    a._folder = lambda: looks.append(1) or real()
    second = a.acquire()
    assert looks == [] and second.number == 2
    a.release(second)
    held_by_b = b.acquire()  # b lists, sees lease 2 released, takes 3
    assert held_by_b.number == 3
    assert a.try_acquire() is None  # lease 3 exists: a looks, and b holds it
    assert looks == [1]
    b.release(held_by_b)
    looks.clear()
    late = a.acquire()  # lease 4, after a listing (a's own last give-back was void)
    clock.now += 6  # less than half the lease left: no longer sure nobody took it over
    a.release(late)
    looks.clear()
    fifth = a.acquire()
    assert fifth.number == 5 and looks == [1]
    a.release(fifth)
    # Every _FORGET_AT numbers taken without listing, a take lists (old leases are forgotten there).
    looks.clear()
    for _ in range(12):
        a.release(a.acquire())
    assert 1 <= len(looks) <= 2
