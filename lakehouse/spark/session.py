"""A SparkSession with defaults that are safe on a single machine, for the apps and the tests.

Every default is applied only where nothing else set the key, so ``spark-submit --conf``,
``spark-defaults.conf`` and the ``conf`` argument win:

- ``spark.driver.bindAddress`` / ``spark.driver.host`` = 127.0.0.1: the driver listens on
  loopback only. On a cluster spanning machines, executors must reach the driver: set
  ``spark.driver.host`` to an address they can reach.
- ``spark.ui.enabled`` = false: the UI is one more open port and costs start-up time; pass
  ``ui=True`` or ``--conf spark.ui.enabled=true`` to have it.
- the Python of the executors = this interpreter (``sys.executable``) unless
  ``spark.pyspark.python`` or ``PYSPARK_PYTHON`` names one: executors need pyarrow and fastavro,
  and the interpreter running the driver has them.
- ``SPARK_LOCAL_IP`` = 127.0.0.1 when this process starts the JVM itself (not under
  spark-submit, whose JVM is already running: export it before calling spark-submit).
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Mapping

from lakehouse.spark import datasource

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

LOOPBACK = "127.0.0.1"


def _jvm_conf():
    """The configuration the JVM was started with (spark-submit's ``--conf``, ``--master``,
    spark-defaults.conf), so that defaults never override what the user chose."""
    from pyspark import SparkConf, SparkContext  # noqa: PLC0415

    if SparkContext._gateway is None and "PYSPARK_GATEWAY_PORT" not in os.environ:
        os.environ.setdefault("SPARK_LOCAL_IP", LOOPBACK)
    SparkContext._ensure_initialized()
    return SparkConf(loadDefaults=True)


def spark_conf(app_name: str = "lakehouse", *, master: str | None = None,
               conf: Mapping[str, str] | None = None, ui: bool | None = None):
    """The SparkConf that :func:`build_session` and :func:`build_context` start Spark with.

    ``master`` and ``conf`` override everything; ``ui`` turns the web UI on or off (default: off
    unless configured elsewhere). Without any master configured, ``local[*]``.
    """
    c = _jvm_conf()
    for k, v in (conf or {}).items():
        c.set(k, str(v))
    if master is not None:
        c.setMaster(master)
    c.setIfMissing("spark.master", "local[*]")
    # spark-submit names an application after its file when --name is not given.
    if c.get("spark.app.name") in (None, "submit.py"):
        c.setAppName(app_name)
    c.setIfMissing("spark.driver.bindAddress", LOOPBACK)
    c.setIfMissing("spark.driver.host", LOOPBACK)
    if ui is not None:
        c.set("spark.ui.enabled", "true" if ui else "false")
    c.setIfMissing("spark.ui.enabled", "false")
    # PySpark reads the executors' interpreter from PYSPARK_PYTHON when the SparkContext starts
    # (spark-submit exports spark.pyspark.python there for the driver); keep both in agreement.
    python = ((conf or {}).get("spark.pyspark.python") or os.environ.get("PYSPARK_PYTHON")
              or c.get("spark.pyspark.python") or sys.executable)
    os.environ["PYSPARK_PYTHON"] = python
    c.set("spark.pyspark.python", python)
    return c


def build_session(app_name: str = "lakehouse", **kw) -> "SparkSession":
    """The active SparkSession, or a new one started with :func:`spark_conf` (same arguments)."""
    from pyspark.sql import SparkSession  # noqa: PLC0415

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    session = SparkSession.builder.config(conf=spark_conf(app_name, **kw)).getOrCreate()
    # Spark finds format("lakehouse") in an installed pyspark_lakehouse package; an editable
    # install (a path hook Spark's lookup does not see) needs it registered.
    datasource.register(session)
    return session


def build_context(app_name: str = "lakehouse", **kw) -> "SparkContext":
    """The active SparkContext, or a new one started with :func:`spark_conf`.

    For work that only maps Python functions over items (the services' engine): a SparkSession
    adds its SQL machinery on top, about 2-3 s of start-up on these machines.
    """
    from pyspark import SparkContext  # noqa: PLC0415

    active = SparkContext._active_spark_context
    if active is not None:
        return active
    return SparkContext.getOrCreate(spark_conf(app_name, **kw))


def active_context() -> "SparkContext | None":
    """The SparkContext running in this process, if any (without importing pyspark)."""
    if "pyspark" not in sys.modules:
        return None
    from pyspark import SparkContext  # noqa: PLC0415

    return SparkContext._active_spark_context
