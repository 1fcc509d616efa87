"""The Airflow Assets of a registry table, named after its registry entry (not its path: Airflow
wants one URI per asset name, and a table that moves keeps its DAGs' history); each extra shows
the table's page in the Lakehouse view.

- ``lakehouse_<table>_commits``: every ingest commit (data-aware DAGs of users follow it);
- ``lakehouse_<table>_compaction_due``, ``lakehouse_<table>_clustering_due``: a commit after
  which the service's trigger is met (lakehouse.services.due), which schedules the service's
  DAG, so it runs when its planner has something to plan rather than after every commit; the
  ingest task announces them through the alias ``lakehouse_<table>_due``;
- ``lakehouse_<table>_alerts``: the health check found alerts.
"""

from __future__ import annotations

from airflow.sdk import Asset, AssetAlias

#: The services whose DAGs a "due" Asset schedules.
DUE_SERVICES = ("compaction", "clustering")


def _view(name: str) -> str:
    return f"/lakehouse/tables/{name}"


def commits_asset(name: str, path: str) -> Asset:
    return Asset(name=f"lakehouse_{name}_commits", uri=f"lakehouse://tables/{name}/commits",
                 group="lakehouse", extra={"path": path, "lakehouse_view": _view(name)})


def due_asset(name: str, service: str) -> Asset:
    if service not in DUE_SERVICES:
        raise ValueError(f"no due Asset for {service!r}: one of {', '.join(DUE_SERVICES)}")
    return Asset(name=f"lakehouse_{name}_{service}_due", uri=f"lakehouse://tables/{name}/{service}_due",
                 group="lakehouse", extra={"lakehouse_view": _view(name)})


def due_alias(name: str) -> AssetAlias:
    return AssetAlias(name=f"lakehouse_{name}_due", group="lakehouse")


def alerts_asset(name: str) -> Asset:
    return Asset(name=f"lakehouse_{name}_alerts", uri=f"lakehouse://tables/{name}/alerts",
                 group="lakehouse", extra={"lakehouse_view": _view(name)})


__all__ = ["commits_asset", "due_asset", "due_alias", "alerts_asset", "DUE_SERVICES"]
