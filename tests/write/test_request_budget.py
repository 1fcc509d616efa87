"""Requests that follow the work (issue 43): on the default Merge-On-Read table, with its Iceberg
publishing, an upsert into one partition, a read filtered to one partition, a compaction and a
clean of one partition's file group cost the same number of storage calls whatever the table's
partition count, and few. Every call of the storage interface is counted here, as an object store
would count requests (``benchmarks/bench_requests.py`` counts those on an S3 API server)."""

from __future__ import annotations

import collections

import pyarrow as pa
import pytest

import lakehouse
from lakehouse.iceberg import background
from lakehouse.storage.local import LocalStorage

CALLS = ("list", "read", "read_range", "open_input", "open_output", "write", "create", "touch", "exists",
         "info", "size", "delete", "delete_many", "delete_dir", "append")
RETAIN_ONE = {"hoodie.cleaner.commits.retained": "1"}


@pytest.fixture()
def calls(monkeypatch):
    """Storage calls on the table under ``calls.root`` by (method, path), while ``calls.on``
    (other tables' background threads, a leftover heartbeat say, are not counted)."""
    seen: collections.Counter = collections.Counter()
    seen.on = False  # type: ignore[attr-defined]
    seen.root = None  # type: ignore[attr-defined]
    for name in CALLS:
        real = getattr(LocalStorage, name)

        def spy(self, *args, _real=real, _name=name, **kw):
            if seen.on and seen.root is not None and self.root.startswith(seen.root):  # type: ignore[attr-defined]
                path = args[0] if args and isinstance(args[0], str) else ""
                seen[(_name, path)] += 1
            return _real(self, *args, **kw)
        monkeypatch.setattr(LocalStorage, name, spy)
    return seen


def _rows(n: int, partitions: int, ts: int, only: int | None = None) -> pa.Table:
    return pa.table({"id": [f"k{i:06d}" for i in range(n)],
                     "p": [f"p{(i % partitions) if only is None else only:03d}" for i in range(n)],
                     "ts": [ts] * n, "v": [float(i) for i in range(n)]})


def _steps(path, partitions: int, calls) -> dict[str, collections.Counter]:
    calls.root = str(path)
    t = lakehouse.create_table(str(path), name="t", table_type="MERGE_ON_READ", record_key="id",
                               partition_by="p", ordering_field="ts")
    t.upsert(_rows(20 * partitions, partitions, 1))
    t.upsert(_rows(20 * partitions, partitions, 2))
    t.compact(force=True)  # the table's first plan and clean look at every partition
    t.upsert(_rows(5, partitions, 2, only=1))
    t.clean(options=RETAIN_ONE)
    background.wait_all()
    out = {}

    def step(name, fn):
        calls.clear()
        calls.on = True
        try:
            fn()
            background.wait_all()
        finally:
            calls.on = False
        out[name] = collections.Counter(calls)
    step("upsert", lambda: t.upsert(_rows(10, partitions, 3, only=0)))
    step("read", lambda: t.read(filters=[("p", "=", "p000")]))
    step("compaction", lambda: t.compact(force=True))
    t.upsert(_rows(5, partitions, 4, only=0))
    background.wait_all()
    step("clean", lambda: t.clean(options=RETAIN_ONE))
    return out


# Reads of file contents may be served by the process's caches (lakehouse.iceberg.memo), whose
# state depends on what ran before: compared by budget only.
READS = ("read", "read_range", "open_input", "info", "exists", "size")


def _listings_and_writes(c: collections.Counter) -> int:
    return sum(n for (m, _), n in c.items() if m not in READS)


def test_one_partition_steps_cost_the_same_at_any_partition_count(tmp_path, calls):
    small, large = _steps(tmp_path / "p4", 4, calls), _steps(tmp_path / "p32", 32, calls)
    for name in small:
        assert _listings_and_writes(small[name]) == _listings_and_writes(large[name]), \
            f"{name}: {sorted(small[name].items())} at 4 partitions, {sorted(large[name].items())} at 32"
        touched = {path.split("/")[0] for (_, path) in large[name] if path and not path.startswith(".hoodie")}
        assert touched <= {"p000", "p001"}, f"{name} touched {sorted(touched)}"
    # A budget, as requests on an object store: the Hudi commit and its Iceberg publish, then a
    # read of one partition (the timeline, the partition, the commit's schema, its files).
    up, rd = small["upsert"], small["read"]
    # (27 and 4 here; on an S3 API server 25 and 5: benchmarks/bench_requests.py --check)
    assert sum(up.values()) <= 30, sorted(up.items())
    assert sum(rd.values()) <= 6, sorted(rd.items())
    timeline = sum(n for (m, path), n in up.items() if m == "list" and path == ".hoodie")
    # prepare, begin, commit; the publish works on the timeline the commit read under the lock
    assert timeline <= 3, f"the timeline was listed {timeline} times by one upsert"
    # The results stay in memory for the commit that follows (Hudi's write statuses): the
    # inflight instant is written once, and the commit knows the markers without listing them.
    inflight = [(m, path) for (m, path) in up if path.endswith(".deltacommit.inflight")]
    assert inflight == [("create", inflight[0][1])], inflight
    assert not [path for (m, path), _ in up.items() if m == "list" and path.startswith(".hoodie/.temp/")]
    locks = sum(n for (m, path), n in up.items() if m == "list" and path == ".hoodie/.locks")
    assert locks <= 2, f"the lock folder was listed {locks} times (two lock holds, one listing each)"
