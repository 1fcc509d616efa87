"""Data skipping by column statistics, after sorted and Z-order clustering (Hudi's
hoodie.layout.optimize.strategy): a 1% range filter on a sort column opens a few files and
returns exactly the rows a full read filtered by the same range returns."""

from __future__ import annotations

import random

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lakehouse
from lakehouse.file_group.file_slice import FileSlice
from lakehouse.read.data_skipping import skip_by_stats

N = 20_000
BATCHES = 8


def _table(path, seed=7):
    t = lakehouse.create_table(str(path), name="s", table_type="COPY_ON_WRITE", record_key="id",
                               ordering_field="ts", index="SIMPLE",
                               options={"hoodie.parquet.small.file.limit": 0})
    rng = random.Random(seed)
    rows = [{"id": f"k{i:06d}", "ts": 1, "v": rng.randrange(1_000_000), "w": rng.randrange(1_000_000)}
            for i in range(N)]
    for b in range(BATCHES):
        t.bulk_insert(pa.Table.from_pylist(rows[b::BATCHES]))
    return t, pa.Table.from_pylist(rows)


def _bytes_read(table, filters):
    return sum(s.base_size for s in table.scan(filters=filters).plan_files())


def _total_bytes(table):
    return sum(s.base_size for s in table.file_system_view().latest_slices())


