"""The view checked against the commits (FileSystemView.verify): a file that a completed commit
names and that no clean, rollback or replace explains is a CorruptFileError for readers and
writers, never rows silently missing; and every way a file legitimately goes (clean, replace,
rollback, restore, archive, a newer commit racing the listing) and every table Apache Hudi wrote
reads without one. Each healthy table is also shown guarded: one of its required files hidden,
it is refused, so none of these tests passes with the check gone."""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import shutil

import pyarrow as pa
import pytest

import lakehouse
from lakehouse.errors import CorruptFileError
from lakehouse.file_group.view import FileSystemView
from lakehouse.iceberg import background
from lakehouse.read.reader import TableReader
from lakehouse.storage import LocalStorage
from lakehouse.timeline.active import ActiveTimeline
from lakehouse.timeline.instant import WRITE_ACTIONS

FID1 = "11111111-aaaa-4aaa-8aaa-aaaaaaaaaaaa-0"
FID2 = "22222222-bbbb-4bbb-8bbb-bbbbbbbbbbbb-0"


def t(n: int) -> str:
    return f"2025010100000{n:04d}"


def base(fid: str, instant: str) -> str:
    return f"{fid}_0-1-1_{instant}.parquet"


def log(fid: str, base_instant: str, version: int) -> str:
    return f".{fid}_{base_instant}.log.{version}_0-1-1"


# --- the rule, on hand-made folders whose commits name their files --------------------------


class Folder:
    """Empty data files, and a timeline whose commits name files as Hudi's write stats do."""

    def __init__(self, root: pathlib.Path) -> None:
        self.root = root
        (root / ".hoodie").mkdir(parents=True)
        self.storage = LocalStorage(str(root))
        self.active = ActiveTimeline(self.storage)

    def commit(self, n: int, action: str, *paths: str, replaced: dict | None = None,
               compaction: bool = False, create: bool = True) -> None:
        stats: dict[str, list] = {}
        for p in paths:
            stats.setdefault(p.rpartition("/")[0], []).append({"fileId": "", "path": p})
        meta = {"partitionToWriteStats": stats, "operationType": "UPSERT", "compacted": compaction}
        if replaced is not None:
            meta["partitionToReplaceFileIds"] = replaced
        requested = "compaction" if compaction else action
        (self.root / ".hoodie" / f"{t(n)}.{requested}.requested").write_bytes(b"")
        (self.root / ".hoodie" / f"{t(n)}.{action}").write_text(json.dumps(meta))
        if create:
            self.files(*paths)

    def pending_compaction(self, n: int) -> None:
        (self.root / ".hoodie" / f"{t(n)}.compaction.requested").write_bytes(b"plan")

    def files(self, *paths: str) -> None:
        for p in paths:
            (self.root / p).parent.mkdir(parents=True, exist_ok=True)
            (self.root / p).write_bytes(b"")

    def remove(self, *paths: str) -> None:
        for p in paths:
            (self.root / p).unlink()

    def view(self, partitions: list[str] | None = None) -> FileSystemView:
        return FileSystemView.load(self.storage, self.active.load(), self.active, partitions)

    def lost(self, *, merge_on_read: bool = True, as_of: str | None = None,
             partitions: list[str] | None = None) -> str | None:
        """The error's message, or None when the view verifies."""
        try:
            assert self.view(partitions).verify(merge_on_read=merge_on_read, as_of=as_of) is None
        except CorruptFileError as e:
            return str(e)
        return None


@pytest.fixture
def folder(tmp_path) -> Folder:
    return Folder(tmp_path / "table")


def test_the_latest_base_file_is_required_older_versions_are_not(folder):
    folder.commit(1, "commit", f"p/{base(FID1, t(1))}")
    folder.commit(2, "commit", f"p/{base(FID1, t(2))}")
    folder.remove(f"p/{base(FID1, t(1))}")  # what a clean does
    assert folder.lost(merge_on_read=False) is None
    folder.remove(f"p/{base(FID1, t(2))}")
    msg = folder.lost(merge_on_read=False)
    assert f".hoodie/{t(2)}.commit: the completed commit {t(2)} names " in msg
    assert f"p/{base(FID1, t(2))}, which does not exist" in msg
    assert "Help: restore " in msg


