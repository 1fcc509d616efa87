"""Files landing in a directory, ingested exactly once.

Which files were taken is kept by name: each ingest writes a manifest of every file name taken
from the source so far (a parquet file under ``.hoodie/.aux/lakehouse/ingest/``) and names it in
the extra metadata of the commit that applies the new files, beside the checkpoint under Hudi's
DeltaStreamer key (the last file taken, by modification time then name, as Hudi's DFS source
orders them). Data and manifest therefore become visible in one atomic step: a crash before the
commit leaves the old manifest, the failed write is rolled back, and the rerun takes the same
files again; a crash after it finds them already applied.

Hudi's DFS source (and this one before) decided by the checkpoint alone: a file landing with a
modification time older than it (a ``cp -p``, a restored backup) was never taken, so exactly
once became at most once. A file is now taken once its name is new, whatever its time; a table
whose last ingest predates manifests starts one from the files at or before its checkpoint.

The record (``lakehouse.ingest.state.<source>``: checkpoint and manifest) rides on every later
commit of any writer (:mod:`lakehouse.timeline.carried`), so archival never hides it; a table
with no record left of a source it took files from refuses to take them again
(:class:`~lakehouse.errors.CheckpointLostError`).
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import re
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.json as pajson
import pyarrow.parquet as pq

from lakehouse.errors import CheckpointLostError, ConfigError, LakehouseError, SchemaError
from lakehouse.services.archive import archived_extras
from lakehouse.storage import get_storage
from lakehouse.timeline.carried import INGEST_STATE_PREFIX, believable, values
from lakehouse.write.source import ParquetSource
from lakehouse import layout

if TYPE_CHECKING:
    from lakehouse.table import Table
    from lakehouse.write.client import ExtraMetadata

CHECKPOINT_KEY = "deltastreamer.checkpoint.key"
SOURCE_KEY = "lakehouse.ingest.source"
MANIFEST_KEY = "lakehouse.ingest.manifest"
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


def _source_id(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:16]


def state_key(source: str) -> str:
    """The extra metadata key of a source's progress, carried from commit to commit."""
    return INGEST_STATE_PREFIX + _source_id(source)


def _manifest_folder(source: str) -> str:
    return f"{layout.INGEST_MANIFESTS}/{_source_id(source)}"


def _committed_mark(source: str) -> str:
    """The newest ingest commit of the source known to have landed: while it stands (completed,
    or archived), finding no record of the source on the timeline means the record was lost, not
    that nothing was ingested (the manifests alone cannot tell: an attempt that never committed
    leaves one too)."""
    return f"{_manifest_folder(source)}/_committed"


@dataclass(frozen=True)
class IngestState:
    """What the newest ingest from a source recorded: its checkpoint, its manifest (None for
    commits from before manifests) and the commit that wrote it."""
    checkpoint: Checkpoint | None
    manifest: str | None
    origin: str


def ingest_state(table: "Table", source: str | None) -> IngestState | None:
    """The newest ingest's record for ``source`` (any source: None): carried on every later
    commit (:mod:`lakehouse.timeline.carried`), else on the ingest commit itself (tables written
    before carrying, other programs' commits in between), else in the archived timeline."""
    key = state_key(source) if source else None

    def match(k: str) -> bool:
        return k == CHECKPOINT_KEY or (k == key if key else k.startswith(INGEST_STATE_PREFIX))

    found: list[IngestState] = []
    for origin, k, value, extra in values(table.active, table.timeline, match,
                                          archived=lambda: archived_extras(table.meta_client),
                                          in_order=not table.concurrency.multi_writer):
        if k == CHECKPOINT_KEY:
            # An ingest commit's own keys (every version wrote them).
            if source is not None and extra.get(SOURCE_KEY) not in (None, source):
                continue
            found.append(IngestState(Checkpoint.decode(value), extra.get(MANIFEST_KEY), origin))
            continue
        try:
            doc = json.loads(value)
            found.append(IngestState(Checkpoint.decode(doc.get("checkpoint")), doc.get("manifest"), origin))
        except (ValueError, AttributeError):
            raise LakehouseError(f"the commit metadata key {k} is not an ingest record ({value!r})",
                                 help="fix or remove the key in the newest commit that carries it") from None
    return max(found, key=lambda st: st.origin) if found else None


