"""The spark-submit applications, run through :mod:`lakehouse.spark.submit`.

Each app module has ``configure(parser)`` (its arguments, after the table path),
``NEEDS_SESSION`` and ``main(argv, spark) -> int``. With ``NEEDS_SESSION`` false, submit.py
passes ``spark=None`` and the app starts Spark only when it has work for executors (a
:class:`~lakehouse.spark.engine.SparkEngine` starts a bare SparkContext on first use): timeline
steps, dry runs and "nothing to do" finish in ~3 s instead of ~12 s.

Every app prints one line of JSON as its last line on stdout, whatever happens::

    {"app": ..., "table": ..., "instant": ..., "action": ..., <the service's counts>,
     "duration_s": ..., "status": "ok" | "nothing_to_do" | "failed", "reason": ...}

Logs and errors go to stderr. Exit codes: 0 ok or nothing to do, 1 failure (the error and a
``Help:`` line on stderr), 2 usage. The line is a report for people and schedulers; the result
itself is on the table's timeline, where the next step reads it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
import traceback
from typing import Any, Callable, Mapping

from lakehouse.iceberg import background
from lakehouse.errors import ConfigError, LakehouseError, TableNotFoundError

OK, NOTHING, FAILED = "ok", "nothing_to_do", "failed"
_EXIT = {OK: 0, NOTHING: 0, FAILED: 1}


class UsageError(Exception):
    def __init__(self, message: str, usage: str = "") -> None:
        super().__init__(message)
        self.usage = usage


class AppParser(argparse.ArgumentParser):
    """Raises :class:`UsageError` instead of exiting, so that the JSON line still gets printed."""

    def error(self, message: str):  # type: ignore[override]
        raise UsageError(f"{self.prog}: error: {message}", self.format_usage())


def add_table_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("table", help="the table: a path or a file:// URI")


def new_parser(app: str, description: str,
               configure: Callable[[argparse.ArgumentParser], None]) -> argparse.ArgumentParser:
    p = AppParser(prog=f"submit.py {app}", description=description,
                  formatter_class=argparse.RawDescriptionHelpFormatter)
    add_table_arg(p)
    configure(p)
    return p


def add_option_arg(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help=f"a hoodie.* {what} option for this run (repeatable)")


def add_tag_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tag", action="append", default=[], metavar="KEY=VALUE",
                   help="put KEY=VALUE in the extra metadata of the instant this run makes, so a "
                        "scheduler finds it there (repeatable; Airflow tasks tag their run)")


def key_values(values: list[str], flag: str = "--option") -> dict[str, str]:
    """Repeated ``KEY=VALUE`` arguments as a dict (a later key wins)."""
    out: dict[str, str] = {}
    for v in values:
        k, eq, val = v.partition("=")
        if not eq or not k.strip():
            raise UsageError(f"{flag} {v!r} is not KEY=VALUE")
        out[k.strip()] = val.strip()
    return out


def parse_options(values: list[str], cls: type, app: str) -> dict[str, str]:
    """``KEY=VALUE`` pairs, each one an option of ``cls``: any other key would be ignored
    silently, a misspelt one included."""
    out = key_values(values)
    keys = sorted(f.metadata["key"] for f in dataclasses.fields(cls) if "key" in f.metadata)
    if bad := sorted(k for k in out if k not in keys):
        raise ConfigError(f"{', '.join(bad)}: not an option of {app}", help=f"{app} takes {', '.join(keys)}")
    return out


def not_created(e: TableNotFoundError, service: str) -> dict[str, Any]:
    """A scheduled service's report on a registered table its first ingest has not created yet:
    nothing to do (a skipped task), not a failure that pages someone before the first batch."""
    return {"status": NOTHING, "reason": f"{e.message}; nothing to {service} until its first ingest creates it"}


def positive_int(s: str) -> int:
    try:
        n = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{s!r} is not a whole number") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"{n} must be at least 1")
    return n


def spark_info(sc, tasks: int | None = None) -> dict[str, Any]:
    """Where the work ran (a SparkContext), for the report."""
    out: dict[str, Any] = {"master": sc.master, "app_id": sc.applicationId}
    return out if tasks is None else {**out, "tasks": tasks}


def emit(doc: Mapping[str, Any]) -> None:
    sys.stdout.write(json.dumps(doc, default=str, separators=(", ", ": ")) + "\n")
    sys.stdout.flush()


def report(app: str, table: str | None, body: Mapping[str, Any], started: float) -> dict[str, Any]:
    """The JSON line: identity first, the service's fields, then timing and outcome."""
    rest = {k: v for k, v in body.items() if k not in ("status", "reason", "instant", "action")}
    return {"app": app, "table": table, "instant": body.get("instant"), "action": body.get("action"),
            **rest, "duration_s": round(time.monotonic() - started, 3),
            "status": body["status"], "reason": body.get("reason") or ""}


