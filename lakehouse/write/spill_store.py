"""Rows spilled to local files by group, for a write larger than ``write.task.max.size``
(lakehouse.write.spill): Hudi's ExternalSpillableMap holds a merge's records the same way."""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from array import array
from typing import Any, Iterator

import pyarrow as pa

# Group keys: ("fg", partition, file id) for a known file group, ("bucket", partition, bucket)
# for a bucket-index bucket, ("new", partition or None, h) for records no file group holds.
Group = tuple[str, Any, Any]


class Spill:
    """Rows spilled to local Arrow IPC files (lz4) by group, and read back a group at a time.

    Rows wait in memory until an eighth of ``budget`` is waiting; then all of them go to one
    file (a run), a record batch per group, and an index notes which batches of which runs
    hold a group. Reading a group takes its batches from every run (IPC files are read batch by
    batch). One file per eighth of the budget, however many groups: a file (or a flush) per group
    made a write to thousands of groups spend most of its time opening files."""

    def __init__(self, budget: int) -> None:
        self.dir = tempfile.mkdtemp(prefix="lakehouse-spill-")
        self.limit = max(1, budget // 8)
        # Per group, flat (run, first batch, batches) triples: a write to thousands of file
        # groups has a triple per group and run, so no Python object per triple.
        self.runs: dict[Group, array] = {}
        self.sizes: dict[Group, int] = {}
        self._paths: list[str] = []
        # Blocks waiting: rows in group order, their groups and each group's (start, end).
        self._blocks: list[tuple[pa.Table, list[Group], list[int], list[int]]] = []
        self._pending_groups: set[Group] = set()
        self._pending_bytes = 0
        self._schema: pa.Schema | None = None
        # Runs' readers, opened once: a run holds a batch of most groups, and its footer (a
        # block per batch) read again per group made a write to thousands of file groups
        # read gigabytes of footers.
        self._readers: dict[str, tuple[pa.ipc.RecordBatchFileReader, pa.OSFile, threading.Lock]] = {}
        self._readers_lock = threading.Lock()

    @property
    def groups(self) -> list[Group]:
        return list(self.runs.keys() | self._pending_groups)

    def add(self, group: Group, rows: pa.Table, nbytes: int | None = None) -> None:
        """``nbytes``: the rows' size if known (a slice's own is costly to work out)."""
        if rows.num_rows:
            self.add_block(rows, [group], [0], [rows.num_rows], nbytes)

    def add_block(self, rows: pa.Table, groups: list[Group], starts: list[int], ends: list[int],
                  nbytes: int | None = None) -> None:
        """``rows`` in group order: rows ``starts[i]:ends[i]`` go to ``groups[i]``."""
        if rows.num_rows == 0:
            return
        nbytes = rows.nbytes if nbytes is None else nbytes
        per_row = nbytes / rows.num_rows
        for g, a, b in zip(groups, starts, ends):
            self.sizes[g] = self.sizes.get(g, 0) + int((b - a) * per_row)
        self._pending_groups.update(groups)
        self._blocks.append((rows, groups, starts, ends))
        self._pending_bytes += nbytes
        if self._pending_bytes >= self.limit:
            self.finish()

    def finish(self) -> None:
        """Writes what waits in memory as a run: a group's rows from every block in one batch."""
        if not self._blocks:
            return
        blocks, self._blocks, self._pending_bytes = self._blocks, [], 0
        self._pending_groups = set()
        if self._schema is None:
            self._schema = blocks[0][0].schema
        blocks = [(t if t.schema == self._schema else t.cast(self._schema), g, a, b) for t, g, a, b in blocks]
        pieces: dict[Group, list[tuple[int, int, int]]] = {}
        for i, (_, groups, starts, ends) in enumerate(blocks):
            for g, a, b in zip(groups, starts, ends):
                pieces.setdefault(g, []).append((i, a, b - a))
        run = len(self._paths)
        path = os.path.join(self.dir, f"{run}.arrow")
        self._paths.append(path)
        at = 0
        with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(
                sink, self._schema, options=pa.ipc.IpcWriteOptions(compression="lz4")) as w:
            for group, where in pieces.items():
                parts = [blocks[i][0].slice(a, n) for i, a, n in where]
                rows = parts[0] if len(parts) == 1 else pa.concat_tables(parts)
                batches = rows.combine_chunks().to_batches()
                for b in batches:
                    w.write_batch(b)
                self.runs.setdefault(group, array("q")).extend((run, at, len(batches)))
                at += len(batches)

    def read(self, group: Group) -> pa.Table:
        return pa.Table.from_batches(list(self.batches(group)), schema=self._schema).combine_chunks()

    def batches(self, group: Group, columns: list[str] | None = None) -> Iterator[pa.RecordBatch]:
        """``group``'s record batches one at a time, in the order they were added."""
        flat = self.runs.get(group, ())
        for k in range(0, len(flat), 3):
            run, first, count = flat[k], flat[k + 1], flat[k + 2]
            reader, _, lock = self._reader(self._paths[run])
            for i in range(first, first + count):
                with lock:
                    b = reader.get_batch(i)
                yield b.select(columns) if columns is not None else b

    def _reader(self, path: str) -> tuple[pa.ipc.RecordBatchFileReader, pa.OSFile, threading.Lock]:
        with self._readers_lock:
            hit = self._readers.get(path)
            if hit is None:
                f = pa.OSFile(path, "rb")
                hit = self._readers[path] = (pa.ipc.open_file(f), f, threading.Lock())
            return hit

    def close(self) -> None:
        with self._readers_lock:
            readers, self._readers = self._readers, {}
        for _, f, _ in readers.values():
            f.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> "Spill":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


__all__ = ["Group", "Spill"]
