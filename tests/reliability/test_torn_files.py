"""Torn and corrupt files: damage to uncommitted state is repaired by the next operation, damage
to committed state is reported by a typed error naming the file, and no read ever returns fewer
(or other) committed records than were written without saying so.

Decisions (kept in sync with the report of issue 8, item 3):

* A torn last log block of a FAILED write is what a crashed appender leaves: it reads as a CORRUPT
  block, is skipped (as Hudi's HoodieLogFileReader and hudi-rs skip it), and the rollback run by
  the next write deletes the file.
* A torn log block of a COMMITTED instant is committed data the storage lost. Java Hudi skips it
  with an INFO line and a ``totalCorruptLogBlock`` counter that only compaction records; hudi-rs
  skips it silently (both return fewer records, checked below). lakehouse raises
  :class:`~lakehouse.errors.CorruptFileError` naming the log file instead: a read is a
  reader's answer, and a warning nobody sees is silent data loss. Whose the torn block is comes
  from its salvaged header (``lakehouse.log.reader`` keeps it on the CORRUPT block) or, when the
  header itself is torn, from the committed write stats (the file is shorter than they record).
  The read path asks the salvaged header, and when the header is torn too, the committed write
  stats (parsed only then). A log file cut exactly at a block boundary before its committed end
  is not caught by reads (that would cost every read the commit metadata); compaction, which
  would make the loss permanent, compares each log file with its committed size and refuses.
* A completed commit file that is empty, truncated or not JSON is a CorruptFileError naming it
  for every operation that needs it (an empty one no longer reads as "wrote nothing").
"""

from __future__ import annotations

import glob
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lakehouse
from lakehouse.errors import CorruptFileError, LakehouseError
from lakehouse.iceberg import background
from lakehouse.log.block import BlockType
from lakehouse.log.reader import check_committed_blocks, read_log_blocks
from tests.interop.hudi_oracle import hudi_read

TYPES = ["MERGE_ON_READ", "COPY_ON_WRITE"]


def batch(keys, ts, city="sf"):
    return pa.table({"id": keys, "city": [city] * len(keys), "ts": [ts] * len(keys),
                     "v": [f"{k}@{ts}" for k in keys]})


class Model:
    """What was committed: key -> value."""

    def __init__(self) -> None:
        self.rows: dict[str, str] = {}

    def apply(self, keys, ts) -> None:
        self.rows.update({k: f"{k}@{ts}" for k in keys})

    def expected(self) -> list[tuple[str, str]]:
        return sorted(self.rows.items())


def make(tmp_path, table_type, model: Model):
    """A table with three commits: inserts, updates (log blocks on MOR), an insert."""
    path = tmp_path / "t"
    t = lakehouse.create_table(str(path), name="c", table_type=table_type, record_key="id",
                               partition_by="city", ordering_field="ts", index="SIMPLE")
    times = []
    for keys, ts in ((["a", "b", "c"], 1), (["a", "b"], 2), (["d"], 3)):
        times.append(t.upsert(batch(keys, ts)))
        model.apply(keys, ts)
    background.wait_all()  # their Iceberg publishing done before a test damages a file
    return path, t, times


def rows(t):
    return sorted((r["id"], r["v"]) for r in t.read(columns=["id", "v"]).to_pylist())


def hudi_rows(path):
    h = hudi_read(path)
    return sorted((r["id"], r["v"]) for r in h.select(["id", "v"]).to_pylist()) if h is not None else []


def verified(t, model: Model) -> int:
    """Every committed record exactly once, nothing else; returns how many were checked."""
    got = rows(t)
    assert got == model.expected()
    assert len({k for k, _ in got}) == len(got)
    return len(got)


def data_files(path) -> set[str]:
    out = set()
    for root, dirs, files in os.walk(path):
        dirs[:] = [d for d in dirs if d != ".hoodie"]
        out |= {os.path.relpath(os.path.join(root, f), path) for f in files
                if f.endswith(".parquet") or ".log." in f}
    return out


def assert_no_orphans(t, path) -> None:
    referenced = set()
    for inst in t.timeline.completed_writes():
        referenced |= {s.path for s in t.active.commit_metadata(inst).write_stats()}
    assert data_files(path) <= referenced, "orphan data files"
    temp = path / ".hoodie" / ".temp"
    assert not temp.exists() or not any(temp.rglob("*.marker.*")), "markers left behind"