def last_checkpoint(table: "Table", source: str | None = None) -> Checkpoint | None:
    """The checkpoint of the newest ingest (from this source)."""
    st = ingest_state(table, source)
    return st.checkpoint if st else None


def ingested_names(table: "Table", source: str, state: IngestState | None = None) -> set[str]:
    """Every file name taken from ``source`` so far, from the newest ingest's manifest; for a
    commit from before manifests, the files at or before its checkpoint. A source whose
    manifests exist while no commit, active or archived, records its progress has lost it:
    :class:`CheckpointLostError`, not every file again."""
    st = state or ingest_state(table, source)
    mark = _committed_mark(source)
    if st is None:
        last = table.storage.read(mark).decode() if table.storage.exists(mark) else None
        # A marked commit rolled back since (on the active timeline's span, absent) lost nothing.
        if last is not None and believable(table.timeline, last):
            raise CheckpointLostError(
                f"{source} was ingested into {table.path} before (manifests under "
                f"{_manifest_folder(source)}), but no commit, active or archived, records what was "
                "taken: ingesting now would apply every file in it again",
                help="if that is what you want, delete that folder and ingest again; else restore the "
                     f"archived timeline ({layout.ARCHIVED}) the records were in")
        return set()
    if not table.storage.exists(mark) or table.storage.read(mark).decode() != st.origin:
        table.storage.write(mark, st.origin.encode())
    path = st.manifest
    if path:
        try:
            return set(pq.read_table(table.storage.open_input(path)).column("name").to_pylist())
        except FileNotFoundError:
            raise LakehouseError(f"{table.storage.uri(path)}, the ingest manifest of the last ingest "
                                 f"from {source}, is missing",
                                 help="restore the file, or start over with a new table") from None
    return {name for c, name in _landed(source) if st.checkpoint is None or c <= st.checkpoint}


def _landed(source_dir: str) -> list[tuple[Checkpoint, str]]:
    storage = get_storage(source_dir)
    out = []
    for info in storage.list(""):
        if info.is_dir or info.name.startswith((".", "_")):
            continue
        if os.path.splitext(info.name)[1].lower() not in FORMATS:
            continue
        out.append((Checkpoint(info.mtime_ns or 0, info.name), info.name))
    return out


def pending_files(source_dir: str, taken: set[str], *, max_files: int | None = None
                  ) -> list[tuple[Checkpoint, str]]:
    """(checkpoint, uri) of the files not taken yet, oldest first (by time, then name)."""
    storage = get_storage(source_dir)
    found = sorted((cp, storage.uri(name)) for cp, name in _landed(source_dir) if name not in taken)
    return found[:max_files] if max_files else found


def write_manifest(table: "Table", source: str, names: set[str], current: str | None = None) -> str:
    """A new manifest of ``names`` (the commit that names it makes it the current one); older
    manifests of the source that no instant names any more are removed (``current``, the one
    the ingest read, stays until a commit names the new one)."""
    folder = _manifest_folder(source)
    path = f"{folder}/{time.strftime('%Y%m%d%H%M%S', time.gmtime())}-{uuid.uuid4().hex[:12]}.parquet"
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table({"name": pa.array(sorted(names), pa.string())}), sink, compression="zstd")
    table.storage.create(path, sink.getvalue().to_pybytes())
    named = {current}
    for i in table.timeline.completed_writes():
        extra = table.active.commit_metadata(i).extra_metadata
        named.add(extra.get(MANIFEST_KEY))
        try:
            named.add(json.loads(extra.get(state_key(source)) or "{}").get("manifest"))
        except (ValueError, AttributeError):
            continue
    for info in table.storage.list(folder):
        # Keep what a commit names, and what a write under way may be about to (an hour's grace).
        if info.path != path and info.path not in named and info.name.endswith(".parquet") and \
                (info.mtime_ns or 0) < time.time_ns() - 3600 * 10**9:
            table.storage.delete(info.path)
    return path


