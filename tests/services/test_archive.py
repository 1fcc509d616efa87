"""Archival bounds the active timeline without changing what reads return."""

from __future__ import annotations

import json

import fastavro
import pyarrow as pa
import pytest

import lakehouse
from lakehouse.errors import InstantNotFoundError
from lakehouse.services.archive import read_archived
from lakehouse.timeline.instant import Action
from tests.conftest import HUDI_AVRO_SCHEMAS, require_shared
from tests.interop.hudi_oracle import hudi_read

OPTS = {"hoodie.keep.max.commits": 6, "hoodie.keep.min.commits": 4, "hoodie.bucket.index.num.buckets": 1}


def make(tmp_path, n, table_type="MERGE_ON_READ"):
    t = lakehouse.create_table(str(tmp_path / "t"), name="a", record_key="id", ordering_field="ts",
                               table_type=table_type, index="BUCKET", options=OPTS)
    snapshots = []
    for i in range(n):
        inst = t.upsert(pa.table({"id": [f"k{i % 3}", f"n{i}"], "ts": [i, i], "v": [i, i]}))
        snapshots.append((inst, sorted(t.read(columns=["id", "v"]).to_pylist(), key=lambda r: r["id"])))
    return t, snapshots


@pytest.mark.parametrize("table_type", ["MERGE_ON_READ", "COPY_ON_WRITE"])
def test_archives_down_to_min_commits_and_reads_stay_the_same(tmp_path, table_type):
    t, snaps = make(tmp_path, 8, table_type)
    before = sorted(t.read(columns=["id", "v"]).to_pylist(), key=lambda r: r["id"])
    res = t.archive()
    assert len(res.archived) == 4
    assert len(t.timeline.completed_writes()) == 4
    after = sorted(t.read(columns=["id", "v"]).to_pylist(), key=lambda r: r["id"])
    assert after == before
    h = hudi_read(tmp_path / "t")
    assert sorted(h.select(["id", "v"]).to_pylist(), key=lambda r: r["id"]) == before
    for inst, rows in snaps[4:]:
        assert sorted(t.read(as_of=inst, columns=["id", "v"]).to_pylist(), key=lambda r: r["id"]) == rows
    with pytest.raises(InstantNotFoundError, match=snaps[4][0]):
        t.read(as_of=snaps[1][0])
    with pytest.raises(InstantNotFoundError, match="earliest available"):
        t.read_changes(snaps[0][0])
    archived = read_archived(t)
    assert [e["commitTime"] for e in archived] == list(res.archived)
    assert all(e["hoodieCommitMetadata"]["operationType"] == "UPSERT" for e in archived)


def test_nothing_to_archive_says_why(tmp_path):
    t, _ = make(tmp_path, 5)
    assert t.archive().reason == "nothing to archive: 5 of 6 commits on the active timeline"


def test_never_past_a_pending_instant(tmp_path):
    t, snaps = make(tmp_path, 3)
    t.schedule_compaction(force=True)
    for i in range(6):
        t.upsert(pa.table({"id": ["z"], "ts": [100 + i], "v": [i]}))
    res = t.archive()
    pending = t.timeline.pending_compactions().instants[0].time
    assert all(a < pending for a in res.archived) and "pending instant" in res.reason
    assert t.timeline.get(pending) is not None


def test_archive_file_reads_with_hudis_schema(tmp_path):
    t, _ = make(tmp_path, 8)
    res = t.archive()
    schema = json.loads((require_shared(HUDI_AVRO_SCHEMAS) / "HoodieArchivedMetaEntry.avsc").read_text())
    entries = read_archived(t)
    # Each entry decodes with Hudi's own schema once written with it as the writer schema.
    parsed = fastavro.parse_schema(schema)
    import io
    for e in entries:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, e)
        buf.seek(0)
        assert fastavro.schemaless_reader(buf, parsed, None)["commitTime"] == e["commitTime"]
    assert res.archive_file.endswith(".commits_.archive.1_1-0-1")
    assert not any(i.action is Action.DELTA_COMMIT and i.time in res.archived for i in t.timeline)
