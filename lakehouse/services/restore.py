"""Restore a table to a savepoint: every write after it is rolled back, newest first.

Each undone instant gets its own rollback instant, so an interrupted restore leaves a table in a
state some earlier moment had, and running the restore again finishes it. Compactions after the
savepoint are undone with their plans, so they do not run again over restored file slices.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from lakehouse.errors import InstantNotFoundError, TimelineError
from lakehouse.services.compaction import undo_execution
from lakehouse.services.rollback import resume_pending_rollbacks, rollback_instant
from lakehouse.timeline.instant import Action

if TYPE_CHECKING:
    from lakehouse.meta_client import TableMetaClient


@dataclass(frozen=True)
class RestoreResult:
    savepoint: str
    rolled_back: tuple[str, ...]
    rollback_instants: tuple[str, ...]

    def to_json(self) -> dict:
        return {"action": "restore", "savepoint": self.savepoint,
                "rolled_back": list(self.rolled_back), "rollbacks": list(self.rollback_instants)}


def restore(meta: "TableMetaClient", savepoint_time: str) -> RestoreResult:
    timeline = meta.timeline
    saved_here = [i for i in timeline.completed().filter(actions=[Action.SAVEPOINT])
                  if i.time == str(savepoint_time)]
    sp = saved_here[0] if saved_here else None
    if sp is None:
        saved = [i.time for i in timeline.completed().filter(actions=[Action.SAVEPOINT])]
        raise InstantNotFoundError(f"{savepoint_time} is not a savepoint",
                                   help="savepoints: " + (", ".join(saved) if saved else "none; "
                                                          "create one with `lakehouse savepoint create`"))
    newer = [i.time for i in timeline.completed().filter(actions=[Action.SAVEPOINT]) if i.time > sp.time]
    if newer:
        # Their commits would have to be rolled back, which a savepoint forbids: refuse before
        # undoing anything rather than stop half-way at the first of them (Hudi's
        # BaseRollbackActionExecutor refuses to roll back a savepointed commit as well).
        raise TimelineError(
            f"cannot restore to {sp.time}: newer savepoint(s) {', '.join(newer)} keep commits "
            "a restore would roll back", help="restore to the newest savepoint, or delete the "
            "newer ones first (`lakehouse savepoint delete`)")
    resume_pending_rollbacks(meta, timeline)
    undone: list[str] = []
    rollbacks: list[str] = []
    t0 = sp.time
    while True:
        timeline = meta.timeline
        dropped = False
        for inst in timeline.pending_compactions():
            if inst.time > t0:
                # A requested one too: a crashed undo's files. Committed meanwhile (only by
                # another process that took the lock from this one): its plan stays, and the
                # rollback below undoes it once the timeline is read again.
                committed = not undo_execution(meta, inst.time)
                meta.check_lock()
                if not committed:
                    meta.active.delete_instant(inst.time, Action.COMPACTION)
                    undone.append(inst.time)
                dropped = True
        if dropped:
            timeline = meta.timeline
        later = [i for i in timeline.write_timeline() if i.time > t0
                 and i.action is not Action.COMPACTION]
        if not later:
            break
        inst = later[-1]
        res = rollback_instant(meta, inst, timeline, to_savepoint=True)
        rollbacks.append(res.rollback_instant)
        undone.append(inst.time)
    return RestoreResult(t0, tuple(undone), tuple(rollbacks))
