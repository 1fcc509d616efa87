"""The table meta client: what the writer and every table service work on.

As Hudi's ``HoodieTableMetaClient`` under its action executors (or hudi-rs's configs, timeline
and file-system view, which never see its ``Table``): the store, the table's stored config, its
active timeline, this process's concurrency and memory settings, the table lock and the writers'
heartbeats, and the one recipe that merges the options stored with the table and those given to
one call. :class:`lakehouse.table.Table` is a facade over it; nothing below the facade imports it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import threading
from typing import TYPE_CHECKING, Any, Callable, ContextManager, Mapping, Sequence

import pyarrow as pa

from lakehouse.concurrency.heartbeat import Heartbeats
from lakehouse.concurrency.transaction import TransactionManager, loadable
from lakehouse.config import (STORAGE_LOCK_PROVIDER, ConcurrencyConfig, MemoryConfig, TableConfig,
                              merged_options, option_keys)
from lakehouse.errors import ConfigError
from lakehouse.properties import load_table_config
from lakehouse.storage import Storage, get_storage
from lakehouse.timeline.active import ActiveTimeline, Timeline
from lakehouse.timeline.schema_resolver import table_schema

if TYPE_CHECKING:
    from lakehouse.timeline.instant import Instant

CONCURRENCY_KEYS = option_keys(ConcurrencyConfig)
OPEN_KEYS = CONCURRENCY_KEYS | option_keys(MemoryConfig)


def split_storage_options(options: Mapping[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(storage options: ``s3.*``, the rest). Storage options reach the store and are never
    stored with the table (they hold credentials)."""
    opts = dict(options or {})
    store = {k: v for k, v in opts.items() if k.startswith("s3.")}
    return store, {k: v for k, v in opts.items() if k not in store}


