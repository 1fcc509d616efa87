"""One operator for every table-service step: a SparkSubmitOperator that submits lakehouse's
Spark application (``lakehouse/spark/submit.py``) and hands the next task the instant it made.

The result of a step is on the table's timeline, never only in a log: the operator tags the
instant the application creates with the task run (``airflow.dag_id``, ``airflow.run_id``,
``airflow.task_id``, ``airflow.try_number`` in the instant's extra metadata), finds it there
afterwards and returns its time, so XCom carries just the name. A step that had nothing to do
is marked skipped (and its downstream tasks with it), with the application's reason in the log.

Retries never duplicate data. Before submitting, a step looks for what an earlier try of the
same task run made: a compaction plan, a completed clean, a write whose phase 1 finished are
resumed (returned as they are); anything else is left to the application, which rolls a failed
write back before writing again (exactly once through the checkpoint in the commit) and undoes
a crashed compaction execution before redoing it.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Iterable, Iterator, Mapping, Sequence

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

from lakehouse.airflow.assets import due_alias, due_asset
from lakehouse.airflow.links import LakehouseTableLink
from lakehouse.errors import ConfigError, TableNotFoundError
from lakehouse.spark.apps import FAILED, summary_line
from lakehouse.spark.package import build_py_files
from lakehouse.spark.submit import APPS, submit_path
from lakehouse.services.due import clustering_due, compaction_due
from lakehouse.table import open_table
from lakehouse.timeline.instant import Action
from lakehouse.timeline.tags import find_tagged

TAG_PREFIX = "airflow."
COMMIT_TAG_PREFIX = "airflow.commit."
#: What each application makes, looked up on the timeline after it ran.
MAKES: dict[str, tuple[Action, ...]] = {
    "ingest": (Action.DELTA_COMMIT, Action.COMMIT, Action.REPLACE_COMMIT),
    "stream": (Action.DELTA_COMMIT, Action.COMMIT),
    "compaction-plan": (Action.COMPACTION,),
    "clustering-plan": (Action.REPLACE_COMMIT,),
    "clean": (Action.CLEAN,),
}
#: Applications that work on an instant an upstream task made.
TAKES_INSTANT = ("compaction-execute", "clustering-execute", "commit")
#: The XCom key of a skipped task's application report (its "reason" says why nothing was done).
REPORT_KEY = "lakehouse_report"
#: How each service's "due" is decided (lakehouse.services.due).
DUE_CHECKS = {"compaction": compaction_due, "clustering": clustering_due}
#: Spark's log level in task logs (Spark's own default is INFO: ~80 lines around the report).
SPARK_LOG_LEVEL = "WARN"
_NO_INSTANT = ("", "None", "null")


def run_tags(context: Any, prefix: str = TAG_PREFIX) -> dict[str, str]:
    """The identity of the running task instance, as instant tags."""
    ti = context["ti"]
    tags = {"dag_id": ti.dag_id, "run_id": ti.run_id, "task_id": ti.task_id,
            "try_number": str(ti.try_number)}
    if getattr(ti, "map_index", -1) not in (-1, None):
        tags["map_index"] = str(ti.map_index)
    return {prefix + k: v for k, v in tags.items()}


def _identity(tags: dict[str, str]) -> dict[str, str]:
    """The tags that name the task run whatever the try: an earlier try's instant matches."""
    return {k: v for k, v in tags.items() if not k.endswith("try_number")}


