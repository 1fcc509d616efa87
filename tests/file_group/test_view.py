"""The file-system view: which file slices a reader merges, on the tables Apache Hudi wrote
(compared with hudi-rs's own file slices) and on hand-made folders of empty files whose timeline
says exactly which instants completed."""

from __future__ import annotations

import json

import pytest

from lakehouse.file_group.view import FileSystemView, list_data_files
from lakehouse.storage import LocalStorage
from lakehouse.timeline.active import ActiveTimeline

FID1 = "11111111-aaaa-4aaa-8aaa-aaaaaaaaaaaa-0"
FID2 = "22222222-bbbb-4bbb-8bbb-bbbbbbbbbbbb-0"
FID3 = "33333333-cccc-4ccc-8ccc-cccccccccccc-0"


def t(n: int) -> str:
    return f"2025010100000{n:04d}"


def base(fid: str, instant: str, token: str = "0-1-1") -> str:
    return f"{fid}_{token}_{instant}.parquet"


def log(fid: str, base_instant: str, version: int, token: str = "0-1-1") -> str:
    return f".{fid}_{base_instant}.log.{version}_{token}"


class Folder:
    """A table folder made by hand: empty data files and a timeline in Hudi's file names."""

    def __init__(self, root) -> None:
        self.root = root
        (root / ".hoodie").mkdir(parents=True)
        self.storage = LocalStorage(str(root))
        self.active = ActiveTimeline(self.storage)

    def timeline_file(self, name: str, content: bytes = b"") -> None:
        (self.root / ".hoodie" / name).write_bytes(content)

    def write(self, n: int, action: str = "commit", *, state: str = "completed",
              replaced: dict[str, list[str]] | None = None) -> None:
        inflight = f"{t(n)}.inflight" if action == "commit" else f"{t(n)}.{action}.inflight"
        self.timeline_file(f"{t(n)}.{action}.requested")
        if state in ("inflight", "completed"):
            self.timeline_file(inflight)
        if state == "completed":
            meta = {"partitionToWriteStats": {}, "compacted": False, "extraMetadata": {},
                    "operationType": "UPSERT"}
            if replaced is not None:
                meta["partitionToReplaceFileIds"] = replaced
            self.timeline_file(f"{t(n)}.{action}", json.dumps(meta).encode())

    def compaction(self, n: int, *, state: str = "requested") -> None:
        self.timeline_file(f"{t(n)}.compaction.requested", b"plan")
        if state in ("inflight", "completed"):
            self.timeline_file(f"{t(n)}.compaction.inflight")
        if state == "completed":
            self.timeline_file(f"{t(n)}.commit", json.dumps(
                {"partitionToWriteStats": {}, "compacted": True, "operationType": "COMPACT"}).encode())

    def files(self, partition: str, *names: str) -> None:
        folder = self.root / partition if partition else self.root
        folder.mkdir(parents=True, exist_ok=True)
        for n in names:
            (folder / n).write_bytes(b"")

    def view(self, partitions: list[str] | None = None) -> FileSystemView:
        return FileSystemView.load(self.storage, self.active.load(), self.active, partitions)


def shape(slices) -> list[tuple]:
    """Slices as plain tuples: (partition, fileId, base instant, base file instant, log names)."""
    return sorted((s.partition, s.file_id, s.base_instant,
                   s.base_file.commit_time if s.base_file else None,
                   tuple(str(lf.name) for lf in s.log_files)) for s in slices)


@pytest.fixture
def folder(tmp_path) -> Folder:
    return Folder(tmp_path / "table")


# --- copy-on-write --------------------------------------------------------------------------


def test_cow_slices_and_failed_writes(folder):
    folder.write(1)
    folder.write(2)
    folder.write(3, state="inflight")     # failed or still running
    folder.write(4, state="requested")
    folder.files("p", base(FID1, t(1)), base(FID1, t(2)), base(FID1, t(3)), base(FID2, t(3)),
                 base(FID3, t(4)), ".hoodie_partition_metadata")
    view = folder.view()
    (group,) = view.file_groups()
    assert [s.base_instant for s in group.slices] == [t(1), t(2)]
    assert group.latest.base_file.path == f"p/{base(FID1, t(2))}"
    # FID2 and FID3 exist only through uncommitted instants: not there at all.
    assert shape(view.latest_slices()) == [("p", FID1, t(2), t(2), ())]
    assert shape(view.latest_slices(as_of=t(1))) == [("p", FID1, t(1), t(1), ())]
    assert view.latest_slices(as_of=t(0)) == []


def test_files_older_than_the_active_timeline_count_as_committed(folder):
    # Instant 1's timeline files were archived; its base file is still the table's data.
    folder.write(2)
    folder.files("p", base(FID1, t(1)), base(FID2, t(2)))
    view = folder.view()
    assert shape(view.latest_slices()) == [("p", FID1, t(1), t(1), ()), ("p", FID2, t(2), t(2), ())]
    # ... but not to a view as of a time before them.
    assert shape(view.latest_slices(as_of=t(1))) == [("p", FID1, t(1), t(1), ())]
    assert view.latest_slices(as_of=t(0)) == []


