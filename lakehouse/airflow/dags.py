"""The DAGs of every table in the registry: ingest, compaction and clean, each step a Spark
application submitted by :class:`~lakehouse.airflow.operators.LakehouseSparkSubmitOperator`.

* ``<table>_ingest`` (cron, or manual): ingest (phase 1) → commit. The commit task updates the
  table's Asset, so data-aware DAGs can follow it. A source in ``mode: stream``: one task, a
  Structured Streaming query into ``format("lakehouse")`` with ``trigger(availableNow)`` (the
  ``stream`` application), which commits each micro-batch and updates the Asset.
* ``<table>_compaction`` (Merge-On-Read only): compaction-plan → compaction-execute → commit.
  Scheduled by the Asset ``lakehouse_<table>_compaction_due`` (``after_commits: K``: the ingest
  task announces it after a commit once K delta commits wait, hoodie.compact.inline.max.delta.
  commits=K, Hudi's own trigger, checked as the planner checks it: lakehouse.services.due), so it
  does not run after every commit to hear "not yet"; or on a cron; or both (``{after_commits: K,
  cron: ...}``: whichever comes first). Nothing planned: the plan task is skipped, and the rest
  with it.
* ``<table>_clustering`` (tables without the bucket index, or with consistent-hashing buckets):
  clustering-plan → clustering-execute → commit. Scheduled by the Asset
  ``lakehouse_<table>_clustering_due`` (``after_commits: K``: announced once K commits completed
  since the last clustering, hoodie.clustering.async.max.commits=K), on a cron, both, or only
  when triggered. The default: after 5
  commits for consistent-hashing tables (a plan only where a bucket passed the split threshold,
  so the table grows without anyone asking), manual for the others (Hudi's async clustering is
  off by default).
* ``<table>_clean`` (daily by default): clean, with the table's retention settings.

Every DAG runs one run at a time (``max_active_runs=1``): one run of a service per table. The
instant a step makes passes to the next one through the timeline, XCom holding only its time.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from airflow.sdk import DAG, Asset, AssetOrTimeSchedule, CronTriggerTimetable

from lakehouse.airflow import assets
from lakehouse.airflow.health import LakehouseHealthOperator
from lakehouse.airflow.operators import LakehouseSparkSubmitOperator
from lakehouse.airflow.registry import Registry, TableEntry

START = datetime(2026, 1, 1, tzinfo=timezone.utc)


def commits_asset(t: TableEntry) -> Asset:
    """The table's commits as an Airflow Asset: updated by every ingest commit."""
    return assets.commits_asset(t.name, t.path)


def due(t: TableEntry) -> dict[str, dict[str, str]]:
    """The services whose DAG a "due" Asset schedules, with the options their planner applies
    (the registry's trigger over its service options): the ingest task checks each after its
    commit and announces those whose trigger is met."""
    out: dict[str, dict[str, str]] = {}
    s = t.schedule
    if t.is_mor and s.compaction_after_commits:
        out["compaction"] = dict(_plan_options(dict(t.compaction_options), "hoodie.compact.inline.max.delta.commits",
                                               s.compaction_after_commits))
    if t.clusters and s.clustering_after_commits:
        out["clustering"] = dict(_plan_options(dict(t.clustering_options), "hoodie.clustering.async.max.commits",
                                               s.clustering_after_commits))
    return out


def _service_schedule(t: TableEntry, service: str, after_commits: int | None, cron: str | None) -> Any:
    """A service DAG's schedule: its "due" Asset (after K commits), its cron, or both, whichever
    comes first (the cron also catches a time-based trigger on a table whose writes stopped: the
    due check runs at commits only, as Hudi's writers schedule after a commit)."""
    if after_commits and cron:
        return AssetOrTimeSchedule(timetable=CronTriggerTimetable(cron, timezone="UTC"),
                                   assets=[assets.due_asset(t.name, service)])
    if after_commits:
        return [assets.due_asset(t.name, service)]
    return cron


def _plan_options(opts: dict[str, str], trigger_key: str, after: int) -> dict[str, str]:
    opts.setdefault(trigger_key, str(after))
    return opts


def _options(opts: dict[str, str]) -> list[str]:
    return [a for k, v in sorted(opts.items()) for a in ("--option", f"{k}={v}")]


def _source_args(t: TableEntry, max_files_flag: str, extra: list[str]) -> list[str]:
    """What the ingest and stream applications share: the source, the table they create."""
    s = t.source
    args = ["--source-dir", s.dir, "--op", s.operation, "--format", s.format, "--create",
            "--table-type", t.table_type, "--index", t.index, *extra]
    if s.max_files:
        args += [max_files_flag, str(s.max_files)]
    if s.kind == "demo":
        args += ["--demo-batches", str(s.demo_batches), "--demo-rows", str(s.demo_rows)]
    return args + _fields_args(t) + _options(dict(t.options))


def ingest_args(t: TableEntry) -> list[str]:
    return _source_args(t, "--max-files", [])


def stream_args(t: TableEntry) -> list[str]:
    """The stream application's arguments for a ``mode: stream`` source (availableNow)."""
    return _source_args(t, "--max-files-per-trigger",
                        ["--checkpoint", t.source.checkpoint] if t.source.checkpoint else [])


def _fields_args(t: TableEntry) -> list[str]:
    if not t.record_key:
        return []
    args = ["--record-key", ",".join(t.record_key)]
    if t.partition_by:
        args += ["--partition-by", ",".join(t.partition_by)]
    if t.ordering_field:
        args += ["--ordering-field", t.ordering_field]
    return args


#: A run triggered with conf {"force": true} plans whether or not the trigger fired.
FORCE_FROM_CONF = "{{ '--force' if (dag_run.conf or {}).get('force') else '' }}"


