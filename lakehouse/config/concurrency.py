"""Several writers on one table: concurrency mode, failed-write policy, lock and commit retries."""

from __future__ import annotations

import dataclasses
import importlib
import enum
from dataclasses import dataclass
from typing import Any, Mapping

from lakehouse.config.options import parse_enum, parse_int, service_config, parse_str, opt
from lakehouse.errors import ConfigError


class ConcurrencyMode(enum.StrEnum):
    SINGLE_WRITER = "SINGLE_WRITER"
    OPTIMISTIC_CONCURRENCY_CONTROL = "OPTIMISTIC_CONCURRENCY_CONTROL"


class FailedWritesPolicy(enum.StrEnum):
    EAGER = "EAGER"  # the next writer rolls back every pending write (one writer at a time)
    LAZY = "LAZY"  # only writes whose heartbeat stopped are failed (several writers)


STORAGE_LOCK_PROVIDER = "lakehouse.concurrency.lock.StorageLockProvider"
# Hudi's file-system lock provider does what ours does; a table configured for it keeps working.
LOCK_PROVIDER_ALIASES = {
    "org.apache.hudi.client.transaction.lock.FileSystemBasedLockProvider": STORAGE_LOCK_PROVIDER,
}


def _check_importable(key: str, class_path: str) -> None:
    """Refuse a class that cannot be loaded now, rather than when the first writer needs it
    (after a table was created with it, say)."""
    module, _, name = class_path.rpartition(".")
    try:
        getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as e:
        raise ConfigError(f"{key}={class_path!r} cannot be imported: {e}",
                          help="install the module or fix the class path") from None


@dataclass(frozen=True)
class ConcurrencyConfig:
    """Several writers on one table (Hudi's multi-writer keys; Iceberg's commit-retry defaults)."""

    mode: ConcurrencyMode = opt(
        "hoodie.write.concurrency.mode", ConcurrencyMode.SINGLE_WRITER, parse_enum(ConcurrencyMode),
        "OPTIMISTIC_CONCURRENCY_CONTROL lets several writers and services work on the table: "
        "instants are allocated and commits checked for conflicts under the table lock")
    failed_writes_policy: FailedWritesPolicy | None = opt(
        "hoodie.cleaner.policy.failed.writes", None, parse_enum(FailedWritesPolicy),
        "EAGER: a new write rolls back every pending one; LAZY: only those whose heartbeat "
        "expired (default: LAZY with several writers, else EAGER)")
    lock_provider: str = opt("hoodie.write.lock.provider", STORAGE_LOCK_PROVIDER, parse_str,
                             "the table lock; the default keeps leases in the table's storage")
    lock_wait_ms: int = opt("hoodie.write.lock.wait_time_ms", 60000, parse_int(1),
                            "how long a writer waits for the table lock before giving up")
    lock_expire_minutes: int = opt("hoodie.write.lock.filesystem.expire", 1, parse_int(1),
                                   "a lock lease not renewed for this long may be taken over")
    lock_poll_ms: int = opt("hoodie.write.lock.wait_time_ms_between_retry", 100, parse_int(1),
                            "pause between attempts to take the table lock")
    heartbeat_interval_ms: int = opt("hoodie.client.heartbeat.interval_in_ms", 60000, parse_int(1),
                                     "how often a writer proves it is alive")
    heartbeat_misses: int = opt("hoodie.client.heartbeat.tolerable.misses", 2, parse_int(0),
                                "missed heartbeats after which a pending write counts as failed")
    conflict_retries: int = opt("hoodie.write.num.retries.on.conflict.failures", 4, parse_int(0),
                                "times a write is redone after a conflict or a lock timeout "
                                "(Iceberg's commit.retry.num-retries)")
    retry_min_wait_ms: int = opt("hoodie.write.commit.retry.min_wait_ms", 100, parse_int(0),
                                 "first backoff before a retry (doubles each time, with jitter)")
    retry_max_wait_ms: int = opt("hoodie.write.commit.retry.max_wait_ms", 60000, parse_int(0),
                                 "longest backoff between retries")
    retry_total_timeout_ms: int = opt("hoodie.write.commit.retry.total_timeout_ms", 1800000, parse_int(1),
                                      "no retry starts after this long since the first attempt")

    @classmethod
    def from_options(cls, options: Mapping[str, Any] | None = None) -> "ConcurrencyConfig":
        cfg = service_config(cls, options)
        provider = LOCK_PROVIDER_ALIASES.get(cfg.lock_provider, cfg.lock_provider)
        if "." not in provider.strip(".") or " " in provider:
            raise ConfigError(f"hoodie.write.lock.provider={cfg.lock_provider!r} is not a class path",
                              help=f"use {STORAGE_LOCK_PROVIDER} (leases in the table's storage) "
                                   "or module.Class of your own provider")
        if cfg.multi_writer and provider != STORAGE_LOCK_PROVIDER:
            _check_importable("hoodie.write.lock.provider", provider)
        policy = cfg.failed_writes_policy or (FailedWritesPolicy.LAZY if cfg.multi_writer
                                              else FailedWritesPolicy.EAGER)
        if cfg.multi_writer and policy is FailedWritesPolicy.EAGER:
            raise ConfigError(
                "hoodie.cleaner.policy.failed.writes=EAGER with several writers would roll back "
                "the other writers' instants while they write",
                help="set it to LAZY (or leave it unset) with OPTIMISTIC_CONCURRENCY_CONTROL")
        if cfg.retry_min_wait_ms > cfg.retry_max_wait_ms:
            raise ConfigError(
                f"hoodie.write.commit.retry.min_wait_ms ({cfg.retry_min_wait_ms}) exceeds "
                f"hoodie.write.commit.retry.max_wait_ms ({cfg.retry_max_wait_ms})",
                help="the first backoff must not be longer than the longest")
        if cfg.lock_wait_ms < cfg.lock_poll_ms:
            raise ConfigError(
                f"hoodie.write.lock.wait_time_ms ({cfg.lock_wait_ms}) is shorter than one pause "
                f"between attempts ({cfg.lock_poll_ms} ms)",
                help="wait at least as long as hoodie.write.lock.wait_time_ms_between_retry")
        return dataclasses.replace(cfg, lock_provider=provider, failed_writes_policy=policy)

    @property
    def multi_writer(self) -> bool:
        return self.mode is ConcurrencyMode.OPTIMISTIC_CONCURRENCY_CONTROL

    @property
    def lazy_rollback(self) -> bool:
        return self.failed_writes_policy is FailedWritesPolicy.LAZY

    @property
    def lock_lease_s(self) -> float:
        return self.lock_expire_minutes * 60.0
