"""Running lakehouse on Spark: an execution engine for the table services, a SparkSession with
safe defaults, and the spark-submit applications (see :mod:`lakehouse.spark.submit`).

Only this package imports pyspark; the core never does, so lakehouse works without Spark.
"""

from lakehouse.spark.engine import SparkEngine, SparkTaskError

__all__ = ["SparkEngine", "SparkTaskError"]
