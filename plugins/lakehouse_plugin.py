"""Loads the lakehouse Airflow plugin (the Lakehouse view and links); its code is in lakehouse.airflow."""

from lakehouse.airflow.plugin import LakehousePlugin

__all__ = ["LakehousePlugin"]