def failed_write(t, keys_ts=((["a"], 4), (["x"], 4, "la"))):
    """Phase 1 of a write that never commits (as a crashed writer leaves it): its files, its
    markers and its inflight instant stay."""
    b = pa.concat_tables([batch(*k) for k in keys_ts])
    inst = t.upsert(b, commit=False)
    stats = t.active.commit_metadata(t.timeline.get(inst)).write_stats()
    return inst, [s.path for s in stats]


def log_paths(paths):
    return [p for p in paths if ".log." in p]


def recover_by_next_write(path, model, keys, ts, files, inst) -> int:
    """The next write rolls the failed one back: its files gone, nothing pending, every
    committed record there once for lakehouse and hudi-rs, no orphans. Records checked."""
    t = lakehouse.open_table(str(path))
    t.upsert(batch(keys, ts))
    model.apply(keys, ts)
    assert_gone(path, files, inst)
    assert not t.timeline.pending()
    n = verified(t, model)
    assert hudi_rows(path) == model.expected()
    assert_no_orphans(t, path)
    return n


def assert_gone(path, files, inst) -> None:
    """The failed write's files are gone (a later write may reuse a log file's name: then the
    file holds none of the failed instant's bytes)."""
    for f in files:
        if not (path / f).exists():
            continue
        assert ".log." in f, f"{f} of the failed write remains"
        blocks = read_log_blocks((path / f).read_bytes())
        assert all(b.block_type is not BlockType.CORRUPT and b.instant_time != inst for b in blocks), \
            f"{f} still holds the failed write's bytes"


def cut_points(data: bytes) -> dict[str, int]:
    """Offsets inside the last block of a log file: magic, length, header, content, footer."""
    last = read_log_blocks(data)[-1]
    assert last.block_type is not BlockType.CORRUPT
    end = last.offset + last.size
    footer = 4 + sum(8 + len(v.encode()) for v in last.footer.values())
    content_end = end - 8 - footer
    content_start = content_end - len(last.content)
    return {"magic": last.offset + 3, "length": last.offset + 10, "header": last.offset + 30,
            "content": (content_start + content_end) // 2, "footer": content_end + 2,
            "reverse-pointer": end - 3}


def assert_names(err: BaseException, path) -> None:
    """A typed lakehouse error that names ``path`` and says what to do (a Help: line)."""
    assert isinstance(err, LakehouseError)
    chain, e = [], err
    while e is not None:
        chain.append(e)
        e = e.__cause__ or e.__context__
    assert any(isinstance(c, CorruptFileError) for c in chain), repr(err)
    assert os.path.basename(str(path)) in str(err)
    assert "Help:" in str(err)


# --- 1. torn last log block ----------------------------------------------------------------------

@pytest.mark.parametrize("where", ["magic", "length", "header", "content", "footer", "reverse-pointer"])
def test_torn_log_block_of_failed_write(tmp_path, reliability, where):
    model = Model()
    path, t, _ = make(tmp_path, "MERGE_ON_READ", model)
    inst, paths = failed_write(t)
    (log,) = log_paths(paths)
    data = (path / log).read_bytes()
    cut = cut_points(data)[where]
    (path / log).write_bytes(data[:cut])
    blocks = read_log_blocks((path / log).read_bytes(), log)
    assert blocks[-1].block_type is BlockType.CORRUPT
    if where not in ("magic", "length", "header"):
        # The torn block's header survived: the reader says whose block it was.
        assert blocks[-1].instant_time == inst
    assert rows(t) == model.expected()
    if where == "length":
        # hudi-rs (0.5) fails on a block torn inside its length field instead of skipping it.
        with pytest.raises(Exception, match="runs past the end"):
            hudi_rows(path)
    else:
        assert hudi_rows(path) == model.expected()

    n = recover_by_next_write(path, model, ["b"], 5, [log], inst)
    reliability.case("torn", f"torn last log block of a failed write, cut in the {where} (MOR)",
                     outcome="recovered", records_checked=n,
                     detail="skipped as a CORRUPT block on read; rollback by the next write deletes the file")


