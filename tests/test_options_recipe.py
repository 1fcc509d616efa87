"""One recipe for options (lakehouse.config.merged_options): a table's stored settings under each
call's options, for every entry point. Keys in hoodie.properties that lakehouse does not read (a
newer Hudi writes such keys) are kept in the file and never fail a service; a call's own unknown
hoodie.* key is an error."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import lakehouse
from lakehouse import cli
from lakehouse.config import CleanConfig, merged_options
from lakehouse.errors import ConfigError
from lakehouse.properties import parse_properties
from lakehouse.services.archive import archive
from lakehouse.services.clean import clean
from lakehouse.services.compaction import schedule_compaction

FUTURE = {"hoodie.table.future.feature": "on", "hoodie.compaction.future.knob": "7"}


def _batch(ids, ts):
    return pa.table({"id": [f"k{i}" for i in ids], "city": ["sf" if i % 2 else "la" for i in ids],
                     "ts": [ts] * len(ids), "v": [i * ts for i in ids]})


def _with_future_keys(path) -> None:
    props = path / ".hoodie" / "hoodie.properties"
    props.write_text(props.read_text("latin-1") + "".join(f"{k}={v}\n" for k, v in FUTURE.items()),
                     "latin-1")


def test_the_recipe_keeps_known_stored_keys_under_the_calls_and_drops_unknown_stored_ones():
    stored = {"hoodie.cleaner.commits.retained": "3", "hoodie.table.future.feature": "on",
              "write.batch.size": "64", "lakehouse.bucket.index.num.buckets.auto": "true"}
    got = merged_options(stored, {"hoodie.cleaner.commits.retained": "1"}, "clean")
    assert got == {"hoodie.cleaner.commits.retained": "1", "write.batch.size": "64"}
    assert CleanConfig.from_options(got).commits_retained == 1
    with pytest.raises(ConfigError, match="unknown option.*hoodie.cleaner.commits.retaind"):
        merged_options(stored, {"hoodie.cleaner.commits.retaind": "1"}, "clean")
    with pytest.raises(ConfigError, match="not hoodie"):
        merged_options(stored, {"cleaner.commits.retained": "1"}, "clean")


def test_a_table_with_keys_lakehouse_does_not_know_is_served_by_every_entry_point(tmp_path):
    p = tmp_path / "t"
    t = lakehouse.create_table(str(p), name="t", record_key="id", partition_by="city", ordering_field="ts",
                               options={"hoodie.cleaner.commits.retained": 1, "hoodie.keep.min.commits": 2,
                                        "hoodie.keep.max.commits": 3})
    _with_future_keys(p)
    t = lakehouse.open_table(str(p))
    for ts in range(1, 5):
        t.upsert(_batch(range(10 * ts), ts))
    # The Table API, then the services' own functions.
    assert t.schedule_compaction(force=True).scheduled
    t.run_compaction()
    assert t.commit_compaction().committed
    t.upsert(_batch(range(5), 9))
    assert t.clean().files_deleted > 0
    t.archive()
    sp = t.create_savepoint()
    t.upsert(_batch(range(3), 10))
    t.restore(sp.instant)
    t.upsert(_batch(range(3), 11))
    t.rollback()
    assert schedule_compaction(t, force=True).scheduled
    t.run_compaction()
    t.commit_compaction()
    clean(t)
    archive(t)
    assert t.read(columns=["id"]).num_rows == 40
    # The CLI.
    runner = CliRunner()
    for args in (["compaction", "schedule", str(p), "--force"], ["compaction", "run", str(p)],
                 ["compaction", "commit", str(p)], ["clean", "plan", str(p)], ["clean", "run", str(p)],
                 ["archive", str(p)], ["stats", str(p), "--json"], ["timeline", str(p), "--json"]):
        res = runner.invoke(cli.main, args)
        assert res.exit_code == 0, (args, res.output)
    src = tmp_path / "in.parquet"
    pq.write_table(_batch(range(100, 110), 12), src)
    res = runner.invoke(cli.main, ["write", str(p), str(src)])
    assert res.exit_code == 0, res.output
    # The keys are still in the file, untouched.
    props = parse_properties((p / ".hoodie" / "hoodie.properties").read_text("latin-1"))
    assert {k: props[k] for k in FUTURE} == FUTURE
    assert json.loads(runner.invoke(cli.main, ["stats", str(p), "--json"]).output)["file_groups"] >= 2
    # The Airflow Lakehouse view reads it too (the Spark apps: tests/spark/test_spark_apps.py::
    # test_the_apps_serve_a_table_whose_properties_hold_keys_lakehouse_does_not_know).
    pytest.importorskip("airflow")
    from lakehouse.airflow.ui import overview
    view = overview.details("t", str(p), "MERGE_ON_READ")
    assert view["exists"] and view["timeline"] and view["groups"], view
