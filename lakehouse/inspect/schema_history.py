"""A table's schema and how it got there: the columns of the newest write's schema, and every
completed write (archived ones included) whose schema differs from the one before it, with the
columns it added, dropped or changed. Read from the commit metadata's ``schema`` (the Avro
schema every Hudi write records), never from a data file; Hudi's meta fields are left out."""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Sequence

from lakehouse.columns import META_FIELDS
from lakehouse.errors import LakehouseError
from lakehouse.inspect.timeline import Fact
from lakehouse.schema import avro_to_arrow_schema


@lru_cache(maxsize=256)
def _columns(avro: str) -> tuple[tuple[str, str, bool], ...] | None:
    try:
        schema = avro_to_arrow_schema(avro)
    except (LakehouseError, ValueError, TypeError, KeyError):
        return None  # a schema lakehouse cannot read says nothing about columns
    return tuple((f.name, str(f.type), f.nullable) for f in schema if f.name not in META_FIELDS)



def _diff(old: tuple, new: tuple) -> dict[str, list]:
    before, after = {c[0]: c for c in old}, {c[0]: c for c in new}
    return {"added": [{"name": n, "type": c[1], "nullable": c[2]} for n, c in after.items() if n not in before],
            "dropped": [{"name": n, "type": c[1]} for n, c in before.items() if n not in after],
            "changed": [{"name": n, "from": _shown(before[n]), "to": _shown(c)}
                        for n, c in after.items() if n in before and before[n] != c]}


def _shown(c: tuple[str, str, bool]) -> str:
    return c[1] + ("" if c[2] else " not null")


def schema_history(facts: Sequence[Fact]) -> dict[str, Any]:
    """``columns``: the newest schema's (name, type, nullable), ``since``: the write that set it;
    ``changes``: each write that changed the schema, oldest first (the first write's columns
    all count as added)."""
    prev: tuple | None = None
    changes: list[dict[str, Any]] = []
    since = None
    for f in facts:
        if f.meta is None or f.row.get("state") != "completed" or f.row.get("action") == "compaction":
            continue
        avro = f.meta.schema
        cols = _columns(avro) if avro else None
        if cols is None or cols == prev:
            continue
        change = _diff(prev or (), cols)
        changes.append({"instant": f.row["time"], "operation": f.row.get("operation"),
                        "columns": len(cols), **change})
        prev, since = cols, f.row["time"]
    columns = [{"name": n, "type": t, "nullable": nullable} for n, t, nullable in prev or ()]
    return {"columns": columns, "since": since, "changes": changes}


__all__ = ["schema_history"]
