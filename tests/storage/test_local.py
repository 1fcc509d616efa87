"""LocalStorage: the atomic create every timeline transition relies on, atomic replace, and the
plain file operations, checked against the real file system rather than against the storage's
own view of it."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap
import threading
import time

import pyarrow as pa
import pytest

from lakehouse.errors import ConfigError, FileAlreadyExistsError, StorageError
from lakehouse.storage import LocalStorage, Storage, get_storage

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture
def storage(tmp_path) -> LocalStorage:
    return LocalStorage(str(tmp_path))


def _payload(tag: int, size: int) -> bytes:
    # Every byte says who wrote it, so a mix of two writers' data is detectable.
    return bytes([tag % 251 + 1]) * size


def _is_whole_payload(data: bytes, sizes: set[int]) -> bool:
    return len(data) in sizes and data == data[:1] * len(data)


# --- create --------------------------------------------------------------------------------


def test_create_writes_the_content_and_makes_parent_folders(storage, tmp_path):
    storage.create("a/b/c.bin", b"hello")
    assert (tmp_path / "a" / "b" / "c.bin").read_bytes() == b"hello"


def test_create_refuses_an_existing_file_and_leaves_it_untouched(storage, tmp_path):
    storage.create("x", b"first")
    with pytest.raises(FileAlreadyExistsError) as err:
        storage.create("x", b"second")
    # Callers catch it as the standard exception types as well.
    assert isinstance(err.value, FileExistsError) and isinstance(err.value, StorageError)
    assert "Help:" in str(err.value)
    assert (tmp_path / "x").read_bytes() == b"first"


def test_create_of_empty_content(storage, tmp_path):
    storage.create(".hoodie/20250101000000000.commit.requested", b"")
    assert (tmp_path / ".hoodie" / "20250101000000000.commit.requested").read_bytes() == b""


def test_create_leaves_no_temporary_files(storage, tmp_path):
    storage.create("d/f", b"1")
    with pytest.raises(FileAlreadyExistsError):
        storage.create("d/f", b"2")
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == ["f"]


def test_create_race_between_threads_has_exactly_one_winner(storage, tmp_path):
    n = 16
    size = 256 * 1024
    barrier = threading.Barrier(n)
    outcomes: dict[int, str] = {}

    def run(i: int) -> None:
        barrier.wait()
        try:
            storage.create("race/target", _payload(i, size))
            outcomes[i] = "won"
        except FileAlreadyExistsError:
            outcomes[i] = "lost"
        except Exception as e:  # pragma: no cover - reported by the assertion below
            outcomes[i] = repr(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [i for i, o in outcomes.items() if o == "won"]
    assert len(winners) == 1, outcomes
    assert all(o in ("won", "lost") for o in outcomes.values()), outcomes
    # The file holds the winner's bytes, all of them.
    assert (tmp_path / "race" / "target").read_bytes() == _payload(winners[0], size)
    assert sorted(p.name for p in (tmp_path / "race").iterdir()) == ["target"]


def test_racing_creators_never_expose_a_partial_file(storage, tmp_path):
    # Big payloads make each write take long enough for the reader to look in the middle of it
    # if the content were written in place; several rounds make a lucky pass unlikely.
    sizes = {8 * 1024 * 1024 + i for i in range(4)}  # a different length per writer, too
    bad: list[int] = []
    seen = [0]
    for rnd in range(6):
        target = tmp_path / f"seen{rnd}"
        stop = threading.Event()

        def reader() -> None:
            while not stop.is_set():
                try:
                    data = target.read_bytes()
                except FileNotFoundError:
                    continue
                seen[0] += 1
                if not _is_whole_payload(data, sizes):
                    bad.append(len(data))

        barrier = threading.Barrier(len(sizes))

        def writer(i: int, size: int) -> None:
            barrier.wait()
            try:
                storage.create(target.name, _payload(i, size))
            except FileAlreadyExistsError:
                pass

        r = threading.Thread(target=reader)
        r.start()
        ws = [threading.Thread(target=writer, args=(i, s)) for i, s in enumerate(sorted(sizes))]
        for w in ws:
            w.start()
        for w in ws:
            w.join()
        time.sleep(0.02)
        stop.set()
        r.join()
    assert not bad, f"partial content seen: lengths {bad[:5]}"
    assert seen[0] > 0


_CREATE_SCRIPT = textwrap.dedent("""
    import os, sys, time
    from lakehouse.errors import FileAlreadyExistsError
    from lakehouse.storage import LocalStorage
    root, start, tag = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
    s = LocalStorage(root)
    while time.time() < start:
        pass
    try:
        s.create("p/target", bytes([tag]) * (1 << 20))
        print("won")
    except FileAlreadyExistsError:
        print("lost")
