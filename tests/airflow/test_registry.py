"""The table registry: what users edit is validated, with errors that name the field."""

from __future__ import annotations

import os

import pytest

from lakehouse.errors import ConfigError
from tests.airflow.conftest import REPO

pytest.importorskip("jsonschema", reason="the registry is validated with jsonschema (pip install '.[airflow]')")
pytest.importorskip("yaml", reason="the registry is YAML (pip install '.[airflow]')")

from lakehouse.airflow import registry  # noqa: E402

GOOD = """
defaults: {spark_conn_id: my_spark, retries: 3}
tables:
  trips:
    path: data/trips
    options: {hoodie.bucket.index.num.buckets: 4, hoodie.parquet.small.file.limit: 0}
    source: {kind: demo, dir: landing}
  orders:
    path: s3://bucket/orders
    table_type: COPY_ON_WRITE
    index: BLOOM
    record_key: [order_id, line]
    partition_by: day
    ordering_field: updated_at
    source: {kind: files, dir: /in/orders, format: csv}
    schedule: {ingest: "0 * * * *", compaction: {cron: "0 3 * * *"}, clean: null}
    retries: 0
"""


def write(tmp_path, text: str):
    p = tmp_path / "tables.yaml"
    p.write_text(text)
    return str(p)


def test_the_shipped_registry_loads():
    reg = registry.load(str(REPO / "dags" / "tables.yaml"))
    assert [t.name for t in reg.tables] == ["trips", "trips_live"]
    t = reg.tables[0]
    live = reg.table("trips_live")  # what `make demo` streams into
    assert (t.source.mode, live.source.mode, live.source.kind, live.is_mor) == ("batch", "stream", "demo", True)
    assert live.source.checkpoint is None and live.schedule.compaction_after_commits == 3
    assert t.path == os.path.normpath(REPO / "var" / "tables" / "trips")
    assert t.schedule.compaction_after_commits == 3
    assert reg.catalog == registry.Catalog(f"sqlite:///{os.path.normpath(REPO / 'var' / 'catalog.db')}",
                                           "lakehouse", "lakehouse")
    assert t.options["hoodie.meta.sync.iceberg.catalog.namespace"] == "lakehouse"


def test_the_catalog_section_registers_every_table_unless_an_entry_names_its_own(tmp_path):
    text = GOOD.replace("tables:\n", "catalog: {uri: sqlite:///cat/catalog.db, namespace: sales}\ntables:\n", 1)
    text = text.replace("index: BLOOM\n", "index: BLOOM\n    options: {hoodie.meta.sync.iceberg.catalog.uri: 'env:ORDERS_CATALOG'}\n")
    reg = registry.load(write(tmp_path, text))
    # A relative SQLite path is relative to the registry file (Airflow's components and the
    # Spark driver run in different working directories).
    assert reg.catalog.uri == f"sqlite:///{tmp_path / 'cat' / 'catalog.db'}"
    trips, orders = reg.table("trips"), reg.table("orders")
    assert trips.options["hoodie.meta.sync.iceberg.catalog.uri"] == reg.catalog.uri
    assert trips.options["hoodie.meta.sync.iceberg.catalog.namespace"] == "sales"
    assert orders.options["hoodie.meta.sync.iceberg.catalog.uri"] == "env:ORDERS_CATALOG"
    with pytest.raises(ConfigError, match="catalog"):
        registry.load(write(tmp_path, GOOD.replace("tables:\n", "catalog: {namespace: x}\ntables:\n", 1)))


def test_entries_are_typed_with_defaults_and_paths_resolved(tmp_path):
    reg = registry.load(write(tmp_path, GOOD))
    trips, orders = reg.table("trips"), reg.table("orders")
    assert trips.path == str(tmp_path / "data" / "trips") and trips.source.dir == str(tmp_path / "landing")
    assert trips.source.mode == "batch"
    streamed = registry.load(write(tmp_path, GOOD.replace("source: {kind: demo, dir: landing}",
                                                          "source: {kind: demo, dir: landing, mode: stream, "
                                                          "checkpoint: ck/trips}"))).table("trips")
    assert (streamed.source.mode, streamed.source.checkpoint) == ("stream", str(tmp_path / "ck" / "trips"))
    assert trips.options == {"hoodie.bucket.index.num.buckets": "4", "hoodie.parquet.small.file.limit": "0"}
    assert (trips.spark_conn_id, trips.retries, trips.table_type, trips.index) == ("my_spark", 3, "MERGE_ON_READ", "BUCKET")
    assert trips.schedule.compaction_after_commits == registry.DEFAULT_AFTER_COMMITS
    assert trips.schedule.clean == "@daily" and trips.schedule.ingest is None
    assert orders.path == "s3://bucket/orders" and orders.retries == 0
    assert orders.record_key == ("order_id", "line") and orders.partition_by == ("day",)
    # Copy-on-write: nothing to compact, whatever the schedule says.
    assert orders.schedule.compaction_after_commits is None and orders.schedule.compaction_cron is None
    assert orders.schedule.clean is None
    with pytest.raises(ConfigError, match="no table 'nope'"):
        reg.table("nope")


