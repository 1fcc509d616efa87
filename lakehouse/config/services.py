"""Settings of the table services: compaction, clean, archival, Iceberg publishing, merge memory."""

from __future__ import annotations

import re
import urllib.parse
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping

import enum

from lakehouse.config.options import opt, parse_bool, parse_enum, parse_int, parse_str, service_config
from lakehouse.errors import ConfigError
from lakehouse import layout

if TYPE_CHECKING:
    pass


def _choice(*values: str) -> Callable[[str, Any], str]:
    def parse(key: str, v: Any) -> str:
        s = str(v).strip().upper()
        if s not in values:
            raise ConfigError(f"{key}={v!r} is not one of {', '.join(values)}",
                              help=f"set {key} to one of the listed values")
        return s
    return parse


# Hudi's master switch (HoodieWriteConfig.TABLE_SERVICES_ENABLED): false stops every service
# from scheduling new work or archiving (BaseHoodieWriteClient.tableServicesEnabled); a plan already
# on the timeline still runs when asked for, so nothing half-done is left waiting. Each service's
# config reads it, so a service call takes it like its own options.
SERVICES_ENABLED_KEY = "hoodie.table.services.enabled"


def services_switch() -> Any:
    return opt(SERVICES_ENABLED_KEY, True, parse_bool,
               "false: no service schedules new work or archives (plans already on the timeline "
               "still run); Hudi's switch for pausing a table's services")


@dataclass(frozen=True)
class CompactionConfig:
    """When to schedule a compaction and what its plan may hold (MOR tables)."""

    services_enabled: bool = services_switch()

    trigger_strategy: str = opt(
        "hoodie.compact.inline.trigger.strategy", "NUM_COMMITS",
        _choice("NUM_COMMITS", "TIME_ELAPSED", "NUM_AND_TIME", "NUM_OR_TIME", "LOG_BYTES",
                "NUM_OR_LOG_BYTES"),
        "what triggers a compaction: delta commits, time, log bytes (the last two are lakehouse's)")
    max_delta_commits: int = opt("hoodie.compact.inline.max.delta.commits", 5, parse_int(1),
                                 "delta commits since the last compaction that trigger one")
    max_delta_seconds: int = opt("hoodie.compact.inline.max.delta.seconds", 3600, parse_int(1),
                                 "seconds since the last compaction that trigger one")
    max_log_bytes: int = opt("hoodie.compact.trigger.log.bytes", 1 << 30, parse_int(1),
                             "lakehouse: total log bytes that trigger a compaction")
    target_io_mb: int = opt("hoodie.compaction.target.io", 512000, parse_int(1),
                            "at most this many MB read and written by one plan")
    log_size_threshold: int = opt("hoodie.compaction.logfile.size.threshold", 0, parse_int(0),
                                  "file slices with fewer log bytes are left out of a plan")

    @classmethod
    def from_options(cls, options: Mapping[str, Any] | None = None) -> "CompactionConfig":
        return service_config(cls, options)


