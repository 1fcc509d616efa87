"""Run by the judge's Python (PySpark 3.5 with Iceberg's Spark runtime), not by the project's:
reads the Iceberg metadata lakehouse publishes, by path and through Iceberg's JDBC catalog.

    python iceberg_job.py REQUEST.json

REQUEST: {"out": folder, "catalog": {"name", "uri": a jdbc: URL, "warehouse"}, "steps": [...]},
each {"name", "table": a path (``.hoodie/iceberg``) or a catalog identifier, "snapshot_id"?}. A
read goes to ``out/<name>`` (a Spark parquet folder) and the table's snapshots (id, Hudi's
instant) to ``out/<name>.snapshots.json``; a failed step's error to ``out/<name>.error``.
"""

import json
import os
import sys
import traceback

from pyspark.sql import SparkSession


def session(catalog: dict) -> SparkSession:
    name = catalog["name"]
    jars = [j for j in os.environ["LAKEHOUSE_JUDGE_JARS"].split(",") if "/iceberg-" in j or "/sqlite-" in j]
    return (SparkSession.builder.master("local[2]").appName("lakehouse-judge-iceberg")
            .config("spark.jars", ",".join(jars))
            .config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.extensions", "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
            .config(f"spark.sql.catalog.{name}", "org.apache.iceberg.spark.SparkCatalog")
            .config(f"spark.sql.catalog.{name}.type", "jdbc")
            .config(f"spark.sql.catalog.{name}.uri", catalog["uri"])
            .config(f"spark.sql.catalog.{name}.warehouse", catalog["warehouse"])
            .config("spark.sql.session.timeZone", "UTC")
            # Spark's default (INT96) would drop the time zone the rows are compared with.
            .config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
            .config("spark.sql.shuffle.partitions", "2")
            .getOrCreate())


def main() -> int:
    with open(sys.argv[1]) as f:
        request = json.load(f)
    spark = session(request["catalog"])
    spark.sparkContext.setLogLevel("ERROR")
    for step in request["steps"]:
        target = os.path.join(request["out"], step["name"])
        try:
            table = step["table"]
            reader = spark.read.format("iceberg")
            if step.get("snapshot_id"):
                reader = reader.option("snapshot-id", str(step["snapshot_id"]))
            reader.load(table).write.mode("overwrite").parquet(target)
            meta_table = f"{table}#snapshots" if "/" in table else f"{table}.snapshots"
            snapshots = spark.read.format("iceberg").load(meta_table).select("snapshot_id", "summary").collect()
            with open(target + ".snapshots.json", "w") as f:
                json.dump([{"id": r["snapshot_id"], "instant": r["summary"].get("hudi.instant")}
                           for r in snapshots], f)
        except Exception:  # noqa: BLE001 - reported per step, the others still run
            with open(target + ".error", "w") as f:
                f.write(traceback.format_exc())
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
