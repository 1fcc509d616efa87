"""The services' parallel map on Spark: each item becomes part of a Spark task on an executor.

With ``n`` items and a parallelism of at least ``n`` (the default is Spark's
``defaultParallelism``), every item is one Spark task, so one compaction operation or one batch
of deletes is what the scheduler places, retries and shows in the UI.

An exception raised by ``fn`` is caught on the executor and shipped back as a value rather than
failing the task: Spark would retry a task that fails by raising (on a cluster, up to
``spark.task.maxFailures`` times) although the same input fails the same way again, and it would
flatten the exception into a Java stack trace. Returned as a value, the driver raises the original
exception of the first failing item, as :class:`~lakehouse.engine.LocalEngine` does. Lost
executors and killed workers still fail the task, which Spark retries as it should.
"""

from __future__ import annotations

import pickle
import traceback
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from lakehouse.engine import Engine
from lakehouse.errors import ConfigError, LakehouseError
from lakehouse.spark import session

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession


class SparkTaskError(LakehouseError):
    """A Spark task failed without a Python exception that could be sent back (a lost executor,
    a killed worker, an exception that does not pickle)."""


@dataclass(frozen=True)
class Failure:
    """What an executor sends back instead of a result when ``fn`` raised."""

    error: BaseException | None  # None when the exception does not survive pickling
    type_name: str
    message: str
    remote_traceback: str


def _portable(e: BaseException) -> BaseException | None:
    # Some exceptions pickle but cannot be rebuilt (an __init__ with other arguments than
    # .args); finding out here keeps the whole collect() from failing on the driver.
    try:
        pickle.loads(pickle.dumps(e))
    except Exception:  # noqa: BLE001 - any failure means "send a description instead"
        return None
    return e


class Guarded:
    """``fn`` wrapped so that its exceptions come back as values (a class, not a closure, so
    that it pickles the same way everywhere)."""

    def __init__(self, fn: Callable[[Any], Any]) -> None:
        self.fn = fn

    def __call__(self, item: Any) -> Any:
        try:
            return self.fn(item)
        except Exception as e:  # noqa: BLE001 - re-raised on the driver
            return Failure(_portable(e), f"{type(e).__module__}.{type(e).__qualname__}", str(e),
                            traceback.format_exc())


def _raise(f: Failure, index: int, total: int) -> None:
    where = f"item {index} of {total} failed on a Spark executor"
    if f.error is not None:
        f.error.add_note(f"{where}; remote traceback:\n{f.remote_traceback}")
        raise f.error
    err = SparkTaskError(f"{where}: {f.type_name}: {f.message}",
                         help="fix the cause (the executor's traceback follows) and run again")
    err.add_note(f"remote traceback:\n{f.remote_traceback}")
    raise err


def java_failure_summary(e: Exception) -> str:
    # The Py4J message holds the whole Java stack trace; its first lines say what happened.
    text = str(e).strip().splitlines()
    return " ".join(line.strip() for line in text[:3])[:1000]


class SparkEngine(Engine):
    """:class:`~lakehouse.engine.Engine` on Spark: on the given SparkSession (or SparkContext),
    or on one started on first use by :func:`lakehouse.spark.session.build_context`, so that a
    job with nothing to do starts no Spark at all."""

    def __init__(self, spark: "SparkSession | SparkContext | None" = None, *,
                 parallelism: int | None = None, app_name: str = "lakehouse") -> None:
        if parallelism is not None and parallelism < 1:
            raise ConfigError(f"parallelism {parallelism} must be at least 1", help="pass 1 or more")
        self._spark = spark
        self.parallelism = parallelism
        self.app_name = app_name

    @classmethod
    def from_session(cls, spark: "SparkSession", *, parallelism: int | None = None) -> "SparkEngine":
        return cls(spark, parallelism=parallelism)

    @property
    def started(self) -> bool:
        return self._spark is not None

    @property
    def context(self) -> "SparkContext":
        if self._spark is None:
            self._spark = session.build_context(self.app_name)
        return getattr(self._spark, "sparkContext", self._spark)

    def slices(self, n_items: int, parallelism: int | None = None) -> int:
        """How many Spark tasks ``map`` runs for ``n_items`` items."""
        if n_items == 0:
            return 0
        want = parallelism or self.parallelism or self.context.defaultParallelism
        return max(1, min(n_items, want))

    def map(self, fn, items, parallelism=None):
        items = list(items)
        if not items:
            return []
        from py4j.protocol import Py4JJavaError  # noqa: PLC0415

        sc = self.context
        rdd = sc.parallelize(items, numSlices=self.slices(len(items), parallelism))
        try:
            # parallelize keeps items in order within and across slices, and collect() returns
            # the slices in order, so results line up with items.
            results = rdd.map(Guarded(fn)).collect()
        except Py4JJavaError as e:
            raise SparkTaskError(f"a Spark job of {len(items)} item(s) failed: "
                                 f"{java_failure_summary(e)}",
                                 help="see the executor logs (stderr of spark-submit in local "
                                      "mode); the work can be run again") from e
        for i, r in enumerate(results):
            if isinstance(r, Failure):
                _raise(r, i, len(items))
        return results
