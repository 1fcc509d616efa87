"""The streaming sink's batch ids across archival (issue 40, point 1): a replayed batch stays
skipped after other writers' commits pushed the sink's own commits into the archive (Hudi's
``HoodieStreamingSink.canSkipBatch`` reads ``_hudi_streaming_sink_checkpoint`` from the active
timeline only; lakehouse carries it forward). No Spark session: the sink's driver and executor
steps run in this process."""

from __future__ import annotations

import pyarrow as pa
import pytest

pytest.importorskip("pyspark")

import lakehouse  # noqa: E402
from lakehouse.errors import CheckpointLostError  # noqa: E402
from lakehouse.services.archive import archive_files  # noqa: E402
from lakehouse.spark.datasource import LakehouseStreamWriter, Sink, sink_commits  # noqa: E402
from lakehouse.spark.types import spark_schema  # noqa: E402
from tests.interop.hudi_oracle import canonical, hudi_read  # noqa: E402
from tests.sources.test_exactly_once_archival import strip_carried  # noqa: E402

SCHEMA = pa.schema([("id", pa.string()), ("v", pa.string()), ("ts", pa.int64())])


def rows(ids, v):
    return pa.table({"id": ids, "v": [v] * len(ids), "ts": [1] * len(ids)}, schema=SCHEMA)


def stream_batch(t, batch_id, data, identifier="q1"):
    sink = Sink.of({"path": t.path, "hoodie.datasource.write.streaming.checkpoint.identifier": identifier},
                   spark_schema(SCHEMA), False, streaming=True)
    writer = LakehouseStreamWriter(sink)
    staged = writer.write(iter(data.to_batches()))
    writer.commit([staged], batch_id)


def archived_history(tmp_path, table_type):
    t = lakehouse.create_table(str(tmp_path / "t"), name="t", table_type=table_type, record_key="id",
                               merge_mode="COMMIT_TIME_ORDERING", ordering_field="ts")
    stream_batch(t, 0, rows(["k1", "k2"], "b0"))
    stream_batch(t, 0, rows(["x"], "other-query"), identifier="q2")
    t.upsert(rows(["k1"], "fixed"))
    for i in range(6):
        t.upsert(rows([f"api{i}"], "api"))
        t.clean(options={"hoodie.cleaner.commits.retained": "1"})
    assert t.archive(options={"hoodie.keep.min.commits": "2", "hoodie.keep.max.commits": "3"}).archived
    assert not sink_commits(lakehouse.open_table(t.path), "q1")  # its commits are archived
    return t


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_replayed_batch_skipped_after_archival(tmp_path, table_type):
    t = archived_history(tmp_path, table_type)
    writes = len(lakehouse.open_table(t.path).timeline.completed_writes())
    stream_batch(t, 0, rows(["k1", "k2"], "b0"))  # the query restarted and replays batch 0
    stream_batch(t, 0, rows(["x"], "other-query"), identifier="q2")
    t = lakehouse.open_table(t.path)
    assert len(t.timeline.completed_writes()) == writes
    stream_batch(t, 1, rows(["k3"], "b1"))
    t = lakehouse.open_table(t.path)
    model = {"k1": "fixed", "k2": "b0", "x": "other-query", "k3": "b1", **{f"api{i}": "api" for i in range(6)}}
    assert {r["id"]: r["v"] for r in t.read(columns=["id", "v"]).to_pylist()} == model
    assert canonical(hudi_read(t.path), ["id", "v"]) == canonical(t.read(), ["id", "v"])


def test_sink_found_in_archive_and_lost_without_it(tmp_path):
    t = archived_history(tmp_path, "COPY_ON_WRITE")
    strip_carried_sink(t)
    writes = len(lakehouse.open_table(t.path).timeline.completed_writes())
    stream_batch(t, 0, rows(["k1", "k2"], "b0"))  # found in the archived timeline: skipped
    assert len(lakehouse.open_table(t.path).timeline.completed_writes()) == writes
    for info in archive_files(t.active):
        t.storage.delete(info.path)
    with pytest.raises(CheckpointLostError, match="q1"):
        stream_batch(t, 0, rows(["k1", "k2"], "b0"))
    assert len(lakehouse.open_table(t.path).timeline.completed_writes()) == writes


def strip_carried_sink(t):
    import json

    from lakehouse.timeline.carried import ORIGINS_KEY, SINK_CHECKPOINT_KEY
    strip_carried(t)
    for inst in t.timeline.completed_writes():
        raw = json.loads(t.storage.read(t.active.path(inst)))
        raw["extraMetadata"].pop(SINK_CHECKPOINT_KEY, None)
        raw["extraMetadata"].pop(ORIGINS_KEY, None)
        t.storage.write(t.active.path(inst), json.dumps(raw).encode())
