"""What Hudi keeps in a base file's parquet footer about its record keys: the least and greatest
key (``hoodie_min_record_key`` / ``hoodie_max_record_key``) and the keys' bloom filter
(``org.apache.hudi.bloomfilter``). Hudi's BLOOM index looks keys up with them; a read of given
keys skips a base file they rule out without decoding it.

Footers are cached by file URI: a base file is never rewritten under its name (the name holds
its instant and write token).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse.bloom_filter import BloomFilter
from lakehouse.file_group.file_slice import BaseFile
from lakehouse.storage.base import Storage
from lakehouse.storage.parquet import read_metadata


@dataclass(frozen=True)
class BaseFileFooter:
    min_key: str | None
    max_key: str | None
    bloom: BloomFilter | None

    @property
    def nbytes(self) -> int:
        return self.bloom.nbytes if self.bloom is not None else 0

    def might_contain(self, keys: pa.Array) -> np.ndarray:
        """Per key: False where the key range or the bloom filter rules it out (a bloom filter
        answers True wrongly now and then, never False wrongly)."""
        out = np.ones(len(keys), dtype=bool)
        if len(keys) == 0:
            return out
        if self.min_key is not None and self.max_key is not None:
            in_range = pc.and_(pc.greater_equal(keys, self.min_key), pc.less_equal(keys, self.max_key))
            out &= np.asarray(pc.fill_null(in_range, False))
        if self.bloom is not None and out.any():
            out[out] = self.bloom.might_contain(keys.filter(pa.array(out)))
        return out


_FOOTERS: "OrderedDict[str, BaseFileFooter]" = OrderedDict()
_FOOTERS_LOCK = threading.Lock()
_FOOTER_CACHE_SIZE = 4096
# Bytes of bloom filters the cache keeps (a footer's filter is ~0.3-0.6 MB at Hudi's sizing per
# 60k keys): a count alone let a lookup over thousands of files hold gigabytes.
_FOOTER_CACHE_BYTES = 64 << 20
_footer_bytes = [0]


def read_footer(storage: Storage, bf: BaseFile) -> BaseFileFooter:
    uri = storage.uri(bf.path)
    with _FOOTERS_LOCK:
        hit = _FOOTERS.get(uri)
        if hit is not None:
            _FOOTERS.move_to_end(uri)
            return hit
    md = read_metadata(storage, bf.path, bf.size).metadata or {}
    bloom = None
    raw = md.get(b"org.apache.hudi.bloomfilter")
    if raw:
        try:
            bloom = BloomFilter.deserialize(raw, md.get(b"hoodie_bloom_filter_type_code"))
        except ValueError:
            bloom = None
    mn, mx = md.get(b"hoodie_min_record_key"), md.get(b"hoodie_max_record_key")
    footer = BaseFileFooter(mn.decode() if mn else None, mx.decode() if mx else None, bloom)
    with _FOOTERS_LOCK:
        if uri not in _FOOTERS:
            _FOOTERS[uri] = footer
            _footer_bytes[0] += footer.nbytes
        while _FOOTERS and (len(_FOOTERS) > _FOOTER_CACHE_SIZE or _footer_bytes[0] > _FOOTER_CACHE_BYTES):
            _footer_bytes[0] -= _FOOTERS.popitem(last=False)[1].nbytes
    return footer
