"""Airflow DAGs for every table in the lakehouse table registry.

The registry is $LAKEHOUSE_REGISTRY, or tables.yaml beside this file. Edit the registry, not this
file: each table gets <table>_ingest, <table>_compaction and <table>_clean (lakehouse.airflow.dags).
"""

import os

from lakehouse.airflow import registry
from lakehouse.airflow.dags import build_dags

_REGISTRY = os.environ.get(registry.ENV_VAR) or os.path.join(os.path.dirname(os.path.abspath(__file__)), "tables.yaml")

globals().update(build_dags(registry.load(_REGISTRY), schedules=not registry.schedules_held()))
