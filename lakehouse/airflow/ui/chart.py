"""The timeline drawn as an SVG Gantt chart: one row per instant, a bar from start to end,
coloured by action, hatched while pending. Server-side, so the page needs no script to show it."""

from __future__ import annotations

import time
from html import escape
from typing import Any

COLORS = {"deltacommit": "#4e79a7", "commit": "#59a14f", "compaction": "#f28e2b", "clean": "#76b7b2",
          "rollback": "#e15759", "replacecommit": "#b07aa1", "savepoint": "#9c755f", "restore": "#ff9da7"}
ROW, LEFT, WIDTH, TOP = 18, 190, 900, 24


def _span(i: dict[str, Any]) -> tuple[float | None, float | None]:
    s, e = i.get("start_ns"), i.get("end_ns")
    return (s / 1e9 if s is not None else None), (e / 1e9 if e is not None else None)


def timeline_svg(instants: list[dict[str, Any]], now: float | None = None) -> str:
    """``instants`` as :func:`lakehouse.airflow.ui.overview.timeline` returns them (``lakehouse
    timeline --json`` rows)."""
    now = now if now is not None else time.time()
    rows = [{**i, "start": _span(i)[0], "end": _span(i)[1], "instant": i["time"]}
            for i in instants if i.get("start_ns") is not None]
    height = TOP + ROW * max(1, len(rows)) + 20
    if not rows:
        return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{LEFT + WIDTH}" height="{height}" '
                f'role="img" aria-label="empty timeline"><text x="10" y="20" fill="currentColor">no instants yet</text></svg>')
    t0 = min(i["start"] for i in rows)
    t1 = max(max(i["end"] or now, i["start"]) for i in rows)
    span = max(t1 - t0, 1.0)

    def x(t: float) -> float:
        return LEFT + (t - t0) / span * WIDTH

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{LEFT + WIDTH + 10}" height="{height}" '
           f'role="img" aria-label="timeline of {len(rows)} instants" class="lh-timeline">',
           '<defs><pattern id="pending" width="6" height="6" patternUnits="userSpaceOnUse" '
           'patternTransform="rotate(45)"><rect width="3" height="6" fill="#bbb"/></pattern></defs>',
           f'<text x="{LEFT}" y="14" font-size="11" fill="currentColor">{escape(_clock(t0))}</text>',
           f'<text x="{LEFT + WIDTH}" y="14" font-size="11" text-anchor="end" fill="currentColor">'
           f'{escape(_clock(t1))}</text>']
    for n, i in enumerate(rows):
        y = TOP + n * ROW
        end = i["end"] if i["end"] is not None else now
        x0, x1 = x(i["start"]), x(max(end, i["start"]))
        fill = COLORS.get(i["action"], "#bab0ac") if i["state"] == "completed" else "url(#pending)"
        dur = f'{i["duration_s"]:.1f} s' if i.get("duration_s") is not None else i["state"]
        title = f'{i["instant"]} {i["action"]} {i["state"]} {dur}'
        out.append(f'<g data-instant="{escape(i["instant"])}"><title>{escape(title)}</title>'
                   f'<text x="4" y="{y + 12}" font-size="11" font-family="monospace" fill="currentColor">'
                   f'{escape(i["instant"])} {escape(i["action"][:12])}</text>'
                   f'<rect x="{x0:.1f}" y="{y + 2}" width="{max(x1 - x0, 3):.1f}" height="{ROW - 5}" '
                   f'fill="{fill}" stroke="currentColor" stroke-opacity="0.4" stroke-width="0.5"/></g>')
    out.append("</svg>")
    return "".join(out)


def _clock(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(t))


__all__ = ["timeline_svg"]