def test_every_log_of_the_latest_slice_is_required_those_of_a_compacted_one_are_not(folder):
    folder.commit(1, "deltacommit", f"p/{base(FID1, t(1))}")
    # One delta commit, several log files (a flushed buffer, a rolled-over log): each its stat.
    folder.commit(2, "deltacommit", f"p/{log(FID1, t(1), 1)}", f"p/{log(FID1, t(1), 2)}")
    folder.commit(3, "commit", f"p/{base(FID1, t(3))}", compaction=True)
    folder.commit(4, "deltacommit", f"p/{log(FID1, t(3), 1)}", f"p/{log(FID1, t(3), 2)}")
    folder.remove(f"p/{base(FID1, t(1))}", f"p/{log(FID1, t(1), 1)}", f"p/{log(FID1, t(1), 2)}")
    assert folder.lost() is None
    folder.remove(f"p/{log(FID1, t(3), 2)}")
    assert f"{t(4)} names " in folder.lost() and log(FID1, t(3), 2) in folder.lost()
    folder.files(f"p/{log(FID1, t(3), 2)}")
    folder.remove(f"p/{base(FID1, t(3))}")  # the compaction's output
    assert f"the completed commit {t(3)} names " in folder.lost()


def test_a_pending_compactions_input_and_the_logs_written_under_it_are_required(folder):
    folder.commit(1, "deltacommit", f"p/{base(FID1, t(1))}")
    folder.commit(2, "deltacommit", f"p/{log(FID1, t(1), 1)}")
    folder.pending_compaction(3)
    folder.commit(4, "deltacommit", f"p/{log(FID1, t(3), 1)}")
    assert folder.lost() is None
    for gone, by in [(f"p/{base(FID1, t(1))}", t(1)), (f"p/{log(FID1, t(1), 1)}", t(2)),
                     (f"p/{log(FID1, t(3), 1)}", t(4))]:
        folder.remove(gone)
        assert f"{by} names " in folder.lost() and gone in folder.lost()
        folder.files(gone)


def test_replaced_file_groups_may_be_gone_whole(folder):
    folder.commit(1, "commit", f"p/{base(FID1, t(1))}", f"q/{base(FID2, t(1))}")
    folder.commit(2, "replacecommit", f"p/{base(FID2, t(2))}", replaced={"p": [FID1], "q": [FID2]})
    folder.remove(f"p/{base(FID1, t(1))}", f"q/{base(FID2, t(1))}")
    assert folder.lost(merge_on_read=False) is None
    # As of before the replace the group was live: its file is gone all the same, as the
    # cleaner may delete it once replaced (the current timeline decides).
    assert folder.lost(merge_on_read=False, as_of=t(1)) is None
    folder.remove(f"p/{base(FID2, t(2))}")
    assert f"{t(2)}.replacecommit" in folder.lost(merge_on_read=False)


def test_a_time_travel_needs_only_the_commits_up_to_it(folder):
    folder.commit(1, "commit", f"p/{base(FID1, t(1))}")
    folder.commit(2, "commit", f"p/{base(FID2, t(2))}")
    folder.remove(f"p/{base(FID2, t(2))}")
    assert folder.lost(merge_on_read=False, as_of=t(1)) is None
    assert f"{t(2)} names " in folder.lost(merge_on_read=False, as_of=t(2))


def test_a_newer_base_file_listed_from_archived_commits_explains_older_slices(folder):
    # Delta commit 5 names a log of slice 1. Base file 2 is listed, from an instant before the
    # active timeline (archived, so committed): slice 1 is older than it and may be cleaned.
    folder.commit(5, "deltacommit", f"p/{log(FID1, t(1), 1)}", create=False)
    folder.files(f"p/{base(FID1, t(2))}")
    assert folder.lost() is None
    folder.remove(f"p/{base(FID1, t(2))}")
    assert f"{t(5)} names " in folder.lost()


