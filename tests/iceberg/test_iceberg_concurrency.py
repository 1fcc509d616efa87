"""Publishers racing each other (and writers): versions stay consecutive, no snapshot is lost or
published twice, and the end state is every completed instant exactly once."""

from __future__ import annotations

import json
import re
import threading

import pyarrow as pa

import lakehouse
from lakehouse.iceberg import METADATA_DIR, sync_iceberg
from tests.iceberg.iceberg_oracle import MANUAL_SYNC, assert_every_snapshot_is_its_instant, sync_and_compare


def _table(path, table_type="COPY_ON_WRITE"):
    return lakehouse.create_table(str(path), name="race", table_type=table_type, record_key="id",
                                  partition_by="city", ordering_field="ts", options=MANUAL_SYNC)


def _upsert(table, keys, ts):
    return table.upsert(pa.table({"id": keys, "city": ["sf" if k < "m" else "la" for k in keys],
                                  "ts": [ts] * len(keys), "v": [f"{k}{ts}" for k in keys]}))


def _versions(table) -> dict[int, list[str]]:
    """Version -> the instants of its snapshots, read straight from the JSON files."""
    out = {}
    for info in table.storage.list(METADATA_DIR):
        m = re.fullmatch(r"v(\d+)\.metadata\.json", info.name)
        if m:
            doc = json.loads(table.storage.read(info.path))
            out[int(m.group(1))] = [s["summary"]["hudi.instant"] for s in doc["snapshots"]]
    return out


def _run_together(fns):
    barrier = threading.Barrier(len(fns))
    results, errors = [None] * len(fns), []

    def run(i, fn):
        barrier.wait()
        try:
            results[i] = fn()
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i, fn)) for i, fn in enumerate(fns)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return results


def test_racing_publishers_make_consecutive_versions_without_loss_or_duplicates(tmp_path):
    path = tmp_path / "t"
    table = _table(path)
    published: list[str] = []
    ts = 0
    for _ in range(3):
        for keys in (["a", "b", "x"], ["a", "y"]):
            ts += 1
            _upsert(table, keys, ts)
        results = _run_together([lambda: sync_iceberg(lakehouse.open_table(str(path))) for _ in range(4)])
        # Exactly one racer published each new instant; the others found it done.
        for r in results:
            published += [i for i, _ in r.published]
        assert sum(1 for r in results if r.versions_written) >= 1
    instants = [i.time for i in table.timeline.completed_writes()]
    assert sorted(published) == instants
    versions = _versions(table)
    assert sorted(versions) == list(range(1, max(versions) + 1))
    for v in range(1, max(versions)):
        assert set(versions[v]) <= set(versions[v + 1]), f"v{v + 1} lost a snapshot of v{v}"
        assert len(set(versions[v])) == len(versions[v])
    assert versions[max(versions)] == instants
    assert_every_snapshot_is_its_instant(table, sync_and_compare(table, "after the races"))


def test_publishers_racing_a_writer(tmp_path):
    path = tmp_path / "t"
    _table(path, "MERGE_ON_READ")
    done = threading.Event()

    def writer():
        t = lakehouse.open_table(str(path))
        for ts in range(1, 7):
            _upsert(t, ["a", "b", "x", f"k{ts}"], ts)
        done.set()

    def publisher():
        t = lakehouse.open_table(str(path))
        count = 0
        while not done.is_set():
            count += len(sync_iceberg(t).published)
        return count

    _run_together([writer, publisher, publisher])
    table = lakehouse.open_table(str(path))
    res = sync_and_compare(table, "after the writer finished")
    mapping = assert_every_snapshot_is_its_instant(table, res)
    assert sorted(mapping) == [i.time for i in table.timeline.completed_writes()]
    versions = _versions(table)
    assert sorted(versions) == list(range(1, max(versions) + 1))
