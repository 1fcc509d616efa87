"""The development platform: what ``make run``, ``make cluster``, ``make demo`` and ``make demo-api``
start on this machine (Airflow on SQLite or PostgreSQL, Spark local or a standalone cluster, an S3
API server, the sample tables of ``tables.yaml``). Kept out of the ``lakehouse`` package, which is
the library users install: these modules start processes; the library never does. Run them from
the repository's root (``python -m deploy.platform start``), as the Makefile does.
"""