def committed_log(t, path, inst):
    stats = t.active.commit_metadata(t.timeline.get(inst)).write_stats()
    (stat,) = [s for s in stats if ".log." in s.path]
    return stat


@pytest.mark.parametrize("where", ["whole", "magic", "length", "header", "content", "footer",
                                   "reverse-pointer"])
def test_torn_committed_log_block_is_found_by_the_log_reader(tmp_path, where):
    """The log reader finds committed data in a torn stretch at every cut point, from the salvaged
    header or, when that is torn too, from the size the commit recorded."""
    model = Model()
    path, t, times = make(tmp_path, "MERGE_ON_READ", model)
    stat = committed_log(t, path, times[1])
    data = (path / stat.path).read_bytes()
    cut = 0 if where == "whole" else cut_points(data)[where]
    blocks = read_log_blocks(data[:cut], stat.path)
    with pytest.raises(CorruptFileError) as e:
        check_committed_blocks(blocks, stat.path, t.timeline.is_completed,
                               committed_size=stat.file_size_in_bytes)
    assert stat.path in str(e.value) and "Help:" in str(e.value)
    # Intact, or torn in a failed write's bytes: nothing to report.
    check_committed_blocks(read_log_blocks(data, stat.path), stat.path, t.timeline.is_completed,
                           committed_size=stat.file_size_in_bytes)
    check_committed_blocks(blocks, stat.path, lambda _t: False)


@pytest.mark.parametrize("where", ["whole", "magic", "header", "content", "reverse-pointer"])
def test_torn_committed_log_block_is_reported(tmp_path, reliability, where):
    model = Model()
    path, t, times = make(tmp_path, "MERGE_ON_READ", model)
    stat = committed_log(t, path, times[1])
    data = (path / stat.path).read_bytes()
    cut = 0 if where == "whole" else cut_points(data)[where]
    (path / stat.path).write_bytes(data[:cut])
    # hudi-rs returns the older values without a word: storage lost committed data.
    assert hudi_rows(path) != model.expected()
    with pytest.raises(CorruptFileError) as e:
        rows(lakehouse.open_table(str(path)))
    assert_names(e.value, stat.path)
    reliability.case("torn", f"torn log block of a committed instant, cut in the {where} (MOR)",
                     outcome="detected", detail="CorruptFileError naming the log file")


def test_committed_log_cut_at_a_block_boundary_is_refused_by_compaction(tmp_path, reliability):
    """A log file cut exactly between two blocks reads as a shorter, well-formed file: reads
    cannot tell without the commit metadata. Compaction, which would make the loss permanent
    (the logs go once the new base file is committed and cleaned), compares the file with the
    size its committed write recorded and refuses the file group."""
    path = tmp_path / "t"
    t = lakehouse.create_table(str(path), name="c", table_type="MERGE_ON_READ", record_key="id",
                               ordering_field="ts", index="BUCKET",
                               options={"hoodie.bucket.index.num.buckets": 1, "hoodie.logfile.max.size": 16384,
                                        "hoodie.logfile.data.block.max.size": 8192})
    keys = [f"k{i:03d}" for i in range(300)]
    t.upsert(batch(keys, 1))
    t.upsert(batch(keys, 2))
    victim = None
    for lf in only_slice_logs(t):
        blocks = read_log_blocks((path / lf).read_bytes(), lf)
        if len(blocks) >= 2:
            victim, cut = lf, blocks[0].offset + blocks[0].size
            break
    assert victim, "no log file with two blocks: the sizes above no longer make one"
    data = (path / victim).read_bytes()
    (path / victim).write_bytes(data[:cut])
    before = sorted(p.name for p in path.iterdir())
    sched = t.schedule_compaction(force=True)
    res = t.run_compaction(sched.instant)
    assert res.failed == 1
    done = t.commit_compaction(sched.instant)
    assert not done.committed and os.path.basename(victim) in done.reason and "committed" in done.reason
    assert sorted(p.name for p in path.iterdir() if p.name.endswith(".parquet")) == \
        sorted(n for n in before if n.endswith(".parquet")), "no compacted base file committed"
    reliability.case("torn", "committed log file cut at a block boundary, then compacted (MOR)",
                     outcome="detected", detail="the compaction's file group fails naming the log "
                     "file (shorter than its committed size); nothing committed")