def _path_and_kind(uri: str, fmt: str) -> tuple[str, str | None]:
    """A landed file's local path and format (``fmt``, or its extension's for "auto")."""
    path = uri[len("file://"):] if uri.startswith("file://") else uri
    return path, FORMATS.get(os.path.splitext(path)[1].lower()) if fmt == "auto" else fmt


def read_file(uri: str, fmt: str = "auto", schema: pa.Schema | None = None) -> pa.Table:
    path, kind = _path_and_kind(uri, fmt)
    try:
        if kind == "parquet":
            return pq.read_table(path)
        if kind == "jsonl":
            return pajson.read_json(path)
        if kind == "csv":
            opts = pacsv.ConvertOptions(column_types={f.name: f.type for f in schema} if schema else None)
            return pacsv.read_csv(path, convert_options=opts)
    except (pa.ArrowInvalid, OSError) as e:
        problem = _csv_problem(path, str(e)) if kind == "csv" else str(e)
        raise SchemaError(f"{uri} cannot be read as {kind}: {problem}",
                          help="fix or remove the file; nothing was written") from None
    raise ConfigError(f"unknown input format {kind!r} for {uri}", help="use parquet, jsonl or csv")


def _csv_problem(path: str, message: str) -> str:
    """Arrow's CSV error with its column named: Arrow numbers columns from 0 ("In CSV column
    #1" is the second), which a reader of the file takes for the first."""
    m = re.match(r"In CSV column #(\d+): (.*)", message, re.S)
    if not m:
        return message
    i = int(m.group(1))
    try:
        with open(path, newline="", encoding="utf-8", errors="replace") as f:
            header = next(csv.reader(f), [])
    except OSError:
        header = []
    name = f"column {header[i]!r} (the {_ordinal(i + 1)})" if i < len(header) else f"the {_ordinal(i + 1)} column"
    return f"{name}: {m.group(2)}"


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


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


# (file uris, the commit's extra metadata: a mapping or what makes one, which the writer hands to
# Table.write or write_dataframe) -> (instant, rows)
Writer = Callable[[list[str], "ExtraMetadata"], tuple[str, int]]


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
    state = ingest_state(table, source)
    after = state.checkpoint if state else None
    taken = ingested_names(table, source, state)
    files = pending_files(source_dir, taken, max_files=max_files)
    if not files:
        return IngestResult(None, 0, 0, after.encode() if after else None, False,
                            reason=f"no new files in {source} since "
                                   f"{after.name if after else 'the beginning'}")
    checkpoint = max(files[-1][0], after).encode() if after else files[-1][0].encode()
    names = [os.path.basename(u) for _, u in files]

    def extra() -> dict[str, str]:
        # Made by the write once the batch has passed its checks: a refused batch leaves no
        # manifest behind.
        manifest = write_manifest(table, source, taken | set(names), state.manifest if state else None)
        return {**(extra_metadata or {}), CHECKPOINT_KEY: checkpoint, SOURCE_KEY: source,
                "lakehouse.ingest.files": json.dumps(names), MANIFEST_KEY: manifest,
                state_key(source): json.dumps({"source": source, "checkpoint": checkpoint,
                                               "manifest": manifest})}
    if writer is not None:
        instant, rows = writer([uri for _, uri in files], extra)
        return IngestResult(instant, len(files), rows, checkpoint, commit)
    schema = None
    try:
        schema = table.schema()
    except LakehouseError:  # a table without data yet has no schema to parse CSV with
        schema = None
    landed = [_path_and_kind(uri, fmt) for _, uri in files]
    if {kind for _, kind in landed} == {"parquet"}:
        # Read a row group at a time by the write, never whole (lakehouse.write.source).
        try:
            batch = ParquetSource([path for path, _ in landed], lambda p: p, None)
        except (pa.ArrowInvalid, OSError) as e:
            raise SchemaError(f"the landed parquet files cannot be read together: {e}",
                              help="fix or remove the file; nothing was written") from None
    else:
        tables = [read_file(uri, fmt, schema) for _, uri in files]
        batch = pa.concat_tables(tables, promote_options="permissive")
    instant = table.write(batch, operation, commit=commit, extra_metadata=extra, options=options)
    if commit:
        table.storage.write(_committed_mark(source), instant.encode())
    return IngestResult(instant, len(files), batch.num_rows, checkpoint, commit)
