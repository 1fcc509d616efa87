"""lakehouse.inspect.describe: the one line the CLI's timeline and the Lakehouse view both print
for an instant, from real timeline rows of a table that went through every action."""

from __future__ import annotations

import pyarrow as pa

import lakehouse
from lakehouse.inspect.describe import human_bytes, what
from lakehouse.inspect.timeline import timeline_rows


def test_human_bytes_in_binary_units():
    assert [human_bytes(n) for n in (None, 0, 1023, 1024, 1536, 5 * 2**20, 3 * 2**30, 2**50)] == \
        ["-", "0 B", "1023 B", "1.0 KiB", "1.5 KiB", "5.0 MiB", "3.0 GiB", "1024.0 TiB"]


def test_every_action_reads_as_one_line(tmp_path):
    t = lakehouse.create_table(str(tmp_path / "t"), name="t", table_type="MERGE_ON_READ", record_key="id",
                               partition_by="p", ordering_field="ts", index="BUCKET",
                               options={"hoodie.bucket.index.num.buckets": 1, "hoodie.cleaner.commits.retained": 1})

    def batch(keys, ts):
        return pa.table({"id": keys, "p": [f"p{k % 2}" for k in keys], "ts": [ts] * len(keys)})

    first = t.upsert(batch(list(range(10)), 1))
    second = t.upsert(batch(list(range(5, 15)), 2))
    t.delete(pa.table({"id": [0, 1], "p": ["p0", "p1"]}))
    compaction = t.compact(force=True).instant
    t.upsert(batch(list(range(3)), 3))
    t.compact(force=True)
    t.clean()
    sp = t.create_savepoint().instant
    rows = {(r["time"], r["action"]): r for r in timeline_rows(t)}

    assert what(rows[(first, "deltacommit")]) == "upsert: 10 written, 10 inserted, 2 file group(s)"
    w = rows[(second, "deltacommit")]
    # An append to an existing bucket's log: Hudi's HoodieAppendHandle counts its records as
    # updates (5 of the 10 keys are new), so they read as appended, not as updates.
    assert w["records_appended"] == 10 and w["records_updated"] == 0 and w["records_inserted"] == 0
    assert what(w) == "upsert: 10 written, 10 appended, 2 file group(s)"
    deletes = next(r for r in rows.values() if r.get("operation") == "delete")
    assert what(deletes).startswith("delete: ") and "2 deleted" in what(deletes)
    c = rows[(compaction, "compaction")]
    assert what(c) == f"2 file group(s), {c['records_written']:,} records" and c["records_written"] == 13
    clean = next(r for r in rows.values() if r["action"] == "clean")
    assert clean["files_deleted"] > 0 and clean["bytes_freed"] > 0
    assert what(clean) == f"{clean['files_deleted']} file(s) deleted, {human_bytes(clean['bytes_freed'])} freed"
    s = rows[(sp, "savepoint")]
    assert s["files"] > 0 and what(s) == f"savepoints {sp}, {s['files']} file(s)"
    assert what({"action": "clean", "state": "requested", "files_to_delete": 3}) == "3 file(s) to delete"
    assert what({"action": "rollback", "state": "requested", "rolled_back": ["1"]}) == "rolls back 1"
    assert what({"action": "rollback", "state": "completed", "rolled_back": ["1"], "files_deleted": 2}) == \
        "rolled back 1, 2 file(s) deleted"
    assert what({"action": "compaction", "state": "requested", "operations": None}) == "? file group(s)"
