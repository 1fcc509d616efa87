"""read_table on the shared local[2] SparkSession returns what Table.read / read_changes return."""

from __future__ import annotations

import functools
import random
from datetime import datetime, timedelta, timezone

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lakehouse
from lakehouse.errors import ConfigError, SchemaError
from lakehouse.file_group.file_slice import FileSlice
from lakehouse.spark.reader import group_slices, native_slices, plan_read, read_table, register, spark_schema

pytestmark = pytest.mark.spark

KEYS = [f"k{i:03d}" for i in range(120)]
EPOCH = datetime(2024, 5, 1, tzinfo=timezone.utc)


def _batch(keys: list[str], ts: int) -> pa.Table:
    # A timezone-aware timestamp column checks the Arrow -> Spark type mapping on the way.
    return pa.Table.from_pylist([{"id": k, "city": ("sf", "la", "nyc")[int(k[1:]) % 3], "ts": ts,
                                  "v": ts * 1000 + i, "at": EPOCH + timedelta(minutes=ts, seconds=i)}
                                 for i, k in enumerate(keys)])


def _keys_of(keys: list[str]) -> pa.Table:
    return _batch(keys, 0).select(["id", "city"])


def _write(path, table_type: str) -> lakehouse.Table:
    """Upserts, deletes and, on MOR, a completed compaction, then a pending one with writes after
    it (its slices carry the slice they compact as `previous`)."""
    rnd = random.Random(7)
    mor = table_type == "MERGE_ON_READ"
    t = lakehouse.create_table(str(path), name="trips", table_type=table_type, record_key="id",
                               partition_by="city", ordering_field="ts", index="BUCKET",
                               options={"hoodie.bucket.index.num.buckets": 2})
    t.bulk_insert(_batch(KEYS[:90], 1))
    t.upsert(_batch(sorted(rnd.sample(KEYS[:90], 30)) + KEYS[90:100], 2))
    t.delete(_keys_of(sorted(rnd.sample(KEYS[:100], 8))))
    if mor:
        assert t.compact(force=True).instant
    t.upsert(_batch(sorted(rnd.sample(KEYS[:100], 20)), 3))
    if mor:
        assert t.schedule_compaction(force=True).scheduled
    t.upsert(_batch(sorted(rnd.sample(KEYS[:100], 10)) + KEYS[100:110], 4))
    t.delete(_keys_of(sorted(rnd.sample(KEYS[:110], 5))))
    if mor:
        assert len(t.timeline.pending_compactions()) == 1
    return t


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    root = tmp_path_factory.mktemp("spark-reader")
    return {k: _write(root / k, k) for k in ("MERGE_ON_READ", "COPY_ON_WRITE")}


@pytest.fixture(params=["MERGE_ON_READ", "COPY_ON_WRITE"])
def table(request, tables):
    return tables[request.param]


def _rows(t: pa.Table) -> list[dict]:
    return sorted(t.to_pylist(), key=lambda r: (r.get("_hoodie_record_key") or r.get("id"), repr(r)))


def _compare(df, got: pa.Table, want: pa.Table, n_tasks: int | None) -> None:
    assert df.schema == spark_schema(want.schema)
    assert got.column_names == want.column_names
    # Spark hands timestamps back in its session time zone; compare instants in the table's types.
    got = pa.Table.from_arrays([got.column(i).cast(f.type) for i, f in enumerate(want.schema)],
                               names=want.column_names)
    assert got.num_rows == want.num_rows
    assert _rows(got) == _rows(want)
    if n_tasks is not None:
        assert df.rdd.getNumPartitions() == n_tasks


def assert_reads_as(df, want: pa.Table, n_tasks: int | None = None) -> None:
    _compare(df, df.toArrow(), want, n_tasks)


def assert_all_read_as(cases: list[tuple]) -> None:
    """(df, want, n_tasks) cases of one schema, collected in one Spark job: on two cores a job
    costs more than its handful of small tasks."""
    from pyspark.sql import functions as F

    tagged = [df.withColumn("__case", F.lit(i)) for i, (df, _, _) in enumerate(cases)]
    got = functools.reduce(lambda a, b: a.unionByName(b), tagged).toArrow()
    for i, (df, want, n) in enumerate(cases):
        _compare(df, got.filter(pc.equal(got["__case"], i)).drop_columns(["__case"]), want, n)


def _times(t: lakehouse.Table) -> list[str]:
    return [i.time for i in t.timeline.completed_writes()]


