"""The spark-submit applications on local[2], and the app contract (JSON line, exit codes)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import lakehouse
from lakehouse import faults
from lakehouse.spark import submit
from lakehouse.timeline.instant import Action, State
from lakehouse.iceberg import background
from tests.spark.spark_tables import assert_same_tables, late_batch, rows, write_history

pytestmark = pytest.mark.spark


def _last_json(out: str) -> dict:
    return json.loads(out.strip().splitlines()[-1])


def test_plan_execute_commit_each_a_spark_submit_equal_the_python_api(tmp_path, spark_submit):
    ours = write_history(tmp_path / "spark")
    reference = write_history(tmp_path / "python")

    r = spark_submit("compaction-plan", ours.path, "--force")
    assert r.returncode == 0 and r.doc["status"] == "ok", r.explain()
    t = r.doc["instant"]
    assert r.doc["app"] == "compaction-plan" and r.doc["action"] == "compaction" and r.doc["operations"] > 2
    assert ours.timeline.get(t).state is State.REQUESTED

    r = spark_submit("compaction-execute", ours.path, "--instant", t, "--parallelism", "8")
    assert r.returncode == 0 and r.doc["status"] == "ok", r.explain()
    ops = r.doc["operations"]
    assert r.doc["instant"] == t and r.doc["failed"] == 0 and r.doc["rows"] > 0 and r.doc["bytes"] > 0
    assert r.doc["spark"]["master"] == "local[2]" and r.doc["spark"]["tasks"] == min(ops, 8)
    assert ours.timeline.get(t).state is State.INFLIGHT

    # Phase 1 of a write while the compaction is inflight: its logs go to the new file slices;
    # commit completes both, oldest first.
    w = ours.upsert(late_batch(), commit=False)
    r = spark_submit("commit", ours.path)
    assert r.returncode == 0 and r.doc["status"] == "ok", r.explain()
    assert [(c["instant"], c["action"]) for c in r.doc["committed"]] == [(t, "compaction"), (w, "deltacommit")]
    assert r.doc["instant"] == w and r.doc["skipped"] == [] and r.doc["failed"] == []
    timeline = ours.timeline
    assert timeline.is_compaction(t) and timeline.get(t).is_completed and timeline.get(w).is_completed
    assert ours.active.commit_metadata(timeline.get(t)).operation_type == "COMPACT"

    ref = reference.compact(force=True)
    assert ref.committed and r.doc["committed"][0]["files"] == ref.operations == ops
    assert r.doc["committed"][0]["rows"] == ref.rows
    reference.upsert(late_batch())
    assert_same_tables(ours.path, reference.path)


def test_clustering_plan_execute_commit_as_apps_equal_the_python_api(tmp_path, capsys):
    ours = write_history(tmp_path / "spark", index="SIMPLE")
    reference = write_history(tmp_path / "python", index="SIMPLE")
    sort = "hoodie.clustering.plan.strategy.sort.columns=v"
    assert submit.main(["clustering-plan", ours.path, "--force", "--option", sort]) == 0
    doc = _last_json(capsys.readouterr()[0])
    assert doc["status"] == "ok" and doc["app"] == "clustering-plan" and doc["groups"] > 0, doc
    t = doc["instant"]
    assert ours.timeline.is_clustering(t) and ours.timeline.get(t).state is State.REQUESTED
    assert submit.main(["clustering-execute", ours.path, "--instant", t]) == 0
    doc = _last_json(capsys.readouterr()[0])
    assert doc["status"] == "ok" and doc["failed"] == 0 and doc["files"] > 0, doc
    assert ours.timeline.get(t).state is State.INFLIGHT
    assert submit.main(["commit", ours.path]) == 0
    doc = _last_json(capsys.readouterr()[0])
    assert [(c["instant"], c["action"]) for c in doc["committed"]] == [(t, "clustering")], doc
    ref = reference.cluster(force=True, options={sort.split("=")[0]: "v"})
    assert ref.committed and doc["committed"][0]["files"] == ref.files_written
    background.wait_all()
    assert rows(lakehouse.open_table(ours.path).read()) == rows(reference.read())
    from tests.interop.hudi_oracle import hudi_read
    assert rows(hudi_read(ours.path)) == rows(reference.read())
    # A SIMPLE-engine bucket table is refused, saying why; a consistent-hashing one (the
    # default) is resized, here with nothing to resize.
    bucket = write_history(tmp_path / "bucket", options={"hoodie.index.bucket.engine": "SIMPLE"})
    assert submit.main(["clustering-plan", bucket.path, "--force"]) == 1
    assert "SIMPLE engine" in _last_json(capsys.readouterr()[0])["reason"]
    rings = write_history(tmp_path / "rings")
    assert submit.main(["clustering-plan", rings.path, "--force"]) == 0
    assert "no bucket to resize" in _last_json(capsys.readouterr()[0])["reason"]


def test_clean_via_spark_submit_deletes_what_the_dry_run_planned(tmp_path, spark_submit):
    table = write_history(tmp_path / "cow", table_type="COPY_ON_WRITE")
    before = rows(table.read())
    files_before = {f.path for f in table.storage.list("", recursive=True)
                    if f.name.endswith(".parquet")}
    plan = table.clean(options={"hoodie.cleaner.commits.retained": "1"}, dry_run=True)
    assert plan.planned and plan.files and set(plan.files) < files_before

    r = spark_submit("clean", table.path, "--option", "hoodie.cleaner.commits.retained=1")
    assert r.returncode == 0 and r.doc["status"] == "ok", r.explain()
    assert r.doc["files_deleted"] == len(plan.files) and r.doc["bytes_freed"] == plan.bytes
    assert r.doc["earliest_retained"] == plan.plan.earliest_instant_to_retain.timestamp
    assert r.doc["spark"]["master"] == "local[2]"
    files_after = {f.path for f in table.storage.list("", recursive=True) if f.name.endswith(".parquet")}
    assert files_after == files_before - set(plan.files)
    inst = table.timeline.get(r.doc["instant"])
    assert inst.action is Action.CLEAN and inst.is_completed
    assert rows(table.read()) == before
    from tests.interop.hudi_oracle import hudi_read
    assert rows(hudi_read(table.path)) == before


# --- the app contract, in-process (these steps start no Spark) ------------------------------


def test_usage_errors_exit_2_with_a_json_line(capsys):
    assert submit.main(["compaction-execute"]) == 2
    out, err = capsys.readouterr()
    doc = _last_json(out)
    assert doc["app"] == "compaction-execute" and doc["status"] == "failed" and "usage" in doc["reason"]
    assert "the following arguments are required: table" in err
    assert submit.main(["no-such-app", "/t"]) == 2
    assert _last_json(capsys.readouterr()[0])["status"] == "failed"
    assert submit.main(["compaction-execute", "/t", "--parallelism", "0"]) == 2
    assert submit.main(["compaction-plan", "/t", "--option", "novalue"]) == 2


def test_ingest_and_stream_refuse_an_option_without_a_value_before_writing(tmp_path, capsys):
    from lakehouse.spark.apps import ingest, stream
    table = tmp_path / "t"
    for main in (ingest.main, stream.main):
        assert main([str(table), "--source-dir", str(tmp_path), "--create", "--demo-batches", "1",
                     "--option", "hoodie.table.name"]) == 2
        out, err = capsys.readouterr()
        doc = _last_json(out)
        assert doc["status"] == "failed" and "'hoodie.table.name' is not KEY=VALUE" in doc["reason"], doc
    assert not table.exists() and not list(tmp_path.glob("*.parquet"))


def test_errors_exit_1_with_help_on_stderr(tmp_path, capsys):
    assert submit.main(["commit", str(tmp_path / "missing")]) == 1
    out, err = capsys.readouterr()
    assert _last_json(out)["status"] == "failed" and "is not a table" in err and "Help:" in err
    cow = write_history(tmp_path / "cow", table_type="COPY_ON_WRITE")
    assert submit.main(["compaction-plan", cow.path]) == 1
    assert "COPY_ON_WRITE" in _last_json(capsys.readouterr()[0])["reason"]
    assert submit.main(["clean", cow.path, "--option", "hoodie.compact.inline.max.delta.commits=1"]) == 1
    assert "not an option of clean" in _last_json(capsys.readouterr()[0])["reason"]


def test_scheduled_services_skip_a_registered_table_not_created_yet(tmp_path, capsys):
    """A registry's clean and compaction crons may fire before the table's first ingest: nothing
    to do (Airflow skips the task), not a failure retried until someone is paged; nothing is
    written at the path."""
    missing = tmp_path / "not-yet"
    for app, verb in (("clean", "clean"), ("compaction-plan", "compact")):
        assert submit.main([app, str(missing)]) == 0
        doc = _last_json(capsys.readouterr()[0])
        assert doc["status"] == "nothing_to_do" and "is not a table" in doc["reason"], doc
        assert f"nothing to {verb} until its first ingest creates it" in doc["reason"]
    assert not missing.exists()
    # A misspelt option is still refused first: a missing table does not hide it.
    assert submit.main(["clean", str(missing), "--option", "hoodie.cleaner.comits.retained=3"]) == 1


def test_nothing_to_do_says_why(tmp_path, capsys):
    table = write_history(tmp_path / "t")
    assert submit.main(["compaction-plan", table.path]) == 0
    doc = _last_json(capsys.readouterr()[0])
    assert doc["status"] == "nothing_to_do" and doc["instant"] is None and doc["reason"].startswith("not yet")
    assert submit.main(["compaction-execute", table.path]) == 0
    assert _last_json(capsys.readouterr()[0])["reason"] == "no compaction is pending"
    assert submit.main(["commit", table.path]) == 0
    assert _last_json(capsys.readouterr()[0])["reason"] == "nothing is inflight"
    done = table.timeline.completed_writes().last.time
    assert submit.main(["commit", table.path, "--instant", done]) == 0
    doc = _last_json(capsys.readouterr()[0])
    assert (doc["instant"], doc["status"], doc["reason"]) == (done, "nothing_to_do", "already completed")
    assert submit.main(["commit", table.path, "--instant", "20990101000000000"]) == 1
    assert "not on the timeline" in _last_json(capsys.readouterr()[0])["reason"]
    assert submit.main(["clean", table.path, "--dry-run"]) == 0
    doc = _last_json(capsys.readouterr()[0])
    assert doc["status"] == "nothing_to_do" and "hoodie.cleaner.commits.retained" in doc["reason"]


def test_commit_skips_a_write_whose_phase_1_did_not_finish(tmp_path, capsys):
    table = write_history(tmp_path / "t")
    faults.activate("write.after_data_files", "raise")
    try:
        with pytest.raises(faults.InjectedFault):
            table.upsert(late_batch(), commit=False)
    finally:
        faults.reset()
    pending = table.timeline.pending().instants[-1]
    assert submit.main(["commit", table.path]) == 0
    doc = _last_json(capsys.readouterr()[0])
    assert doc["status"] == "nothing_to_do" and doc["committed"] == []
    assert [s["instant"] for s in doc["skipped"]] == [pending.time]
    assert "phase 1" in doc["reason"]
    assert lakehouse.open_table(table.path).timeline.get(pending.time).is_inflight


def test_clean_dry_run_reports_the_plan(tmp_path, capsys):
    table = write_history(tmp_path / "cow", table_type="COPY_ON_WRITE")
    plan = table.clean(options={"hoodie.cleaner.commits.retained": "1"}, dry_run=True)
    assert submit.main(["clean", table.path, "--dry-run", "--option", "hoodie.cleaner.commits.retained=1"]) == 0
    doc = _last_json(capsys.readouterr()[0])
    assert doc["status"] == "ok" and doc["dry_run"] and doc["files"] == len(plan.files) and doc["bytes"] == plan.bytes
    assert "spark" not in doc and table.timeline.filter(actions=[Action.CLEAN]).instants == ()


def test_ingest_missing_is_a_clear_usage_error(monkeypatch, capsys):
    monkeypatch.setattr(submit, "INGEST", "lakehouse.spark.apps.no_such_ingest")
    assert submit.main(["ingest", "/t", "--source-dir", "/in"]) == 2
    out, err = capsys.readouterr()
    assert "ingest application is not installed" in err and _last_json(out)["app"] == "ingest"


def test_submit_path_is_this_file():
    p = Path(submit.submit_path())
    assert p.is_absolute() and p.name == "submit.py" and p.read_text().startswith('"""The one file')


