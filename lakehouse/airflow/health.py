"""The health check of a table, as an Airflow task (the ``<table>_health`` DAG): the alerts of
:mod:`lakehouse.inspect.alerts`, so that other DAGs and monitoring can react to them.

- Each run sends gauges through Airflow's metrics (StatsD or OpenTelemetry, as ``[metrics]``
  configures): ``lakehouse.<table>.alerts``, ``.compaction_backlog_commits``, ``.log_files``,
  ``.log_bytes``, ``.pending_instants``.
- With alerts, the task succeeds and its outlet, the Asset ``lakehouse_<table>_alerts``, gets an
  event whose extra holds them (a DAG scheduled on that Asset runs on every alert); the alerts
  are also its XCom. Without, the task is skipped ("healthy"), and a skipped task emits no event.

Pure Python on the table's timeline: no Spark, a second or two per table.
"""

from __future__ import annotations

from typing import Any, Mapping

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowSkipException
from airflow.sdk.observability.stats import Stats

from lakehouse.airflow.assets import alerts_asset
from lakehouse.airflow.operators import REPORT_KEY
from lakehouse.errors import TableNotFoundError
from lakehouse.inspect.alerts import alerts
from lakehouse.inspect.health import history
from lakehouse.inspect.timeline import instant_facts
from lakehouse.table import open_table


class LakehouseHealthOperator(BaseOperator):
    """Check one table; see the module's doc."""

    template_fields: tuple[str, ...] = ()
    ui_color = "#e8f0fb"

    def __init__(self, *, table_path: str, table_name: str, options: Mapping[str, Any] | None = None,
                 compaction_after: int | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("outlets", [alerts_asset(table_name)])
        super().__init__(**kwargs)
        self.table_path = table_path
        self.table_name = table_name
        self.options = dict(options or {})
        self.compaction_after = compaction_after

    def check(self) -> tuple[list[dict[str, Any]], dict[str, float]]:
        """(alerts as JSON, gauges) of the table now."""
        table = open_table(self.table_path)
        facts = instant_facts(table)
        points = history(table, facts)["points"]
        last = points[-1] if points else None
        found = alerts(table, facts, last, options=self.options, compaction_after=self.compaction_after)
        gauges = {"alerts": len(found),
                  "compaction_backlog_commits": last["uncompacted_commits"] if last else 0,
                  "log_files": last["log_files"] if last else 0, "log_bytes": last["log_bytes"] if last else 0,
                  "pending_instants": sum(1 for f in facts if f.row["state"] != "completed")}
        return [a.to_json() for a in found], gauges

    def _skip(self, context: Any, reason: str) -> None:
        # The same report a skipped service step leaves (lakehouse.airflow.operators.REPORT_KEY).
        context["ti"].xcom_push(key=REPORT_KEY, value={"status": "nothing_to_do", "reason": reason})
        raise AirflowSkipException(reason)

    def execute(self, context: Any) -> list[dict[str, Any]]:
        try:
            found, gauges = self.check()
        except TableNotFoundError as e:
            self._skip(context, f"{e.message}: nothing to check until its first ingest creates it")
        for k, v in gauges.items():
            Stats.gauge(f"lakehouse.{self.table_name}.{k}", v)
        if not found:
            self._skip(context, f"{self.table_name} is healthy: no alert")
        for a in found:
            self.log.warning("%s (%s): %s. What to do: %s", a["kind"], a["severity"], a["message"], a["help"])
        context["outlet_events"][alerts_asset(self.table_name)].extra = {"alerts": found}
        return found


__all__ = ["LakehouseHealthOperator"]
