"""Files landing in a directory, ingested exactly once.

The checkpoint (the last file taken, by modification time then name, as Hudi's DFS source
orders them) is stored in the extra metadata of the commit that applied those files, under
Hudi's DeltaStreamer key. Data and checkpoint therefore become visible in one atomic step: a
crash before the commit leaves the old checkpoint, the failed write is rolled back, and the
rerun takes the same files again; a crash after it finds them already applied.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.json as pajson
import pyarrow.parquet as pq

from lakehouse.errors import ConfigError, LakehouseError, SchemaError
from lakehouse.storage import get_storage

if TYPE_CHECKING:
    from lakehouse.table import Table

CHECKPOINT_KEY = "deltastreamer.checkpoint.key"
SOURCE_KEY = "lakehouse.ingest.source"
FORMATS = {".parquet": "parquet", ".jsonl": "jsonl", ".json": "jsonl", ".csv": "csv"}


@dataclass(frozen=True, order=True)
class Checkpoint:
    mtime_ns: int
    name: str

    def encode(self) -> str:
        return f"{self.mtime_ns}:{self.name}"

    @classmethod
    def decode(cls, s: str | None) -> "Checkpoint | None":
        if not s:
            return None
        mtime, _, name = s.partition(":")
        try:
            return cls(int(mtime), name)
        except ValueError:
            raise ConfigError(f"checkpoint {s!r} is not '<mtime_ns>:<file name>'",
                              help="the table's last commit holds a checkpoint from another source; "
                                   "pass --checkpoint to start from a chosen point") from None


def last_checkpoint(table: "Table", source: str | None = None) -> Checkpoint | None:
    """The checkpoint of the newest completed commit that carries one (for this source)."""
    timeline = table.timeline
    for inst in reversed(timeline.completed_writes().instants):
        extra = table.active.commit_metadata(inst).extra_metadata
        if CHECKPOINT_KEY in extra and (source is None or extra.get(SOURCE_KEY) in (None, source)):
            return Checkpoint.decode(extra[CHECKPOINT_KEY])
    return None


def pending_files(source_dir: str, after: Checkpoint | None, *, max_files: int | None = None
                  ) -> list[tuple[Checkpoint, str]]:
    storage = get_storage(source_dir)
    found = []
    for info in storage.list(""):
        if info.is_dir or info.name.startswith((".", "_")):
            continue
        if os.path.splitext(info.name)[1].lower() not in FORMATS:
            continue
        cp = Checkpoint(info.mtime_ns or 0, info.name)
        if after is None or cp > after:
            found.append((cp, storage.uri(info.path)))
    found.sort()
    return found[:max_files] if max_files else found


def read_file(uri: str, fmt: str = "auto", schema: pa.Schema | None = None) -> pa.Table:
    path = uri[len("file://"):] if uri.startswith("file://") else uri
    kind = FORMATS.get(os.path.splitext(path)[1].lower()) if fmt == "auto" else fmt
    try:
        if kind == "parquet":
            return pq.read_table(path)
        if kind == "jsonl":
            return pajson.read_json(path)
        if kind == "csv":
            opts = pacsv.ConvertOptions(column_types={f.name: f.type for f in schema} if schema else None)
            return pacsv.read_csv(path, convert_options=opts)
    except (pa.ArrowInvalid, OSError) as e:
        raise SchemaError(f"{uri} cannot be read as {kind}: {e}",
                          help="fix or remove the file; nothing was written") from None
    raise ConfigError(f"unknown input format {kind!r} for {uri}", help="use parquet, jsonl or csv")


@dataclass(frozen=True)
class IngestResult:
    instant: str | None
    files: int
    rows: int
    checkpoint: str | None
    committed: bool
    reason: str = ""

    def to_json(self) -> dict:
        return {"action": "ingest", "instant": self.instant, "files": self.files, "rows": self.rows,
                "checkpoint": self.checkpoint, "committed": self.committed, "reason": self.reason}


Writer = Callable[[list[str], dict[str, str]], tuple[str, int]]


def ingest(table: "Table", source_dir: str, *, operation: str = "upsert", fmt: str = "auto",
           max_files: int | None = None, commit: bool = True,
           options: dict[str, str] | None = None, writer: Writer | None = None,
           extra_metadata: dict[str, str] | None = None) -> IngestResult:
    """Apply the files that landed since the last checkpoint as one write (phase 1, and phase 2
    unless ``commit=False``). Exactly once, whatever crashed before.

    ``writer(file_uris, extra_metadata) -> (instant, rows)`` replaces the in-process read and
    write (the Spark job reads and writes on executors); it must put ``extra_metadata`` on the
    commit, since the checkpoint travels there. ``extra_metadata`` (tags: who ran it) goes there too."""
    source = get_storage(source_dir).uri()
    after = last_checkpoint(table, source)
    files = pending_files(source_dir, after, max_files=max_files)
    if not files:
        return IngestResult(None, 0, 0, after.encode() if after else None, False,
                            reason=f"no new files in {source} since "
                                   f"{after.name if after else 'the beginning'}")
    checkpoint = files[-1][0].encode()
    extra = {**(extra_metadata or {}), CHECKPOINT_KEY: checkpoint, SOURCE_KEY: source,
             "lakehouse.ingest.files": json.dumps([os.path.basename(u) for _, u in files])}
    if writer is not None:
        instant, rows = writer([uri for _, uri in files], extra)
        return IngestResult(instant, len(files), rows, checkpoint, commit)
    schema = None
    try:
        schema = table.schema()
    except LakehouseError:  # a table without data yet has no schema to parse CSV with
        schema = None
    tables = [read_file(uri, fmt, schema) for _, uri in files]
    batch = pa.concat_tables(tables, promote_options="permissive")
    instant = table.write(batch, operation, commit=commit, extra_metadata=extra, options=options)
    return IngestResult(instant, len(files), batch.num_rows, checkpoint, commit)