def test_write_stats_without_a_data_file_path_are_not_checked(folder):
    folder.commit(1, "commit", "", "p/_SUCCESS", "/abs/elsewhere.parquet",
                  f"s3://bucket/p/{base(FID2, t(1))}", create=False)
    folder.commit(2, "commit", f"p/{base(FID1, t(2))}")
    assert folder.lost(merge_on_read=False) is None
    folder.remove(f"p/{base(FID1, t(2))}")
    assert f"{t(2)} names " in folder.lost(merge_on_read=False)


def test_a_view_of_some_partitions_checks_those(folder):
    folder.commit(1, "commit", f"p/{base(FID1, t(1))}", f"q/{base(FID2, t(1))}")
    folder.remove(f"q/{base(FID2, t(1))}")
    assert folder.lost(merge_on_read=False, partitions=["p"]) is None
    assert folder.lost(merge_on_read=False, partitions=["q"]) is not None


def test_files_a_newer_commit_and_a_clean_removed_make_the_view_stale_not_lost(folder):
    folder.commit(1, "commit", f"p/{base(FID1, t(1))}")
    old = folder.active.load()
    # Between the reader's timeline and its listing: a commit, then a clean of the old version.
    folder.commit(2, "commit", f"p/{base(FID1, t(2))}")
    folder.remove(f"p/{base(FID1, t(1))}")
    view = FileSystemView.load(folder.storage, old, folder.active)
    newer = view.verify(merge_on_read=False)
    assert newer is not None and newer.is_completed(t(2))
    # ... and listed again with that timeline, it verifies.
    assert FileSystemView.load(folder.storage, newer, folder.active).verify(merge_on_read=False) is None


def test_files_of_an_instant_rolled_back_since_make_the_view_stale_not_lost(folder):
    folder.commit(1, "commit", f"p/{base(FID1, t(1))}")
    folder.commit(2, "commit", f"p/{base(FID2, t(2))}")
    old = folder.active.load()
    (folder.root / ".hoodie" / f"{t(2)}.commit").unlink()  # a rollback unpublishes it first
    folder.remove(f"p/{base(FID2, t(2))}")
    view = FileSystemView.load(folder.storage, old, folder.active)
    assert view.verify(merge_on_read=False) is not None


# --- tables: what readers and writers do ---------------------------------------------------


def rows(ids, ts: int, p: str = "x") -> pa.Table:
    ids = list(ids)
    return pa.table({"id": [f"k{i}" for i in ids], "p": [p] * len(ids), "ts": [ts] * len(ids),
                     "v": [i * 10 + ts for i in ids]})


def make(tmp_path, table_type: str, name: str = "t", **options):
    return lakehouse.create_table(str(tmp_path / name), name=name, table_type=table_type,
                                  record_key="id", partition_by="p", ordering_field="ts",
                                  options=options or None)


def snapshot(table, **kw) -> list[tuple]:
    got = table.read(columns=["id", "v"], **kw)
    return sorted(zip(got.column("id").to_pylist(), got.column("v").to_pylist()))


def data_files(table) -> set[str]:
    root = pathlib.Path(table.storage.uri().removeprefix("file://"))
    return {p.relative_to(root).as_posix() for p in root.rglob("*")
            if p.is_file() and ".hoodie" not in p.relative_to(root).parts}


def named(table) -> dict[str, str]:
    """Path -> the completed write naming it (the latest), for every file the timeline names."""
    out = {}
    for inst in table.timeline.completed_writes():
        for st in table.active.commit_metadata(inst).write_stats():
            if st.path:
                out[st.path] = inst.time
    return out


@contextlib.contextmanager
def hidden(table, path: str):
    root = pathlib.Path(table.storage.uri().removeprefix("file://"))
    background.wait_all()  # the Iceberg publisher reads the table's files
    os.rename(root / path, root / (path + ".hidden"))
    try:
        yield
    finally:
        os.rename(root / (path + ".hidden"), root / path)


