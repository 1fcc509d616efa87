"""The generated DAGs, run for real: dag.test() on a SQLite metadata database, every task a
spark-submit on local[2], against temporary tables; compared with the Python API and hudi-rs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import lakehouse
from lakehouse.sources import demo
from lakehouse.sources.files import ingest
from lakehouse.timeline.instant import Action
from lakehouse.timeline.tags import instant_extra
from tests.airflow.conftest import REPO
from tests.interop.hudi_oracle import canonical, hudi_read

pytestmark = [pytest.mark.airflow, pytest.mark.spark]
COLS = ["trip_id", "city", "event_ts", "fare", "_hoodie_record_key", "_hoodie_partition_path"]


def _registry(tmp_path: Path, retries: int, tables: str) -> Path:
    reg = tmp_path / "tables.yaml"
    reg.write_text(f"defaults: {{retries: {retries}, retry_delay_s: 0}}\ntables:\n{tables}")
    return reg


def write_registry(tmp_path: Path, *, retries: int = 0, clean_retained: int = 1) -> Path:
    return _registry(tmp_path, retries, f"""
  trips:
    path: tables/trips
    options: {{hoodie.bucket.index.num.buckets: 2}}
    source: {{kind: demo, dir: landing/trips, demo_rows: 300}}
    schedule: {{ingest: "*/10 * * * *", compaction: {{after_commits: 2}}, clean: "@daily"}}
    clean_options: {{hoodie.cleaner.commits.retained: {clean_retained}}}
""")


@pytest.fixture
def dagbag_for(airflow_db, spark_submit_ready, monkeypatch):
    from airflow.dag_processing.dagbag import DagBag

    def load(registry: Path):
        monkeypatch.setenv("LAKEHOUSE_REGISTRY", str(registry))
        bag = DagBag(dag_folder=str(REPO / "dags"))
        assert bag.import_errors == {}
        return bag
    return load


def _tags(table, inst) -> dict:
    return instant_extra(table.active, inst, table.timeline)


def _data_files(path: Path) -> set[str]:
    return {os.path.relpath(os.path.join(d, f), path) for d, _, fs in os.walk(path)
            if ".hoodie" not in os.path.relpath(d, path).split(os.sep) for f in fs
            if not f.startswith(".hoodie_partition_metadata")}


def _committed_files(table) -> set[str]:
    out = set()
    for inst in table.timeline.completed_writes():
        out |= {s.path for s in table.active.commit_metadata(inst).write_stats()}
    return out


def reference_table(path: Path):
    """The registry's table, made with the Python API."""
    return lakehouse.create_table(str(path), name="trips", table_type="MERGE_ON_READ", index="BUCKET",
                                  schema=demo.SCHEMA, options={"hoodie.bucket.index.num.buckets": 2},
                                  **demo.TABLE_OPTIONS)


def _asset_events(name: str) -> list:
    from airflow.models.asset import AssetEvent
    from airflow.utils.session import create_session
    with create_session() as session:
        events = [e for e in session.query(AssetEvent).all() if e.asset.name == name]
        for e in events:
            session.expunge(e)
    return events


def _run(dag):
    run = dag.test()
    return run, {ti.task_id: ti for ti in run.get_task_instances()}


