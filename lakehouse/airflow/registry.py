"""The table registry: the one file users edit to put a table under Airflow's care.

YAML (or JSON), validated against ``registry.schema.json`` before any DAG is built, so a typo is
an import error naming the file, the entry and the field, not a DAG that fails at 3 a.m.::

    defaults:
      spark_conn_id: spark_default
      retries: 2
    tables:
      trips:
        path: tables/trips                 # relative to this file, absolute, or a URI
        table_type: MERGE_ON_READ
        index: BUCKET
        record_key: trip_id
        partition_by: city
        ordering_field: event_ts
        options: {hoodie.bucket.index.num.buckets: 4}
        source: {kind: files, dir: landing/trips, format: parquet}   # mode: stream (see below)
        schedule:
          ingest: "*/10 * * * *"
          compaction: {after_commits: 4}  # or {cron: "0 * * * *"}, or both; null: manual only
          clustering: {cron: "0 3 * * *"}   # default: after 5 commits where buckets resize, else manual
          clean: "@daily"
          health: "*/15 * * * *"            # the alerts check; null: on demand only

A ``catalog: {uri: sqlite:///catalog.db, namespace: lakehouse}`` section registers every table in
that Iceberg SQL catalog (``<namespace>.<table>``), which the Airflow plugin also serves over
Iceberg's REST protocol at ``/lakehouse-catalog``.

A source in ``mode: stream`` is applied by a Structured Streaming query through
``format("lakehouse")`` (the ``stream`` Spark application with ``trigger(availableNow)``; Spark's
checkpoint in ``checkpoint``, by default inside the table) instead of the ``ingest`` application.

Each table gets its DAGs (:mod:`lakehouse.airflow.dags`): ``<name>_ingest``,
``<name>_compaction`` (Merge-On-Read), ``<name>_clustering`` (tables without the bucket index, and
consistent-hashing ones, whose buckets it splits and merges),
``<name>_clean`` and ``<name>_health``.
"""

from __future__ import annotations

import difflib
import json
import os
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any, Mapping

import jsonschema
import yaml

from lakehouse.errors import ConfigError

ENV_VAR = "LAKEHOUSE_REGISTRY"
# A file whose existence holds every DAG's schedule (the DAGs run only when triggered): the
# embedded platform's first cycle, whose manual runs would otherwise wait behind scheduled and
# Asset-triggered ones (deploy.platform).
HOLD_ENV = "LAKEHOUSE_HOLD_SCHEDULES"
DEFAULT_CONN = "spark_default"
#: Hudi's default for hoodie.compact.inline.max.delta.commits, when nothing else is said.
DEFAULT_AFTER_COMMITS = 5
#: How often a table's alerts are checked, unless its entry says otherwise.
DEFAULT_HEALTH = "*/15 * * * *"
_RUNTIME_KEYS = ("spark_conn_id", "spark_conf", "retries", "retry_delay_s", "ship_package")


def schedules_held() -> bool:
    """Whether $LAKEHOUSE_HOLD_SCHEDULES names a file that exists."""
    path = os.environ.get(HOLD_ENV)
    return bool(path) and os.path.exists(path)


@dataclass(frozen=True)
class Source:
    kind: str  # "files" | "demo"
    dir: str
    mode: str = "batch"  # "batch": the ingest app; "stream": a Structured Streaming query (stream app)
    checkpoint: str | None = None  # stream mode: Spark's checkpoint (default: inside a local table)
    format: str = "auto"
    operation: str = "upsert"
    max_files: int | None = None
    demo_batches: int = 1
    demo_rows: int = 1000


@dataclass(frozen=True)
class Schedule:
    ingest: str | None = None
    compaction_after_commits: int | None = DEFAULT_AFTER_COMMITS  # asset-driven, after K ingest commits
    compaction_cron: str | None = None
    clustering_after_commits: int | None = None  # asset-driven, after K ingest commits
    clustering_cron: str | None = None  # neither: the clustering DAG runs when triggered
    clean: str | None = "@daily"
    health: str | None = DEFAULT_HEALTH


