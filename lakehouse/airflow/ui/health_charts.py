"""The table page's health charts, drawn server-side as SVG (no script needed to see them), each
with the data it draws (the page embeds it as JSON, so tests and users read the same numbers).
Colours come from CSS classes (``lh-s1`` ...), so the page's light and dark themes apply.

- ``size``: rows of the latest base files and bytes of the table after each write/compaction;
- ``backlog``: log files waiting for compaction after each write, compactions marked;
- ``file_sizes``: base files per size bucket (the small-file limit and max size are edges);
- ``cleans``: bytes freed by each clean;
- ``commits``: duration and records written of each commit.
"""

from __future__ import annotations

import math
from html import escape
from typing import Any, Callable, Sequence

from lakehouse.inspect.describe import human_bytes

W, H, PAD_L, PAD_R, PAD_T, PAD_B = 560, 200, 56, 60, 26, 30


def human(n: float | None) -> str:
    if n is None:
        return "-"
    n = float(n)
    for unit in ("", "K", "M", "G", "T"):
        if abs(n) < 1000 or unit == "T":
            return f"{n:.0f}{unit}" if unit == "" or n >= 100 else f"{n:.1f}{unit}"
        n /= 1000
    return str(n)


def _frame(name: str, title: str, body: list[str], y_label: str, y_max: float, fmt: Callable,
           y2: tuple[str, float, Callable] | None = None) -> str:
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" class="lh-chart" '
           f'data-chart="{name}" role="img" aria-label="{escape(title)}">']
    inner_h = H - PAD_T - PAD_B
    for k in range(5):
        y = PAD_T + inner_h * k / 4
        out.append(f'<line x1="{PAD_L}" x2="{W - PAD_R}" y1="{y:.1f}" y2="{y:.1f}" class="lh-grid"/>')
        out.append(f'<text x="{PAD_L - 6}" y="{y + 4:.1f}" text-anchor="end" class="lh-axis">'
                   f'{escape(fmt(y_max * (4 - k) / 4))}</text>')
        if y2:
            out.append(f'<text x="{W - PAD_R + 6}" y="{y + 4:.1f}" class="lh-axis lh-s2t">'
                       f'{escape(y2[2](y2[1] * (4 - k) / 4))}</text>')
    out.append(f'<text x="4" y="{PAD_T - 12}" class="lh-axis">{escape(y_label)}</text>')
    if y2:
        out.append(f'<text x="{W - 4}" y="{PAD_T - 12}" text-anchor="end" class="lh-axis lh-s2t">{escape(y2[0])}</text>')
    return "".join(out + body + ["</svg>"])


def _empty(name: str, why: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} 40" class="lh-chart" data-chart="{name}" '
            f'role="img" aria-label="{escape(why)}"><text x="8" y="24" class="lh-axis">{escape(why)}</text></svg>')


def _x(n: int, count: int) -> float:
    return PAD_L + (W - PAD_L - PAD_R) * ((n + 0.5) / max(count, 1))


def _y(v: float, top: float) -> float:
    return PAD_T + (H - PAD_T - PAD_B) * (1 - (v / top if top else 0))


def _bars(values: Sequence[float | None], top: float, cls: str, titles: Sequence[str], keys: Sequence[str]) -> list[str]:
    n = len(values)
    width = max(1.5, (W - PAD_L - PAD_R) / max(n, 1) * 0.7)
    out = []
    for i, (v, t, k) in enumerate(zip(values, titles, keys)):
        v = v or 0
        y = _y(v, top)
        out.append(f'<rect x="{_x(i, n) - width / 2:.1f}" y="{y:.1f}" width="{width:.1f}" '
                   f'height="{max(H - PAD_B - y, 0):.1f}" class="{cls}" data-key="{escape(k)}">'
                   f'<title>{escape(t)}</title></rect>')
    return out


def _line(values: Sequence[float | None], top: float, cls: str) -> list[str]:
    pts = [f"{_x(i, len(values)):.1f},{_y(v, top):.1f}" for i, v in enumerate(values) if v is not None]
    return [f'<polyline points="{" ".join(pts)}" class="{cls}" fill="none"/>'] if pts else []


def _top(values: Sequence[float | None]) -> float:
    """The axis' top: a little above the largest value; for counts, a multiple of the 4 grid
    steps, so every tick is a whole number."""
    vals = [v for v in values if v is not None]
    m = max(vals, default=0)
    if vals and all(float(v).is_integer() for v in vals):
        return max(4, 4 * math.ceil(m * 1.05 / 4))
    return m * 1.1 if m else 1