def test_dag_folder_imports_and_declares_the_services(tmp_path, dagbag_for):
    bag = dagbag_for(write_registry(tmp_path))
    assert set(bag.dags) == {"trips_ingest", "trips_compaction", "trips_clustering", "trips_clean", "trips_health"}
    health = bag.dags["trips_health"]
    assert [t.task_id for t in health.topological_sort()] == ["health"]
    assert [a.name for a in health.get_task("health").outlets] == ["lakehouse_trips_alerts"]
    ingest_dag, comp, clean = bag.dags["trips_ingest"], bag.dags["trips_compaction"], bag.dags["trips_clean"]
    assert [t.task_id for t in ingest_dag.topological_sort()] == ["ingest", "commit"]
    assert [t.task_id for t in comp.topological_sort()] == ["compaction_plan", "compaction_execute", "commit"]
    assert [t.task_id for t in clean.topological_sort()] == ["clean"]
    for d in bag.dags.values():
        assert d.max_active_runs == 1 and not d.catchup
    # Every ingest commit updates the table's commits Asset; compaction follows its own "due"
    # Asset, which the commit announces through the alias once the trigger is met.
    outlets = ingest_dag.get_task("commit").outlets
    assert [a.name for a in outlets] == ["lakehouse_trips_commits", "lakehouse_trips_due"]
    assert ingest_dag.get_task("commit").due == {"compaction": {"hoodie.compact.inline.max.delta.commits": "2"},
                                                 "clustering": {"hoodie.clustering.async.max.commits": "5"}}
    assert "lakehouse_trips_compaction_due" in repr(comp.timetable.asset_condition)
    assert "lakehouse_trips_commits" not in repr(comp.timetable.asset_condition)
    # The plan step asks for Hudi's trigger with K = after_commits.
    plan = comp.get_task("compaction_plan")
    assert "hoodie.compact.inline.max.delta.commits=2" in plan.app_args


def test_a_service_on_its_commits_and_a_cron_runs_on_whichever_comes_first(tmp_path, dagbag_for):
    """``{after_commits: K, cron: ...}``: the due Asset or the cron (Airflow's AssetOrTimeSchedule);
    the cron catches a time-based trigger on a table whose writes stopped. A cron alone: the
    commit announces nothing for that service."""
    bag = dagbag_for(_registry(tmp_path, 0, """
  trips:
    path: tables/trips
    source: {kind: demo, dir: landing/trips}
    schedule: {ingest: null, compaction: {after_commits: 3, cron: "@hourly"}, clustering: {cron: "0 3 * * *"}}
"""))
    comp = bag.dags["trips_compaction"].timetable
    assert type(comp).__name__ == "AssetOrTimeSchedule"
    assert "lakehouse_trips_compaction_due" in repr(comp.asset_condition)
    assert comp.timetable.expression == "0 * * * *"
    # As the DAG processor stores it for the scheduler.
    from airflow.serialization.serialized_objects import DagSerialization
    stored = DagSerialization.from_dict(DagSerialization.to_dict(bag.dags["trips_compaction"])).timetable
    assert stored.summary == "Asset or 0 * * * *" and stored.can_be_scheduled
    assert bag.dags["trips_clustering"].timetable.expression == "0 3 * * *"
    assert bag.dags["trips_ingest"].get_task("commit").due == {
        "compaction": {"hoodie.compact.inline.max.delta.commits": "3"}}


def test_a_hold_file_leaves_every_dag_to_be_triggered_until_it_goes(tmp_path, dagbag_for, monkeypatch):
    """The embedded platform's first cycle: while $LAKEHOUSE_HOLD_SCHEDULES names a file that
    exists, the DAG file declares no schedules (no scheduled or Asset-triggered run queues ahead
    of the cycle's manual runs); once it is gone, the registry's."""
    hold = tmp_path / "held"
    hold.write_text("")
    monkeypatch.setenv("LAKEHOUSE_HOLD_SCHEDULES", str(hold))
    held = dagbag_for(write_registry(tmp_path))
    assert all(not d.timetable.can_be_scheduled for d in held.dags.values()), \
        {k: type(d.timetable).__name__ for k, d in held.dags.items()}
    hold.unlink()
    free = dagbag_for(write_registry(tmp_path))
    assert free.dags["trips_ingest"].timetable.expression == "*/10 * * * *"
    assert "lakehouse_trips_compaction_due" in repr(free.dags["trips_compaction"].timetable.asset_condition)


