"""``lakehouse timeline``: every instant of a table, active and archived, with when it started
and completed and what it touched, read from the timeline files alone."""

from __future__ import annotations

from typing import Any

import click
from rich import box
from rich.table import Table as RichTable
from rich.text import Text

from lakehouse.cli.common import clock, console, duration, emit, json_flag, whole_width
from lakehouse.inspect.describe import what
from lakehouse.inspect.timeline import timeline_rows
from lakehouse.table import open_table
from lakehouse import layout


@click.command()
@click.argument("path")
@click.option("--archived", is_flag=True, help=f"Also list the archived instants ({layout.ARCHIVED}).")
@json_flag
def timeline(path: str, archived: bool, as_json: bool) -> list[dict[str, Any]]:
    """List every instant, oldest first: action, state, when it started and completed (UTC, from
    the timeline files' times) and what it touched.

    A completed compaction is listed as a compaction (its timeline file is <instant>.commit).
    """
    table = open_table(path)
    rows = timeline_rows(table, archived)
    if as_json:
        emit(rows)
        return rows
    # One day for all (the usual case): the date goes to the caption and the cells keep the time.
    days = {r["start"].partition("T")[0] for r in rows if r["start"]}
    day = next(iter(days)) if len(days) == 1 else None
    caption = f"{len(rows)} instant(s); times in UTC" + (f" on {day}" if day else "")
    con = console()
    # A narrow terminal drops the completion time (started + took gives it; --json has it all).
    wide = con.width >= 100
    out = RichTable(title=f"timeline of {table.name}", caption=caption, box=box.SIMPLE_HEAD,
                    pad_edge=False, collapse_padding=True)
    # The instant time is what a reader copies into the next command: it never narrows.
    instant_width = whole_width("instant", (r["time"] for r in rows))
    for h in ("instant", "action", "state", "started", "completed", "took"):
        if wide or h != "completed":
            out.add_column(h, no_wrap=True, justify="right" if h == "took" else "left",
                           min_width=instant_width if h == "instant" else None)
    out.add_column("what", overflow="fold", min_width=16)
    for r in rows:
        start_day = (r["start"] or "").partition("T")[0] or None
        cells = [r["time"], r["action"], "archived" if r["archived"] else r["state"],
                 clock(r["start"], day), clock(r["end"], start_day), duration(r["duration_s"]), what(r)]
        out.add_row(*(Text(c) for i, c in enumerate(cells) if wide or i != 4))
    con.print(out)
    return rows


COMMANDS = (timeline,)
