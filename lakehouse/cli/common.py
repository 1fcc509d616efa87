"""What every ``lakehouse`` command shares: the exit codes and the group that maps errors to them,
stderr notes, rich tables, and the parsing of instant, KEY=VALUE and ``--json`` arguments.

It imports no command module, so that each of them (and the package that builds the group) can
import it.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any, Callable, Sequence

import click
from rich.console import Console
from rich.table import Table as RichTable
from rich.text import Text

from lakehouse.errors import (CommitConflictError, CommitOutcomeUnknownError, LakehouseError,
                              TableNotFoundError)
from lakehouse.inspect.timeline import ns_iso

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
                raise
            click.echo(f"error: {e.message}", err=True)
            if e.help:
                click.echo(f"Help: {e.help}", err=True)
            raise click.exceptions.Exit(exit_code_for(e)) from None


def note(msg: str) -> None:
    click.echo(msg, err=True)


def console() -> Console:
    return Console()  # made per command: it must write to the sys.stdout of the moment


def _cell(v: Any) -> str:
    if isinstance(v, dt.datetime):
        s = v.isoformat(sep=" ", timespec="milliseconds" if v.microsecond else "seconds")
        return s.removesuffix("+00:00") + ("Z" if v.utcoffset() == dt.timedelta(0) else "")
    return str(v)


def rich_table(title: str | None, headers: Sequence[str], rows: Sequence[Sequence[Any]],
               caption: str | None = None, right: Sequence[str] = (),
               nowrap: Sequence[str] = ()) -> RichTable:
    t = RichTable(title=title, caption=caption)
    for h in headers:
        t.add_column(h, justify="right" if h in right else "left", overflow="fold",
                     no_wrap=h in nowrap)
    for r in rows:
        # Text() keeps values such as "[x]" from being read as rich markup.
        t.add_row(*(Text("null", style="dim") if v is None else Text(_cell(v)) for v in r))
    return t


def split_names(value: str | None) -> list[str]:
    return [x.strip() for x in (value or "").split(",") if x.strip()]


def instant_arg(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Instant times as the timeline shows them, or an ISO date-time taken as UTC."""
    if value is None:
        return None
    v = value.strip()
    if v.isdigit() and len(v) in (14, 17):
        return v
    try:
        t = dt.datetime.fromisoformat(v)
    except ValueError:
        raise click.BadParameter(f"{value!r} is neither an instant time (17 digits, "
                                 "yyyyMMddHHmmssSSS) nor an ISO date-time") from None
    if t.tzinfo is not None:
        t = t.astimezone(dt.timezone.utc)
    return t.strftime("%Y%m%d%H%M%S") + f"{t.microsecond // 1000:03d}"


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