def test_snapshot_and_read_optimized_as_of_every_instant(spark, table):
    path = table.path
    cases = []
    for as_of in [None, *_times(table)]:
        for ro in (False, True):
            n = len(plan_read(path, as_of=as_of, read_optimized=ro).slices)
            assert n > 0
            # Two tasks a read keep the sweep quick (a task costs ~0.1 s on two cores). Slices
            # with nothing to merge go to Spark's parquet reader; native=False merges them all.
            for native in (True, False):
                df = read_table(spark, path, as_of=as_of, read_optimized=ro, parallelism=2, native=native)
                cases.append((df, table.read(as_of=as_of, read_optimized=ro), None if native else min(n, 2)))
    for ro in (False, True):  # one task per slice
        n = len(plan_read(path, read_optimized=ro).slices)
        cases.append((read_table(spark, path, read_optimized=ro, native=False), table.read(read_optimized=ro), n))
    assert_all_read_as(cases)
    if table.config.table_type.value == "MERGE_ON_READ":
        # The pending compaction is in the plan: its slices merge over the slices they compact.
        assert any(s.previous is not None for s in plan_read(path).slices)


def test_incremental_ranges(spark, table):
    times = _times(table)
    ranges = [(a, b) for a, b in zip(times, times[1:])]
    ranges += [(times[0], None), (None, times[2]), ("0", times[1]), (times[1], times[-2]),
               (times[-1], None)]
    cases = []
    for start, end in ranges:
        plan = plan_read(table.path, changes_from=start, changes_to=end)
        df = read_table(spark, table.path, changes_from=start, changes_to=end)
        cases.append((df, table.read_changes(start, end), len(plan.slices)))
        # Only the file groups the range's commits wrote are read.
        written = set().union(*(table.active.commit_metadata(i).file_ids()
                                for i in table.timeline.completed_writes()
                                if (start is None or i.time > start) and (end is None or i.time <= end)))
        assert {(s.partition, s.file_id) for s in plan.slices} <= written
    assert_all_read_as(cases)


def test_projection_and_filters(spark, table):
    path, times = table.path, _times(table)
    all_slices = len(plan_read(path).slices)
    cases = [
        dict(columns=["id", "v", "at"]),
        dict(filters=[("city", "=", "sf")]),
        dict(columns=["v", "id"], filters=[("city", "in", ["la", "nyc"]), ("v", ">", 2000)]),
        dict(columns=["id", "at"], filters=[("at", ">=", datetime(2024, 5, 1, 0, 2))],
             as_of=times[-2]),
        dict(filters=[("city", "=", "la")], read_optimized=True),
    ]
    for kw in cases:
        plan = plan_read(path, **kw)
        assert_reads_as(read_table(spark, path, **kw), table.read(**kw))
        assert_reads_as(read_table(spark, path, native=False, **kw), table.read(**kw), len(plan.slices))
        if any(f[0] == "city" for f in kw.get("filters", [])):
            assert len(plan.slices) < all_slices, "partition filters prune slices"
    for kw in (dict(columns=["id", "ts"]), dict(columns=["ts"], filters=[("city", "=", "nyc")])):
        df = read_table(spark, path, changes_from=times[1], changes_to=times[-1], **kw)
        assert_reads_as(df, table.read_changes(times[1], times[-1], **kw))


def test_parallelism_groups_slices(spark, tables):
    t = tables["MERGE_ON_READ"]
    n = len(plan_read(t.path).slices)
    assert n >= 4
    for p in (1, 2, n + 3):
        assert_reads_as(read_table(spark, t.path, parallelism=p, native=False), t.read(), min(p, n))
    with pytest.raises(ConfigError):
        read_table(spark, t.path, parallelism=0)


def _scans_parquet(df) -> bool:
    return "FileScan parquet" in df._jdf.queryExecution().executedPlan().toString()


