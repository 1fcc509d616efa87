"""lakehouse.storage.kept_reads: one piece of work reads a file whole once, on a store whose files
never change (S3); everything else goes to the store as it is."""

from __future__ import annotations

import pytest

from lakehouse.storage import get_storage
from lakehouse.storage.kept_reads import KeptReads


@pytest.fixture
def s3(s3_uri, s3_options):
    return get_storage(s3_uri, s3_options)


def _counting(storage, monkeypatch):
    reads: list[str] = []
    real = type(storage).read
    monkeypatch.setattr(type(storage), "read", lambda self, path: reads.append(path) or real(self, path))
    return reads


def test_a_file_read_twice_is_fetched_once_and_a_write_forgets_it(s3, monkeypatch):
    s3.write("p/a.log", b"one")
    reads = _counting(s3, monkeypatch)
    kept = KeptReads(s3)
    assert kept.read("p/a.log") == b"one" and kept.read("p/a.log") == b"one"
    assert reads == ["p/a.log"]
    kept.write("p/a.log", b"two")
    assert kept.read("p/a.log") == b"two" and len(reads) == 2
    kept.delete("p/a.log")
    with pytest.raises(FileNotFoundError):
        kept.read("p/a.log")


def test_large_files_and_the_bound_keep_it_small(s3, monkeypatch):
    for name in ("a", "b", "c"):
        s3.write(f"f/{name}", name.encode() * 100)
    s3.write("f/big", b"x" * 1000)
    reads = _counting(s3, monkeypatch)
    kept = KeptReads(s3, max_bytes=250, file_bytes=500)
    for name in ("big", "big", "a", "b", "c", "a"):
        kept.read(f"f/{name}")
    # big is never kept (over file_bytes); a falls out when c comes in (250 bytes in all)
    assert reads == ["f/big", "f/big", "f/a", "f/b", "f/c", "f/a"]


def test_a_store_that_appends_is_read_every_time(tmp_path, monkeypatch):
    local = get_storage(str(tmp_path))
    local.write("a.log", b"one")
    reads = _counting(local, monkeypatch)
    kept = KeptReads(local)
    local.append("a.log", b"+more")  # another writer appends: a kept copy would be stale
    assert kept.read("a.log") == b"one+more"
    local.append("a.log", b"!")
    assert kept.read("a.log") == b"one+more!" and len(reads) == 2
