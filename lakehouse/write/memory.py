"""Where a write taken in chunks gets its memory from, and how it gives it back.

A write larger than ``write.task.max.size`` allocates and frees a chunk's worth again and again;
an allocator that keeps what is freed makes the process hold far more than the write uses.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import threading
from typing import Callable

import pyarrow as pa

__all__ = ["bounded_allocator", "release_unused"]


_pool_lock = threading.Lock()
_pool_users = 0
_pool_before: pa.MemoryPool | None = None


# jemalloc's own decay (Arrow's build: a second) while no bounded write runs.
_JEMALLOC_DECAY_MS = 1000


def _bounded_pool() -> tuple[pa.MemoryPool, bool]:
    """The pool a bounded write allocates from, and whether it is jemalloc's."""
    try:
        return pa.jemalloc_memory_pool(), True
    except (NotImplementedError, pa.ArrowNotImplementedError):
        return pa.system_memory_pool(), False


@contextlib.contextmanager
def bounded_allocator():
    """Arrow allocations from an allocator that gives freed memory back, while a write takes its
    batch in chunks: jemalloc with its decay at zero (freed pages returned at once), or the
    system allocator where pyarrow has no jemalloc.

    Arrow's default allocator (mimalloc) keeps freed memory for reuse, and glibc's keeps it in
    its arenas: a write that allocates and frees a chunk's worth again and again then holds
    several times what it uses (measured on a Copy-On-Write upsert of 10x write.task.max.size
    with 1.1x the budget live at its peak: 2.0x the budget resident with jemalloc at zero
    decay, 2.9x with glibc's allocator, more with mimalloc). The pool is pyarrow's process
    default, so it is switched for every thread meanwhile (buffers always go back to the pool
    they came from); the first write in switches, the last out switches back.

    pyarrow's ``jemalloc_set_decay_ms`` reaches only the arenas jemalloc creates after it: a
    process whose arenas exist already (a Spark worker that ran earlier tasks) keeps their
    one-second decay unless started with ``JE_ARROW_MALLOC_CONF=dirty_decay_ms:0,muzzy_decay_ms:0``
    (measured on Spark's Copy-On-Write write tasks: 2.1x -> 1.7x the budget at their peak)."""
    global _pool_users, _pool_before
    with _pool_lock:
        if _pool_users == 0:
            _pool_before = pa.default_memory_pool()
            pool, jemalloc = _bounded_pool()
            if jemalloc:
                pa.jemalloc_set_decay_ms(0)
            pa.set_memory_pool(pool)
        _pool_users += 1
    try:
        yield
    finally:
        with _pool_lock:
            _pool_users -= 1
            if _pool_users == 0 and _pool_before is not None:
                pa.set_memory_pool(_pool_before)
                if _bounded_pool()[1]:
                    pa.jemalloc_set_decay_ms(_JEMALLOC_DECAY_MS)


def _native_pools() -> list[pa.MemoryPool]:
    pools = []
    for make in (pa.mimalloc_memory_pool, pa.jemalloc_memory_pool):
        try:
            pools.append(make())
        except (NotImplementedError, pa.ArrowNotImplementedError):
            pass
    return pools


_NATIVE_POOLS = _native_pools()


def _malloc_trim() -> Callable[[], None]:
    """glibc's malloc_trim, or nothing where the C library has none (musl, macOS)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return lambda: None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return lambda: trim(0)


_TRIM = _malloc_trim()


def release_unused() -> None:
    """Gives back what Arrow's C++ allocator keeps after a chunk's work. pyarrow's default pool
    (switched by :func:`bounded_allocator`) is the one Python-side calls allocate from; much of
    Arrow's C++ (parquet decoding, compute kernels, IPC) allocates from the C++ default pool,
    mimalloc, whatever pyarrow's is, and mimalloc keeps freed pages: measured on an upsert of 10x
    write.task.max.size, ~35 MB held beyond the budget in a fresh process. A call costs ~1 us
    when there is nothing to give back."""
    for pool in _NATIVE_POOLS:
        pool.release_unused()
    # The system allocator (glibc) keeps freed memory in its arenas too: a chunk's buffers
    # freed between lookups stay resident (measured: ~100 MB over 27 MB of live Arrow memory
    # on a Copy-On-Write upsert of 10x the budget) until trimmed.
    _TRIM()
