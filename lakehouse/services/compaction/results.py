"""Where an executing compaction records each operation's result.

Hudi keeps ``<t>.compaction.inflight`` empty, and so does lakehouse (Java readers expect it). The
results go beside the timeline in ``.hoodie/.aux``, the folder Hudi leaves free for auxiliary
files, as one JSON document written atomically when the execution finishes.
"""

from __future__ import annotations

import json

from lakehouse.errors import CorruptFileError
from lakehouse.storage.base import Storage
from lakehouse.timeline.commit_metadata import WriteStat
from lakehouse import layout

def results_path(instant_time: str) -> str:
    return layout.compaction_results(instant_time)


def write_results(storage: Storage, instant_time: str, stats: list[WriteStat], failures: list[dict]) -> None:
    doc = {"instant": instant_time, "stats": [s.to_json() for s in stats], "failures": failures}
    storage.write(results_path(instant_time), json.dumps(doc).encode())


def read_results(storage: Storage, instant_time: str) -> tuple[list[WriteStat], list[dict]] | None:
    path = results_path(instant_time)
    try:
        raw = storage.read(path)
    except FileNotFoundError:
        return None
    try:
        doc = json.loads(raw)
        return [WriteStat.from_json(s) for s in doc["stats"]], list(doc.get("failures", []))
    except (ValueError, KeyError, TypeError) as e:
        raise CorruptFileError(storage.uri(path), f"unreadable compaction results ({e})") from None


def delete_results(storage: Storage, instant_time: str) -> None:
    storage.delete(results_path(instant_time))
