"""The one file given to ``spark-submit``: runs a lakehouse application by name.

::

    spark-submit [spark options] <submit.py> <app> <table> [app options]

    compaction-plan    TABLE [--force] [--option hoodie.compact...=V ...]
    compaction-execute TABLE [--instant T] [--parallelism N]
    clustering-plan    TABLE [--force] [--option hoodie.clustering...=V ...]
    clustering-execute TABLE [--instant T] [--parallelism N]
    commit             TABLE [--instant T]
    clean              TABLE [--dry-run] [--option hoodie.clean...=V ...]
    stream             TABLE --source-dir DIR [--processing-time S --run-for S] ...
    ingest             TABLE ...   (see lakehouse.spark.apps.ingest)

``<submit.py>`` is this file: ``python -c 'from lakehouse.spark.submit import submit_path;
print(submit_path())'`` prints it. ``spark-submit <submit.py> <app> --help`` describes an app.
Each app prints one line of JSON as its last line on stdout (instant, action, counts, duration,
status "ok" | "nothing_to_do" | "failed", reason) and keeps its result on the table's timeline.
Exit codes: 0 ok or nothing to do, 1 failure (error and ``Help:`` on stderr), 2 usage.
Spark itself starts only when there is work for executors: compaction-plan, commit,
``clean --dry-run`` and runs with nothing to do finish in seconds.

On one machine (``local[N]``, or a standalone cluster whose workers run the same Python)::

    export SPARK_LOCAL_IP=127.0.0.1 PYSPARK_PYTHON=$VENV/bin/python
    SUBMIT=$($VENV/bin/python -c 'from lakehouse.spark.submit import submit_path; print(submit_path())')
    spark-submit --master 'local[2]' "$SUBMIT" compaction-plan /data/trips --force
    spark-submit --master 'local[2]' "$SUBMIT" compaction-execute /data/trips --parallelism 2
    spark-submit --master 'local[2]' "$SUBMIT" commit /data/trips
    spark-submit --master 'local[2]' "$SUBMIT" clean /data/trips --option hoodie.cleaner.commits.retained=10

The executors import lakehouse from the venv (installed) or from ``PYTHONPATH``.

On a cluster whose workers lack lakehouse, ship it as a zip (lakehouse is pure Python; the
workers' Python needs pyarrow and fastavro)::

    python -m lakehouse.spark.package /tmp/dist   # writes /tmp/dist/lakehouse.zip and submit.py
    spark-submit --master spark://HOST:7077 --deploy-mode client \\
        --py-files /tmp/dist/lakehouse.zip \\
        --conf spark.pyspark.python=/path/to/python/on/workers \\
        --conf spark.driver.host=<address the workers can reach> \\
        /tmp/dist/submit.py compaction-execute /shared/data/trips

(:func:`lakehouse.spark.package.build_py_files` builds the zip from Python.)

The table path must name the same storage on the driver and every executor (a shared file
system, for local paths). The defaults of :mod:`lakehouse.spark.session` (driver on 127.0.0.1,
UI off) apply unless ``--conf`` says otherwise.
"""

from __future__ import annotations

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def submit_path() -> str:
    """The absolute path of this file, the application file for spark-submit."""
    return os.path.join(_HERE, "submit.py")


# Run as a script, sys.path must be fixed before anything of lakehouse is imported.
if __name__ == "__main__":
    # This file's folder comes first on sys.path, where its siblings (engine.py, session.py,
    # package.py) would shadow any top-level module of those names.
    if sys.path and os.path.abspath(sys.path[0] or os.curdir) == _HERE:
        del sys.path[0]
    try:
        import lakehouse  # noqa: F401
    except ImportError:
        # Not installed and not shipped: the driver can still use the source tree around this
        # file (executors then need PYTHONPATH or --py-files, see above).
        sys.path.insert(0, os.path.dirname(os.path.dirname(_HERE)))

import argparse  # noqa: E402
import importlib  # noqa: E402
import time  # noqa: E402

