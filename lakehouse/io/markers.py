"""Markers: ``.hoodie/.temp/<instant>/<partition>/<file>.marker.<TYPE>``, one per data file a
write creates, rewrites or appends to, always made *before* the data file so that a rollback
finds every file a crashed writer may have left behind."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from lakehouse.faults import fault_point
from lakehouse.storage.base import Storage
from lakehouse import layout


class MarkerType(enum.StrEnum):
    CREATE = "CREATE"
    MERGE = "MERGE"
    APPEND = "APPEND"


@dataclass(frozen=True, slots=True)
class Marker:
    partition: str
    file_name: str
    type: MarkerType

    @property
    def data_path(self) -> str:
        return f"{self.partition}/{self.file_name}" if self.partition else self.file_name


class Markers:
    def __init__(self, storage: Storage, instant_time: str) -> None:
        self.storage = storage
        self.instant_time = instant_time
        self.root = f"{layout.TEMP}/{instant_time}"
        # What this object marked (a dict's item set and pop are atomic: handles on several
        # threads share it). Recorded before the touch, whose outcome may be unknown.
        self._made: dict[str, Marker] = {}

    def create(self, partition: str, file_name: str, type: MarkerType) -> None:
        rel = f"{partition}/{file_name}" if partition else file_name
        self._made[f"{rel}.{type}"] = Marker(partition, file_name, type)
        self.storage.touch(f"{self.root}/{rel}.marker.{type}")
        fault_point("write.after_first_marker")

    def delete(self, partition: str, file_name: str, type: MarkerType) -> None:
        rel = f"{partition}/{file_name}" if partition else file_name
        self.storage.delete(f"{self.root}/{rel}.marker.{type}")
        self._made.pop(f"{rel}.{type}", None)

    def made(self) -> list[Marker]:
        """The markers created through this object and not deleted: every marker of the instant
        when all its files were written through this object (one process's writer; not a
        Spark write, whose tasks each mark through their own)."""
        return list(self._made.values())

    def all(self) -> list[Marker]:
        out = []
        for info in self.storage.list(self.root, recursive=True):
            if info.is_dir or ".marker." not in info.name:
                continue
            rel = info.path[len(self.root) + 1:] if info.path.startswith(self.root + "/") else info.path
            rel, _, kind = rel.rpartition(".marker.")
            partition, _, name = rel.rpartition("/")
            try:
                out.append(Marker(partition, name, MarkerType(kind)))
            except ValueError:
                continue
        return out

    def delete_all(self, known: "list[Marker] | None" = None) -> None:
        """Delete the instant's markers. ``known``: all of them, just listed (by the commit that
        checked the files against them): on an object store they then go without listing the
        folder again, in one request."""
        if known is not None and not self.storage.keeps_empty_folders:
            self.storage.delete_many([f"{self.root}/{m.data_path}.marker.{m.type}" for m in known])
        else:
            self.storage.delete_dir(self.root)


def delete_stale_markers(storage: Storage, completed_times: set[str] | frozenset[str]) -> int:
    """Remove marker folders of instants that completed (their writer died before cleaning up)."""
    n = 0
    for info in storage.list(layout.TEMP):
        if info.is_dir and info.name in completed_times:
            storage.delete_dir(info.path)
            n += 1
    return n
