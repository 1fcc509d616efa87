"""The ``lakehouse`` command: create, write, read and inspect tables from a shell.

Every command but ``options`` and ``catalog serve`` takes the table path as its first argument. What a script consumes
(instant times, JSON, rows) goes to stdout; progress notes and errors go to stderr, so
``T=$(lakehouse write PATH batch.parquet)`` captures just the instant time.

Exit codes, stable for scripts:

* 0 success
* 1 a lakehouse error; ``error: <message>`` and a ``Help:`` line are printed on stderr
* 2 usage error: unknown flag, missing argument, malformed value
* 3 the path holds no table
* 4 commit conflict, or the commit outcome is unknown: check ``lakehouse timeline`` before retrying

Run it as ``lakehouse ...``, ``python -m lakehouse ...`` or ``python -m lakehouse.cli ...``. This
module only builds the group: the data commands live in :mod:`lakehouse.cli.data`, the
table-service commands (``compaction``, ``clean``, ``savepoint``, ``restore``, ``archive``) in
:mod:`lakehouse.cli.services`, ``timeline`` in :mod:`lakehouse.cli.timeline`, ``catalog serve`` in
:mod:`lakehouse.cli.catalog`, and what they share in :mod:`lakehouse.cli.common`.
"""

from __future__ import annotations

import click

from lakehouse import __version__
from lakehouse.cli import catalog, clustering, data, services, timeline
from lakehouse.iceberg import background
from lakehouse.cli.common import (EPILOG, EXIT_COMMIT_UNCERTAIN, EXIT_LAKEHOUSE_ERROR,
                                  EXIT_TABLE_NOT_FOUND, EXIT_USAGE, LakehouseGroup, exit_code_for)

__all__ = ["EXIT_COMMIT_UNCERTAIN", "EXIT_LAKEHOUSE_ERROR", "EXIT_TABLE_NOT_FOUND", "EXIT_USAGE",
           "exit_code_for", "main"]


@click.group("lakehouse", cls=LakehouseGroup, epilog=EPILOG,
             context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="lakehouse")
@click.option("--debug", is_flag=True, help="Show the traceback of lakehouse errors too.")
@click.pass_context
def main(ctx: click.Context, debug: bool) -> None:
    """Apache Hudi (table version 6) tables, Copy-On-Write and Merge-On-Read, from the shell.

    PATH is the table's root folder (a local path or file:// URI).
    """
    # A command is done when what its commits publish to Iceberg is (the background publisher,
    # lakehouse.iceberg.background), also where it runs inside another program.
    ctx.call_on_close(background.wait_all)


for _command in (*data.COMMANDS, *services.COMMANDS, *clustering.COMMANDS, *timeline.COMMANDS, *catalog.COMMANDS):
    main.add_command(_command)