def test_the_commit_step_is_the_single_committer_of_concurrent_writers(tmp_path, capsys):
    """Several writers' phase 1 side by side; the commit step publishes them oldest first,
    checking each for conflicts under the table lock: the overlapping one is rolled back and
    reported with the winner, the others land."""
    import pyarrow as pa
    from lakehouse.table import create_table, open_table
    # The SIMPLE index keeps a partition's few records in one file group: the writers of a1 and
    # a2 then touch the same one (the default BUCKET index could hash them apart).
    create_table(str(tmp_path / "t"), name="t", record_key="id", partition_by="p",
                 ordering_field="ts", index="SIMPLE", options={
                     "hoodie.write.concurrency.mode": "OPTIMISTIC_CONCURRENCY_CONTROL"})
    table = open_table(str(tmp_path / "t"))

    def batch(ids, p, v):
        return pa.table({"id": ids, "p": [p] * len(ids), "ts": [1] * len(ids), "v": [v] * len(ids)})
    table.upsert(batch(["a1", "a2"], "a", "base"))
    table.upsert(batch(["b1"], "b", "base"))
    first = table.upsert(batch(["a1"], "a", "first"), commit=False)
    loser = table.upsert(batch(["a2"], "a", "loser"), commit=False)  # same file group as first
    other = table.upsert(batch(["b1"], "b", "other"), commit=False)
    assert submit.main(["commit", table.path]) == 1
    doc = _last_json(capsys.readouterr()[0])
    assert [c["instant"] for c in doc["committed"]] == [first, other]
    (failed,) = doc["failed"]
    assert failed["instant"] == loser and failed["conflict"]["winner"] == first
    assert failed["conflict"]["file_groups"] and first in failed["reason"]
    assert loser not in {i.time for i in table.timeline}
    rows = {r["id"]: r["v"] for r in table.read().to_pylist()}
    assert rows == {"a1": "first", "a2": "base", "b1": "other"}


