"""What Iceberg readers see of a table now: the published metadata's current snapshot (its id,
the Hudi instant it shows, its row count) and the catalog the table is registered in. Read from
the metadata alone, never a data file: the snapshot's row count is the summary's
``total-records`` less its position deletes, which the publisher counts commit by commit."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lakehouse.config.services import url_has_secret
from lakehouse.errors import CorruptFileError, LakehouseError
from lakehouse.iceberg import catalog
from lakehouse.iceberg.publish import VIEW_PROPERTY, iceberg_config
from lakehouse.iceberg.store import MetadataStore, metadata_file
from lakehouse.meta_client import meta_client_of

if TYPE_CHECKING:
    from lakehouse.meta_client import TableMetaClient


def _int(summary: Any, key: str) -> int | None:
    v = summary.get(key)
    return int(v) if v is not None and str(v).lstrip("-").isdigit() else None


def _shown_url(uri: str) -> str | None:
    """The catalog setting as it may be shown to any viewer: an ``env:NAME`` reference, or a URL
    without a credential (None when it holds one: a password, or a secret query parameter)."""
    if uri.startswith("env:"):
        return uri
    return None if url_has_secret(uri) else uri


def iceberg_status(table: "TableMetaClient | Any") -> dict[str, Any]:
    """The Iceberg side of ``table`` (a table or its meta client) as JSON types: ``enabled``,
    ``metadata_location``, ``version``, ``snapshot_id``, ``instant`` (the Hudi instant the
    current snapshot shows), ``snapshot_rows`` (rows a reader of it gets), ``snapshots``,
    ``catalog`` (name, identifier, shown URL) and ``problem`` (why the metadata could not be read)."""
    meta = meta_client_of(table)
    out: dict[str, Any] = {"enabled": False, "metadata_location": None, "version": 0, "snapshot_id": None,
                           "instant": None, "snapshot_rows": None, "data_files": None, "snapshots": 0,
                           "view": None, "catalog": None, "problem": None}
    try:
        config = iceberg_config(meta)
    except LakehouseError as e:
        out["problem"] = e.message
        return out
    out["enabled"] = config.enabled
    try:
        entry = catalog.catalog_entry(config, meta.config.name, meta.config.database_name or "default")
    except LakehouseError as e:
        entry, out["problem"] = None, e.message
    if entry is not None:
        out["catalog"] = {"name": entry.catalog, "namespace": entry.namespace, "table": entry.name,
                          "identifier": entry.identifier, "uri": _shown_url(config.catalog_uri.strip())}
    try:
        version, md = MetadataStore(meta.storage).load()
    except CorruptFileError as e:
        out["problem"] = e.message
        return out
    if md is None:
        return out
    out.update(version=version, metadata_location=meta.storage.uri(metadata_file(version)),
               snapshots=len(md.snapshots), view=md.properties.get(VIEW_PROPERTY))
    snap = md.current_snapshot
    if snap is not None:
        records = _int(snap.summary, "total-records")
        deletes = _int(snap.summary, "total-position-deletes") or 0
        out.update(snapshot_id=snap.snapshot_id, instant=snap.instant,
                   snapshot_rows=None if records is None else records - deletes,
                   data_files=_int(snap.summary, "total-data-files"))
    return out


__all__ = ["iceberg_status"]