def assert_refused(table, path: str, by: str) -> None:
    """With ``path`` hidden: reads and writes refuse the table, naming the instant ``by`` and
    the file, and the refused write changes nothing."""
    before = snapshot(table)
    writes = [i.time for i in table.timeline.completed_writes()]
    files = data_files(table)
    with hidden(table, path):
        for read in (lambda: table.read(), lambda: table.read(as_of=writes[-1]),
                     lambda: table.read(read_optimized=True)):
            with pytest.raises(CorruptFileError) as e:
                read()
            assert f".hoodie/{by}." in e.value.path and path in str(e.value)
        # A write lists (and checks) the partitions it writes: the hidden file's.
        with pytest.raises(CorruptFileError, match=path.rsplit("/", 1)[-1]):
            table.upsert(rows([0, 99], 50, path.rpartition("/")[0]))
        assert not table.timeline.pending().filter(actions=WRITE_ACTIONS).instants
    assert [i.time for i in table.timeline.completed_writes()] == writes
    assert data_files(table) == files
    assert snapshot(table) == before


def assert_guarded(table) -> None:
    """The table reads and takes a write; hiding a file its latest slices need (one a completed
    instant names) gets it refused, so the check is live on this table."""
    snapshot(table)
    table.upsert(rows([0], 40))
    names = named(table)
    latest = [f for s in table.file_system_view().latest_slices()
              for f in ([s.base_file] if s.base_file else []) + list(s.log_files)]
    required = sorted(f.path for f in latest if f.path in names)
    assert required, "no file of the latest slices is named by an active commit"
    assert_refused(table, required[-1], names[required[-1]])


def gone_but_named(table, files_before: set[str]) -> set[str]:
    """Files the active timeline names that were deleted (by a clean) since ``files_before``."""
    return (files_before - data_files(table)) & set(named(table))


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_a_missing_base_file_of_the_latest_commit(tmp_path, table_type):
    t_ = make(tmp_path, table_type)
    t_.bulk_insert(rows(range(6), 1))
    if table_type == "COPY_ON_WRITE":
        last = t_.upsert(rows([1, 2], 2))
    else:
        t_.upsert(rows([1, 2], 2))
        last = t_.compact(force=True).instant
    (path,) = [p for p, by in named(t_).items() if by == last and p.endswith(".parquet")]
    assert_refused(t_, path, last)
    # A time travel to before that commit does not need the file.
    first = t_.timeline.completed_writes().first.time
    with hidden(t_, path):
        if table_type == "COPY_ON_WRITE":
            assert [v for _, v in snapshot(t_, as_of=first)] == [i * 10 + 1 for i in range(6)]


def test_a_missing_log_file_of_the_latest_slice(tmp_path):
    # Logs of at most 1 byte: each block its own file, so one delta commit writes several.
    t_ = make(tmp_path, "MERGE_ON_READ", **{"hoodie.logfile.max.size": 1,
                                             "hoodie.logfile.data.block.max.size": 1})
    t_.bulk_insert(rows(range(6), 1))
    t_.upsert(rows([1, 2], 2))
    last = t_.upsert(rows([3, 4, 5], 3))
    logs = sorted(p for p, by in named(t_).items() if by == last)
    assert len(logs) == 3 and all(".log." in p for p in logs)
    assert_refused(t_, logs[1], last)


def test_a_missing_base_file_under_a_pending_compaction(tmp_path):
    t_ = make(tmp_path, "MERGE_ON_READ")
    first = t_.bulk_insert(rows(range(6), 1))
    t_.upsert(rows([1, 2], 2))
    assert t_.schedule_compaction(force=True).scheduled
    later = t_.upsert(rows([3], 3))  # its log goes to the compaction's new slice
    (path,) = [p for p, by in named(t_).items() if by == first]
    assert_refused(t_, path, first)
    (log_path,) = [p for p, by in named(t_).items() if by == later]
    assert_refused(t_, log_path, later)


def _set_table_type(table, table_type: str):
    props = pathlib.Path(table.storage.uri().removeprefix("file://")) / ".hoodie" / "hoodie.properties"
    background.wait_all()  # the Iceberg publisher reads the file being rewritten
    text = props.read_text()
    props.write_text("\n".join(f"hoodie.table.type={table_type}" if line.startswith("hoodie.table.type=")
                               else line for line in text.splitlines()) + "\n")
    return lakehouse.open_table(table.storage.uri())