def test_ingest_creates_a_table_whose_index_is_given_as_an_option_only(tmp_path):
    """Found by review: --index defaulted to BUCKET and was passed next to --option
    hoodie.index.type=..., which create_table refuses as a contradiction."""
    from lakehouse.spark.apps import ingest
    path = tmp_path / "t"
    ingest.run(ingest._parse([str(path), "--source-dir", str(tmp_path / "in"), "--create",
                              "--demo-batches", "1", "--demo-rows", "50",
                              "--option", "hoodie.index.type=SIMPLE"]))
    assert lakehouse.open_table(str(path)).config.index_type.value == "SIMPLE"


def test_the_apps_serve_a_table_whose_properties_hold_keys_lakehouse_does_not_know(tmp_path, capsys):
    """lakehouse.config.merged_options: stored keys a newer Hudi wrote are kept and ignored by
    every app (a run's own --option keys are still checked)."""
    from lakehouse.spark.apps import ingest
    table = write_history(tmp_path / "t")
    props = Path(table.path.removeprefix("file://")) / ".hoodie" / "hoodie.properties"
    background.wait_all()  # the Iceberg publisher reads the file being rewritten
    props.write_text(props.read_text("latin-1") + "hoodie.table.future.feature=on\n", "latin-1")
    assert submit.main(["compaction-plan", table.path, "--force"]) == 0
    assert _last_json(capsys.readouterr()[0])["status"] == "ok"
    assert submit.main(["compaction-execute", table.path]) == 0
    assert submit.main(["commit", table.path]) == 0
    assert _last_json(capsys.readouterr()[0])["status"] == "ok"
    assert submit.main(["clean", table.path, "--dry-run"]) == 0
    (tmp_path / "in").mkdir()
    pq.write_table(late_batch(), tmp_path / "in" / "b1.parquet")
    before = lakehouse.open_table(table.path).timeline.completed_writes().last.time
    ingest.run(ingest._parse([table.path, "--source-dir", str(tmp_path / "in"), "--commit"]))
    assert lakehouse.open_table(table.path).timeline.completed_writes().last.time > before
    assert "hoodie.table.future.feature=on" in props.read_text("latin-1")