""")


def test_create_race_between_processes_has_exactly_one_winner(tmp_path):
    n = 6
    start = time.time() + 1.5  # every process is up and spinning before the race starts
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    procs = [subprocess.Popen([sys.executable, "-c", _CREATE_SCRIPT, str(tmp_path), str(start),
                               str(i + 1)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=env) for i in range(n)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        results.append(out.strip())
    assert sorted(results) == ["lost"] * (n - 1) + ["won"]
    tag = results.index("won") + 1
    assert (tmp_path / "p" / "target").read_bytes() == bytes([tag]) * (1 << 20)
    assert [p.name for p in (tmp_path / "p").iterdir()] == ["target"]


# --- write ---------------------------------------------------------------------------------


def test_write_creates_and_replaces(storage, tmp_path):
    storage.write("w/f", b"one")
    storage.write("w/f", b"two!")
    assert (tmp_path / "w" / "f").read_bytes() == b"two!"
    assert [p.name for p in (tmp_path / "w").iterdir()] == ["f"]


def test_write_replaces_atomically_for_concurrent_readers(storage, tmp_path):
    a, b = _payload(1, 2 * 1024 * 1024), _payload(2, 1024 * 1024 + 7)
    storage.write("r/f", a)
    stop = threading.Event()
    bad: list[int] = []
    reads = [0]

    def reader() -> None:
        while not stop.is_set():
            data = (tmp_path / "r" / "f").read_bytes()  # never absent: replace is one rename
            reads[0] += 1
            if data != a and data != b:
                bad.append(len(data))

    r = threading.Thread(target=reader)
    r.start()
    for i in range(20):
        storage.write("r/f", b if i % 2 == 0 else a)
    stop.set()
    r.join()
    assert not bad, f"mixed content seen: lengths {bad[:5]}"
    assert reads[0] > 0
    assert [p.name for p in (tmp_path / "r").iterdir()] == ["f"]


# --- append / read -------------------------------------------------------------------------


def test_append_returns_the_offset_it_wrote_at(storage, tmp_path):
    assert storage.append("l/log", b"abc") == 0  # created when absent
    assert storage.append("l/log", b"defg") == 3
    assert storage.append("l/log", b"") == 7
    assert storage.append("l/log", b"h") == 7
    assert (tmp_path / "l" / "log").read_bytes() == b"abcdefgh"
    assert storage.supports_append


def test_reads(storage, tmp_path):
    (tmp_path / "f").write_bytes(b"0123456789")
    assert storage.read("f") == b"0123456789"
    assert storage.read_range("f", 2, 3) == b"234"
    assert storage.read_range("f", 8, 10) == b"89"  # short at the end, no error
    with storage.open_input("f") as fh:
        assert isinstance(fh, pa.NativeFile)
        fh.seek(5)
        assert fh.read(2) == b"56"
        assert fh.size() == 10
    with pytest.raises(FileNotFoundError):
        storage.read("missing")


def test_open_output_is_an_exclusive_create(storage, tmp_path):
    with storage.open_output("o/big.parquet") as fh:
        fh.write(b"data")
    assert (tmp_path / "o" / "big.parquet").read_bytes() == b"data"
    with pytest.raises(FileExistsError):
        storage.open_output("o/big.parquet")


# --- listing and metadata ------------------------------------------------------------------


def test_absent_directory_lists_empty(storage):
    assert storage.list("no/such/dir") == []
    assert storage.list("no/such/dir", recursive=True) == []


def test_list_gives_paths_relative_to_the_base(storage, tmp_path):
    (tmp_path / "p" / "q").mkdir(parents=True)
    (tmp_path / "p" / "a.txt").write_bytes(b"12345")
    (tmp_path / "p" / "q" / "b.txt").write_bytes(b"1")
    (tmp_path / "top").write_bytes(b"")
    flat = {i.path: i for i in storage.list("p")}
    assert set(flat) == {"p/a.txt", "p/q"}
    assert flat["p/a.txt"].size == 5 and not flat["p/a.txt"].is_dir
    assert flat["p/a.txt"].name == "a.txt"
    assert flat["p/q"].is_dir
    deep = {i.path for i in storage.list("p", recursive=True)}
    assert deep == {"p/a.txt", "p/q", "p/q/b.txt"}
    assert {i.path for i in storage.list("")} == {"p", "top"}
    assert all("\\" not in i.path for i in storage.list("", recursive=True))


_CHURN_SCRIPT = textwrap.dedent("""
    import os, sys, time
    root, seconds = sys.argv[1], float(sys.argv[2])
    end = time.time() + seconds
    while time.time() < end:
        for p in (root + "/busy", root + "/busy/sub"):
            try:
                os.mkdir(p)
            except (FileExistsError, FileNotFoundError):
                pass
        for p in (root + "/busy/sub", root + "/busy"):
            try:
                os.rmdir(p)
            except (FileNotFoundError, OSError):
                pass