def test_a_copy_on_write_table_with_logs_in_its_latest_slices_is_refused(tmp_path):
    mor = make(tmp_path, "MERGE_ON_READ")
    mor.bulk_insert(rows(range(4), 1))
    mor.upsert(rows([1], 2))
    cow = _set_table_type(mor, "COPY_ON_WRITE")
    with pytest.raises(CorruptFileError, match="hoodie.table.type is COPY_ON_WRITE") as e:
        cow.read()
    assert e.value.path.endswith(".hoodie/hoodie.properties") and "MERGE_ON_READ" in e.value.help
    files = data_files(cow)
    with pytest.raises(CorruptFileError, match="hoodie.table.type is COPY_ON_WRITE"):
        cow.upsert(rows([1], 3))
    assert data_files(cow) == files
    assert snapshot(_set_table_type(cow, "MERGE_ON_READ")) == [(f"k{i}", i * 10 + (2 if i == 1 else 1))
                                                                for i in range(4)]


def test_a_table_converted_to_copy_on_write_once_compacted_reads_and_writes(tmp_path):
    # What Hudi's CLI does: compact everything, then change the type. Delta commits (and the
    # older slices with logs) stay.
    mor = make(tmp_path, "MERGE_ON_READ")
    first = mor.bulk_insert(rows(range(4), 1))
    second = mor.upsert(rows([1], 2))
    mor.compact(force=True)
    cow = _set_table_type(mor, "COPY_ON_WRITE")
    assert [v for _, v in snapshot(cow)] == [1, 12, 21, 31]
    assert [v for _, v in snapshot(cow, as_of=second)] == [1, 12, 21, 31]
    assert [v for _, v in snapshot(cow, as_of=first)] == [1, 11, 21, 31]
    cow.upsert(rows([2], 3))
    assert [v for _, v in snapshot(cow)] == [1, 12, 23, 31]
    # Logs appearing in a latest slice again are refused.
    cow2 = _set_table_type(cow, "MERGE_ON_READ")
    cow2.upsert(rows([3], 4))
    with pytest.raises(CorruptFileError, match="hold log files"):
        _set_table_type(cow2, "COPY_ON_WRITE").read()


# --- tables: no false alarm where files legitimately went ----------------------------------


def test_compaction_and_clean(tmp_path):
    t_ = make(tmp_path, "MERGE_ON_READ")
    t_.bulk_insert(rows(range(8), 1))
    for ts in (2, 3):
        t_.upsert(rows([ts, ts + 1], ts))
    t_.compact(force=True)
    t_.upsert(rows([5], 4))
    t_.compact(force=True)
    files = data_files(t_)
    expected = snapshot(t_)
    assert t_.clean(options={"hoodie.cleaner.commits.retained": 1}).files_deleted
    assert gone_but_named(t_, files), "the clean deleted no file the timeline names"
    assert snapshot(t_) == expected
    assert_guarded(t_)


def test_copy_on_write_versions_cleaned(tmp_path):
    t_ = make(tmp_path, "COPY_ON_WRITE")
    t_.bulk_insert(rows(range(4), 1))
    for ts in (2, 3, 4):
        t_.upsert(rows([ts - 1], ts))
    files = data_files(t_)
    t_.clean(options={"hoodie.cleaner.commits.retained": 1})
    assert gone_but_named(t_, files)
    assert_guarded(t_)


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
@pytest.mark.parametrize("op", ["insert_overwrite", "insert_overwrite_table", "delete_partitions"])
def test_replaced_file_groups_cleaned(tmp_path, table_type, op):
    t_ = make(tmp_path, table_type)
    t_.bulk_insert(pa.concat_tables([rows(range(4), 1, "x"), rows(range(4, 8), 1, "y"),
                                     rows(range(8, 10), 1, "z")]))
    t_.upsert(rows([1], 2, "x"))
    if op == "delete_partitions":
        t_.delete_partitions(["y"])
    else:
        getattr(t_, op)(rows([20, 21], 3, "y"))
    t_.upsert(rows([9], 4, "z"))  # the clean retains one commit: the replace is then behind it
    expected = snapshot(t_)
    files = data_files(t_)
    t_.clean(options={"hoodie.cleaner.commits.retained": 1})
    assert any(p.startswith("y/") for p in gone_but_named(t_, files))
    assert snapshot(t_) == expected
    assert_guarded(t_)


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_rollback_and_restore(tmp_path, table_type):
    t_ = make(tmp_path, table_type)
    t_.bulk_insert(rows(range(4), 1))
    saved = snapshot(t_)
    sp = t_.create_savepoint()
    t_.upsert(rows([1], 2))
    kept = snapshot(t_)
    t_.upsert(rows([2, 7], 3))
    t_.rollback()
    assert snapshot(t_) == kept
    t_.upsert(rows([3], 4, "y"))
    t_.restore(sp)
    assert snapshot(t_) == saved
    assert_guarded(t_)


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_archived_and_cleaned(tmp_path, table_type):
    t_ = make(tmp_path, table_type, **{"hoodie.keep.max.commits": 4, "hoodie.keep.min.commits": 2})
    t_.bulk_insert(rows(range(6), 1))
    for ts in range(2, 8):
        t_.upsert(rows([ts % 6], ts))
        if table_type == "MERGE_ON_READ" and ts % 2:
            t_.compact(force=True)
    t_.clean(options={"hoodie.cleaner.commits.retained": 1})
    expected = snapshot(t_)
    assert t_.archive().archived
    assert snapshot(t_) == expected
    assert_guarded(t_)


