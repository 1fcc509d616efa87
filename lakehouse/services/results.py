"""Where an executing table service (a compaction, a clustering) records each task's result.

Hudi keeps ``<t>.compaction.inflight`` and a clustering's ``<t>.replacecommit.inflight`` empty,
and so does lakehouse (Java readers expect it). The results go beside the timeline in
``.hoodie/.aux``, the folder Hudi leaves free for auxiliary files, as one JSON document written
atomically when the execution finishes; the commit step, maybe in another process, reads them.
"""

from __future__ import annotations

import json

from lakehouse.errors import CorruptFileError
from lakehouse.storage.base import Storage
from lakehouse.timeline.commit_metadata import WriteStat
from lakehouse import layout

def results_path(instant_time: str, service: str = "compaction") -> str:
    return layout.service_results(instant_time, service)


def write_results(storage: Storage, instant_time: str, stats: list[WriteStat], failures: list[dict],
                  service: str = "compaction") -> None:
    doc = {"instant": instant_time, "stats": [s.to_json() for s in stats], "failures": failures}
    storage.write(results_path(instant_time, service), json.dumps(doc).encode())


def read_results(storage: Storage, instant_time: str,
                 service: str = "compaction") -> tuple[list[WriteStat], list[dict]] | None:
    path = results_path(instant_time, service)
    try:
        raw = storage.read(path)
    except FileNotFoundError:
        return None
    try:
        doc = json.loads(raw)
        return [WriteStat.from_json(s) for s in doc["stats"]], list(doc.get("failures", []))
    except (ValueError, KeyError, TypeError) as e:
        raise CorruptFileError(storage.uri(path), f"unreadable {service} results ({e})") from None


def delete_results(storage: Storage, instant_time: str, service: str = "compaction") -> None:
    storage.delete_many([results_path(instant_time, service)])  # absent too: one request


def files_not_as_recorded(storage: Storage, stats: list[WriteStat]) -> list[str]:
    """The files of ``stats`` that are missing, or not of the size their result recorded (what
    a commit step checks before it publishes an execution's files)."""
    out = []
    for s in stats:
        info = storage.info(s.path)
        if info is None or info.size != s.file_size_in_bytes:
            out.append(f"{s.path}: {'missing' if info is None else 'size differs from its result'}")
    return out