def _cluster(table, columns, layout, files=48):
    group = _total_bytes(table)
    res = table.cluster(force=True, options={
        "hoodie.clustering.plan.strategy.sort.columns": columns,
        "hoodie.layout.optimize.strategy": layout,
        "hoodie.clustering.plan.strategy.max.bytes.per.group": 1 << 40,
        "hoodie.clustering.plan.strategy.target.file.max.bytes": group // files + 1})
    assert res.committed and res.files_written >= files // 2
    return res


def _check_rows(table, model, filters):
    got = table.read(columns=["id", "v", "w"], filters=filters).sort_by("id")
    mask = None
    for c, op, val in filters:
        m = {">=": pc.greater_equal, "<": pc.less, "=": pc.equal}[op](model.column(c), val)
        mask = m if mask is None else pc.and_(mask, m)
    want = model.filter(mask).select(["id", "v", "w"]).sort_by("id")
    assert got.to_pylist() == want.to_pylist()


def test_a_1_percent_range_on_a_linearly_sorted_column_reads_under_10_percent_of_the_bytes(tmp_path):
    table, model = _table(tmp_path / "t")
    filters = [("v", ">=", 500_000), ("v", "<", 510_000)]
    before = _bytes_read(table, filters) / _total_bytes(table)
    assert before == 1.0  # unsorted: every file holds some of the range
    _cluster(table, "v", "linear")
    table = lakehouse.open_table(str(tmp_path / "t"))
    share = _bytes_read(table, filters) / _total_bytes(table)
    assert share <= 0.10, share
    _check_rows(table, model, filters)
    for lo in random.Random(1).sample(range(0, 990_000), 5):
        _check_rows(table, model, [("v", ">=", lo), ("v", "<", lo + 10_000)])


def test_z_order_lets_a_filter_on_either_column_skip_where_linear_helps_only_the_first(tmp_path):
    lin, model = _table(tmp_path / "lin")
    _cluster(lin, "v,w", "linear")
    z, _ = _table(tmp_path / "z")
    _cluster(z, "v,w", "z-order")
    lin, z = lakehouse.open_table(str(tmp_path / "lin")), lakehouse.open_table(str(tmp_path / "z"))
    on_w = [("w", ">=", 300_000), ("w", "<", 310_000)]
    on_v = [("v", ">=", 300_000), ("v", "<", 310_000)]
    lin_w = _bytes_read(lin, on_w) / _total_bytes(lin)
    z_w = _bytes_read(z, on_w) / _total_bytes(z)
    z_v = _bytes_read(z, on_v) / _total_bytes(z)
    assert lin_w > 0.9, lin_w  # sorted by v first: every file spans all of w
    assert z_w < 0.4 and z_v < 0.4, (z_w, z_v)
    for t in (lin, z):
        _check_rows(t, model, on_w)
        _check_rows(t, model, on_v)


def test_sample_curve_ranks_columns_of_unlike_scales_alike(tmp_path):
    """DIRECT coordinates from values: a column spanning 0..1000 weighs nothing against one
    spanning 0..1e6 (its high bits never differ); SAMPLE ranks both, so both skip."""
    t = lakehouse.create_table(str(tmp_path / "t"), name="s", table_type="COPY_ON_WRITE", record_key="id",
                               ordering_field="ts", index="SIMPLE", options={"hoodie.parquet.small.file.limit": 0})
    rng = random.Random(3)
    rows = [{"id": f"k{i:06d}", "ts": 1, "v": rng.randrange(1_000), "w": rng.randrange(1_000_000)}
            for i in range(N)]
    for b in range(BATCHES):
        t.bulk_insert(pa.Table.from_pylist(rows[b::BATCHES]))
    group = _total_bytes(t)
    t.cluster(force=True, options={"hoodie.clustering.plan.strategy.sort.columns": "v,w",
                                   "hoodie.layout.optimize.strategy": "z-order",
                                   "hoodie.layout.optimize.curve.build.method": "SAMPLE",
                                   "hoodie.clustering.plan.strategy.max.bytes.per.group": 1 << 40,
                                   "hoodie.clustering.plan.strategy.target.file.max.bytes": group // 48 + 1})
    t = lakehouse.open_table(str(tmp_path / "t"))
    on_v = [("v", ">=", 300), ("v", "<", 310)]
    on_w = [("w", ">=", 300_000), ("w", "<", 310_000)]
    assert _bytes_read(t, on_v) / _total_bytes(t) < 0.4
    assert _bytes_read(t, on_w) / _total_bytes(t) < 0.4
    model = pa.Table.from_pylist(rows)
    _check_rows(t, model, on_v)
    _check_rows(t, model, on_w)


def test_slices_with_logs_and_unknown_or_unlike_statistics_are_always_read(tmp_path):
    t = lakehouse.create_table(str(tmp_path / "m"), name="m", table_type="MERGE_ON_READ", record_key="id",
                               ordering_field="ts", index="SIMPLE", options={"hoodie.parquet.small.file.limit": 0})
    t.upsert(pa.table({"id": ["a", "b"], "ts": [1, 1], "v": [1, 2], "s": pa.nulls(2, pa.string())}))
    t.upsert(pa.table({"id": ["a"], "ts": [2], "v": [500], "s": pa.nulls(1, pa.string())}))  # a log moves "a" into the range
    slices = t.file_system_view().latest_slices()
    assert any(s.log_files for s in slices)
    assert skip_by_stats(t.storage, slices, [("v", ">=", 400)]) == slices
    assert t.read(filters=[("v", ">=", 400)], columns=["id", "v"]).to_pylist() == [{"id": "a", "v": 500}]
    base_only = [FileSlice(s.partition, s.file_id, s.base_instant, s.base_file) for s in slices]
    assert skip_by_stats(t.storage, base_only, [("v", ">=", 400)]) == []
    # Only nulls: no comparison passes. A value of another kind: kept.
    assert skip_by_stats(t.storage, base_only, [("s", "=", "x")]) == []
    assert skip_by_stats(t.storage, base_only, [("v", "=", "text")]) == base_only
    assert skip_by_stats(t.storage, base_only, [("v", "!=", 1)]) == base_only
    # Read-optimized reads skip on base files whatever their logs.
    assert skip_by_stats(t.storage, slices, [("v", ">=", 400)], ignore_logs=True) == []


@pytest.mark.parametrize("op, value, kept", [("=", 2, True), ("=", 3, False), ("in", [0, 3], False),
                                             ("in", [0, 1], True), ("<", 1, False), ("<=", 1, True),
                                             (">", 2, False), (">=", 2, True)])
def test_each_operator_skips_exactly_the_files_outside_its_range(tmp_path, op, value, kept):
    t = lakehouse.create_table(str(tmp_path / "c"), name="c", table_type="COPY_ON_WRITE", record_key="id",
                               ordering_field="ts", index="SIMPLE")
    t.upsert(pa.table({"id": ["a", "b"], "ts": [1, 1], "v": [1, 2]}))
    slices = t.file_system_view().latest_slices()
    assert (skip_by_stats(t.storage, slices, [("v", op, value)]) == slices) is kept
    assert (t.read(filters=[("v", op, value)]).num_rows > 0) is kept