@pytest.mark.parametrize("pending_compaction", [False, True])
def test_keep_latest_file_versions(tmp_path, pending_compaction):
    t_ = make(tmp_path, "MERGE_ON_READ")
    t_.bulk_insert(rows(range(6), 1))
    for ts in (2, 3):
        t_.upsert(rows([ts], ts))
        t_.compact(force=True)
    t_.upsert(rows([4], 4))
    if pending_compaction:
        t_.schedule_compaction(force=True)
        t_.upsert(rows([5], 5))
    files = data_files(t_)
    expected = snapshot(t_)
    t_.clean(options={"hoodie.cleaner.policy": "KEEP_LATEST_FILE_VERSIONS",
                      "hoodie.cleaner.fileversions.retained": 1})
    assert gone_but_named(t_, files)
    assert snapshot(t_) == expected
    if pending_compaction:
        t_.run_compaction()
        t_.commit_compaction()
        t_.clean(options={"hoodie.cleaner.policy": "KEEP_LATEST_FILE_VERSIONS",
                          "hoodie.cleaner.fileversions.retained": 1})
        assert snapshot(t_) == expected
    assert_guarded(t_)


def test_a_reader_whose_listing_raced_a_commit_and_a_clean_moves_on(tmp_path):
    t_ = make(tmp_path, "COPY_ON_WRITE")
    t_.bulk_insert(rows(range(4), 1))
    t_.upsert(rows([1], 2))
    reader = TableReader(t_.storage, t_.config, t_.active)  # its timeline: loaded now
    t_.upsert(rows([1], 3))
    t_.clean(options={"hoodie.cleaner.policy": "KEEP_LATEST_FILE_VERSIONS",
                      "hoodie.cleaner.fileversions.retained": 1})
    assert not reader.timeline.is_completed(t_.timeline.completed_writes().last.time)
    got = reader.snapshot(columns=["id", "v"])
    assert sorted(got.column("v").to_pylist()) == [1, 13, 21, 31]


# --- every table Apache Hudi wrote -----------------------------------------------------------


@pytest.mark.interop
def test_every_hudi_v6_fixture_reads_and_is_guarded(fixture_tables, tmp_path):
    checked = 0
    for name, root in sorted(fixture_tables.items()):
        if not name.rsplit("/", 1)[-1].startswith("v6_"):
            continue
        copy = tmp_path / name.replace("/", "_")
        shutil.copytree(root, copy)
        table = lakehouse.open_table(str(copy))
        table.read()
        writes = [i.time for i in table.timeline.completed_writes()]
        for w in writes:
            table.read(as_of=w)
            table.read_changes(None, w)
        if not writes:
            continue
        names = named(table)
        latest = [p for p, by in names.items() if by == writes[-1]]
        with hidden(table, latest[0]), pytest.raises(CorruptFileError, match=writes[-1]):
            lakehouse.open_table(str(copy)).read()
        checked += 1
    assert checked >= 12
