"""The commit step under several writers: a conflict fails the task for good (a retry cannot
help: the write was rolled back) and says what happens next; spark-submit runs for real."""

from __future__ import annotations

from types import SimpleNamespace

import pyarrow as pa
import pytest

from lakehouse.table import create_table, open_table

pytestmark = [pytest.mark.airflow, pytest.mark.spark]


def batch(ids, v):
    return pa.table({"id": ids, "p": ["a"] * len(ids), "ts": [1] * len(ids), "v": [v] * len(ids)})


def test_a_conflict_at_the_commit_step_fails_the_task_without_retries(tmp_path, airflow_db,
                                                                      spark_submit_ready):
    from airflow.sdk.exceptions import AirflowFailException
    from lakehouse.airflow.operators import LakehouseSparkSubmitOperator
    # SIMPLE: k1 and k2 share one file group, so two writers of them conflict.
    create_table(str(tmp_path / "t"), name="t", record_key="id", partition_by="p",
                 ordering_field="ts", index="SIMPLE",
                 options={"hoodie.write.concurrency.mode": "OPTIMISTIC_CONCURRENCY_CONTROL"})
    table = open_table(str(tmp_path / "t"))
    table.upsert(batch(["k1", "k2"], "base"))
    winner = table.upsert(batch(["k1"], "winner"), commit=False)
    loser = table.upsert(batch(["k2"], "loser"), commit=False)
    table.commit(winner)  # another writer's commit step was first
    op = LakehouseSparkSubmitOperator(task_id="commit", app="commit", table_path=table.path,
                                      instant=loser, conn_id="spark_default")
    ti = SimpleNamespace(dag_id="trips_ingest", run_id="manual__1", task_id="commit", try_number=1,
                         map_index=-1)
    with pytest.raises(AirflowFailException) as e:
        op.execute({"ti": ti})
    assert winner in str(e.value) and "next run" in str(e.value)
    assert op.report["failed"][0]["conflict"]["winner"] == winner
    assert {r["id"]: r["v"] for r in table.read().to_pylist()} == {"k1": "winner", "k2": "base"}
