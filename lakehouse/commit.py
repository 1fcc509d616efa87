"""The one commit path: an instant completed, a lost storage answer settled, then the hooks.

Every action completes through :func:`complete`: writes, compaction, clean, rollback (and so
restore), savepoints. As delta-rs's and pyiceberg's commit paths, it is also where the
post-commit hooks run: Iceberg publishing (:func:`lakehouse.iceberg.hook.after_commit`) by
default, anything registered with :func:`register_post_commit_hook`.

Completing is one atomic create of the completed instant file. On an object store the answer to
that request can be lost; then the instant may or may not have landed, and retrying it blindly
could complete it twice while rolling it back could delete the files of one that did land. So
the store is asked first: the file there with our content means it landed.

Hooks run after the instant is durable and never fail it (a hook's error is logged). A caller
holding the table lock defers them (:func:`hooks_deferred`) so that they run once the lock is
released, once for all the instants completed meanwhile.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import Callable, Iterator, Sequence

from lakehouse.errors import CommitOutcomeUnknownError, StorageOutcomeUnknownError, TimelineError
from lakehouse.faults import InjectedFault
from lakehouse.iceberg.hook import after_commit as publish_iceberg
from lakehouse.meta_client import TableMetaClient, meta_client_of
from lakehouse.metadata_table import drop_metadata_table
from lakehouse.properties import restore_table_properties
from lakehouse.timeline.active import ActiveTimeline
from lakehouse.timeline.instant import Instant, State

log = logging.getLogger("lakehouse.commit")

PostCommitHook = Callable[[TableMetaClient, Sequence[Instant]], None]

_hooks: list[PostCommitHook] = [publish_iceberg]
_hooks_lock = threading.Lock()
_deferred = threading.local()


def register_post_commit_hook(hook: PostCommitHook) -> Callable[[], None]:
    """Run ``hook(meta, completed_instants)`` after every commit of every table in this
    process; returns the call that unregisters it."""
    with _hooks_lock:
        _hooks.append(hook)

    def unregister() -> None:
        with _hooks_lock:
            if hook in _hooks:
                _hooks.remove(hook)
    return unregister


@contextlib.contextmanager
def post_commit_hook(hook: PostCommitHook) -> Iterator[None]:
    """``hook`` registered for the duration of a block."""
    unregister = register_post_commit_hook(hook)
    try:
        yield
    finally:
        unregister()


def run_post_commit_hooks(meta: TableMetaClient, instants: Sequence[Instant]) -> None:
    with _hooks_lock:
        hooks = list(_hooks)
    for hook in hooks:
        try:
            hook(meta, tuple(instants))
        except InjectedFault:
            raise
        except Exception:  # noqa: BLE001 - the instant is durable; a hook never fails it
            log.warning("%s: post-commit hook %s failed", meta.path,
                        getattr(hook, "__qualname__", hook), exc_info=True)


@contextlib.contextmanager
def hooks_deferred(meta: TableMetaClient) -> Iterator[None]:
    """Hooks of instants of ``meta`` completed within the block run once, when it ends. A block
    ending in an error skips them, as a crash would: Iceberg publishing catches up at the next
    commit. Nested blocks defer to the outer."""
    pending: dict[int, list[Instant]] = getattr(_deferred, "pending", None) or {}
    _deferred.pending = pending
    key = id(meta)
    if key in pending:
        yield
        return
    pending[key] = []
    try:
        yield
    except BaseException:
        pending.pop(key)
        raise
    done = pending.pop(key)
    if done:
        run_post_commit_hooks(meta, done)


def complete(meta: TableMetaClient, inflight: Instant, content: bytes = b"") -> Instant:
    """Complete ``inflight`` with ``content``; settle a lost answer by looking before deciding;
    then the post-commit hooks (now, or at the end of a :func:`hooks_deferred` block). A Hudi
    metadata table, which would not know this commit's files, goes first
    (:mod:`lakehouse.metadata_table`), and keys ``hoodie.properties`` lost to another program's
    rewrite are written back (:func:`lakehouse.properties.restore_table_properties`)."""
    client = meta_client_of(meta)  # the table facade is taken too (tests, notebooks)
    drop_metadata_table(client)
    if client.restored:
        restore_table_properties(client.storage)
        client.restored = ()
    done = _publish(meta.active, inflight, content)
    pending = getattr(_deferred, "pending", None)
    if pending is not None and id(meta) in pending:
        pending[id(meta)].append(done)
    else:
        run_post_commit_hooks(meta, (done,))
    return done


def _publish(active: ActiveTimeline, inflight: Instant, content: bytes) -> Instant:
    done = inflight.with_state(State.COMPLETED)
    try:
        return active.transition(inflight, State.COMPLETED, content)
    except TimelineError:
        # The completed file exists: an earlier try of ours whose answer was lost, or another
        # committer of this very instant (a retried commit step). Either way it is committed;
        # reporting a failure would make the caller write the batch a second time.
        if _landed(active, done, content) is not None:
            return done
        raise CommitOutcomeUnknownError(
            f"{active.path(done)} exists but cannot be read",
            help=f"do not write the batch again: call commit('{inflight.time}') once the store "
                 "answers") from None
    except StorageOutcomeUnknownError as e:
        if _landed(active, done, content):
            return done
        raise CommitOutcomeUnknownError(
            f"completing {inflight.time} may or may not have landed ({e.message})",
            help=f"do not roll it back: call commit('{inflight.time}') again, which finds out; its "
                 "heartbeat stops, so if it never landed the next writer rolls it back") from e


def _landed(active: ActiveTimeline, done: Instant, content: bytes) -> bool | None:
    """Whether ``done`` is on the store with ``content`` (None: the store would not say)."""
    for delay in (0.0, 0.2, 1.0):
        time.sleep(delay)
        try:
            return active.storage.read(active.path(done)) == content
        except FileNotFoundError:
            return False
        except OSError:
            continue
    return None