#: Report fields the summary line leaves out: said otherwise, or only for machines.
_NOT_SUMMED = frozenset({"app", "table", "instant", "action", "step", "status", "reason", "duration_s", "spark",
                         "redone"})


def summary_line(doc: Mapping[str, Any]) -> str:
    """An application's JSON line as one sentence for a task log: what ran on which table, how it
    ended, on which instant, in how long, and its counts."""
    status = doc.get("status") or "unknown"
    said = {OK: "done", NOTHING: "nothing to do", FAILED: "FAILED"}.get(status, status)
    head = f"lakehouse {doc.get('app')} on {doc.get('table')}: {said}"
    if doc.get("duration_s") is not None:
        head += f" in {float(doc['duration_s']):.1f} s"
    if doc.get("instant"):
        head += f"; instant {doc['instant']}" + (f" ({doc['action']})" if doc.get("action") else "")
    if doc.get("redone"):
        head += ", redone after an earlier try"
    counts = [f"{k.replace('_', ' ')} {v:,}" if isinstance(v, int) and not isinstance(v, bool) else f"{k.replace('_', ' ')} {v}"
              for k, v in doc.items() if k not in _NOT_SUMMED and isinstance(v, (int, float, str, bool)) and v != ""]
    if counts:
        head += "; " + ", ".join(counts)
    if doc.get("reason"):
        head += f". {'Why' if status != FAILED else 'Error'}: {doc['reason']}"
    return head


def usage_failure(app: str | None, e: UsageError, started: float, table: str | None = None) -> int:
    sys.stderr.write(e.usage + str(e) + "\n")
    emit(report(app, table, {"status": FAILED, "reason": f"usage: {e}"}, started))
    return 2


def run_app(app: str, argv: list[str], parser: argparse.ArgumentParser,
            body: Callable[[argparse.Namespace], dict[str, Any]]) -> int:
    """Parse ``argv``, run ``body`` and print the JSON line; the exit code follows its status."""
    started = time.monotonic()
    table = None
    try:
        args = parser.parse_args(argv)
        table = args.table
        doc = body(args)
        # What the application committed is published to Iceberg before it reports (the
        # background publisher would be waited for at exit anyway: here it is timed with it).
        background.wait_all()
    except UsageError as e:
        return usage_failure(app, e, started, table)
    except LakehouseError as e:
        sys.stderr.write(f"error: {e.message}\n" + (f"Help: {e.help}\n" if e.help else ""))
        for note in getattr(e, "__notes__", ()):
            sys.stderr.write(note + "\n")
        emit(report(app, table, {"status": FAILED, "reason": e.message}, started))
        return 1
    except Exception as e:  # noqa: BLE001 - a bug or an environment failure: still report it
        traceback.print_exc()
        emit(report(app, table, {"status": FAILED, "reason": f"{type(e).__name__}: {e}"}, started))
        return 1
    out = report(app, table, doc, started)
    if out["status"] == FAILED:
        sys.stderr.write(f"error: {out['reason']}\n")
    emit(out)
    return _EXIT[out["status"]]
