"""Field ids of a table's columns: decided by the writers, kept on the timeline, put in parquet.

Iceberg readers find a parquet column by its field id, and only some fall back to the
``schema.name-mapping.default`` property for files without ids (Daft does not). So every base
file lakehouse writes carries the ids of the Iceberg schema the table is published with. The ids
are decided when a file is written, not when it is published (publishing may lag behind, or run
afresh for a moved table): a commit that records a schema records its ids next to it in
``extraMetadata``: ``lakehouse.iceberg.schema`` (an Iceberg schema as JSON) and
``lakehouse.iceberg.last-column-id``. Hudi readers ignore both, and parquet field ids.

A column keeps its id for as long as the timeline knows it, by path (a column dropped and added
again gets its old id back: Hudi reads it back by name from the older files too); a new column
gets the next id above the highest any commit used. Before the first commit that records ids,
they come from the published Iceberg metadata, if any, so a table published before keeps its
numbering.

Two writers adding columns at once could both take the next id: the second to commit finds it
taken (:func:`conflict`) and writes again, as on any write conflict.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Mapping

import pyarrow as pa

from lakehouse.errors import IcebergSyncError
from lakehouse.field_schema import (IcebergType, Path, Schema, arrow_to_iceberg, known_ids, path_ids,
                                      schema_from_json, schema_to_json)
from lakehouse.meta_sync import published_schema
from lakehouse.timeline.commit_metadata import CommitMetadata

if TYPE_CHECKING:
    from lakehouse.meta_client import TableMetaClient

SCHEMA_KEY = "lakehouse.iceberg.schema"
LAST_COLUMN_ID_KEY = "lakehouse.iceberg.last-column-id"


@dataclass(frozen=True)
class FieldIds:
    """The ids of one schema's columns, and the highest id the table has used."""

    schema: Schema
    last_column_id: int

    @property
    def paths(self) -> dict[Path, int]:
        return path_ids(self.schema)

    def extra_metadata(self) -> dict[str, str]:
        return {SCHEMA_KEY: json.dumps(schema_to_json(self.schema), separators=(",", ":")),
                LAST_COLUMN_ID_KEY: str(self.last_column_id)}

    @classmethod
    def of_commit(cls, meta: CommitMetadata, where: str = "a commit") -> "FieldIds | None":
        raw = meta.extra_metadata.get(SCHEMA_KEY)
        if not raw:
            return None
        try:
            schema = schema_from_json(json.loads(raw))
            last = int(meta.extra_metadata.get(LAST_COLUMN_ID_KEY, schema.highest_field_id))
        except (ValueError, KeyError, TypeError) as e:
            raise IcebergSyncError(f"{where} records unreadable field ids in {SCHEMA_KEY} ({e})",
                                   help="the commit file was edited or damaged: restore it; base files "
                                        "written after it would otherwise get wrong field ids") from None
        return cls(schema, max(last, schema.highest_field_id))


@dataclass(frozen=True)
class Known:
    """What the timeline knows: path -> (id, type), and the highest id used."""

    ids: Mapping[Path, tuple[int, IcebergType]]
    last_column_id: int


def known(meta: "TableMetaClient", timeline,
          published: Callable[[], tuple[Schema, int] | None] | None = None) -> Known:
    """The ids of every column the completed writes of ``timeline`` recorded (a newer commit's
    win); without any, those of the schema published before (``published``, default: what the
    table's meta sync tools published: lakehouse.meta_sync)."""
    ids: dict[Path, tuple[int, IcebergType]] = {}
    last = 0
    found = False
    for inst in timeline.completed_writes():
        f = FieldIds.of_commit(meta.active.commit_metadata(inst), f"instant {inst.time}")
        if f is not None:
            ids.update(known_ids(f.schema))
            last = max(last, f.last_column_id)
            found = True
    if not found:
        found = published() if published is not None else published_schema(meta)
        if found is not None:
            ids, last = known_ids(found[0]), found[1]
    return Known(ids, last)


@dataclass(frozen=True)
class Stored:
    instant: str
    ids: FieldIds


def stored_as_of(meta: "TableMetaClient", timeline, t: str) -> Stored | None:
    """The ids recorded by the commit whose schema is the table's as of ``t`` (None: that commit
    recorded none, or no commit records a schema)."""
    for inst in reversed(timeline.completed_writes().before_or_on(t).instants):
        cm = meta.active.commit_metadata(inst)
        if cm.schema:
            ids = FieldIds.of_commit(cm, f"instant {inst.time}")
            return Stored(inst.time, ids) if ids is not None else None
    return None


def assign(known_now: Known, arrow: pa.Schema) -> FieldIds:
    """Ids for ``arrow`` (the full schema, meta columns first): known paths keep theirs."""
    schema, last = arrow_to_iceberg(arrow, schema_id=0, previous=None,
                                    last_column_id=known_now.last_column_id, known=known_now.ids,
                                    check_types=False)
    return FieldIds(schema, last)


def conflict(known_now: Known, mine: FieldIds) -> str | None:
    """Why ``mine`` (assigned from an older state) no longer fits the timeline, or None."""
    for path, fid in mine.paths.items():
        had = known_now.ids.get(path)
        if had is not None and had[0] != fid:
            return f"column {'.'.join(path)!r} was numbered {fid}, but a commit since numbered it {had[0]}"
        if had is None and fid <= known_now.last_column_id:
            return (f"column {'.'.join(path)!r} took the new field id {fid}, which a commit since "
                    "gave another column")
    return None
