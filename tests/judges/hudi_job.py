"""Run by the judge's Python (PySpark 3.5 with Hudi's Spark bundle), not by the project's: reads
and writes tables with Apache Hudi's Spark datasource.

    python hudi_job.py REQUEST.json

REQUEST: {"out": folder, "steps": [...]}, run in order, each a read {"kind": "read", "name",
"path", "query": snapshot | read_optimized | incremental, "as_of"?, "begin"?, "end"?} or a write
{"kind": "write", "name", "path", "rows": a parquet file, "options": {hoodie.* -> value}}
(``mode("append")``) or a statement {"kind": "sql", "name", "sql"} (Hudi's procedures: ``CALL
run_compaction(...)``), whose rows go to ``out/<name>.json``. A read goes to ``out/<name>`` (a
Spark parquet folder); a failed step's error goes to ``out/<name>.error`` and the others still
run. One Spark session serves them all.
"""

import json
import os
import sys
import traceback

from pyspark.sql import SparkSession


def session() -> SparkSession:
    return (SparkSession.builder.master("local[2]").appName("lakehouse-judge-hudi")
            .config("spark.jars", ",".join(j for j in os.environ["LAKEHOUSE_JUDGE_JARS"].split(",")
                                           if "/hudi-" in j))
            .config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
            .config("spark.ui.enabled", "false")
            .config("spark.serializer", "org.apache.spark.serializer.KryoSerializer")
            .config("spark.kryo.registrator", "org.apache.spark.HoodieSparkKryoRegistrar")
            .config("spark.sql.extensions", "org.apache.spark.sql.hudi.HoodieSparkSessionExtension")
            .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.hudi.catalog.HoodieCatalog")
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
            .config("spark.sql.shuffle.partitions", "2")
            .getOrCreate())


def read(spark: SparkSession, r: dict):
    reader = spark.read.format("hudi")
    query = r["query"]
    reader = reader.option("hoodie.datasource.query.type", query)
    if r.get("as_of"):
        reader = reader.option("as.of.instant", r["as_of"])
    if query == "incremental":
        reader = reader.option("hoodie.datasource.read.begin.instanttime", r["begin"])
        if r.get("end"):
            reader = reader.option("hoodie.datasource.read.end.instanttime", r["end"])
    return reader.load(r["path"])


def main() -> int:
    with open(sys.argv[1]) as f:
        request = json.load(f)
    spark = session()
    spark.sparkContext.setLogLevel("ERROR")
    for step in request["steps"]:
        target = os.path.join(request["out"], step["name"])
        try:
            if step["kind"] == "write":
                rows = spark.read.parquet(step["rows"])
                rows.write.format("hudi").options(**step["options"]).mode("append").save(step["path"])
            elif step["kind"] == "sql":
                result = [r.asDict(recursive=True) for r in spark.sql(step["sql"]).collect()]
                with open(target + ".json", "w") as f:
                    json.dump(result, f, default=str)
            else:
                read(spark, step).write.mode("overwrite").parquet(target)
        except Exception:  # noqa: BLE001 - reported per step, the others still run
            with open(target + ".error", "w") as f:
                f.write(traceback.format_exc())
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