@pytest.mark.parametrize("text,where", [
    ("tables: {trips: {path: x, sourse: {kind: demo, dir: d}}}", "tables/trips"),
    ("tables: {trips: {path: x, source: {kind: kafka, dir: d}}}", "tables/trips/source/kind"),
    ("tables: {trips: {path: x, source: {kind: demo, dir: d}, options: {parquet.size: 1}}}", "tables/trips/options"),
    ("tables: {9trips: {path: x, source: {kind: demo, dir: d}}}", "tables"),
    ("tables: {trips: {path: x, source: {kind: demo, dir: d}, schedule: {compaction: {after_commits: 0}}}}",
     "tables/trips/schedule/compaction"),
    ("tables: {trips: {path: x, source: {kind: demo, dir: d}, retries: -1}}", "tables/trips/retries"),
    ("tables: {trips: {path: x, source: {kind: demo, dir: d, mode: streaming}}}", "tables/trips/source/mode"),
    ("tables: {trips: {path: x, source: {kind: demo, dir: d}, schedule: {compaction: {}}}}",
     "tables/trips/schedule/compaction"),
    ("tables: {}", "tables"),
    ("defaults: {retries: 1}", "(top level)"),
])
def test_invalid_registries_name_the_field(tmp_path, text, where):
    with pytest.raises(ConfigError) as e:
        registry.load(write(tmp_path, text))
    assert "not a valid table registry" in e.value.message and where in e.value.message
    assert e.value.help


@pytest.mark.parametrize("text,says", [
    # a key misspelt inside a value of several shapes (here: null, {after_commits}, {cron}) was
    # "{'after_comits': 3} is not valid under any of the given schemas"
    ("tables: {trips: {path: x, source: {kind: demo, dir: d}, schedule: {compaction: {after_comits: 3}}}}",
     "tables/trips/schedule/compaction: unknown key 'after_comits', did you mean 'after_commits'?"),
    ("tables: {trips: {path: x, sourse: {kind: demo, dir: d}}}",
     "tables/trips: unknown key 'sourse', did you mean 'source'?"),
    ("defaults: {retrys: 2}\ntables: {t: {path: x, source: {kind: demo, dir: d}}}",
     "defaults: unknown key 'retrys', did you mean 'retries'?"),
    ("tables: {trips: {path: x, source: {kind: demo, dir: d, xyzzy: 1}}}",
     "tables/trips/source: unknown key 'xyzzy', expected one of: checkpoint, demo_batches, demo_rows, dir, "
     "format, kind, max_files, mode, operation"),
    ("tables: {trips: {path: x, source: {kind: demo, dir: d}, schedule: {compaction: {after_commits: 3, crn: '@hourly'}}}}",
     "tables/trips/schedule/compaction: unknown key 'crn', did you mean 'cron'?"),
    # a value of the right shape but out of range: the field itself, not "is not of type 'null'"
    ("tables: {trips: {path: x, source: {kind: demo, dir: d}, schedule: {compaction: {after_commits: 0}}}}",
     "tables/trips/schedule/compaction/after_commits: 0 is less than the minimum of 1"),
])
def test_a_registry_error_names_the_unknown_key_and_the_nearest_valid_one(tmp_path, text, says):
    with pytest.raises(ConfigError) as e:
        registry.load(write(tmp_path, text))
    assert says in e.value.message, e.value.message
    assert "is not valid under any of the given schemas" not in e.value.message


def test_a_service_may_follow_its_commits_and_a_cron_together(tmp_path):
    reg = registry.load(write(tmp_path, "tables: {trips: {path: x, source: {kind: demo, dir: d}, schedule: "
                                        "{compaction: {after_commits: 3, cron: '@hourly'}, "
                                        "clustering: {after_commits: 7, cron: '0 3 * * *'}}}}"))
    s = reg.tables[0].schedule
    assert (s.compaction_after_commits, s.compaction_cron) == (3, "@hourly")
    assert (s.clustering_after_commits, s.clustering_cron) == (7, "0 3 * * *")


def test_a_files_source_needs_its_record_key(tmp_path):
    with pytest.raises(ConfigError, match="names no record_key"):
        registry.load(write(tmp_path, "tables: {t: {path: x, source: {kind: files, dir: d}}}"))


