"""An action's life on the timeline: requested, started, completed, then the post-commit hooks.

Every action goes through here: writes, compaction, clean, rollback (and so restore),
savepoints. :func:`exclusive` takes the table lock for the steps that must not interleave and
defers the hooks of what completes under it until the lock is released; :func:`request`,
:func:`start` and :func:`complete` change the timeline and, under the lock, check first that the
lease still has time to run (a process that stalled past it must not act on what it looked at).
As in delta-rs's and pyiceberg's commit paths, completing is where the post-commit hooks run: the
table's meta sync tools (Iceberg publishing, turned on by its options: :mod:`lakehouse.meta_sync`)
and the meta client's own hooks (:attr:`TableMetaClient.post_commit_hooks`).

Completing is one atomic create of the completed instant file. On an object store the answer to
that request can be lost; then the instant may or may not have landed, and retrying it blindly
could complete it twice while rolling it back could delete the files of one that did land. So
the store is asked first: the file there with our content means it landed.

Hooks run after the instant is durable and never fail it (a hook's error is logged). Under
:func:`exclusive` (or :func:`hooks_deferred`) they run once the block ends, once for all the
instants completed meanwhile.
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Any, Callable, Iterator, Sequence

from lakehouse import meta_sync
from lakehouse.errors import CommitOutcomeUnknownError, StorageOutcomeUnknownError, TimelineError
from lakehouse.faults import InjectedFault
from lakehouse.meta_client import TableMetaClient, meta_client_of
from lakehouse.metadata_table import drop_metadata_table
from lakehouse.properties import restore_table_properties
from lakehouse.timeline.active import ActiveTimeline, Timeline
from lakehouse.timeline.instant import Action, Instant, State

log = logging.getLogger("lakehouse.commit")

PostCommitHook = Callable[[TableMetaClient, Sequence[Instant]], None]


def run_post_commit_hooks(meta: Any, instants: Sequence[Instant]) -> None:
    """The table's meta sync tools, then the meta client's own hooks, on ``instants``."""
    client = meta_client_of(meta)
    try:
        tools = meta_sync.configured(client)
    except Exception:  # noqa: BLE001 - the instant is durable; a hook never fails it
        log.warning("%s: the meta sync tools could not be loaded", client.path, exc_info=True)
        tools = ()
    hooks: list[PostCommitHook] = [t.after_commit for t in tools]
    hooks += client.post_commit_hooks
    for hook in hooks:
        try:
            hook(client, tuple(instants))
        except InjectedFault:
            raise
        except Exception:  # noqa: BLE001 - the instant is durable; a hook never fails it
            log.warning("%s: post-commit hook %s failed", client.path,
                        getattr(hook, "__qualname__", hook), exc_info=True)


@contextlib.contextmanager
def hooks_deferred(meta: Any) -> Iterator[None]:
    """Hooks of instants of ``meta`` this thread completes within the block run once, when it
    ends. A block ending in an error skips them, as a crash would: Iceberg publishing catches up
    at the next commit. Nested blocks defer to the outer."""
    client = meta_client_of(meta)
    state = client.deferred_hooks
    if getattr(state, "pending", None) is not None:
        yield
        return
    state.pending = []
    try:
        yield
    except BaseException:
        state.pending = None
        raise
    done, state.pending = state.pending, None
    if done:
        run_post_commit_hooks(client, done)


@contextlib.contextmanager
def exclusive(meta: Any) -> Iterator[None]:
    """The table lock (:meth:`TableMetaClient.exclusive`) for the block, the hooks of what
    completes under it run once it is released: publishing has its own optimistic protocol and
    must not keep other writers waiting."""
    client = meta_client_of(meta)
    with hooks_deferred(client), client.exclusive():
        yield


def _check_lease(client: TableMetaClient) -> None:
    if client.holds_lock():
        client.check_lock()


def request(meta: Any, action: Action, content: bytes = b"", *, time: str | None = None,
            before_create: Callable[[str], None] | None = None, timeline: Any = None) -> Instant:
    """A new requested instant of ``action`` (at ``time``, or a new instant time; ``before_create``
    runs with it before its file exists; ``timeline``: loaded under the lock just before:
    ActiveTimeline.create_requested)."""
    client = meta_client_of(meta)
    _check_lease(client)
    return client.active.create_requested(action, content, time=time, before_create=before_create,
                                          timeline=timeline if client.holds_lock() else None)


def start(meta: Any, requested: Instant, content: bytes = b"") -> Instant:
    """``requested`` made inflight."""
    client = meta_client_of(meta)
    _check_lease(client)
    return client.active.transition(requested, State.INFLIGHT, content)


def complete(meta: Any, inflight: Instant, content: bytes = b"", *,
             folders: "frozenset[str] | None" = None, timeline: "Timeline | None" = None) -> Instant:
    """Complete ``inflight`` with ``content``; settle a lost answer by looking before deciding;
    then the post-commit hooks (now, or at the end of a :func:`hooks_deferred` block). A Hudi
    metadata table, which would not know this commit's files, goes first
    (:mod:`lakehouse.metadata_table`), and keys ``hoodie.properties`` lost to another program's
    rewrite are written back (:func:`lakehouse.properties.restore_table_properties`).
    ``folders``: the folders of ``.hoodie``, listed under the lock held now (the metadata table
    is then not looked for again); ``timeline``: that listing's timeline, which the hooks then
    get with this instant completed on it (TableMetaClient.timeline_after)."""
    client = meta_client_of(meta)  # the table facade is taken too (tests, notebooks)
    _check_lease(client)
    drop_metadata_table(client, folders if client.holds_lock() else None)
    if client.restored:
        restore_table_properties(client.storage)
        client.restored = ()
    done = _publish(client.active, inflight, content)
    client.note_completion(timeline.with_instant(done) if timeline is not None else None)
    pending = getattr(client.deferred_hooks, "pending", None)
    if pending is not None:
        pending.append(done)
    else:
        run_post_commit_hooks(client, (done,))
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