def compaction_plan_args(t: TableEntry) -> list[str]:
    opts = dict(t.compaction_options)
    if t.schedule.compaction_after_commits:
        opts = _plan_options(opts, "hoodie.compact.inline.max.delta.commits", t.schedule.compaction_after_commits)
    return [FORCE_FROM_CONF, *_options(opts)]


def clustering_plan_args(t: TableEntry) -> list[str]:
    opts = dict(t.clustering_options)
    if t.schedule.clustering_after_commits:
        opts = _plan_options(opts, "hoodie.clustering.async.max.commits", t.schedule.clustering_after_commits)
    return [FORCE_FROM_CONF, *_options(opts)]


def _doc(t: TableEntry, what: str) -> str:
    return (f"**{t.name}** ({t.table_type}, {t.index} index) at `{t.path}`: {what}\n\n"
            "Generated from the lakehouse table registry; edit the registry, not this DAG.")


def table_dags(t: TableEntry, *, schedules: bool = True) -> dict[str, DAG]:
    """``t``'s DAGs; without ``schedules`` every one runs only when triggered (the platform's
    first cycle, before the schedules start: registry.schedules_held)."""
    def when(schedule: Any) -> Any:
        return schedule if schedules else None

    common: dict[str, Any] = dict(
        start_date=START, catchup=False, max_active_runs=1, tags=["lakehouse", t.name],
        default_args={"retries": t.retries, "retry_delay": timedelta(seconds=t.retry_delay_s)})

    def op(task_id: str, app: str, args: list[str] | None = None, instant: str | None = None,
           **kw: Any) -> LakehouseSparkSubmitOperator:
        return LakehouseSparkSubmitOperator(
            task_id=task_id, app=app, table_path=t.path, table_name=t.name, app_args=args or [],
            instant=instant, conn_id=t.spark_conn_id, conf=dict(t.spark_conf),
            ship_package=t.ship_package, **kw)

    out: dict[str, DAG] = {}
    if t.source.mode == "stream":
        with DAG(t.dag_id("ingest"), schedule=when(t.schedule.ingest),
                 doc_md=_doc(t, f"stream the files landed in `{t.source.dir}` through format(\"lakehouse\") "
                                "(availableNow), a commit per micro-batch."), **common) as d:
            op("ingest", "stream", stream_args(t), outlets=[commits_asset(t), assets.due_alias(t.name)],
               due=due(t))
    else:
        with DAG(t.dag_id("ingest"), schedule=when(t.schedule.ingest),
                 doc_md=_doc(t, f"ingest new files from `{t.source.dir}`, then commit."), **common) as d:
            op("ingest", "ingest", ingest_args(t)) >> op(
                "commit", "commit", instant="{{ ti.xcom_pull(task_ids='ingest') }}",
                outlets=[commits_asset(t), assets.due_alias(t.name)], due=due(t))
    out[d.dag_id] = d

    if t.is_mor:
        s = t.schedule
        schedule: Any = _service_schedule(t, "compaction", s.compaction_after_commits, s.compaction_cron)
        with DAG(t.dag_id("compaction"), schedule=when(schedule),
                 doc_md=_doc(t, "plan a compaction if its trigger fires, execute it, commit it."),
                 **common) as d:
            pulled = "{{ ti.xcom_pull(task_ids='compaction_plan') }}"
            (op("compaction_plan", "compaction-plan", compaction_plan_args(t))
             >> op("compaction_execute", "compaction-execute", instant=pulled)
             >> op("commit", "commit", instant=pulled))
        out[d.dag_id] = d

    if t.clusters:
        s = t.schedule
        schedule = _service_schedule(t, "clustering", s.clustering_after_commits, s.clustering_cron)
        with DAG(t.dag_id("clustering"), schedule=when(schedule),
                 doc_md=_doc(t, ("plan a bucket resize (buckets past the split threshold split, small "
                                 "neighbours merged) " if t.resizes_buckets else
                                 "plan a clustering (small file groups rewritten, sorted if sort columns "
                                 "are set) ") + "if its trigger fires, execute it, commit it."), **common) as d:
            pulled = "{{ ti.xcom_pull(task_ids='clustering_plan') }}"
            (op("clustering_plan", "clustering-plan", clustering_plan_args(t))
             >> op("clustering_execute", "clustering-execute", instant=pulled)
             >> op("commit", "commit", instant=pulled))
        out[d.dag_id] = d

    with DAG(t.dag_id("clean"), schedule=when(t.schedule.clean),
             doc_md=_doc(t, "delete file versions the retention policy no longer keeps."), **common) as d:
        op("clean", "clean", _options(dict(t.clean_options)))
    out[d.dag_id] = d

    with DAG(t.dag_id("health"), schedule=when(t.schedule.health),
             doc_md=_doc(t, "check the table's alerts (compaction backlog, stuck instants, overdue clean): "
                            f"metrics each run, an event on the Asset `{assets.alerts_asset(t.name).name}` when "
                            "there are alerts, skipped when healthy."), **common) as d:
        LakehouseHealthOperator(task_id="health", table_path=t.path, table_name=t.name,
                                options=t.service_options, compaction_after=t.compaction_trigger)
    out[d.dag_id] = d
    return out


def build_dags(registry: Registry, *, schedules: bool = True) -> dict[str, DAG]:
    """Every table's DAGs by DAG id (put them in a DAG file's globals); ``schedules``: as
    table_dags."""
    out: dict[str, DAG] = {}
    for t in registry.tables:
        out.update(table_dags(t, schedules=schedules))
    return out


__all__ = ["build_dags", "table_dags", "commits_asset", "due", "ingest_args", "stream_args"]