@dataclass(frozen=True)
class CleanConfig:
    """What cleaning keeps (seed 003; Hudi's keys and defaults) and when it runs."""

    services_enabled: bool = services_switch()

    policy: str = opt("hoodie.cleaner.policy", "KEEP_LATEST_COMMITS",
                      _choice("KEEP_LATEST_COMMITS", "KEEP_LATEST_BY_HOURS", "KEEP_LATEST_FILE_VERSIONS"),
                      "which file versions cleaning keeps")
    commits_retained: int = opt("hoodie.cleaner.commits.retained", 10, parse_int(1),
                                "KEEP_LATEST_COMMITS: commits whose files stay readable")
    hours_retained: int = opt("hoodie.cleaner.hours.retained", 24, parse_int(1),
                              "KEEP_LATEST_BY_HOURS: hours of commits whose files stay readable")
    file_versions_retained: int = opt("hoodie.cleaner.fileversions.retained", 3, parse_int(1),
                                      "KEEP_LATEST_FILE_VERSIONS: file slices kept per file group")
    max_commits: int = opt("hoodie.clean.max.commits", 1, parse_int(1),
                           "commits since the last clean that trigger a clean")
    incremental: bool = opt("hoodie.cleaner.incremental.mode", True, parse_bool,
                            "scan only partitions written since the last clean")
    parallelism: int = opt("hoodie.cleaner.parallelism", 200, parse_int(1),
                           "delete tasks run at once at most")
    trigger_strategy: str = opt("hoodie.clean.trigger.strategy", "NUM_COMMITS", _choice("NUM_COMMITS"),
                                "what triggers a clean: commits since the last one (Hudi's only strategy)")
    # Hudi's default is true: its writers clean after every commit. lakehouse's writers leave
    # cleaning to the clean service the platform schedules (a separate task, its own failures and
    # retries), so a write's latency never includes deleting files; true cleans as Hudi does.
    automatic: bool = opt("hoodie.clean.automatic", False, parse_bool,
                          "clean after every commit of a writer (Table.write, ingest, "
                          "format('lakehouse')); false (lakehouse's default, Hudi's is true): the "
                          "platform's clean task cleans")
    run_async: bool = opt("hoodie.clean.async", False, parse_bool,
                          "with hoodie.clean.automatic: the clean runs beside the write, in a thread "
                          "started with it, and the write waits for it before it returns (Hudi's "
                          "async cleaner)")
    # Hudi's default is true. One clean at a time is lakehouse's: a second plan beside a pending
    # one lists the same files, and every clean finishes the pending ones before it plans.
    allow_multiple: bool = opt("hoodie.clean.allow.multiple", False, parse_bool,
                               "plan a clean while another is still pending (Hudi's default true; "
                               "lakehouse's false: the pending one is finished first)")

    @classmethod
    def from_options(cls, options: Mapping[str, Any] | None = None) -> "CleanConfig":
        return service_config(cls, options)


@dataclass(frozen=True)
class ArchivalConfig:
    """How long the active timeline may grow (Hudi's defaults)."""

    services_enabled: bool = services_switch()

    max_commits: int = opt("hoodie.keep.max.commits", 30, parse_int(2),
                           "archive when the active timeline holds more completed commits")
    min_commits: int = opt("hoodie.keep.min.commits", 20, parse_int(1),
                           "archive down to this many completed commits")

    @classmethod
    def from_options(cls, options: Mapping[str, Any] | None = None) -> "ArchivalConfig":
        cfg = service_config(cls, options)
        if cfg.min_commits >= cfg.max_commits:
            raise ConfigError(f"hoodie.keep.min.commits ({cfg.min_commits}) must be below "
                              f"hoodie.keep.max.commits ({cfg.max_commits})",
                              help="for example 20 and 30, Hudi's defaults")
        return cfg


# Query parameters of a SQLAlchemy URL that carry a credential (psycopg's password=, a token=).
_SECRET_PARAMS = frozenset({"password", "passwd", "pwd", "secret", "token", "access_token",
                            "api_key", "apikey", "key", "sslpassword", "aws_secret_access_key"})


def _secret_param(name: str) -> bool:
    n = name.lower()
    return n in _SECRET_PARAMS or n.endswith(("password", "secret", "token"))


def url_has_secret(uri: str) -> bool:
    """Whether the catalog URL ``uri`` holds a credential: a password in its user part or a
    password/secret/token query parameter."""
    try:
        parts = urllib.parse.urlsplit(uri)
    except ValueError:
        return True  # unreadable: assume the worst
    return parts.password is not None or any(
        _secret_param(k) for k, _ in urllib.parse.parse_qsl(parts.query, keep_blank_values=True))


def masked_url(uri: str) -> str:
    """``uri`` with its credentials replaced by ``***``, fit for a message or a log line."""
    try:
        parts = urllib.parse.urlsplit(uri)
    except ValueError:
        return "<a URL that could not be parsed>"
    out = uri
    if parts.password is not None:
        user, _, host = parts.netloc.rpartition("@")
        out = out.replace(parts.netloc, f"{user.split(':', 1)[0]}:***@{host}", 1)
    params = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    if any(_secret_param(k) for k, _ in params):
        masked = "&".join(f"{k}={'***' if _secret_param(k) else v}" for k, v in params)
        at = out.rindex("?" + parts.query) + 1
        out = out[:at] + masked + out[at + len(parts.query):]
    return out


