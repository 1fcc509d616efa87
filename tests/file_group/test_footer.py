"""The base-file footer cache (lakehouse.file_group.footer): Hudi's key range and bloom filter,
read once per file and kept within a byte bound."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from lakehouse.bloom_filter import footer_metadata
from lakehouse.file_group import footer
from lakehouse.file_group.file_slice import BaseFile
from lakehouse.file_group.naming import BaseFileName
from lakehouse.storage.local import LocalStorage


def _base_file(root, i: int, keys: list[str]) -> BaseFile:
    name = f"0000000{i}-0000-0000-0000-000000000000-0_0-1-0_20240101000000000.parquet"
    (root / "p").mkdir(exist_ok=True)
    table = pa.table({"_hoodie_record_key": keys}).replace_schema_metadata(footer_metadata(pa.array(keys)))
    pq.write_table(table, root / "p" / name)
    return BaseFile("p", BaseFileName.parse(name), 1)


def test_the_footer_cache_keeps_within_its_bytes(tmp_path, monkeypatch):
    """A BLOOM lookup over thousands of files reads every footer: the cache keeps the newest
    within a byte bound (a count alone let it hold gigabytes of bloom filters), and a footer
    read again after it left the cache answers the same."""
    monkeypatch.setattr(footer, "_FOOTERS", type(footer._FOOTERS)())
    monkeypatch.setattr(footer, "_footer_bytes", [0])
    storage = LocalStorage(str(tmp_path))
    files = [_base_file(tmp_path, i, [f"k{i}-{j}" for j in range(100)]) for i in range(6)]
    one = footer.read_footer(storage, files[0])
    assert one.nbytes > 0 and one.min_key == "k0-0" and one.max_key == "k0-99"
    monkeypatch.setattr(footer, "_FOOTER_CACHE_BYTES", 3 * one.nbytes)
    for bf in files:
        footer.read_footer(storage, bf)
    assert len(footer._FOOTERS) == 3 and footer._footer_bytes[0] == 3 * one.nbytes
    assert footer.read_footer(storage, files[-1]) is footer.read_footer(storage, files[-1])  # cached
    again = footer.read_footer(storage, files[0])  # evicted, read again
    assert again is not one and again.might_contain(pa.array(["k0-5", "zz"])).tolist() == [True, False]
    assert footer._footer_bytes[0] == sum(f.nbytes for f in footer._FOOTERS.values())