def test_ingest_compaction_and_clean_dags_end_to_end(tmp_path, dagbag_for):
    bag = dagbag_for(write_registry(tmp_path))
    path = tmp_path / "tables" / "trips"
    due_events, before = [], len(_asset_events("lakehouse_trips_compaction_due"))  # the session's DB is shared
    for _ in range(2):
        run, tis = _run(bag.dags["trips_ingest"])
        assert run.state == "success" and tis["commit"].state == "success"
        due_events.append(len(_asset_events("lakehouse_trips_compaction_due")) - before)
    # The compaction DAG is scheduled on the compaction-due Asset, which the ingest commit
    # announces only once its trigger is met (2 delta commits): not after the first ingest.
    assert due_events == [0, 1], due_events
    assert "lakehouse_trips_compaction_due" in repr(bag.dags["trips_compaction"].timetable.asset_condition)
    assert _asset_events("lakehouse_trips_compaction_due")[-1].extra["reason"] == "2 of 2 delta commits"
    table = lakehouse.open_table(str(path))
    deltas = table.timeline.completed().filter(actions=[Action.DELTA_COMMIT]).instants
    assert len(deltas) == 2 and not table.timeline.pending().instants
    for d in deltas:  # made by the ingest task, committed by the commit task, each found by its tags
        tags = _tags(table, d)
        assert (tags["airflow.dag_id"], tags["airflow.task_id"], tags["airflow.commit.task_id"]) == \
            ("trips_ingest", "ingest", "commit")

    run, tis = _run(bag.dags["trips_compaction"])
    assert run.state == "success"
    planned = str(tis["compaction_plan"].xcom_pull(task_ids="compaction_plan"))
    table = lakehouse.open_table(str(path))
    assert table.timeline.is_compaction(planned) and table.timeline.is_completed(planned)
    assert _tags(table, table.timeline.get(planned))["airflow.task_id"] == "compaction_plan"
    assert table.stats().log_files == 0 or all(
        s.base_instant == planned for s in table.file_system_view().latest_slices() if s.log_files)
    # Right after it, the trigger is not met: the plan step is skipped (and the steps after it),
    # the application's reason kept in an XCom for the Lakehouse view.
    run, tis = _run(bag.dags["trips_compaction"])
    assert run.state == "success" and tis["compaction_plan"].state == "skipped"
    from lakehouse.airflow.operators import REPORT_KEY
    report = tis["compaction_plan"].xcom_pull(task_ids="compaction_plan", key=REPORT_KEY)
    assert report["status"] == "nothing_to_do" and "delta commits" in report["reason"], report

    # A third ingest, then clean: the slices the compaction replaced go (1 commit retained).
    _run(bag.dags["trips_ingest"])
    run, tis = _run(bag.dags["trips_clean"])
    assert run.state == "success" and tis["clean"].state == "success"
    table = lakehouse.open_table(str(path))
    cleans = table.timeline.completed().filter(actions=[Action.CLEAN]).instants
    assert len(cleans) == 1 and _tags(table, cleans[0])["airflow.dag_id"] == "trips_clean"
    live = {f for s in table.file_system_view().latest_slices()
            for f in ([s.base_file.path] if s.base_file else []) + [lf.path for lf in s.log_files]}
    assert live and live <= _data_files(path)
    # Only what the cleaner's retention keeps is left: fewer files than were ever committed.
    assert len(_data_files(path)) < len(_committed_files(table) | live)

    # The same landed batches through the Python API give the same rows; hudi-rs agrees.
    ref = reference_table(tmp_path / "ref")
    for inst in table.timeline.completed().filter(actions=[Action.DELTA_COMMIT]).instants:
        n = len(json.loads(_tags(table, inst)["lakehouse.ingest.files"]))
        ingest(ref, str(tmp_path / "landing" / "trips"), max_files=n)
    got = canonical(table.read(), COLS)
    assert got == canonical(ref.read(), COLS)
    assert canonical(hudi_read(path), COLS) == got


