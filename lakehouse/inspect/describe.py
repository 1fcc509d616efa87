"""Timeline rows as a person reads them: the one line of what an instant did, and byte counts.
``lakehouse timeline`` and the Lakehouse view both print these, so they word an instant alike."""

from __future__ import annotations

from typing import Any, Mapping


def human_bytes(n: float | None) -> str:
    """Bytes in binary units (KiB, MiB, ...); ``-`` for unknown."""
    if n is None:
        return "-"
    n = float(n)
    if n < 1024:
        return f"{n:.0f} B"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        n /= 1024
        if n < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}"
    raise AssertionError("unreachable")


def _count(n: int, what: str) -> str:
    return f"{n:,} {what}"


def what(r: Mapping[str, Any]) -> str:
    """One line of what the instant of timeline row ``r`` touched (or plans to)."""
    action = r.get("action")
    if action == "compaction":
        ops = r.get("operations")
        out = f"{'?' if ops is None else f'{ops:,}'} file group(s)"
        return out + (f", {r['records_written']:,} records" if r.get("records_written") is not None else "")
    if "records_written" in r or "operation" in r:
        parts = []
        if "records_written" in r:
            parts.append(_count(r["records_written"], "written"))
            parts += [_count(r[f"records_{k}"], k) for k in ("inserted", "updated", "appended", "deleted")
                      if r.get(f"records_{k}")]
            parts.append(_count(r.get("file_groups", 0), "file group(s)"))
        if r.get("file_groups_replaced"):
            parts.append(_count(r["file_groups_replaced"], "replaced"))
        body = ", ".join(parts)
        op = r.get("operation")
        return f"{op}: {body}" if op and body else op or body
    if action == "clean" and r.get("files_deleted") is not None:
        return _count(r["files_deleted"], "file(s) deleted") + (
            f", {human_bytes(r['bytes_freed'])} freed" if r.get("bytes_freed") else "")
    if "files_to_delete" in r:
        return _count(r["files_to_delete"], "file(s) to delete")
    if "rolled_back" in r:
        done = r.get("state") == "completed"
        n = r.get("files_deleted")
        return f"{'rolled back' if done else 'rolls back'} {', '.join(r['rolled_back'])}" + (
            f", {_count(n, 'file(s) deleted')}" if n else "")
    if "savepointed_commit" in r:
        return f"savepoints {r['savepointed_commit']}" + (
            f", {_count(r['files'], 'file(s)')}" if "files" in r else "")
    return ""


__all__ = ["human_bytes", "what"]