@pytest.mark.parametrize("table_type", ["MERGE_ON_READ", "COPY_ON_WRITE"])
def test_slices_with_nothing_to_merge_are_read_by_sparks_parquet_reader(spark, tables, tmp_path, table_type):
    """As Hudi's Spark integration does: a read-optimized read, a Copy-On-Write table and a
    compacted slice go to Spark's parquet reader (column pruning, filter pushdown); slices with
    logs, filters Spark answers otherwise than Arrow (floats, 'not in', expressions) and base
    files of an older schema go through the merge. Every read returns Table.read's rows."""
    t = tables[table_type]
    mor = table_type == "MERGE_ON_READ"
    ro = read_table(spark, t.path, read_optimized=True, columns=["id", "v"], filters=[("city", "in", ["sf", "la"])])
    assert _scans_parquet(ro)
    assert_reads_as(ro, t.read(read_optimized=True, columns=["id", "v"], filters=[("city", "in", ["sf", "la"])]))
    plan = plan_read(t.path)
    native, merged = native_slices(plan, None)
    assert bool(merged) == mor and bool(native) != mor  # MOR: every slice has logs; COW: none
    ro_plan = plan_read(t.path, read_optimized=True)
    assert native_slices(ro_plan, None) == (list(range(len(ro_plan.slices))), [])
    for filters in ([("v", "not in", [1001])], pc.field("v") > 1000):
        assert native_slices(ro_plan, filters)[0] == []
        assert_reads_as(read_table(spark, t.path, filters=filters), t.read(filters=filters))
    # A column added after partition la's files were written: those merge (lakehouse conforms
    # them), partition sf's, written with it, need not.
    e = lakehouse.create_table(str(tmp_path / "e"), name="e", table_type=table_type, record_key="id",
                               partition_by="city", ordering_field="ts", index="BUCKET",
                               options={"hoodie.bucket.index.num.buckets": 2})
    e.bulk_insert(_batch([k for k in KEYS if int(k[1:]) % 3 == 1][:20], 1).drop_columns(["at"]))
    sf = _batch([k for k in KEYS if int(k[1:]) % 3 == 0][:20], 2)
    e.bulk_insert(sf.append_column("fare", pa.array([1.5] * sf.num_rows)))
    n_plan = plan_read(e.path)
    native_e, merged_e = native_slices(n_plan, None)
    assert {n_plan.slices[i].partition for i in native_e} == {"sf"}
    assert {n_plan.slices[i].partition for i in merged_e} == {"la"}
    assert_reads_as(read_table(spark, e.path), e.read())


def test_group_slices_balances_bytes():
    def s(i: int, size: int) -> FileSlice:
        from lakehouse.file_group.file_slice import BaseFile
        from lakehouse.file_group.naming import BaseFileName
        name = BaseFileName.parse(f"f{i}-0_0-1-1_20240101000000000.parquet")
        return FileSlice("p", f"f{i}", "20240101000000000", BaseFile("p", name, size))

    slices = [s(i, size) for i, size in enumerate([10, 70, 20, 30, 40])]
    groups = group_slices(slices, 2)
    assert sorted(i for g in groups for i in g) == list(range(5))
    loads = sorted(sum(slices[i].base_size for i in g) for g in groups)
    assert loads == [80, 90]
    assert group_slices(slices, 9) == [[i] for i in range(5)]


def test_empty_results_and_bad_arguments(spark, tables):
    t = tables["MERGE_ON_READ"]
    last = _times(t)[-1]
    df = read_table(spark, t.path, changes_from=last, columns=["id"])
    assert df.count() == 0 and df.columns == ["id"]
    assert_reads_as(df, t.read_changes(last, None, columns=["id"]))
    with pytest.raises(ConfigError):
        read_table(spark, t.path, changes_from=last, as_of=last)
    with pytest.raises(SchemaError):
        read_table(spark, t.path, columns=["nope"])


def test_register_binds_read_table(spark, tables):
    t = tables["COPY_ON_WRITE"]
    read = register(spark)
    assert spark.read_lakehouse is read
    assert spark.read_lakehouse(t.path, columns=["id"]).count() == t.read().num_rows


@pytest.mark.interop
def test_apache_hudi_fixture_table(spark, fixture_tables):
    from tests.interop.hudi_oracle import canonical, hudi_read

    path = fixture_tables["quickstart_trips_table/mor/avro/v6_trips_8i1u"]
    t = lakehouse.open_table(str(path))
    for ro in (False, True):
        df = read_table(spark, str(path), read_optimized=ro)
        want = t.read(read_optimized=ro)
        assert_reads_as(df, want)  # Java Hudi's base files through Spark's parquet reader too
        assert_reads_as(read_table(spark, str(path), read_optimized=ro, native=False), want,
                        len(plan_read(str(path), read_optimized=ro).slices))
        got = df.toArrow()
        assert canonical(got, want.column_names) == canonical(hudi_read(path, read_optimized=ro),
                                                              want.column_names)