def only_slice_logs(t):
    [s] = t.file_system_view().latest_slices()
    return [lf.path for lf in s.log_files]


# --- 2. zero-byte log file -------------------------------------------------------------------------

def test_zero_byte_log_file_of_failed_write(tmp_path, reliability):
    model = Model()
    path, t, _ = make(tmp_path, "MERGE_ON_READ", model)
    inst, paths = failed_write(t)
    (log,) = log_paths(paths)
    (path / log).write_bytes(b"")
    assert rows(t) == model.expected() == hudi_rows(path)
    n = recover_by_next_write(path, model, ["c", "e"], 6, [log], inst)
    reliability.case("torn", "zero-byte log file of a failed write (MOR)", outcome="recovered",
                     records_checked=n, detail="skipped on read, deleted by the rollback of the next write")


def test_zero_byte_stray_log_file_survives_reads_and_writes(tmp_path, reliability):
    """A zero-byte log file no instant claims (its writer died before writing a byte)."""
    model = Model()
    path, t, times = make(tmp_path, "MERGE_ON_READ", model)
    stat = committed_log(t, path, times[1])
    name = os.path.basename(stat.path)
    stray = path / os.path.dirname(stat.path) / name.replace(".log.1_", ".log.7_")
    stray.write_bytes(b"")
    assert rows(t) == model.expected() == hudi_rows(path)
    t.upsert(batch(["a"], 7))
    model.apply(["a"], 7)
    n = verified(t, model)
    assert hudi_rows(path) == model.expected()
    reliability.case("torn", "zero-byte log file without an instant (MOR)", outcome="survived",
                     records_checked=n, detail="an empty file has no blocks: reads and the next write go on")


# --- 3. partial parquet base file of a failed writer ---------------------------------------------