@dataclass(frozen=True)
class TableEntry:
    name: str
    path: str
    source: Source
    table_type: str = "MERGE_ON_READ"
    index: str = "BUCKET"
    record_key: tuple[str, ...] = ()
    partition_by: tuple[str, ...] = ()
    ordering_field: str | None = None
    options: Mapping[str, str] = field(default_factory=dict)
    compaction_options: Mapping[str, str] = field(default_factory=dict)
    clustering_options: Mapping[str, str] = field(default_factory=dict)
    clean_options: Mapping[str, str] = field(default_factory=dict)
    schedule: Schedule = Schedule()
    spark_conn_id: str = DEFAULT_CONN
    spark_conf: Mapping[str, str] = field(default_factory=dict)
    retries: int = 2
    retry_delay_s: float = 60.0
    ship_package: bool = False

    @property
    def is_mor(self) -> bool:
        return self.table_type == "MERGE_ON_READ"

    def dag_id(self, service: str) -> str:
        return f"{self.name}_{service}"

    @property
    def resizes_buckets(self) -> bool:
        """Whether the table's buckets are consistent-hashing rings that clustering resizes."""
        return _resizes_buckets(self.index, self.table_type, self.options)

    @property
    def clusters(self) -> bool:
        """Whether the table can be clustered: a SIMPLE-engine bucket table's file groups are a
        fixed set of buckets; consistent-hashing buckets are split and merged by clustering."""
        return self.index != "BUCKET" or self.resizes_buckets

    @property
    def services(self) -> tuple[str, ...]:
        """The services this table has a DAG for (no compaction for a copy-on-write table, no
        clustering for a bucket-index one)."""
        return ("ingest", *(("compaction",) if self.is_mor else ()),
                *(("clustering",) if self.clusters else ()), "clean", "health")

    @property
    def service_options(self) -> dict[str, str]:
        """The entry's options with its compaction and clean options over them: what the
        services read, and so what the health check's thresholds follow."""
        return {**self.options, **self.compaction_options, **self.clean_options}

    @property
    def compaction_trigger(self) -> int | None:
        """Delta commits that trigger a compaction, when the entry's schedule says."""
        return self.schedule.compaction_after_commits if self.is_mor else None


@dataclass(frozen=True)
class Catalog:
    """The Iceberg SQL catalog the registry's tables register in."""

    uri: str  # SQLAlchemy URL, or env:NAME
    name: str = "lakehouse"
    namespace: str = "lakehouse"

    def options(self) -> dict[str, str]:
        return {"hoodie.meta.sync.iceberg.catalog.uri": self.uri,
                "hoodie.meta.sync.iceberg.catalog.name": self.name,
                "hoodie.meta.sync.iceberg.catalog.namespace": self.namespace}


@dataclass(frozen=True)
class Registry:
    path: str
    tables: tuple[TableEntry, ...]
    catalog: Catalog | None = None

    def table(self, name: str) -> TableEntry:
        for t in self.tables:
            if t.name == name:
                return t
        raise ConfigError(f"no table {name!r} in {self.path}",
                          help=f"the registry has: {', '.join(t.name for t in self.tables)}")


@lru_cache(maxsize=1)
def _validator():
    schema = json.loads(resources.files("lakehouse.airflow").joinpath("registry.schema.json").read_text())
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def _where(err) -> str:
    return "/".join(str(p) for p in err.absolute_path) or "(top level)"


def _unknown_keys(err) -> list[tuple[str, str | None, list[str]]]:
    """(unknown key, the nearest valid one or None, the valid ones) of an additionalProperties
    error of an object whose schema names its keys."""
    if err.validator != "additionalProperties" or not isinstance(err.instance, dict):
        return []
    allowed = sorted(err.schema.get("properties", {}))
    if not allowed:
        return []
    return [(k, next(iter(difflib.get_close_matches(k, allowed, n=1, cutoff=0.6)), None), allowed)
            for k in sorted(set(err.instance) - set(allowed))]