def _x_labels(labels: Sequence[str]) -> list[str]:
    """A few slots' labels. One slot per commit, evenly spaced whatever the time between them:
    each label says which commit it is ("#7"), so the axis does not read as a clock."""
    if not labels:
        return []
    picks = sorted({0, len(labels) - 1, len(labels) // 2})
    return [f'<text x="{_x(i, len(labels)):.1f}" y="{H - 10}" text-anchor="middle" class="lh-axis">'
            f'{escape(f"#{i + 1} · {labels[i]}")}</text>' for i in picks]


def _short(instant: str) -> str:
    return f"{instant[4:6]}-{instant[6:8]} {instant[8:10]}:{instant[10:12]}" if len(instant) >= 12 else instant


def size_chart(points: list[dict[str, Any]]) -> str:
    if not points:
        return _empty("size", "no commit yet")
    rows, size = [p["rows"] for p in points], [p["bytes"] for p in points]
    r_top, b_top = _top(rows), _top(size)
    body = _bars(rows, r_top, "lh-s1", [f'{p["instant"]} {p["action"]}: {p["rows"]:,} rows, '
                                        f'{human_bytes(p["bytes"])}' for p in points], [p["instant"] for p in points])
    body += _line([b / b_top * r_top for b in size], r_top, "lh-s2l")
    body += _x_labels([_short(p["instant"]) for p in points])
    return _frame("size", "rows and bytes after each commit", body, "rows (base files)", r_top, human,
                  ("bytes", b_top, human_bytes))


def backlog_chart(points: list[dict[str, Any]]) -> str:
    if not points:
        return _empty("backlog", "no commit yet")
    files = [p["log_files"] for p in points]
    waiting = [p["uncompacted_commits"] for p in points]
    top, w_top = _top(files), _top(waiting)
    body = []
    for i, p in enumerate(points):
        if p["action"] == "compaction":
            x = _x(i, len(points))
            body.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{PAD_T}" y2="{H - PAD_B}" class="lh-mark" '
                        f'data-compaction="{escape(p["instant"])}"><title>compaction {escape(p["instant"])}</title></line>')
    body += _bars(files, top, "lh-s3", [
        f'{p["instant"]}: {p["log_files"]} log files, {human_bytes(p["log_bytes"])}, {p["log_records"]:,} records '
        f'from {p["uncompacted_commits"]} delta commits' + (f' (oldest {p["oldest_uncompacted"]})'
                                                            if p["oldest_uncompacted"] else "")
        for p in points], [p["instant"] for p in points])
    body += _line([w / w_top * top for w in waiting], top, "lh-s2l")
    body += _x_labels([_short(p["instant"]) for p in points])
    return _frame("backlog", "log backlog against compactions", body, "log files", top, human,
                  ("delta commits waiting", w_top, human))


def file_size_chart(fs: dict[str, Any] | None) -> str:
    if not fs or not fs["files"]:
        return _empty("file_sizes", "no base file yet")
    buckets = fs["buckets"]
    counts = [b["files"] for b in buckets]
    top = _top(counts)
    labels = [f'< {human_bytes(b["to"])}' if b["to"] else f'>= {human_bytes(b["from"])}' for b in buckets]
    body = _bars(counts, top, "lh-s1", [f'{lab}: {c} files' for lab, c in zip(labels, counts)], labels)
    body += [f'<text x="{_x(i, len(labels)):.1f}" y="{H - 10}" text-anchor="middle" class="lh-axis">'
             f'{escape(lab)}</text>' for i, lab in enumerate(labels)]
    title = "base files by size"
    resize = fs.get("resize")
    if resize and resize["to_split"]:
        title += (f'; {resize["to_split"]} bucket(s) past the split threshold ({human_bytes(resize["split_threshold"])}):'
                  f' the next clustering splits them into {resize["split_into"]}')
    elif resize:
        title += f'; no bucket past the split threshold ({human_bytes(resize["split_threshold"])})'
    return _frame("file_sizes", title, body, "files", top, human)


def cleans_chart(cleans: list[dict[str, Any]]) -> str:
    if not cleans:
        return _empty("cleans", "no clean yet")
    freed = [c["bytes_freed"] for c in cleans]
    top = _top(freed)
    body = _bars(freed, top, "lh-s4", [f'{c["instant"]}: {c["files_deleted"]} files, {human_bytes(c["bytes_freed"])} freed'
                                       for c in cleans], [c["instant"] for c in cleans])
    body += _x_labels([_short(c["instant"]) for c in cleans])
    return _frame("cleans", "bytes freed per clean", body, "bytes freed", top, human_bytes)


def commits_chart(commits: list[dict[str, Any]]) -> str:
    if not commits:
        return _empty("commits", "no commit yet")
    dur = [c["duration_s"] for c in commits]
    recs = [c["records_written"] for c in commits]
    d_top, r_top = _top(dur), _top(recs)
    body = _bars(dur, d_top, "lh-s1", [f'{c["instant"]} {c["action"]}: {c["duration_s"]} s, '
                                       f'{(c["records_written"] or 0):,} records' for c in commits],
                 [c["instant"] for c in commits])
    body += _line([(r / r_top * d_top) if r is not None else None for r in recs], d_top, "lh-s2l")
    body += _x_labels([_short(c["instant"]) for c in commits])
    return _frame("commits", "commit duration and records written", body, "seconds", d_top,
                  (lambda v: f"{v:.2f}") if d_top < 10 else (lambda v: f"{v:.0f}"), ("records", r_top, human))


def health_charts(d: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """name -> {"title", "svg", "data"} for a table's :func:`overview.details`."""
    h = d.get("history") or {"points": [], "commits": [], "cleans": [], "compactions": []}
    charts = {
        "size": ("Rows and bytes", size_chart(h["points"]),
                 [{k: p[k] for k in ("instant", "action", "rows", "bytes")} for p in h["points"]]),
        "backlog": ("Log backlog and compactions", backlog_chart(h["points"]),
                    [{k: p[k] for k in ("instant", "action", "log_files", "log_bytes", "log_records",
                                        "uncompacted_commits", "oldest_uncompacted")} for p in h["points"]]),
        "file_sizes": ("File sizes", file_size_chart(d.get("file_sizes")), (d.get("file_sizes") or {}).get("buckets", [])),
        "cleans": ("Bytes freed per clean", cleans_chart(h["cleans"]), h["cleans"]),
        "commits": ("Commit duration and records written", commits_chart(h["commits"]), h["commits"]),
    }
    if d.get("table_type") != "MERGE_ON_READ":
        charts.pop("backlog")
    return {k: {"title": t, "svg": svg, "data": data} for k, (t, svg, data) in charts.items()}


__all__ = ["health_charts", "human", "human_bytes"]
