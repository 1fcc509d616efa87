"""A streaming query writing landed JSON files into a table through format("lakehouse"), one
file per micro-batch, until the files are all processed; run as a subprocess by the crash tests
(python -m tests.spark.stream_driver SRC TABLE CHECKPOINT)."""

from __future__ import annotations

import sys

from lakehouse.spark.session import build_session

SCHEMA = "id string, city string, ts long, v long"


def main(src: str, table: str, checkpoint: str) -> int:
    spark = build_session("stream-driver", master="local[1]", ui=False)
    query = (spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(src)
             .writeStream.format("lakehouse").option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start(table))
    query.awaitTermination()
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
