"""Meta sync tools: where a table's commits are published besides Hudi's timeline.

As Hudi runs the ``HoodieSyncTool`` classes its config names (``hoodie.meta.sync.client.tool.class``,
the Hive sync by default) once a commit is durable, lakehouse runs the sync tools a table's
options turn on: Iceberg metadata (``hoodie.meta.sync.iceberg.enabled``, on by default:
:class:`lakehouse.iceberg.hook.IcebergSync`). The table format names a tool by reference and
loads it when a commit needs it, so it never imports the integration (its import-linter contract).
A tool also says what it has published before (the column ids of a table published before its
writers recorded them), so that the writers keep that numbering (:mod:`lakehouse.field_ids`).

In-process hooks for one meta client are :attr:`TableMetaClient.post_commit_hooks`
(lakehouse.commit runs both).
"""

from __future__ import annotations

import functools
import importlib
from typing import TYPE_CHECKING, Protocol, Sequence

from lakehouse.config import IcebergConfig
from lakehouse.errors import ConfigError

if TYPE_CHECKING:
    from lakehouse.field_schema import Schema
    from lakehouse.meta_client import TableMetaClient
    from lakehouse.timeline.instant import Instant

# The Iceberg publisher (lakehouse.iceberg): a reference, loaded on first use.
ICEBERG = "lakehouse.iceberg.hook:IcebergSync"


class MetaSyncTool(Protocol):
    def after_commit(self, meta: "TableMetaClient", instants: Sequence["Instant"]) -> None:
        """Bring the target up to date with every instant completed so far (``instants``: the
        ones just completed). Runs after they are durable, outside the table lock; an error is
        logged and never fails them."""

    def published_schema(self, meta: "TableMetaClient") -> "tuple[Schema, int] | None":
        """The schema (with its column ids) and the highest column id the target holds, or None."""


@functools.cache
def load(reference: str) -> MetaSyncTool:
    """The tool ``module:Class`` names (one instance per process)."""
    module, _, name = reference.partition(":")
    try:
        return getattr(importlib.import_module(module), name)()
    except (ImportError, AttributeError) as e:
        raise ConfigError(f"the meta sync tool {reference} cannot be loaded ({e})",
                          help="reinstall lakehouse, or turn the sync off "
                               "(hoodie.meta.sync.iceberg.enabled=false)") from e


def configured(meta: "TableMetaClient") -> tuple[MetaSyncTool, ...]:
    """The sync tools ``meta``'s options turn on (read at each commit: an option stored with the
    table since takes effect at the next one)."""
    iceberg = IcebergConfig.from_options(meta.options(None, "meta sync"))
    return (load(ICEBERG),) if iceberg.enabled else ()


def published_schema(meta: "TableMetaClient") -> "tuple[Schema, int] | None":
    """What the first of ``meta``'s sync tools that has published a schema published."""
    for tool in configured(meta):
        found = tool.published_schema(meta)
        if found is not None:
            return found
    return None
