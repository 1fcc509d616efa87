"""Run tags in instants' extra metadata: parsed strictly, found on every kind of instant."""

from __future__ import annotations

import pyarrow as pa
import pytest

import lakehouse
from lakehouse.errors import ConfigError
from lakehouse.timeline.instant import Action
from lakehouse.timeline.tags import find_tagged, instant_extra, parse_tags


def test_parse_tags():
    assert parse_tags(["a.b=1", "c= x=y"]) == {"a.b": "1", "c": " x=y"}
    for bad in ("novalue", "=v"):
        with pytest.raises(ConfigError, match="KEY=VALUE"):
            parse_tags([bad])


def test_found_on_writes_compactions_and_cleans(tmp_path):
    t = lakehouse.create_table(str(tmp_path / "t"), name="t", table_type="MERGE_ON_READ", record_key="id",
                               ordering_field="ts", index="BUCKET", options={"hoodie.bucket.index.num.buckets": 1})
    rows = lambda ts: pa.table({"id": ["a", "b"], "ts": [ts, ts]})  # noqa: E731
    w1 = t.write(rows(1), "upsert", extra_metadata={"run": "1"})
    w2 = t.write(rows(2), "upsert", commit=False, extra_metadata={"run": "2"})
    assert find_tagged(t.active, {"run": "2"}, [Action.DELTA_COMMIT]).time == w2  # inflight too
    t.commit(w2)
    plan = t.schedule_compaction(force=True, extra_metadata={"run": "3"}).instant
    assert find_tagged(t.active, {"run": "3"}, [Action.COMPACTION]).time == plan  # requested
    t.run_compaction(plan)
    t.commit_compaction(plan)
    assert find_tagged(t.active, {"run": "3"}, [Action.COMPACTION]).time == plan  # completed
    t.write(rows(3), "upsert")
    cleaned = t.clean(options={"hoodie.cleaner.policy": "KEEP_LATEST_FILE_VERSIONS",
                               "hoodie.cleaner.fileversions.retained": 1}, extra_metadata={"run": "4"})
    assert find_tagged(t.active, {"run": "4"}, [Action.CLEAN]).time == cleaned.instant
    assert find_tagged(t.active, {"run": "1"}, [Action.DELTA_COMMIT]).time == w1
    assert find_tagged(t.active, {"run": "1"}, [Action.CLEAN]) is None  # other actions not searched
    assert find_tagged(t.active, {"run": "9"}, [Action.DELTA_COMMIT]) is None
    assert instant_extra(t.active, t.timeline.get(w1))["run"] == "1"