@pytest.mark.parametrize("table_type", TYPES)
def test_partial_base_file_of_failed_write(tmp_path, reliability, table_type):
    model = Model()
    path, t, _ = make(tmp_path, table_type, model)
    inst, paths = failed_write(t)
    bases = [p for p in paths if p.endswith(".parquet")]
    assert bases
    for p in bases:
        data = (path / p).read_bytes()
        (path / p).write_bytes(data[:len(data) // 2])  # no footer
    assert (path / ".hoodie" / ".temp" / inst).exists(), "the markers stay with the failed write"
    assert rows(t) == model.expected() == hudi_rows(path)
    n = recover_by_next_write(path, model, ["d"], 8, bases, inst)
    reliability.case("torn", f"half-written base file of a failed write ({table_type})",
                     outcome="recovered", records_checked=n,
                     detail="never opened (instant not completed); deleted by the next write's rollback")


# --- 4. truncated metadata of an inflight instant ------------------------------------------------

@pytest.mark.parametrize("table_type", TYPES)
@pytest.mark.parametrize("damage", ["zero", "half"])
def test_truncated_inflight_metadata_of_failed_write(tmp_path, reliability, table_type, damage):
    model = Model()
    path, t, _ = make(tmp_path, table_type, model)
    inst, paths = failed_write(t)
    meta = path / ".hoodie" / t.active.path(t.timeline.get(inst)).split("/", 1)[1]
    data = meta.read_bytes()
    meta.write_bytes(b"" if damage == "zero" else data[:len(data) // 2])
    assert rows(t) == model.expected() == hudi_rows(path)
    n = recover_by_next_write(path, model, ["b"], 9, paths, inst)
    reliability.case("torn", f"{damage} inflight metadata {meta.name.split('.', 1)[1]} ({table_type})",
                     outcome="recovered", records_checked=n,
                     detail="rollback plans from the markers; the next write goes on")


@pytest.mark.parametrize("damage", ["zero", "half"])
def test_truncated_compaction_plan(tmp_path, reliability, damage):
    model = Model()
    path, t, _ = make(tmp_path, "MERGE_ON_READ", model)
    sched = t.schedule_compaction(force=True)
    assert sched.scheduled
    plan = path / ".hoodie" / f"{sched.instant}.compaction.requested"
    data = plan.read_bytes()
    plan.write_bytes(b"" if damage == "zero" else data[:len(data) // 2])
    assert rows(t) == model.expected() == hudi_rows(path)
    # The plan is damaged: running it must say so, naming the file, not compact something else.
    with pytest.raises(LakehouseError) as e:
        t.run_compaction(sched.instant)
    assert_names(e.value, plan)
    assert rows(t) == model.expected()
    reliability.case("torn", f"{damage} compaction plan (requested, MOR)", outcome="detected",
                     records_checked=len(model.rows),
                     detail="CorruptFileError naming the plan; reads unaffected")


# --- 5. corrupt metadata of a completed instant --------------------------------------------------

@pytest.mark.parametrize("table_type", TYPES)
@pytest.mark.parametrize("which", ["latest", "older"])
@pytest.mark.parametrize("damage", ["zero", "half", "not-json"])
def test_corrupt_completed_commit(tmp_path, reliability, table_type, which, damage):
    model = Model()
    path, t, times = make(tmp_path, table_type, model)
    inst = t.timeline.get(times[2] if which == "latest" else times[1])
    f = path / t.active.path(inst)
    data = f.read_bytes()
    f.write_bytes({"zero": b"", "half": data[:len(data) // 2], "not-json": b"{nope"}[damage])
    t = lakehouse.open_table(str(path))
    checked = 0
    try:
        checked = verified(t, model)  # a snapshot read needs only the latest commit's schema
    except LakehouseError as e:
        assert_names(e, f)
    # Whatever reads the commit's metadata says the file is corrupt, never answers with less.
    with pytest.raises(LakehouseError) as e:
        t.read_changes(times[0])
    assert_names(e.value, f)
    with pytest.raises(LakehouseError) as e:
        t.upsert(batch(["z"], 10))
    assert_names(e.value, f)
    if checked:
        assert verified(t, model) == checked, "the refused write must leave nothing visible"
    reliability.case("torn", f"{damage} completed {inst.action} ({which}, {table_type})",
                     outcome="detected", records_checked=checked,
                     detail="CorruptFileError naming the file for incremental reads and writes"
                            + ("; snapshot reads exact" if checked else "; snapshot reads too"))
    if which == "latest":
        # What the error's help says to do: roll it back. Without its write stats the rollback
        # finds the instant's files by name and by log block headers.
        t.rollback()
        del model.rows["d"]  # the damaged commit inserted d
        t = lakehouse.open_table(str(path))
        n = verified(t, model)
        assert hudi_rows(path) == model.expected()
        assert_no_orphans(t, path)
        t.upsert(batch(["e"], 5))
        model.apply(["e"], 5)
        verified(t, model)
        reliability.case("torn", f"{damage} completed {inst.action} rolled back ({table_type})",
                         outcome="recovered", records_checked=n,
                         detail="rollback finds the instant's files without its metadata")


def test_corrupt_completed_clean(tmp_path, reliability):
    model = Model()
    path, t, _ = make(tmp_path, "COPY_ON_WRITE", model)
    res = t.clean(options={"hoodie.cleaner.commits.retained": "1"})
    assert res.instant
    f = path / ".hoodie" / f"{res.instant}.clean"
    data = f.read_bytes()
    f.write_bytes(data[:len(data) // 2])
    t = lakehouse.open_table(str(path))
    n = verified(t, model)
    assert hudi_rows(path) == model.expected()
    with pytest.raises(LakehouseError) as e:
        t.clean(options={"hoodie.cleaner.commits.retained": "1"})
    assert_names(e.value, f)
    reliability.case("torn", "truncated completed clean metadata (COW)", outcome="detected",
                     records_checked=n, detail="reads exact; the next clean names the file")


def test_corrupt_completed_rollback(tmp_path, reliability):
    model = Model()
    path, t, times = make(tmp_path, "MERGE_ON_READ", model)
    t.rollback(times[2])
    del model.rows["d"]
    (f,) = glob.glob(str(path / ".hoodie" / "*.rollback"))
    data = open(f, "rb").read()
    open(f, "wb").write(data[:len(data) // 2])
    t = lakehouse.open_table(str(path))
    n = verified(t, model)
    assert hudi_rows(path) == model.expected()
    t.upsert(batch(["e"], 11))
    model.apply(["e"], 11)
    n = verified(t, model)
    reliability.case("torn", "truncated completed rollback metadata (MOR)", outcome="survived",
                     records_checked=n, detail="the rollback is done: nothing reads its metadata to "
                     "answer a query; reads and writes exact")


@pytest.mark.parametrize("damage", ["zero", "mid-line"])
def test_corrupt_table_properties(tmp_path, reliability, damage):
    model = Model()
    path, t, _ = make(tmp_path, "MERGE_ON_READ", model)
    f = path / ".hoodie" / "hoodie.properties"
    data = f.read_bytes()
    f.write_bytes(b"" if damage == "zero" else data[:data.index(b"hoodie.table.name") + 8])
    with pytest.raises(LakehouseError) as e:
        lakehouse.open_table(str(path))
    assert_names(e.value, f)
    reliability.case("torn", f"{damage} hoodie.properties", outcome="detected",
                     detail="CorruptFileError naming hoodie.properties on open")


def test_table_properties_cut_at_a_line_boundary(tmp_path, reliability):
    model = Model()
    path, t, _ = make(tmp_path, "MERGE_ON_READ", model)
    f = path / ".hoodie" / "hoodie.properties"
    data = f.read_bytes()
    f.write_bytes(data[:data.index(b"hoodie.table.type")])
    with pytest.raises(CorruptFileError) as e:
        lakehouse.open_table(str(path))
    assert_names(e.value, f)
    reliability.case("torn", "hoodie.properties cut at a line boundary", outcome="detected",
                     detail="CorruptFileError naming hoodie.properties on open")


# --- 6. bit flips in committed files -------------------------------------------------------------

def _flip_scan(path, t, model, target, region):
    """Flip one bit at every offset of ``region`` in turn: each read is exact or names the file."""
    original = target.read_bytes()
    detected = 0
    for off in region:
        flipped = bytearray(original)
        flipped[off] ^= 0x10
        target.write_bytes(bytes(flipped))
        try:
            assert rows(lakehouse.open_table(str(path))) == model.expected(), f"wrong answer, flip at {off}"
        except LakehouseError as e:
            assert_names(e, target)
            detected += 1
    target.write_bytes(original)
    assert detected, "no flip was detected: the region holds no data"
    return verified(t, model)


@pytest.mark.parametrize("table_type", TYPES)
def test_bit_flip_in_committed_base_file(tmp_path, reliability, table_type):
    model = Model()
    path, t, _ = make(tmp_path, table_type, model)
    (slice_,) = [s for s in t.file_system_view().latest_slices() if s.base_file is not None
                 and "a" in pq.read_table(path / s.base_file.path, columns=["id"]).column(0).to_pylist()]
    target = path / slice_.base_file.path
    md = pq.ParquetFile(target).metadata
    col = md.row_group(0).column(md.schema.to_arrow_schema().names.index("v"))
    start = col.dictionary_page_offset or col.data_page_offset
    n = _flip_scan(path, t, model, target, range(start, start + col.total_compressed_size))
    reliability.case("torn", f"bit flip in a committed base file's data ({table_type})",
                     outcome="detected", records_checked=n,
                     detail="every flip: CorruptFileError naming the file, or an exact read")


def test_bit_flip_in_committed_log_block(tmp_path, reliability):
    model = Model()
    path, t, times = make(tmp_path, "MERGE_ON_READ", model)
    stat = committed_log(t, path, times[1])
    target = path / stat.path
    (block,) = read_log_blocks(target.read_bytes())
    assert block.block_type is BlockType.PARQUET_DATA
    content_start = block.offset + block.size - 8 - 4 - len(block.content)
    md = pq.ParquetFile(pa.BufferReader(block.content)).metadata
    col = md.row_group(0).column(md.schema.to_arrow_schema().names.index("v"))
    start = content_start + (col.dictionary_page_offset or col.data_page_offset)
    n = _flip_scan(path, t, model, target, range(start, start + col.total_compressed_size))
    reliability.case("torn", "bit flip in a committed log block's content (MOR)", outcome="detected",
                     records_checked=n, detail="every flip: CorruptFileError naming the log file, "
                     "or an exact read")