def test_no_instants_no_data(folder):
    folder.files("p", base(FID1, t(1)))
    assert folder.view().latest_slices() == []


def test_replaced_file_groups_vanish_from_the_replace_on(folder):
    folder.write(1)
    folder.write(2, "replacecommit", replaced={"p": [FID1], "q": [FID3]})
    folder.files("p", base(FID1, t(1)), base(FID2, t(2)))
    folder.files("q", base(FID3, t(1)))
    view = folder.view()
    assert shape(view.latest_slices()) == [("p", FID2, t(2), t(2), ())]
    assert view.replaced_file_groups() == {("p", FID1), ("q", FID3)}
    assert shape(view.latest_slices(as_of=t(1))) == [("p", FID1, t(1), t(1), ()),
                                                     ("q", FID3, t(1), t(1), ())]
    assert view.replaced_file_groups(as_of=t(1)) == set()


def test_pending_replace_changes_nothing(folder):
    folder.write(1)
    folder.write(2, "replacecommit", state="inflight")
    folder.files("p", base(FID1, t(1)), base(FID2, t(2)))
    assert shape(folder.view().latest_slices()) == [("p", FID1, t(1), t(1), ())]


def test_partitions(folder):
    folder.write(1)
    folder.files("a/x", base(FID1, t(1)), ".hoodie_partition_metadata")
    folder.files("a/y", base(FID2, t(1)))
    folder.files("b", base(FID3, t(1)))
    view = folder.view()
    assert view.all_partitions() == ["a/x", "a/y", "b"]
    assert [s.file_id for s in view.latest_slices(partitions={"a/y"})] == [FID2]
    only = folder.view(partitions=["b"])
    assert only.all_partitions() == ["b"]
    assert {f.path for f in list_data_files(folder.storage)} == {
        f"a/x/{base(FID1, t(1))}", "a/x/.hoodie_partition_metadata", f"a/y/{base(FID2, t(1))}",
        f"b/{base(FID3, t(1))}"}


def test_non_partitioned_table_lives_at_the_root(folder):
    folder.write(1)
    folder.files("", base(FID1, t(1)), ".hoodie_partition_metadata")
    view = folder.view()
    assert shape(view.latest_slices()) == [("", FID1, t(1), t(1), ())]
    assert view.latest_slices()[0].base_file.path == base(FID1, t(1))
    # .hoodie is never data.
    assert {f.path for f in list_data_files(folder.storage)} == {base(FID1, t(1)), ".hoodie_partition_metadata"}


# --- merge-on-read --------------------------------------------------------------------------


def test_mor_logs_in_version_order(folder):
    folder.write(1, "deltacommit")
    folder.write(2, "deltacommit")
    folder.files("p", base(FID1, t(1)), log(FID1, t(1), 10), log(FID1, t(1), 2, "1-0-0"),
                 log(FID1, t(1), 2, "0-9-9"), log(FID1, t(1), 1))
    (s,) = folder.view().latest_slices()
    assert [(lf.name.version, lf.name.write_token) for lf in s.log_files] == [
        (1, "0-1-1"), (2, "0-9-9"), (2, "1-0-0"), (10, "0-1-1")]
    assert s.has_logs and s.total_log_size == 0 and s.base_size == 0


def test_log_only_file_group_of_a_failed_write_is_ignored(folder):
    folder.write(1, "deltacommit")
    folder.write(2, "deltacommit", state="inflight")
    # A failed write's new file group: logs against its own (uncommitted) instant.
    folder.files("p", base(FID1, t(1)), log(FID2, t(2), 1))
    assert [s.file_id for s in folder.view().latest_slices()] == [FID1]


def test_pending_compaction_splits_the_file_group(folder):
    folder.write(1, "deltacommit")
    folder.write(2, "deltacommit")
    folder.compaction(3)
    folder.write(4, "deltacommit")
    folder.files("p", base(FID1, t(1)), log(FID1, t(1), 1), log(FID1, t(1), 2),
                 log(FID1, t(3), 1))     # written after the compaction was scheduled
    view = folder.view()
    (group,) = view.file_groups()
    assert [(s.base_instant, s.base_file is not None) for s in group.slices] == [(t(1), True), (t(3), False)]
    (latest,) = view.latest_slices()
    # Readers merge the new logs over the slice the compaction reads.
    assert latest.base_instant == t(3) and latest.base_file is None
    assert [str(lf.name) for lf in latest.log_files] == [log(FID1, t(3), 1)]
    assert shape([latest.previous]) == [("p", FID1, t(1), t(1), (log(FID1, t(1), 1), log(FID1, t(1), 2)))]
    # Writers append to the compaction's new slice.
    (for_write,) = view.latest_slices_for_write()
    assert for_write.base_instant == t(3)
    assert view.pending_compaction_times() == {t(3): t(3)}
    assert [s.base_instant for s in view.file_groups(include_pending_compaction=False)[0].slices] == [t(1)]


