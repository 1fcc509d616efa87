"""Random operation sequences against the in-memory oracle (and hudi-rs at the end)."""

from __future__ import annotations

import shutil
import tempfile

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lakehouse
from lakehouse.iceberg import background
from tests.interop.hudi_oracle import hudi_read
from tests.model.oracle import Oracle

KEYS = [f"k{i:02d}" for i in range(24)]
SCHEMA = pa.schema([("id", pa.string()), ("part", pa.string()), ("ts", pa.int64()), ("v", pa.int64())])

op = st.one_of(
    st.tuples(st.just("upsert"), st.lists(st.tuples(st.sampled_from(KEYS), st.integers(0, 9),
                                                    st.integers(0, 1000)), min_size=1, max_size=12)),
    st.tuples(st.just("delete"), st.lists(st.sampled_from(KEYS), min_size=1, max_size=5)),
    st.tuples(st.just("failed_upsert"), st.lists(st.tuples(st.sampled_from(KEYS), st.integers(0, 9),
                                                           st.integers(0, 1000)), min_size=1, max_size=6)),
    st.tuples(st.just("rollback_latest"), st.none()),
)

config = st.tuples(st.sampled_from(["MERGE_ON_READ", "COPY_ON_WRITE"]),
                   st.sampled_from(["BUCKET", "SIMPLE", "BLOOM"]),
                   st.sampled_from(["EVENT_TIME_ORDERING", "COMMIT_TIME_ORDERING"]),
                   st.sampled_from(["avro", "parquet"]))


def part_of(k: str) -> str:
    return "p" + str(int(k[1:]) % 3)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(config, st.lists(op, min_size=1, max_size=7))
def test_random_operations_match_the_oracle(cfg, ops):
    table_type, index, mode, fmt = cfg
    tmp = tempfile.mkdtemp()
    try:
        t = lakehouse.create_table(tmp + "/t", name="p", table_type=table_type, record_key="id",
                                   partition_by="part", ordering_field="ts", merge_mode=mode, index=index, schema=SCHEMA,
                                   options={"hoodie.bucket.index.num.buckets": 2,
                                            "hoodie.logfile.data.block.format": fmt,
                                            "hoodie.parquet.max.file.size": 4000,
                                            "hoodie.parquet.small.file.limit": 2000,
                                            "hoodie.copyonwrite.record.size.estimate": 100})
        oracle = Oracle(mode, "id", "ts")
        deleted_floor: dict[str, int] = {}
        history: list[tuple[str, list]] = []
        for kind, arg in ops:
            if kind in ("upsert", "failed_upsert"):
                rows = []
                for k, ts, v in arg:
                    # After a delete, lower ordering values behave differently in COW and MOR in
                    # Hudi itself (see tests/read/test_merge_semantics.py): stay above them.
                    ts = ts + deleted_floor.get(k, -1) + 1
                    rows.append({"id": k, "part": part_of(k), "ts": ts, "v": v})
                batch = pa.Table.from_pylist(rows, schema=SCHEMA)
                if kind == "failed_upsert":
                    t.upsert(batch, commit=False)  # phase 1 only: rolled back by the next write
                    continue
                instant = t.upsert(batch)
                oracle.upsert(rows, instant)
                history.append((instant, oracle.rows(None, ["id", "ts", "v"])))
            elif kind == "delete":
                keys = sorted(set(arg))
                instant = t.delete(pa.table({"id": keys, "part": [part_of(k) for k in keys]}))
                for k in keys:
                    deleted_floor[k] = 2000
                oracle.delete(keys, instant)
                history.append((instant, oracle.rows(None, ["id", "ts", "v"])))
            elif kind == "rollback_latest" and history and not t.timeline.pending():
                t.rollback()
                history.pop()
                oracle.state = {}
                oracle.history = [h for h in oracle.history if h[0] != oracle.history[-1][0]]
                if oracle.history:
                    oracle.state = dict(oracle.history[-1][1])
            assert t.read(columns=["id", "ts", "v"]).sort_by("id").to_pylist() == \
                oracle.rows(None, ["id", "ts", "v"])
        for instant, expected in history:
            assert t.read(as_of=instant, columns=["id", "ts", "v"]).sort_by("id").to_pylist() == expected
        h = hudi_read(tmp + "/t")
        got = h.select(["id", "ts", "v"]).sort_by("id").to_pylist() if h is not None else []
        assert got == oracle.rows(None, ["id", "ts", "v"])
    finally:
        background.wait_all()  # its Iceberg publisher reads the table being removed
        shutil.rmtree(tmp, ignore_errors=True)
