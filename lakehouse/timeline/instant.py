"""Instants: an action at an instant time, in one of three states, each state a file.

All timeline file names are parsed and built here and nowhere else.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from functools import total_ordering

from lakehouse.errors import TimelineError


class Action(enum.StrEnum):
    COMMIT = "commit"
    DELTA_COMMIT = "deltacommit"
    REPLACE_COMMIT = "replacecommit"
    COMPACTION = "compaction"
    CLEAN = "clean"
    ROLLBACK = "rollback"
    SAVEPOINT = "savepoint"
    RESTORE = "restore"
    INDEXING = "indexing"
    LOG_COMPACTION = "logcompaction"


class State(enum.IntEnum):
    REQUESTED = 0
    INFLIGHT = 1
    COMPLETED = 2


# Actions whose completed instants carry table data.
WRITE_ACTIONS = frozenset({Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT})

_NAME_RE = re.compile(r"^(\d{17}|\d{14})\.([a-z]+)(?:\.(requested|inflight))?$")

_MIN_TIME = "0" * 17


@total_ordering
@dataclass(frozen=True, slots=True)
class Instant:
    """One instant. Ordering is by time, then by state (so requested < inflight < completed)."""

    time: str
    action: Action
    state: State

    def __post_init__(self) -> None:
        if not (len(self.time) in (14, 17) and self.time.isdigit()):
            raise TimelineError(f"instant time {self.time!r} is not 17 digits (yyyyMMddHHmmssSSS)",
                                help="pass an instant time as the timeline shows it")

    def __lt__(self, other: "Instant") -> bool:
        return (self.time, self.state, self.action) < (other.time, other.state, other.action)

    @property
    def is_completed(self) -> bool:
        return self.state is State.COMPLETED

    @property
    def is_requested(self) -> bool:
        return self.state is State.REQUESTED

    @property
    def is_inflight(self) -> bool:
        return self.state is State.INFLIGHT

    def with_state(self, state: State) -> "Instant":
        return Instant(self.time, self.action, state)

    @property
    def file_name(self) -> str:
        """The timeline file for this state, in timeline layout 1."""
        a = self.action
        if self.state is State.COMPLETED:
            # A finished compaction is a commit (operationType COMPACT).
            return f"{self.time}.{Action.COMMIT if a is Action.COMPACTION else a}"
        if self.state is State.INFLIGHT:
            # COW writes keep Hudi's historic bare '.inflight' name.
            return f"{self.time}.inflight" if a is Action.COMMIT else f"{self.time}.{a}.inflight"
        return f"{self.time}.{a}.requested"

    @classmethod
    def parse(cls, file_name: str) -> "Instant | None":
        """The instant a timeline file name stands for, or None if it is not a timeline file."""
        m = _NAME_RE.match(file_name)
        if m is None:
            return None
        time, action, state = m.groups()
        if action == "inflight" and state is None:
            return cls(time, Action.COMMIT, State.INFLIGHT)
        try:
            act = Action(action)
        except ValueError:
            return None
        st = {"requested": State.REQUESTED, "inflight": State.INFLIGHT, None: State.COMPLETED}[state]
        return cls(time, act, st)

    def __str__(self) -> str:
        return f"{self.time}__{self.action}__{self.state.name}"
