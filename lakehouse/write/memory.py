"""Where a write taken in chunks gets its memory from, and how it gives it back.

A write larger than ``write.task.max.size`` allocates and frees a chunk's worth again and again;
an allocator that keeps what is freed makes the process hold far more than the write uses.
"""

from __future__ import annotations

import contextlib
import threading

import pyarrow as pa

__all__ = ["release_unused", "system_allocator"]


_pool_lock = threading.Lock()
_pool_users = 0
_pool_before: pa.MemoryPool | None = None


@contextlib.contextmanager
def system_allocator():
    """Arrow allocations from the system allocator while a write takes its batch in chunks.

    Arrow's default allocator (mimalloc) keeps freed memory for reuse: a write that allocates and
    frees a chunk's worth again and again then holds about twice what it uses (measured on an
    upsert of 10x write.task.max.size: 2.7x the budget, 1.6x with the system allocator). The
    pool is pyarrow's process default, so it is switched for every thread meanwhile (buffers
    always go back to the pool they came from); the first write in switches, the last out
    switches back."""
    global _pool_users, _pool_before
    with _pool_lock:
        if _pool_users == 0:
            _pool_before = pa.default_memory_pool()
            pa.set_memory_pool(pa.system_memory_pool())
        _pool_users += 1
    try:
        yield
    finally:
        with _pool_lock:
            _pool_users -= 1
            if _pool_users == 0 and _pool_before is not None:
                pa.set_memory_pool(_pool_before)


def _native_pools() -> list[pa.MemoryPool]:
    pools = []
    for make in (pa.mimalloc_memory_pool, pa.jemalloc_memory_pool):
        try:
            pools.append(make())
        except (NotImplementedError, pa.ArrowNotImplementedError):
            pass
    return pools


_NATIVE_POOLS = _native_pools()


def release_unused() -> None:
    """Gives back what Arrow's C++ allocator keeps after a chunk's work. pyarrow's default pool
    (switched by :func:`system_allocator`) is the one Python-side calls allocate from; much of
    Arrow's C++ (parquet decoding, compute kernels, IPC) allocates from the C++ default pool,
    mimalloc, whatever pyarrow's is, and mimalloc keeps freed pages: measured on an upsert of 10x
    write.task.max.size, ~35 MB held beyond the budget in a fresh process. A call costs ~1 us
    when there is nothing to give back."""
    for pool in _NATIVE_POOLS:
        pool.release_unused()