from lakehouse.spark import session  # noqa: E402
from lakehouse.spark.apps import (  # noqa: E402
    FAILED, AppParser, UsageError, add_table_arg, emit, new_parser, report, usage_failure)

APPS = {
    "compaction-plan": "lakehouse.spark.apps.compaction_plan",
    "compaction-execute": "lakehouse.spark.apps.compaction_execute",
    "clustering-plan": "lakehouse.spark.apps.clustering_plan",
    "clustering-execute": "lakehouse.spark.apps.clustering_execute",
    "commit": "lakehouse.spark.apps.commit",
    "clean": "lakehouse.spark.apps.clean",
    "stream": "lakehouse.spark.apps.stream",
}
INGEST = "lakehouse.spark.apps.ingest"


def _parser():
    top = AppParser(prog="spark-submit [spark options] submit.py",
                    description="Run a lakehouse application on Spark.",
                    epilog="ingest TABLE ...: see `submit.py ingest --help`",
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = top.add_subparsers(dest="app", required=True, metavar="app")
    for name, module in APPS.items():
        mod = importlib.import_module(module)
        summary = mod.__doc__.split("\n\n")[0].split(": ", 1)[-1].replace("``", "")
        p = sub.add_parser(name, help=" ".join(summary.split()),
                           description=mod.__doc__,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        add_table_arg(p)
        mod.configure(p)
    # Parsed by the ingest app itself; listed here so that --help shows it.
    sub.add_parser("ingest", help="read new input since the last checkpoint and write it", add_help=False)
    return top


def _driver_in_yarn_container() -> bool:
    # YARN's launch environment of the application master (where the driver runs in cluster
    # deploy mode) carries the staging folder; asking the JVM instead costs ~1 s on every run.
    return "SPARK_YARN_STAGING_DIR" in os.environ and "PYSPARK_GATEWAY_PORT" in os.environ


def _dispatch(app: str, mod, argv: list[str]) -> int:
    """Run ``mod.main`` with a SparkSession if it asks for one (the default for apps that do not
    say), else with None: the app then starts a bare SparkContext itself if it has work."""
    before = session.active_context()
    spark = None
    if getattr(mod, "NEEDS_SESSION", True):
        spark = session.build_session(f"lakehouse-{app}")
    elif _driver_in_yarn_container():
        # YARN's application master fails an application that never starts a SparkContext.
        session.build_context(f"lakehouse-{app}")
    try:
        return int(mod.main(argv, spark))
    finally:
        # Stop what this run started (an app may have started a context itself), never a
        # context that a caller in this process was already using.
        started = session.active_context()
        if started is not None and started is not before:
            started.stop()


def _run_ingest(argv: list[str], started: float) -> int:
    try:
        mod = importlib.import_module(INGEST)
    except ModuleNotFoundError as e:
        if e.name not in (INGEST, "lakehouse.spark.apps"):
            raise
        msg = f"the ingest application is not installed: {INGEST} is missing"
        sys.stderr.write(f"error: {msg}\nHelp: install a lakehouse version that has it, or ship "
                         "it with --py-files\n")
        emit(report("ingest", argv[0] if argv else None, {"status": FAILED, "reason": msg}, started))
        return 2
    if hasattr(mod, "configure"):  # its arguments are checked before Spark starts
        try:
            new_parser("ingest", mod.__doc__ or "", mod.configure).parse_args(argv)
        except UsageError as e:
            return usage_failure("ingest", e, started)
    return _dispatch("ingest", mod, argv)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    started = time.monotonic()
    if argv and argv[0] == "ingest":
        return _run_ingest(argv[1:], started)
    try:
        args = _parser().parse_args(argv)
    except UsageError as e:
        return usage_failure(argv[0] if argv and argv[0] in APPS else None, e, started)
    return _dispatch(args.app, importlib.import_module(APPS[args.app]), argv[1:])


if __name__ == "__main__":
    sys.exit(main())