class TableMetaClient:
    def __init__(self, storage: Storage, config: TableConfig,
                 options: Mapping[str, Any] | None = None, *, restored: tuple[str, ...] = ()) -> None:
        """``options``: this process's concurrency and memory settings over the table's stored ones;
        ``restored``: keys of ``config`` taken from lakehouse's saved copy of ``hoodie.properties``
        (:func:`lakehouse.properties.load_table_config`), which the next commit writes back."""
        self.storage = storage
        self.config = config
        self.restored = restored
        self.open_options: dict[str, Any] = dict(options or {})
        self.active = ActiveTimeline(storage, archive_folder=config.archive_folder)
        extra = {k: v for k, v in config.extra.items() if k in OPEN_KEYS}
        unknown = sorted(k for k in (options or {}) if k not in OPEN_KEYS)
        if unknown:
            raise ConfigError(f"option(s) {', '.join(unknown)} cannot be set when opening a table",
                              help="pass write options to the write, service options to the service")
        # Each config class reads its own keys of the stored settings and this process's.
        settings = {**extra, **(options or {})}
        self.concurrency = ConcurrencyConfig.from_options(settings)
        self.memory = MemoryConfig.from_options(settings)
        if not self.concurrency.multi_writer and ConcurrencyConfig.from_options(extra).multi_writer:
            raise ConfigError(
                f"{storage.uri()} is shared by several writers "
                "(hoodie.write.concurrency.mode=OPTIMISTIC_CONCURRENCY_CONTROL in hoodie.properties); "
                "one writer working without the lock would roll back the others' writes",
                help="open it without overriding hoodie.write.concurrency.mode")
        self._txn: TransactionManager | None = None
        self._heartbeats: Heartbeats | None = None
        # Called as hook(meta, completed_instants) after each commit through this client, beside
        # the meta sync tools its options turn on (lakehouse.commit, lakehouse.meta_sync).
        self.post_commit_hooks: list[Callable[..., None]] = []
        # Per thread: the instants completed in a lakehouse.commit.hooks_deferred block.
        self.deferred_hooks = threading.local()
        # The results of writes whose phase 1 ran through this client, until their phase 2
        # (lakehouse.write.client.WriteClient.record_results).
        self.recorded_writes: dict[str, Any] = {}
        # Per thread: the timeline right after this thread's last completion (note_completion).
        self._completions = threading.local()
        # Each partition's consistent-hashing ring a write last loaded, with the replace commits
        # on its timeline then (lakehouse.write.client.WriteClient.bucket_context).
        self.ring_cache: dict[str, tuple[tuple, Any]] = {}
        if self.concurrency.multi_writer:
            _ = self.transactions  # a lock that cannot be had is refused now, before any write
        if self._lock_config is not None:
            # Every allocation of this program under the table lock (most run under it
            # already): no other instant can take the same time, so none is looked for.
            self.active.allocation_guard = self.exclusive
            self.active.allocation_check = self.check_lock
            self.active.allocation_exclusive = True

    @classmethod
    def open(cls, path: str | Storage, options: Mapping[str, Any] | None = None) -> "TableMetaClient":
        """``options``: the store's settings (``s3.*``) and this process's concurrency and memory
        settings over those stored with the table."""
        store, rest = split_storage_options(options)
        storage = get_storage(path, store or None)
        config, restored = load_table_config(storage)
        return cls(storage, config, rest, restored=restored)

    @functools.cached_property
    def _lock_config(self) -> ConcurrencyConfig | None:
        """The table lock's settings (None: no lock to take). With one writer, a lock provider
        set for Hudi's Java jobs (ZooKeeper, say) is not loadable here and the storage lock
        guards the same steps; on a store without atomic create, that lock cannot be had."""
        config = self.concurrency
        if config.multi_writer:
            return config
        if not loadable(config.lock_provider):
            config = dataclasses.replace(config, lock_provider=STORAGE_LOCK_PROVIDER)
        if config.lock_provider == STORAGE_LOCK_PROVIDER and not self.storage.atomic_create:
            return None
        return config

    @property
    def transactions(self) -> TransactionManager:
        """The table lock of this process (:meth:`exclusive` says when it is taken)."""
        if self._txn is None:
            self._txn = TransactionManager(self.storage, self._lock_config or self.concurrency)
        return self._txn

    def exclusive(self) -> ContextManager[Any]:
        """The table lock, around the timeline steps that must not interleave: a write's
        recovery of failed writes and its instant, a commit's last check and its publish, a
        compaction plan's check that no write is pending and its instant, a rollback or restore.
        With one writer too: the commit step and the table services run in other processes
        (the Airflow tasks), where Hudi's in-process lock for async services cannot reach.
        With one writer on a store without atomic create and no loadable lock provider, there
        is no lock to take (the README says what to avoid then)."""
        if self._lock_config is None:
            return contextlib.nullcontext()
        return self.transactions.lock()

    def holds_lock(self) -> bool:
        """Whether this thread holds the table lock (in an :meth:`exclusive` block that took one)."""
        return self._lock_config is not None and self._txn is not None and self._txn.lease is not None

    def check_lock(self) -> None:
        """Called right before an irreversible step under :meth:`exclusive` (a publish, an
        instant, a delete): raise :class:`~lakehouse.errors.LockLostError` unless this thread
        still holds the table lock with a quarter of a lease to go. A process that stalled past its
        lease (a long pause, a suspended machine) must not act on what it looked at before
        another process took the lock. Nothing to check where there is no lock to take; where
        there is one, a step outside a hold is an error."""
        if self._lock_config is None:
            return
        self.transactions.check()

    @property
    def heartbeats(self) -> Heartbeats:
        if self._heartbeats is None:
            c = self.concurrency
            self._heartbeats = Heartbeats(self.storage, interval_s=c.heartbeat_interval_ms / 1000.0,
                                          misses=c.heartbeat_misses)
        return self._heartbeats

    @property
    def path(self) -> str:
        return self.storage.uri()

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def timeline(self) -> Timeline:
        return self.active.load()

    def schema(self, as_of: str | None = None, timeline: Timeline | None = None) -> pa.Schema:
        """The table's schema (meta fields first) at ``as_of`` (default: the latest) on ``timeline``
        (default: the current one): the schema the last completed write at or before it recorded,
        else the one the table was created with (lakehouse.timeline.schema_resolver), as Hudi's
        TableSchemaResolver works on the meta client."""
        return table_schema(self.active, self.config, timeline if timeline is not None else self.timeline, as_of)

    def options(self, given: Mapping[str, Any] | None, where: str) -> dict[str, str]:
        """The options of one call (a write, a service run, a reader): those stored with the
        table, overridden by ``given``; ``where`` names the call in errors. The one recipe every
        entry point uses (lakehouse.config.merged_options)."""
        return merged_options(self.config.extra, given, where)

    def fresh(self) -> "TableMetaClient":
        """Another meta client of the same table and settings, with its own lock holder and
        heartbeats: for work another thread does beside this one's (an async clean)."""
        fresh = TableMetaClient(self.storage, self.config, self.open_options, restored=self.restored)
        fresh.post_commit_hooks = list(self.post_commit_hooks)
        fresh.active.share_caches(self.active)
        return fresh

    def note_completion(self, timeline: "Timeline | None") -> None:
        """The timeline right after an instant this thread just completed: listed under the
        lock before the completion, with the instant completed on it (None: not known)."""
        self._completions.timeline = timeline

    def timeline_after(self, instants: "Sequence[Instant]") -> "Timeline | None":
        """The timeline this thread noted at its last completion, if every one of ``instants``
        is completed on it: a prefix of the table's completion order (completions happen under
        the lock), for the post-commit hooks to work on without listing ``.hoodie`` again."""
        timeline = getattr(self._completions, "timeline", None)
        if timeline is None or not all(timeline.is_completed(i.time) for i in instants):
            return None
        return timeline

    def adopt(self, config: TableConfig) -> None:
        """Work with ``config`` from now on (hoodie.properties rewritten: the bucket count a
        table's first write fixed)."""
        self.config = config


def meta_client_of(obj: Any) -> TableMetaClient:
    """The meta client of ``obj``: itself, or that of a facade over one (a ``Table``)."""
    if isinstance(obj, TableMetaClient):
        return obj
    meta = getattr(obj, "meta_client", None)
    if isinstance(meta, TableMetaClient):
        return meta
    raise TypeError(f"expected a table or its meta client, got {type(obj).__name__}")