def _closest(err):
    """The error to report for ``err``: for a value matching none of several shapes (oneOf,
    anyOf), the shape's error that names an unknown key nearest a valid one (a misspelt key),
    else the deepest error of a shape of the value's type; the error itself otherwise."""
    if not err.context:
        return err
    misspelt = [e for e in err.context if any(near for _, near, _ in _unknown_keys(e))]
    if misspelt:
        return misspelt[0]
    # The shapes of the value's own type, the error deepest inside it first (its field's).
    fitting = [e for e in err.context if e.validator != "type"] or list(err.context)
    return _closest(max(fitting, key=lambda e: (len(e.relative_path), e.validator != "required")))


def _message(err) -> str:
    unknown = _unknown_keys(err)
    if not unknown:
        return err.message
    return "; ".join(f"unknown key {k!r}, " + (f"did you mean {near!r}?" if near else
                                               f"expected one of: {', '.join(allowed)}")
                     for k, near, allowed in unknown)


def validate(doc: Any, origin: str) -> None:
    """Raise a ConfigError naming every problem of ``doc`` (the parsed registry file): an
    unknown key is named, with the nearest valid one."""
    errors = sorted((_closest(e) for e in _validator().iter_errors(doc)),
                    key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        lines = [f"{_where(e)}: {_message(e)}" for e in errors[:10]]
        more = f" (and {len(errors) - 10} more)" if len(errors) > 10 else ""
        raise ConfigError(f"{origin} is not a valid table registry: " + "; ".join(lines) + more,
                          help="fix those fields; lakehouse/airflow/registry.schema.json lists every one")


def _resolve(base: str, path: str) -> str:
    if "://" in path or os.path.isabs(path):
        return path
    return os.path.normpath(os.path.join(base, path))


def _catalog(doc: Mapping[str, Any] | None, base_dir: str) -> Catalog | None:
    if not doc:
        return None
    uri = doc["uri"]
    prefix = "sqlite:///"
    if uri.startswith(prefix) and not uri.startswith(prefix + "/") and uri != prefix + ":memory:":
        # Relative to the registry file, as table paths are (SQLAlchemy's would be the cwd's,
        # which differs between Airflow's components and the Spark driver).
        uri = prefix + os.path.normpath(os.path.join(os.path.abspath(base_dir), uri[len(prefix):]))
    return Catalog(uri, doc.get("name", "lakehouse"), doc.get("namespace", "lakehouse"))


def _fields(v: Any) -> tuple[str, ...]:
    if v is None:
        return ()
    return (v,) if isinstance(v, str) else tuple(v)


def _strs(m: Mapping[str, Any] | None) -> dict[str, str]:
    return {k: (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in (m or {}).items()}


def _resizes_buckets(index: str, table_type: str, options: Mapping[str, str]) -> bool:
    """A bucket-index table with the consistent-hashing engine: the options' engine, else the one
    lakehouse.table_builder gives (consistent hashing for Merge-On-Read)."""
    default = "CONSISTENT_HASHING" if table_type == "MERGE_ON_READ" else "SIMPLE"
    return index == "BUCKET" and str(options.get("hoodie.index.bucket.engine", default)).upper() == "CONSISTENT_HASHING"


def parse(doc: Mapping[str, Any], origin: str, base_dir: str) -> Registry:
    validate(doc, origin)
    defaults = doc.get("defaults") or {}
    catalog = _catalog(doc.get("catalog"), base_dir)
    tables = []
    for name, t in doc["tables"].items():
        rt = {**defaults, **{k: t[k] for k in _RUNTIME_KEYS if k in t}}
        src = t["source"]
        sched = t.get("schedule") or {}
        comp = sched.get("compaction", {"after_commits": DEFAULT_AFTER_COMMITS})
        clus = sched.get("clustering")
        # The registry's catalog, unless the entry names its own (stored at the table's creation).
        opts = {**(catalog.options() if catalog else {}), **_strs(t.get("options"))}
        # An entry may name the table type or index as hoodie.* options only (Hudi style): then
        # those are its table_type and index, not the registry's defaults, which would contradict them.
        table_type = t.get("table_type", opts.get("hoodie.table.type", "MERGE_ON_READ")).upper()
        index = t.get("index", opts.get("hoodie.index.type", "BUCKET")).upper()
        if table_type == "COPY_ON_WRITE":
            comp = None  # nothing to compact: a copy-on-write table has no logs
        if "clustering" not in sched and _resizes_buckets(index, table_type, opts):
            # Buckets split as the table grows without anyone asking (a plan is made only when a
            # bucket passes the split threshold); null in the entry makes it manual.
            clus = {"after_commits": DEFAULT_AFTER_COMMITS}
        if src["kind"] == "files" and "record_key" not in t:
            raise ConfigError(f"{origin}: table {name!r} reads files but names no record_key",
                              help="add record_key (and partition_by, ordering_field) to the entry; "
                                   "only the demo source has fields of its own")
        tables.append(TableEntry(
            name=name, path=_resolve(base_dir, t["path"]),
            source=Source(kind=src["kind"], dir=_resolve(base_dir, src["dir"]), mode=src.get("mode", "batch"),
                          checkpoint=_resolve(base_dir, src["checkpoint"]) if src.get("checkpoint") else None,
                          format=src.get("format", "auto"), operation=src.get("operation", "upsert"),
                          max_files=src.get("max_files"), demo_batches=src.get("demo_batches", 1),
                          demo_rows=src.get("demo_rows", 1000)),
            table_type=table_type, index=index,
            record_key=_fields(t.get("record_key")), partition_by=_fields(t.get("partition_by")),
            ordering_field=t.get("ordering_field"), options=opts,
            compaction_options=_strs(t.get("compaction_options")), clean_options=_strs(t.get("clean_options")),
            clustering_options=_strs(t.get("clustering_options")),
            schedule=Schedule(ingest=sched.get("ingest"),
                              compaction_after_commits=(comp or {}).get("after_commits"),
                              compaction_cron=(comp or {}).get("cron"),
                              clustering_after_commits=(clus or {}).get("after_commits"),
                              clustering_cron=(clus or {}).get("cron"),
                              clean=sched.get("clean", "@daily"),
                              health=sched.get("health", DEFAULT_HEALTH)),
            spark_conn_id=rt.get("spark_conn_id", DEFAULT_CONN), spark_conf=_strs(rt.get("spark_conf")),
            retries=rt.get("retries", 2), retry_delay_s=float(rt.get("retry_delay_s", 60)),
            ship_package=bool(rt.get("ship_package", False))))
    return Registry(origin, tuple(tables), catalog)


def load(path: str | None = None) -> Registry:
    """The registry at ``path`` (default: ``$LAKEHOUSE_REGISTRY``)."""
    path = path or os.environ.get(ENV_VAR)
    if not path:
        raise ConfigError("no table registry given",
                          help=f"set {ENV_VAR} to the registry file (see lakehouse/airflow/registry.py)")
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        raise ConfigError(f"table registry {path} does not exist",
                          help=f"create it, or point {ENV_VAR} at the right file") from None
    try:
        doc = yaml.safe_load(text)  # JSON is YAML too
    except yaml.YAMLError as e:
        raise ConfigError(f"{path} is not valid YAML: {e}", help="fix the syntax at the line shown") from None
    return parse(doc if doc is not None else {}, path, os.path.dirname(os.path.abspath(path)))


__all__ = ["Registry", "TableEntry", "Source", "Schedule", "load", "parse", "validate", "ENV_VAR"]
