"""Named fault points for crash and failure tests.

A test activates points through the environment (``LAKEHOUSE_FAULTS=name[:action],...``, read
when this module is imported, so it reaches subprocesses) or :func:`activate`. Actions: ``kill``
(SIGKILL this process: nothing is flushed or cleaned up, like a machine dying) and ``raise``
(:class:`InjectedFault`). ``kill@/some/marker`` (or ``raise@...``) fires once across processes:
only where the marker file can still be created, so a retried task gets past the point (as
after a real crash). An inactive point costs one truth test of a module global.
"""

from __future__ import annotations

import os
import signal

ENV = "LAKEHOUSE_FAULTS"

_active: dict[str, str] = {}
_enabled = False


class InjectedFault(RuntimeError):
    """Raised by a fault point whose action is ``raise``."""


def _parse(spec: str) -> dict[str, str]:
    out = {}
    for item in spec.split(","):
        item = item.strip()
        if item:
            name, _, action = item.partition(":")
            out[name] = action or "kill"
    return out


def activate(name: str, action: str = "raise") -> None:
    global _enabled
    _active[name] = action
    _enabled = True


def reset() -> None:
    global _enabled
    _active.clear()
    _enabled = False


def fault_point(name: str) -> None:
    if not _enabled:
        return
    action = _active.get(name)
    if action is None:
        return
    action, _, marker = action.partition("@")
    if marker:
        try:
            os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        except FileExistsError:
            return  # fired already, in this process or another
    if action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    raise InjectedFault(f"injected fault at {name}")


_active.update(_parse(os.environ.get(ENV, "")))
_enabled = bool(_active)

# Every point the code defines, for the reliability report.
POINTS = (
    "write.after_requested",       # instant requested, nothing written
    "write.after_first_marker",    # a marker exists, its data file does not
    "write.mid_data_file",         # a data file is half written
    "write.after_data_files",      # every data file written, results not yet recorded
    "spark.write_task.after_files",  # a Spark write task wrote its files, results not returned
    "write.after_results",         # phase 1 done: results recorded (in memory when the commit follows)
    "commit.before_complete",      # phase 2 checked the results, completed file not written
    "commit.after_complete",       # completed, markers still present
    "rollback.after_plan",         # rollback requested, nothing deleted
    "rollback.mid_delete",         # some files of the failed write deleted
    "rollback.before_complete",    # files deleted, target's instant files removed
    "compaction.mid_execute",      # one operation's base file written, the others not
    "compaction.after_execute",    # every base file written, results not recorded
    "compaction.before_commit",    # results checked, <t>.commit not written
    "clustering.mid_execute",      # the first group's first base file written, the rest not
    "clustering.after_execute",    # every base file written, results not recorded
    "clustering.before_commit",    # results checked, <t>.replacecommit not written
    "clean.after_plan",            # clean requested, nothing deleted
    "clean.mid_delete",            # some files of the plan deleted
    "clean.before_complete",       # every file deleted, <t>.clean not written
    "archive.after_write",         # archive file written, active instants not yet removed
    "iceberg.before_publish",      # instant completed, its Iceberg metadata not yet written
    "iceberg.mid_publish",         # manifests and manifest list written, metadata.json not
)
