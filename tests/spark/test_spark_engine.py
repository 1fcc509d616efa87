"""SparkEngine.map in-process on one shared local[2] SparkSession."""

from __future__ import annotations

import os

import pytest

from lakehouse.errors import CorruptFileError
from lakehouse.spark.engine import SparkEngine, SparkTaskError

pytestmark = pytest.mark.spark


# Module-level functions: executors import them from this module (the work tree is on their path).
def _square_in_partition(x: int) -> tuple[int, int]:
    from pyspark import TaskContext
    return x * x, TaskContext.get().partitionId()


def _fail_on_3_and_5(x: int) -> int:
    if x == 3:
        raise ValueError("item 3 is bad")
    if x == 5:
        raise KeyError("item 5 is bad too")
    return x


def _unrebuildable(x: int) -> int:
    # CorruptFileError(path, reason) pickles but cannot be rebuilt from its args alone.
    raise CorruptFileError("/t/f.parquet", "torn footer")


def _crash_worker(x: int) -> int:
    os._exit(3)


def test_map_keeps_order_one_task_per_item(spark):
    engine = SparkEngine.from_session(spark)
    out = engine.map(_square_in_partition, range(8), parallelism=8)
    assert [v for v, _ in out] == [x * x for x in range(8)]
    assert [p for _, p in out] == list(range(8)), "each item is its own Spark task"
    assert engine.map(_square_in_partition, []) == []


def test_map_groups_items_when_parallelism_is_lower(spark):
    engine = SparkEngine.from_session(spark)
    out = engine.map(_square_in_partition, range(10), parallelism=3)
    assert [v for v, _ in out] == [x * x for x in range(10)]
    parts = [p for _, p in out]
    assert sorted(set(parts)) == [0, 1, 2] and parts == sorted(parts)
    # Default: Spark's defaultParallelism, 2 on local[2].
    assert sorted({p for _, p in engine.map(_square_in_partition, range(5))}) == [0, 1]
    assert engine.slices(5) == 2 and SparkEngine(spark, parallelism=4).slices(5) == 4


def test_first_failure_is_raised_with_its_type_and_remote_traceback(spark):
    engine = SparkEngine.from_session(spark)
    with pytest.raises(ValueError, match="item 3 is bad") as e:
        engine.map(_fail_on_3_and_5, range(8), parallelism=4)
    notes = "\n".join(getattr(e.value, "__notes__", []))
    assert "item 3 of 8" in notes and "_fail_on_3_and_5" in notes


def test_failures_that_cannot_travel_become_spark_task_errors(spark):
    engine = SparkEngine.from_session(spark)
    with pytest.raises(SparkTaskError, match="CorruptFileError: /t/f.parquet: torn footer"):
        engine.map(_unrebuildable, [1, 2])
    # A Python worker that dies fails its task; the engine reports it, the context survives.
    with pytest.raises(SparkTaskError, match="Spark job of 2 item"):
        engine.map(_crash_worker, [1, 2])
    assert [v for v, _ in engine.map(_square_in_partition, [3])] == [9]
