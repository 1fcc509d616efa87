"""The task log of a lakehouse step: what runs, spark-submit's output in a group Airflow's UI
folds, then the application's report in one sentence (lakehouse.spark.apps.summary_line);
Spark's INFO lines off unless the table's spark_conf asks for them. The Spark hook's process is
replaced by recorded output, fed through the hook's own log handling."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

pytest.importorskip("airflow.providers.apache.spark", reason="the Apache Spark provider is needed")
pytestmark = pytest.mark.airflow

REPORT = {"app": "commit", "table": "/data/trips", "instant": "20261130101010101", "action": "deltacommit",
          "records": 1771, "files": 4, "duration_s": 2.345, "status": "ok", "reason": ""}


class Said(list):
    def _say(self, level):
        return lambda msg, *args, **kw: self.append((level, msg % args if args else msg))

    def __getattr__(self, level):
        if level in ("info", "warning", "error", "debug", "exception"):
            return self._say(level)
        raise AttributeError(level)


def _run(monkeypatch, lines, returncode=0, conf=None):
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    from lakehouse.airflow.operators import LakehouseSparkSubmitOperator
    seen = {}

    def submit(hook, application="", **kw):
        seen["cmd"] = hook._build_spark_submit_command(application)
        hook._process_spark_submit_log(iter(lines))
        if returncode:
            from airflow.sdk.exceptions import AirflowException
            raise AirflowException(f"Cannot execute: spark-submit. Error code is: {returncode}.")

    monkeypatch.setattr(SparkSubmitHook, "submit", submit)
    monkeypatch.setattr(SparkSubmitHook, "_resolve_connection", lambda self: {
        "master": "local[2]", "spark_binary": "spark-submit", "deploy_mode": None, "queue": None,
        "spark_home": None, "namespace": None, "principal": None, "keytab": None})
    said = Said()
    # One log for the operator and its hook, in the order the lines come, as the task log has them.
    for cls in (LakehouseSparkSubmitOperator, SparkSubmitHook):
        monkeypatch.setattr(cls, "log", property(lambda self: said))
    op = LakehouseSparkSubmitOperator(task_id="commit", app="commit", table_path="/nonexistent/trips",
                                      instant="20261130101010101", conf=conf)
    ti = SimpleNamespace(dag_id="trips_ingest", run_id="manual__1", task_id="commit", try_number=1, map_index=-1)
    try:
        result = op.execute({"ti": ti})
    except Exception as e:  # noqa: BLE001 - the failure's log is what is checked
        result = e
    return result, said, seen["cmd"]


def test_the_log_leads_with_the_step_folds_spark_and_ends_with_the_report(monkeypatch):
    spark = [f"26/11/30 10:10:{n:02d} WARN Something: spark line {n}\n" for n in range(5)]
    result, said, cmd = _run(monkeypatch, spark + [json.dumps(REPORT) + "\n"])
    assert result == "20261130101010101"
    messages = [m for _, m in said]
    start, group, end = messages.index("lakehouse commit on trips (/nonexistent/trips)"), \
        messages.index("::group::spark-submit output"), messages.index("::endgroup::")
    assert start < group < end
    # Spark's own lines are inside the group (the hook logs each line it reads).
    assert all(start < messages.index(line.strip()) < end for line in spark)
    summary = messages[end + 1]
    assert summary.startswith("lakehouse commit on /data/trips: done in 2.3 s; instant 20261130101010101 (deltacommit)")
    assert "records 1,771" in summary and "files 4" in summary
    assert "spark.log.level=WARN" in " ".join(cmd)


def test_a_failed_step_ends_with_its_error_outside_the_fold(monkeypatch):
    failed = {**REPORT, "status": "failed", "reason": "the table is locked by another writer"}
    result, said, _ = _run(monkeypatch, ["error: ...\n", json.dumps(failed) + "\n"], returncode=1)
    assert isinstance(result, Exception)
    end = [m for _, m in said].index("::endgroup::")
    level, summary = said[end + 1]
    assert level == "error" and "FAILED" in summary and "Error: the table is locked by another writer" in summary


def test_spark_info_comes_back_when_the_table_asks(monkeypatch):
    _, _, cmd = _run(monkeypatch, [json.dumps(REPORT) + "\n"], conf={"spark.log.level": "INFO"})
    assert "spark.log.level=INFO" in " ".join(cmd) and "spark.log.level=WARN" not in " ".join(cmd)


class _Events(dict):
    """Airflow's outlet_events as far as _announce uses it: events[alias].add(asset, extra=...)."""

    def __missing__(self, key):
        added = self[key] = SimpleNamespace(added=[])
        added.add = lambda asset, extra=None: added.added.append((asset, extra))
        return added


def _announcer(monkeypatch, check):
    from lakehouse.airflow import operators
    monkeypatch.setitem(operators.DUE_CHECKS, "compaction", check)
    said = Said()
    monkeypatch.setattr(operators.LakehouseSparkSubmitOperator, "log", property(lambda self: said))
    monkeypatch.setattr(operators.LakehouseSparkSubmitOperator, "_table", lambda self: object())
    op = operators.LakehouseSparkSubmitOperator(task_id="commit", app="commit", table_path="/data/trips",
                                                due={"compaction": {"strategy": "NUM_COMMITS"}})
    return op, said


def test_a_due_check_that_fails_announces_the_service_as_due_and_says_why(monkeypatch):
    """The commit is done when _announce runs: a check that cannot decide neither fails the task
    nor leaves the compaction DAG untriggered."""
    from lakehouse.airflow.assets import due_alias, due_asset

    def broken(table, options):
        raise OSError("the timeline could not be listed")
    op, said = _announcer(monkeypatch, broken)
    events = _Events()
    op._announce({"outlet_events": events})
    assert events[due_alias("trips")].added == [
        (due_asset("trips", "compaction"), {"reason": "could not tell (OSError); its DAG decides"})]
    assert any(level == "warning" and "the timeline could not be listed" in m for level, m in said)


def test_a_due_check_that_is_not_met_announces_nothing(monkeypatch):
    from lakehouse.services.due import Due
    op, said = _announcer(monkeypatch, lambda table, options: Due(False, "1 of 3 delta commits"))
    events = _Events()
    op._announce({"outlet_events": events})
    assert not events and ("info", "compaction not due yet: 1 of 3 delta commits") in said


def test_no_outlet_events_is_a_warning_not_a_failure(monkeypatch):
    op, said = _announcer(monkeypatch, lambda table, options: pytest.fail("checked with nowhere to announce"))
    op._announce({})
    assert [level for level, _ in said] == ["warning"]


def test_a_report_the_summary_cannot_read_is_still_logged(monkeypatch):
    from lakehouse.airflow import operators

    def unreadable(report):
        raise KeyError("duration_s")
    monkeypatch.setattr(operators, "summary_line", unreadable)
    result, said, _ = _run(monkeypatch, [json.dumps(REPORT) + "\n"])
    assert result == "20261130101010101"
    end = [m for _, m in said].index("::endgroup::")
    assert said[end + 1][1].startswith("commit: report {") and "no summary" in said[end + 1][1]