def test_a_pending_compactions_partial_base_file_is_never_read(folder):
    folder.write(1, "deltacommit")
    folder.compaction(2, state="inflight")
    folder.files("p", base(FID1, t(1)), log(FID1, t(1), 1), base(FID1, t(2)))
    (latest,) = folder.view().latest_slices()
    assert latest.base_instant == t(2) and latest.base_file is None and latest.log_files == ()
    assert latest.previous.base_file.commit_time == t(1)
    assert [str(lf.name) for lf in latest.previous.log_files] == [log(FID1, t(1), 1)]


def test_pending_compaction_without_new_files_keeps_the_old_slice(folder):
    folder.write(1, "deltacommit")
    folder.compaction(2)
    folder.files("p", base(FID1, t(1)), log(FID1, t(1), 1))
    assert shape(folder.view().latest_slices()) == [("p", FID1, t(1), t(1), (log(FID1, t(1), 1),))]


def test_completed_compaction_starts_a_new_slice(folder):
    folder.write(1, "deltacommit")
    folder.compaction(2, state="completed")
    folder.write(3, "deltacommit")
    folder.files("p", base(FID1, t(1)), log(FID1, t(1), 1), base(FID1, t(2)), log(FID1, t(2), 1))
    view = folder.view()
    assert shape(view.latest_slices()) == [("p", FID1, t(2), t(2), (log(FID1, t(2), 1),))]
    assert view.latest_slices()[0].previous is None
    # Before the compaction, the old slice with its log.
    assert shape(view.latest_slices(as_of=t(1))) == [("p", FID1, t(1), t(1), (log(FID1, t(1), 1),))]


# --- the fixtures, against hudi-rs -----------------------------------------------------------


def _fixture_view(root) -> FileSystemView:
    storage = LocalStorage(str(root))
    active = ActiveTimeline(storage)
    return FileSystemView.load(storage, active.load(), active)


def _hudi_shape(slices) -> list[tuple]:
    return sorted((s.partition_path, s.file_id, s.creation_instant_time, s.base_file_name or None,
                   tuple(s.log_file_names)) for s in slices)


def _our_shape(slices) -> list[tuple]:
    return sorted((s.partition, s.file_id, s.base_instant,
                   str(s.base_file.name) if s.base_file else None,
                   tuple(str(lf.name) for lf in s.log_files)) for s in slices)


@pytest.mark.interop
def test_latest_slices_equal_hudi_rs_on_every_v6_fixture(fixture_tables):
    hudi = pytest.importorskip("hudi")
    compared = 0
    for name, root in fixture_tables.items():
        if not name.rsplit("/", 1)[-1].startswith("v6_"):
            continue
        view = _fixture_view(root)
        table = hudi.HudiTableBuilder.from_base_uri(str(root)).build()
        assert _our_shape(view.latest_slices()) == _hudi_shape(table.get_file_slices()), name
        for inst in view.timeline.completed_writes():
            opts = hudi.HudiReadOptions().with_as_of_timestamp(inst.time)
            assert _our_shape(view.latest_slices(as_of=inst.time)) == \
                _hudi_shape(table.get_file_slices(opts)), (name, inst.time)
            compared += 1
    assert compared >= 25


@pytest.mark.interop
@pytest.mark.parametrize("kind", ["cow", "mor/parquet"])
def test_overwrite_fixture_replaces_every_old_file_group(fixture_tables, kind):
    view = _fixture_view(fixture_tables[f"sample_table/{kind}/v6_simplekeygen_nonhivestyle_overwritetable"])
    writes = [i.time for i in view.timeline.completed_writes()]
    before, at = writes[-2], writes[-1]
    old = {(s.partition, s.file_id) for s in view.latest_slices(as_of=before)}
    now = {(s.partition, s.file_id) for s in view.latest_slices()}
    assert len(old) == 3 and len(now) == 1 and not old & now
    assert view.replaced_file_groups() == old
    assert view.replaced_file_groups(as_of=before) == set()
    assert {s.base_instant for s in view.latest_slices()} == {at}


@pytest.mark.interop
def test_rollback_fixture_keeps_all_three_logs(fixture_tables):
    view = _fixture_view(fixture_tables["sample_table/mor/parquet/v6_nonpartitioned_rollback"])
    (s,) = view.latest_slices()
    # .log.2 holds the rollback command block; the log reader, not the view, applies it.
    assert [lf.name.version for lf in s.log_files] == [1, 2, 3]
    assert s.partition == "" and s.base_file is not None
