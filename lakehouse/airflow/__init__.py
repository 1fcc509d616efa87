"""Airflow integration: the table registry, the Spark-submitting operator, the DAG factory."""