""")


def test_listing_survives_folders_appearing_and_vanishing_meanwhile(storage, tmp_path):
    # The first writer creates .hoodie, markers come and go under .hoodie/.temp, while readers
    # list. A folder appearing or vanishing during a listing must not fail it (pyarrow's
    # FileSelector(allow_not_found=True) does: ENOENT, then "exists" when it looks again).
    churn = subprocess.Popen([sys.executable, "-c", _CHURN_SCRIPT, str(tmp_path), "2.0"])
    try:
        time.sleep(0.2)
        deadline = time.time() + 1.5
        while time.time() < deadline:
            storage.list("busy")
            storage.list("", recursive=True)
    finally:
        churn.wait(timeout=30)


def test_info_exists_and_size(storage, tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "f").write_bytes(b"xyz")
    info = storage.info("d/f")
    assert info is not None and info.size == 3 and not info.is_dir and info.path == "d/f"
    assert info.mtime_ns is not None
    assert storage.info("d").is_dir
    assert storage.info("nope") is None
    assert storage.exists("d/f") and storage.exists("d") and not storage.exists("nope")
    assert storage.size("d/f") == 3
    with pytest.raises(FileNotFoundError):
        storage.size("nope")


def test_delete(storage, tmp_path):
    (tmp_path / "f").write_bytes(b"1")
    assert storage.delete("f") is True
    assert not (tmp_path / "f").exists()
    assert storage.delete("f") is False
    with pytest.raises(FileNotFoundError):
        storage.delete("f", missing_ok=False)


def test_mkdirs_and_delete_dir(storage, tmp_path):
    storage.mkdirs("a/b/c")
    storage.mkdirs("a/b/c")  # idempotent
    assert (tmp_path / "a" / "b" / "c").is_dir()
    (tmp_path / "a" / "b" / "c" / "f").write_bytes(b"1")
    storage.delete_dir("a")
    assert not (tmp_path / "a").exists()
    storage.delete_dir("a")  # absent: nothing to do, no error


def test_uri_and_child(storage, tmp_path):
    assert storage.base_uri == "file://" + str(tmp_path)
    assert storage.uri() == storage.base_uri
    assert storage.uri("x/y") == f"file://{tmp_path}/x/y"
    child = storage.child("sub/dir")
    child.create("f", b"c")
    assert (tmp_path / "sub" / "dir" / "f").read_bytes() == b"c"
    assert child.list("") and child.list("")[0].path == "f"


def test_relative_root_is_made_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    s = LocalStorage("rel")
    s.create("f", b"1")
    assert (tmp_path / "rel" / "f").read_bytes() == b"1"
    assert s.base_uri == f"file://{tmp_path}/rel"


# --- get_storage ---------------------------------------------------------------------------


def test_get_storage_plain_path(tmp_path):
    s = get_storage(str(tmp_path / "t"))
    assert isinstance(s, LocalStorage) and s.root == str(tmp_path / "t")
    assert isinstance(get_storage(tmp_path / "t"), LocalStorage)  # a pathlib.Path works too


def test_get_storage_file_uri(tmp_path):
    s = get_storage(f"file://{tmp_path}/t")
    assert isinstance(s, LocalStorage) and s.root == f"{tmp_path}/t"
    assert get_storage(f"file://localhost{tmp_path}/t").root == f"{tmp_path}/t"


def test_get_storage_decodes_a_percent_encoded_file_uri(tmp_path):
    # pathlib writes a space in a file URI as %20; the folder has a real space.
    folder = tmp_path / "my table"
    assert get_storage(folder.as_uri()).root == str(folder)


def test_get_storage_refuses_a_file_uri_with_a_host(tmp_path):
    # 'file://tmp/t' is a classic slip for 'file:///tmp/t'; it must not land in '/t'.
    with pytest.raises(ConfigError) as err:
        get_storage("file://tmp/t")
    assert "Help:" in str(err.value)


def test_get_storage_returns_a_storage_as_is(storage):
    assert get_storage(storage) is storage
    assert isinstance(storage, Storage)


@pytest.mark.parametrize("uri", ["hdfs://nn:8020/t", "gs://b/t", "abfs://c@a/t"])
def test_get_storage_unsupported_scheme(uri):
    with pytest.raises(ConfigError) as err:
        get_storage(uri)
    assert uri.split(":")[0] in str(err.value)
    assert "Help:" in str(err.value)


# --- failures ------------------------------------------------------------------------------


class _Boom(Exception):
    pass


@pytest.mark.parametrize("op", ["create", "write"])
def test_a_failed_write_leaves_nothing_behind(storage, tmp_path, monkeypatch, op):
    # The disk fills up while the content is written: neither the target nor a temporary
    # file may remain.
    real_fsync = os.fsync

    def failing_fsync(fd):
        raise _Boom("No space left on device")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(_Boom):
        getattr(storage, op)("d/target", b"x" * 1000)
    monkeypatch.setattr(os, "fsync", real_fsync)
    assert [p.name for p in (tmp_path / "d").iterdir()] == []


def test_touch_creates_an_empty_file_once_and_keeps_existing_content(tmp_path):
    from lakehouse.storage.local import LocalStorage
    s = LocalStorage(str(tmp_path))
    s.touch("a/b/m.marker.CREATE")
    assert s.read("a/b/m.marker.CREATE") == b""
    s.write("x", b"data")
    s.touch("x")
    assert s.read("x") == b"data"


def test_open_output_refuses_to_overwrite_and_keeps_what_was_written(tmp_path):
    import pytest as _pytest
    from lakehouse.storage.local import LocalStorage
    s = LocalStorage(str(tmp_path))
    with s.open_output("p/f.parquet") as f:
        f.write(b"abc")
    assert s.read("p/f.parquet") == b"abc"
    with _pytest.raises(FileExistsError):
        s.open_output("p/f.parquet")


def test_a_rewrite_append_or_delete_drops_the_hadoop_checksum_beside_the_file(tmp_path):
    """Java Hudi on file: paths writes through Hadoop's checksummed local file system, which keeps
    .<name>.crc beside each file and verifies it on read: once lakehouse changes the file, the
    stale checksum would make Java fail to read it."""
    from lakehouse.storage.local import LocalStorage
    s = LocalStorage(str(tmp_path))
    for name in ("hoodie.properties", "log", "gone"):
        s.write(f".hoodie/{name}", b"java wrote this")
        (tmp_path / ".hoodie" / f".{name}.crc").write_bytes(b"crc of what java wrote")
    s.write(".hoodie/hoodie.properties", b"lakehouse rewrote it")
    s.append(".hoodie/log", b" and appended")
    s.delete(".hoodie/gone")
    assert sorted(p.name for p in (tmp_path / ".hoodie").iterdir()) == ["hoodie.properties", "log"]
    assert s.read(".hoodie/log") == b"java wrote this and appended"