class LakehouseSparkSubmitOperator(SparkSubmitOperator):
    """Submit ``submit.py <app> <table_path> <app_args...>`` with the task run's tags.

    :param app: ingest, stream, compaction-plan, compaction-execute, clustering-plan,
        clustering-execute, commit or clean.
    :param table_path: the table's path or URI, as the Spark driver and executors reach it.
    :param app_args: (templated) the application's own arguments; one rendering empty is dropped.
    :param instant: (templated) for compaction-execute and commit: the instant an upstream task
        returned, e.g. ``"{{ ti.xcom_pull(task_ids='compaction_plan') }}"``; empty skips the step.
    :param ship_package: send the lakehouse package to the executors with ``--py-files`` (for
        clusters whose workers do not have it installed).
    :param due: for an ingest step: the services (compaction, clustering) to check after its
        commit, with their planners' options; each whose trigger is met gets an event on its
        "due" Asset (lakehouse.airflow.assets), through the alias the step has as an outlet.
    Other arguments go to :class:`SparkSubmitOperator` (``conn_id``, ``conf``, ...).
    """

    template_fields: Sequence[str] = (*SparkSubmitOperator.template_fields, "instant", "app_args")
    ui_color = "#cfe8ff"
    operator_extra_links = (LakehouseTableLink(),)

    def __init__(self, *, app: str, table_path: str, table_name: str | None = None,
                 app_args: Iterable[str] = (), instant: str | None = None, ship_package: bool = False,
                 conf: dict[str, Any] | None = None, env_vars: dict[str, Any] | None = None,
                 due: Mapping[str, Mapping[str, str]] | None = None, **kwargs: Any) -> None:
        apps = ("ingest", *APPS)
        if app not in apps:
            raise ConfigError(f"unknown lakehouse application {app!r}", help=f"use one of {', '.join(apps)}")
        name = table_name or table_path.rstrip("/").rsplit("/", 1)[-1]
        env = {"PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable)}
        if os.environ.get("SPARK_LOCAL_IP"):
            env["SPARK_LOCAL_IP"] = os.environ["SPARK_LOCAL_IP"]
        # Progress bars and Spark's INFO lines (~80 per run) are noise in a task log; the
        # application prints what happened. spark_conf {spark.log.level: INFO} brings them back.
        spark_conf = {"spark.ui.showConsoleProgress": "false", "spark.log.level": SPARK_LOG_LEVEL, **(conf or {})}
        super().__init__(application=submit_path(), name=f"lakehouse-{app}-{name}", conf=spark_conf,
                         env_vars={**env, **(env_vars or {})}, **kwargs)
        self.app = app
        self.table_path = table_path
        self.table_name = name
        self.app_args = list(app_args)
        self.instant = instant
        self.ship_package = ship_package
        self.due = {k: dict(v) for k, v in (due or {}).items()}
        self.report: dict[str, Any] | None = None

    # --- the timeline side ------------------------------------------------------------------

    def _table(self):
        try:
            return open_table(self.table_path)
        except TableNotFoundError:
            return None

    def _made_by(self, tags: dict[str, str]):
        """The instant this task run (any try) made, if any."""
        table = self._table()
        if table is None or self.app not in MAKES:
            return None, None
        return table, find_tagged(table.active, _identity(tags), MAKES[self.app])

    def _resumable(self, table, inst) -> bool:
        if self.app == "stream":
            # An earlier try may have stopped between micro-batches: run again, the query's
            # checkpoint and the sink's batch ids apply nothing twice.
            return False
        if inst.is_completed or self.app in ("compaction-plan", "clustering-plan"):
            return True
        return self.app == "ingest" and inst.is_inflight and table.write_ready(inst.time) == ""

    # --- running ----------------------------------------------------------------------------

    def _tee(self, lines: Iterator[str]) -> Iterator[str]:
        for line in lines:
            s = line.strip()
            if s.startswith("{") and '"app"' in s:
                try:
                    self.report = json.loads(s)
                except ValueError:
                    pass
            yield line

    def _announce(self, context: Any) -> None:
        """An event on the "due" Asset of each service whose trigger this commit met."""
        if not self.due:
            return
        events = context.get("outlet_events")
        if events is None:
            self.log.warning("no outlet events in this task's context: the services' 'due' Assets "
                             "get no event from this commit (their DAGs wait for the next one)")
            return
        table = self._table()
        for service, options in self.due.items():
            # The commit is done: a check that cannot decide must not fail the task, and a
            # service left untriggered is worse than one run that finds nothing to do.
            try:
                if table is None:
                    raise RuntimeError(f"{self.table_path} could not be opened")
                d = DUE_CHECKS[service](table, options)
                due, reason = d.due, d.reason
            except Exception as e:  # noqa: BLE001 - see above
                self.log.warning("%s: could not tell whether it is due (%s); announcing it as due", service, e)
                due, reason = True, f"could not tell ({type(e).__name__}); its DAG decides"
            self.log.info("%s %s: %s", service, "due" if due else "not due yet", reason)
            if due:
                events[due_alias(self.table_name)].add(due_asset(self.table_name, service),
                                                       extra={"reason": reason})

    def _skip(self, context: Any, report: dict) -> None:
        """Skip this task, keeping the application's report in the XCom ``REPORT_KEY`` (the
        Lakehouse view shows why a service did nothing; the log alone would bury it)."""
        from airflow.sdk.exceptions import AirflowSkipException  # noqa: PLC0415
        try:
            context["ti"].xcom_push(key=REPORT_KEY, value=report)
        except Exception as e:  # noqa: BLE001 - the reason is a courtesy, the skip is the outcome
            self.log.warning("could not record the report: %s", e)
        raise AirflowSkipException(f"{self.app}: nothing to do: {report.get('reason', '')}")

    def execute(self, context: Any) -> str | None:
        from airflow.sdk.exceptions import AirflowException  # noqa: PLC0415

        tags = run_tags(context, COMMIT_TAG_PREFIX if self.app == "commit" else TAG_PREFIX)
        table, earlier = self._made_by(tags)
        if earlier is not None and self._resumable(table, earlier):
            self.log.info("resuming: %s was made by an earlier try of this task; not submitting again", earlier)
            return earlier.time
        # A templated argument that renders empty (an unset flag) is left out.
        args = [self.app, self.table_path, *(str(a) for a in self.app_args if str(a).strip())]
        if self.app in TAKES_INSTANT:
            if self.instant is None or str(self.instant).strip() in _NO_INSTANT:
                self._skip(context, {"status": "nothing_to_do", "app": self.app,
                                     "reason": "no instant from upstream (nothing was made to work on)"})
            args += ["--instant", str(self.instant).strip()]
        if self.app != "compaction-execute":  # its result is the plan's instant, found by time
            for k, v in tags.items():
                args += ["--tag", f"{k}={v}"]
        self.application_args = args
        if self.ship_package:
            self.py_files = build_py_files(os.path.join(os.environ.get("AIRFLOW_HOME", "/tmp"), "lakehouse-py-files"))
        self.report = None
        self._hook = self._get_hook()
        original = self._hook._process_spark_submit_log
        self._hook._process_spark_submit_log = lambda itr: original(self._tee(itr))
        # The task log: what runs, Spark's output folded away (Airflow's UI collapses a
        # ::group:: block), then the application's report in one sentence.
        self.log.info("lakehouse %s on %s (%s)", self.app, self.table_name, self.table_path)
        self.log.info("::group::spark-submit output")
        try:
            try:
                super().execute(context)
            finally:
                self.log.info("::endgroup::")
                if self.report:
                    try:
                        line = summary_line(self.report)
                    except Exception as e:  # noqa: BLE001 - a summary never hides the task's outcome
                        line = f"{self.app}: report {self.report!r} (no summary: {e})"
                    (self.log.error if self.report.get("status") == FAILED else self.log.info)("%s", line)
        except AirflowException:
            conflicts = [f for f in (self.report or {}).get("failed", []) if f.get("conflict")]
            if conflicts:
                from airflow.sdk.exceptions import AirflowFailException  # noqa: PLC0415
                c = conflicts[0]
                # A retry cannot help: the write was rolled back. Fail now, and say what happens.
                raise AirflowFailException(
                    f"{self.app}: {c['reason']} Help: the write was rolled back; the next run of "
                    "the ingest writes the batch again (its source checkpoint did not move)") from None
            raise
        report = self.report or {}
        if self.app in TAKES_INSTANT:
            if report.get("status") == "nothing_to_do":
                self.log.info("%s: nothing to do: %s", self.app, report.get("reason", ""))
            self._announce(context)
            return str(self.instant).strip()
        _, made = self._made_by(tags)
        if made is not None:
            self.log.info("%s made %s", self.app, made)
            self._announce(context)
            return made.time
        if report.get("status") == "nothing_to_do":
            self._skip(context, report)
        raise AirflowException(
            f"{self.app} finished, but no instant tagged with this task run is on {self.table_path}'s "
            f"timeline (its report: {report or 'none'}). Help: check the task log above; the next "
            "run of the step rolls back anything it left half done")
