"""`lakehouse timeline` (lakehouse/cli/timeline.py): each instant's times and what it touched,
on a real Merge-On-Read table that went through every service command."""

from __future__ import annotations

import datetime as dt

import pytest

from tests.test_cli import batch, write_file
from tests.test_cli_services import KEEP_ONE, make_mor, run, run_json, upsert


@pytest.fixture
def mor(tmp_path):
    return make_mor(tmp_path)


def test_timeline_times_and_what_each_instant_touched(mor, tmp_path):
    path, writes = mor
    t = run("compaction", "schedule", path, "--force").stdout.strip()
    run("compaction", "run", path, t)
    run("compaction", "commit", path, t)
    after = upsert(path, tmp_path, [6, 7], 300, 700.0, "u3")
    clean = run("clean", "run", path, *KEEP_ONE).stdout.strip()
    sp = run("savepoint", "create", path).stdout.strip()
    bad = upsert(path, tmp_path, [8], 400, 1.0, "u4")
    rb = run("rollback", path).stdout.strip()
    pending = run("write", path, write_file(batch([9]), tmp_path / "p.parquet"), "--no-commit").stdout.strip()

    tl = run_json("timeline", path)
    by = {(r["time"], r["action"]): r for r in tl}
    assert sp == after
    assert [(r["time"], r["action"], r["state"]) for r in tl] == [
        *((w, "deltacommit", "completed") for w in writes), (t, "compaction", "completed"),
        (after, "deltacommit", "completed"), (sp, "savepoint", "completed"),
        (clean, "clean", "completed"), (rb, "rollback", "completed"),
        (pending, "deltacommit", "inflight")]
    hoodie = path / ".hoodie"

    def mtime(name):
        return (hoodie / name).stat().st_mtime_ns

    for r in tl:
        if r["state"] != "completed":
            continue
        assert r["start_ns"] <= r["end_ns"]
        assert r["duration_s"] == pytest.approx((r["end_ns"] - r["start_ns"]) / 1e9, abs=1e-6)
        for key in ("start", "end"):
            parsed = dt.datetime.fromisoformat(r[key].replace("Z", "+00:00"))
            assert abs(parsed.timestamp() * 1e9 - r[f"{key}_ns"]) < 1e6
    w = by[(writes[1], "deltacommit")]
    assert (w["start_ns"], w["end_ns"]) == (mtime(f"{writes[1]}.deltacommit.requested"),
                                            mtime(f"{writes[1]}.deltacommit"))
    c = by[(t, "compaction")]
    assert (c["start_ns"], c["end_ns"]) == (mtime(f"{t}.compaction.requested"), mtime(f"{t}.commit"))
    # A savepoint shares its commit's instant time; each keeps its own times.
    s = by[(sp, "savepoint")]
    assert (s["start_ns"], s["end_ns"]) == (mtime(f"{sp}.savepoint.inflight"), mtime(f"{sp}.savepoint"))
    assert by[(sp, "deltacommit")]["end_ns"] == mtime(f"{sp}.deltacommit") != s["end_ns"]
    assert by[(sp, "deltacommit")]["start_ns"] == mtime(f"{sp}.deltacommit.requested")
    p = by[(pending, "deltacommit")]
    assert p["end"] is None and p["duration_s"] is None
    assert p["start_ns"] == mtime(f"{pending}.deltacommit.requested")

    assert (w["operation"], w["records_written"], w["records_deleted"], w["file_groups"]) == \
        ("upsert", 3, 0, 2)
    assert by[(writes[0], "deltacommit")]["records_written"] == 20
    assert c["operations"] == 2 and c["records_written"] == 20
    assert s["savepointed_commit"] == sp and s["files"] > 0
    cleaned = run_json("clean", "show", path)[0]
    assert by[(clean, "clean")]["files_deleted"] == cleaned["files_deleted"] > 0
    assert by[(rb, "rollback")]["rolled_back"] == [bad]
    assert p["operation"] == "upsert" and p["records_written"] == 1

    out = run("timeline", path).stdout
    for text in ("upsert: 3 written, ", ", 2 file group(s)", "2 file group(s), 20 records",
                 f"savepoints {sp}", f"{cleaned['files_deleted']} file(s) deleted",
                 f"rolled back {bad}", "took", "times in UTC", "inflight"):
        assert text in out, text
    # Times of day to the millisecond; the date in the caption (or the cell if days differ).
    assert w["start"][11:23] in out and w["end"][11:23] in out and w["start"][:10] in out
    assert f"{round(w['duration_s'] * 1000)} ms" in out or f"{w['duration_s']:.2f} s" in out


def test_timeline_shows_pending_service_instants(mor):
    path, _ = mor
    t = run("compaction", "schedule", path, "--force").stdout.strip()
    row = {r["time"]: r for r in run_json("timeline", path)}[t]
    assert (row["action"], row["state"], row["operations"], row["end"]) == \
        ("compaction", "requested", 2, None)
    assert "2 file group(s)" in run("timeline", path).stdout