def test_the_health_dag_sends_metrics_and_an_asset_event_with_the_alerts(tmp_path, dagbag_for, monkeypatch):
    """<table>_health: skipped while the table is healthy; with a compaction backlog past twice
    the trigger it succeeds, its Asset event carries the alerts, and Airflow's StatsD client
    sends the gauges (to a UDP socket of the test, as to a StatsD server)."""
    import socket

    from airflow.sdk._shared.observability.metrics import stats
    from airflow.sdk._shared.observability.metrics.base_stats_logger import NoStatsLogger
    from airflow.sdk.observability.metrics.stats_utils import get_stats_factory

    bag = dagbag_for(write_registry(tmp_path))
    run, tis = _run(bag.dags["trips_health"])
    assert tis["health"].state == "skipped"  # not created yet: nothing to check, and it says so
    from lakehouse.airflow.operators import REPORT_KEY
    assert "first ingest" in tis["health"].xcom_pull(task_ids="health", key=REPORT_KEY)["reason"]
    table = reference_table(tmp_path / "tables" / "trips")
    stream = demo.DemoStream(seed=3, rows=50)
    for n in range(5):  # base files, then four delta commits in logs: twice after_commits (2)
        table.upsert(stream.batch(n))
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    udp.settimeout(5)
    for k, v in {"STATSD_ON": "True", "STATSD_HOST": "127.0.0.1", "STATSD_PORT": str(udp.getsockname()[1]),
                 "STATSD_PREFIX": "airflow"}.items():
        monkeypatch.setenv(f"AIRFLOW__METRICS__{k}", v)
    stats.initialize(factory=get_stats_factory(), export_legacy_names=True)  # as the task runner does
    try:
        run, tis = _run(bag.dags["trips_health"])
        got = {}
        while "airflow.lakehouse.trips.alerts" not in got or "airflow.lakehouse.trips.log_files" not in got:
            for line in udp.recv(65536).decode().splitlines():
                name, _, value = line.partition(":")
                got[name] = float(value.split("|")[0])
    finally:
        stats.initialize(factory=NoStatsLogger, export_legacy_names=True)
        udp.close()
    assert run.state == "success" and tis["health"].state == "success"
    found = {a["kind"]: a for a in tis["health"].xcom_pull(task_ids="health")}
    # Four delta commits wait. Five commits and no clean with hoodie.cleaner.commits.retained=1,
    # but before a compaction a Merge-On-Read table has nothing a clean could delete: not overdue.
    assert set(found) == {"compaction_backlog"} and found["compaction_backlog"]["value"] == 4
    assert got["airflow.lakehouse.trips.alerts"] == 1 and got["airflow.lakehouse.trips.compaction_backlog_commits"] == 4
    from airflow.models.asset import AssetEvent
    from airflow.utils.session import create_session
    with create_session() as session:
        events = [e for e in session.query(AssetEvent).all() if e.asset.name == "lakehouse_trips_alerts"]
    assert len(events) == 1 and {a["kind"] for a in events[0].extra["alerts"]} == set(found)


def test_retried_tasks_do_not_duplicate_data(tmp_path, dagbag_for, monkeypatch):
    """The ingest task dies after writing its data files, the commit task just before completing:
    both are retried by Airflow; every landed batch is applied once, no orphan file is left."""
    bag = dagbag_for(write_registry(tmp_path, retries=1))
    monkeypatch.setenv("LAKEHOUSE_FAULTS", f"write.after_data_files:kill@{tmp_path}/once-1,"
                                           f"commit.before_complete:kill@{tmp_path}/once-2")
    run, tis = _run(bag.dags["trips_ingest"])
    assert run.state == "success"
    assert tis["ingest"].try_number == 2 and tis["commit"].try_number == 2
    path = tmp_path / "tables" / "trips"
    table = lakehouse.open_table(str(path))
    done = table.timeline.completed()
    assert [i.action for i in done.instants] == [Action.ROLLBACK, Action.DELTA_COMMIT]
    tags = _tags(table, done.instants[-1])
    assert tags["airflow.try_number"] == "2" and tags["airflow.commit.try_number"] == "2"
    # Each try landed one demo batch; the second try applied both, once.
    landed = sorted(os.listdir(tmp_path / "landing" / "trips"))
    assert len(landed) == 2
    ref = reference_table(tmp_path / "ref")
    ingest(ref, str(tmp_path / "landing" / "trips"))
    assert canonical(table.read(), COLS) == canonical(ref.read(), COLS)
    keys = table.read(columns=["trip_id"]).column("trip_id").to_pylist()
    assert len(keys) == len(set(keys))
    # The killed try's files were rolled back: every data file on disk is a committed one.
    assert _data_files(path) == _committed_files(table)