def catalog_url_problem(url: str) -> tuple[str, str] | None:
    """Why ``url`` cannot be the Iceberg SQL catalog's URL, as (what is wrong, what to do); None
    when it can. Checked where the option is given and again where ``env:NAME`` is resolved."""
    if re.match(r"^(https?|thrift)://", url):
        return ("names a REST or Hive catalog; lakehouse registers tables in an Iceberg SQL (JDBC) "
                "catalog only",
                "give a SQLAlchemy URL (sqlite:////abs/path/catalog.db or postgresql+psycopg2://user@host/db); "
                "REST engines read that catalog through `lakehouse catalog serve` or Airflow's /lakehouse-catalog")
    if not re.match(r"^[a-z0-9+]+://", url):
        return ("is not a SQLAlchemy URL",
                "use sqlite:////abs/path/catalog.db or postgresql+psycopg2://user@host/db, or env:NAME "
                "in the option (the URL from that environment variable)")
    return None


def _catalog_uri(key: str, v: Any) -> str:
    """A SQLAlchemy URL or ``env:NAME`` (resolved where the table is written); empty: none."""
    s = str(v).strip()
    if not s or (s.startswith("env:") and s.removeprefix("env:").strip()):
        return s
    problem = catalog_url_problem(s)
    if problem is not None:
        raise ConfigError(f"{key}={masked_url(s)!r} {problem[0]}", help=problem[1])
    return s


class IcebergView(enum.StrEnum):
    """What a table's Iceberg metadata shows (published as the table property lakehouse.iceberg.view)."""

    SNAPSHOT = "snapshot"  # every commit's rows, logs included (lakehouse.iceberg.snapshot_view)
    READ_OPTIMIZED = "read_optimized"  # the base files only: a Merge-On-Read table as of its compactions


@dataclass(frozen=True)
class IcebergConfig:
    """Iceberg metadata published with every completed instant (seed 004)."""

    enabled: bool = opt("hoodie.meta.sync.iceberg.enabled", True, parse_bool,
                        "publish Iceberg v2 metadata under "
                        f"{layout.ICEBERG} after every commit, compaction, clean and rollback")
    view: IcebergView = opt("hoodie.meta.sync.iceberg.view", IcebergView.SNAPSHOT, parse_enum(IcebergView),
                            "what Iceberg readers see of a Merge-On-Read table: snapshot (every "
                            "commit's rows, as lakehouse reads them: its log records published as "
                            "Iceberg data and position delete files, which costs each delta commit's "
                            "publish a key lookup in the file groups it touched) or read_optimized "
                            "(its base files only, as of the last compaction, as Apache XTable "
                            "publishes it); Copy-On-Write tables are the same either way")
    asynchronous: bool = opt("hoodie.meta.sync.iceberg.async", True, parse_bool,
                             "publish in a thread of the writing process after the commit returns "
                             "(as Delta Lake's UniForm does): the Iceberg view lags by the commits "
                             "completed while a publish runs (a writer more than 8 ahead waits); the "
                             "process waits for it at exit; false: each commit returns once its Iceberg "
                             "metadata is published")
    catalog_uri: str = opt("hoodie.meta.sync.iceberg.catalog.uri", "", _catalog_uri,
                           "register the table in an Iceberg SQL catalog (Iceberg's JDBC catalog "
                           "tables, as pyiceberg's SqlCatalog keeps them) at this SQLAlchemy URL "
                           "(sqlite:///..., postgresql+psycopg2://...), its pointer moved after every "
                           "publish; env:NAME reads the URL from the environment variable NAME "
                           "(keep passwords out of hoodie.properties); empty: no catalog")
    catalog_name: str = opt("hoodie.meta.sync.iceberg.catalog.name", "lakehouse", parse_str,
                            "the catalog's name (the catalog_name column of its tables)")
    catalog_namespace: str = opt("hoodie.meta.sync.iceberg.catalog.namespace", "", parse_str,
                                 "the namespace the table is registered under (empty: the "
                                 "table's hoodie.database.name)")

    @classmethod
    def from_options(cls, options: Mapping[str, Any] | None = None) -> "IcebergConfig":
        return service_config(cls, options)


@dataclass(frozen=True)
class MemoryConfig:
    """How much memory merging one file slice's log records may hold (snapshot reads, compaction)."""

    merge_max_size: int = opt(
        "hoodie.memory.merge.max.size", 1 << 30, parse_int(1),
        "bytes of decoded log records one file slice's merge holds before it merges them down to "
        "one version per key and reads on (log files past this on disk are read one at a time)")

    @classmethod
    def from_options(cls, options: Mapping[str, Any] | None = None) -> "MemoryConfig":
        return service_config(cls, options)