def test_missing_and_malformed_files(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match="does not exist"):
        registry.load(str(tmp_path / "absent.yaml"))
    with pytest.raises(ConfigError, match="not valid YAML"):
        registry.load(write(tmp_path, "tables: [unclosed"))
    monkeypatch.delenv(registry.ENV_VAR, raising=False)
    with pytest.raises(ConfigError, match="no table registry"):
        registry.load()


def test_table_type_and_index_given_as_hoodie_options_are_the_entrys(tmp_path):
    """Found by review: the registry's defaults (MERGE_ON_READ, BUCKET) were passed explicitly
    next to hoodie.table.type / hoodie.index.type options, which create_table refuses as a
    contradiction. Options-only entries (Hudi style) take their values from the options."""
    reg = registry.load(write(tmp_path, """
tables:
  t:
    path: t
    options: {hoodie.table.type: copy_on_write, hoodie.index.type: SIMPLE}
    source: {kind: demo, dir: landing}
"""))
    t = reg.table("t")
    assert (t.table_type, t.index) == ("COPY_ON_WRITE", "SIMPLE")
    assert t.schedule.compaction_after_commits is None  # a copy-on-write table has nothing to compact


def test_a_table_without_the_bucket_index_gets_a_clustering_dag(tmp_path):
    """clustering-plan → clustering-execute → commit, exchanging the plan's instant through the
    timeline like compaction's; Asset-driven with after_commits (Hudi's
    hoodie.clustering.async.max.commits), manual by default; after 5 commits by default for a
    consistent-hashing table (the Merge-On-Read default: its buckets split as it grows); none for
    a SIMPLE-engine bucket table."""
    pytest.importorskip("airflow", reason="the DAGs are built with Airflow")
    from lakehouse.airflow.assets import due_asset
    from lakehouse.airflow.dags import due, table_dags

    text = GOOD.replace('schedule: {ingest: "0 * * * *", compaction: {cron: "0 3 * * *"}, clean: null}',
                        'schedule: {ingest: "0 * * * *", clustering: {after_commits: 3}, clean: null}\n'
                        '    clustering_options: {hoodie.clustering.plan.strategy.sort.columns: updated_at}')
    reg = registry.load(write(tmp_path, text))
    orders, trips = reg.table("orders"), reg.table("trips")
    assert orders.services == ("ingest", "clustering", "clean", "health")
    assert trips.resizes_buckets and "clustering" in trips.services
    resize = table_dags(trips)["trips_clustering"]
    assert "hoodie.clustering.async.max.commits=5" in resize.get_task("clustering_plan").app_args
    assert due_asset("trips", "clustering").name in repr(resize.timetable.asset_condition)
    # The ingest commit announces the clustering as due with the plan's own trigger options.
    ingest_commit = table_dags(trips)["trips_ingest"].get_task("commit")
    assert ingest_commit.due == due(trips) and due(trips)["clustering"]["hoodie.clustering.async.max.commits"] == "5"
    assert "bucket resize" in resize.doc_md
    fixed = registry.load(write(tmp_path, GOOD.replace("hoodie.bucket.index.num.buckets: 4,",
                                                       "hoodie.bucket.index.num.buckets: 4, hoodie.index.bucket.engine: SIMPLE,")
                                )).table("trips")
    assert "clustering" not in fixed.services and "clustering" not in {k.split("_", 1)[1] for k in table_dags(fixed)}
    manual = registry.load(write(tmp_path, GOOD.replace("source: {kind: demo, dir: landing}",
                                                        "source: {kind: demo, dir: landing}\n    schedule: {clustering: null}")
                                 )).table("trips")
    assert type(table_dags(manual)["trips_clustering"].timetable).__name__ == "NullTimetable"
    dag = table_dags(orders)["orders_clustering"]
    assert [t.task_id for t in dag.topological_sort()] == ["clustering_plan", "clustering_execute", "commit"]
    plan = dag.get_task("clustering_plan")
    assert plan.app == "clustering-plan"
    assert "hoodie.clustering.async.max.commits=3" in plan.app_args
    assert "hoodie.clustering.plan.strategy.sort.columns=updated_at" in plan.app_args
    assert dag.get_task("clustering_execute").instant == "{{ ti.xcom_pull(task_ids='clustering_plan') }}"
    assert due_asset("orders", "clustering").name in repr(dag.timetable.asset_condition)
    manual = registry.load(write(tmp_path, GOOD)).table("orders")
    assert type(table_dags(manual)["orders_clustering"].timetable).__name__ == "NullTimetable"