def write_stream_registry(tmp_path: Path, *, retries: int = 0) -> Path:
    return _registry(tmp_path, retries, """
  live:
    path: tables/live
    options: {hoodie.bucket.index.num.buckets: 2}
    source: {kind: demo, mode: stream, dir: landing/live, demo_rows: 300, max_files: 1}
    schedule: {ingest: null, compaction: {after_commits: 2}, clean: null}
""")


def test_a_stream_source_is_ingested_by_a_streaming_query_retried_without_duplicates(
        tmp_path, dagbag_for, monkeypatch):
    """mode: stream: the ingest DAG is one task, the stream application (a Structured Streaming
    query into format("lakehouse"), availableNow), updating the Asset that schedules compaction.
    The Python worker committing its first micro-batch dies right after the commit: Airflow
    retries the task, the query replays that batch, the sink skips it (its batch id is in the
    table) and goes on; every landed file is applied once."""
    from lakehouse.spark.apps.stream import checkpoint_location, source_files
    from lakehouse.spark.datasource import DEFAULT_IDENTIFIER, sink_commits

    bag = dagbag_for(write_stream_registry(tmp_path, retries=1))
    dag = bag.dags["live_ingest"]
    assert [t.task_id for t in dag.topological_sort()] == ["ingest"]
    task = dag.get_task("ingest")
    assert task.app == "stream" and [a.name for a in task.outlets] == ["lakehouse_live_commits", "lakehouse_live_due"]
    assert "lakehouse_live_compaction_due" in repr(bag.dags["live_compaction"].timetable.asset_condition)

    monkeypatch.setenv("LAKEHOUSE_FAULTS", f"commit.after_complete:kill@{tmp_path}/once")
    run, tis = _run(dag)
    assert run.state == "success" and tis["ingest"].try_number == 2
    path = tmp_path / "tables" / "live"
    table = lakehouse.open_table(str(path))
    # Each try landed one demo batch: two micro-batches, batch 0 committed once.
    assert [b for _, b in sink_commits(table)] == [0, 1]
    tags = [_tags(table, table.timeline.get(t)) for t, _ in sink_commits(table)]
    assert [(t["airflow.dag_id"], t["airflow.try_number"]) for t in tags] == [("live_ingest", "1"),
                                                                             ("live_ingest", "2")]
    assert str(tis["ingest"].xcom_pull(task_ids="ingest")) == sink_commits(table)[-1][0]
    monkeypatch.delenv("LAKEHOUSE_FAULTS")

    run, tis = _run(bag.dags["live_compaction"])
    assert run.state == "success"
    _run(dag)
    table = lakehouse.open_table(str(path))
    assert [b for _, b in sink_commits(table)] == [0, 1, 2]
    assert sum(1 for i in table.timeline.completed_writes() if table.timeline.is_compaction(i.time)) == 1

    # The same files, in the same micro-batches, through the Python API; hudi-rs agrees.
    files = source_files(checkpoint_location(str(path), None, DEFAULT_IDENTIFIER))
    assert sorted(len(f) for f in files.values()) == [1, 1, 1]
    ref = reference_table(tmp_path / "ref")
    for inst in table.timeline.completed_writes():
        if table.timeline.is_compaction(inst.time):
            ref.compact(force=True)
        else:
            ingest(ref, str(tmp_path / "landing" / "live"), max_files=1)
    got = canonical(table.read(), COLS)
    assert got == canonical(ref.read(), COLS)
    assert canonical(hudi_read(path), COLS) == got
