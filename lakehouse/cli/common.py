"""What every ``lakehouse`` command shares: the exit codes and the group that maps errors to them,
stderr notes, rich tables, and the parsing of instant, KEY=VALUE and ``--json`` arguments.

It imports no command module, so that each of them (and the package that builds the group) can
import it.
"""

from __future__ import annotations

import datetime as dt
import dataclasses
import json
import sys
import traceback
from typing import Any, Callable, Iterable, Mapping, Sequence

import click
from rich.cells import cell_len
from rich.console import Console
from rich.table import Table as RichTable
from rich.text import Text

from lakehouse.errors import (CommitConflictError, CommitOutcomeUnknownError, ConfigError, LakehouseError,
                              TableNotFoundError, TimelineError)
from lakehouse.inspect.timeline import ns_iso
from lakehouse.timeline.instant_time import instant_time_of

EXIT_LAKEHOUSE_ERROR, EXIT_USAGE, EXIT_TABLE_NOT_FOUND, EXIT_COMMIT_UNCERTAIN = 1, 2, 3, 4

EPILOG = """\b
Exit codes:
  0  success
  1  lakehouse error (message and a Help: line on stderr)
  2  usage error (bad flag, argument or value)
  3  table not found at PATH
  4  commit conflict or unknown commit outcome (check `lakehouse timeline`)"""


def exit_code_for(err: LakehouseError) -> int:
    if isinstance(err, (CommitConflictError, CommitOutcomeUnknownError)):
        return EXIT_COMMIT_UNCERTAIN
    return EXIT_TABLE_NOT_FOUND if isinstance(err, TableNotFoundError) else EXIT_LAKEHOUSE_ERROR


class LakehouseGroup(click.Group):
    """Turns lakehouse errors into a two-line message and a documented exit code. Anything else
    propagates with its traceback: an unexpected exception is a bug to see."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except LakehouseError as e:
            if ctx.params.get("debug"):
                # The traceback is for a human; scripts under --debug still branch on the code.
                traceback.print_exc(file=sys.stderr)
            click.echo(f"error: {e.message}", err=True)
            if e.help:
                click.echo(f"Help: {e.help}", err=True)
            raise click.exceptions.Exit(exit_code_for(e)) from None


def note(msg: str) -> None:
    click.echo(msg, err=True)


# Off a terminal no table is narrowed to a width: rich would fold its cells and crop its lines.
UNBOUNDED_WIDTH = 1_000_000


class _UncroppedConsole(Console):
    """A line wider than the terminal (identifier columns keep their width however narrow it is)
    soft-wraps on the screen rather than losing its end."""

    def print(self, *objects: Any, **kwargs: Any) -> None:
        kwargs.setdefault("crop", False)
        super().print(*objects, **kwargs)


def console() -> Console:
    """Made per command: it must write to the sys.stdout of the moment.

    Piped, redirected or in CI, the output is read by a program or pasted back, so nothing is
    sized to a screen (not even to COLUMNS); on a terminal tables fit the screen.
    """
    try:
        tty = sys.stdout.isatty()
    except (AttributeError, ValueError):  # a closed or bare stream is no terminal either
        tty = False
    return _UncroppedConsole() if tty else _UncroppedConsole(width=UNBOUNDED_WIDTH)


def _cell(v: Any) -> str:
    if isinstance(v, dt.datetime):
        s = v.isoformat(sep=" ", timespec="milliseconds" if v.microsecond else "seconds")
        return s.removesuffix("+00:00") + ("Z" if v.utcoffset() == dt.timedelta(0) else "")
    return str(v)


def rich_table(title: str | None, headers: Sequence[str], rows: Sequence[Sequence[Any]],
               caption: str | None = None, right: Sequence[str] = (),
               nowrap: Sequence[str] = ()) -> RichTable:
    """``nowrap`` names the identifier columns (instant times, file ids, keys): whole or useless,
    they keep their widest cell's width and the other columns wrap to make room."""
    t = RichTable(title=title, caption=caption)
    # Text() keeps values such as "[x]" from being read as rich markup.
    body = [[Text("null", style="dim") if v is None else Text(_cell(v)) for v in r] for r in rows]
    for i, h in enumerate(headers):
        # A wrapping column keeps one character: squeezed to none, rich would drop its cells.
        t.add_column(h, justify="right" if h in right else "left", overflow="fold",
                     no_wrap=h in nowrap,
                     min_width=whole_width(h, (r[i] for r in body)) if h in nowrap else 1)
    for r in body:
        t.add_row(*r)
    return t


def whole_width(header: str, cells: Iterable[str | Text]) -> int:
    """The min_width that shows a no_wrap column's header and cells whole: when a table does not
    fit, rich narrows every column, then crops their cells, and min_width is the one bound it
    restores."""
    return max(cell_len(str(c)) for c in (header, *cells))


def split_names(value: str | None) -> list[str]:
    return [x.strip() for x in (value or "").split(",") if x.strip()]


def instant_arg(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Instant times as the timeline shows them, or an ISO date-time taken as UTC (the API's
    rule: lakehouse.timeline.instant_time.instant_time_of)."""
    if value is None:
        return None
    try:
        return instant_time_of(value, param.name or "instant",
                               prefix=param.name in ("changes_from", "changes_to"))
    except TimelineError:
        raise click.BadParameter(f"{value!r} is neither an instant time (17 digits, "
                                 "yyyyMMddHHmmssSSS) nor an ISO date-time") from None


def options_arg(ctx: click.Context, param: click.Parameter, values: Sequence[str]) -> dict[str, str]:
    if bad := [v for v in values if not v.partition("=")[0].strip() or "=" not in v]:
        raise click.BadParameter(f"{bad[0]!r} is not KEY=VALUE")
    return {k.strip(): v.strip() for k, _, v in (x.partition("=") for x in values)}


# --- what the table-service and timeline commands share ------------------------------------------


def json_flag(f: Callable) -> Callable:
    return click.option("--json", "as_json", is_flag=True,
                        help="Print one JSON document on stdout instead of text.")(f)


def service_options_flag(what: str) -> Callable:
    return click.option("--option", "options", multiple=True, callback=options_arg,
                        metavar="KEY=VALUE",
                        help=f"A hoodie.* {what} option for this run (repeatable); "
                             "`lakehouse options` lists them.")


def options_for(options: Mapping[str, str], cls: type, what: str) -> dict[str, str]:
    """``options`` if each one configures ``what``: another service's option would be ignored
    silently otherwise, and a misspelt one too."""
    keys = sorted(f.metadata["key"] for f in dataclasses.fields(cls) if "key" in f.metadata)
    if bad := sorted(k for k in options if k not in keys):
        raise ConfigError(f"{', '.join(bad)}: not an option of {what}",
                          help=f"{what} takes {', '.join(keys)}")
    return dict(options)


def emit(doc: Any) -> None:
    click.echo(json.dumps(doc, indent=2))


def ms_iso(ms: int) -> str | None:
    return ns_iso(ms * 1_000_000) if ms else None


def duration(seconds: float | None) -> str:
    if seconds is None:
        return ""
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.2f} s"
    m, s = divmod(int(seconds), 60)
    return f"{m}m {s:02d}s" if m < 60 else f"{m // 60}h {m % 60:02d}m"


def clock(iso: str | None, day: str | None = None) -> str:
    """An ISO time for the table: 'date time' in UTC, the time alone on ``day``."""
    if iso is None:
        return ""
    d, _, t = iso.removesuffix("Z").partition("T")
    return t if d == day else f"{d} {t}"
