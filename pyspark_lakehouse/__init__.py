"""Spark finds Python data sources in installed packages named ``pyspark_*`` that export a
``DefaultSource``: with lakehouse installed, ``format("lakehouse")`` works in every session,
spark-submit jobs and cluster executors included, without registering anything."""

from lakehouse.spark.datasource import LakehouseDataSource as DefaultSource

__all__ = ["DefaultSource"]
