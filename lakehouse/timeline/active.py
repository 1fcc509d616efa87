"""The active timeline: the instants under ``.hoodie/`` and the only code that changes them.

:class:`Timeline` is an immutable snapshot; :class:`ActiveTimeline` performs state transitions,
each one a single atomic file create, so a crash leaves every instant in a well-defined state.
"""

from __future__ import annotations

import contextlib
import dataclasses
import random
import time as _time
from dataclasses import dataclass, field
from functools import cached_property
from typing import Callable, ContextManager, Iterable

from lakehouse.errors import CorruptFileError, FileAlreadyExistsError, InstantNotFoundError, TimelineError
from lakehouse.storage.base import Storage
from lakehouse.timeline.avro_files import CompactionPlan
from lakehouse.timeline.clustering_plan import ClusteringPlan, clustering_plan_of
from lakehouse.timeline.commit_metadata import CommitMetadata
from lakehouse.timeline.instant import WRITE_ACTIONS, Action, Instant, State
from lakehouse.timeline.instant_time import DEFAULT_GENERATOR, InstantTimeGenerator
from lakehouse import layout



# Completed actions whose file is commit metadata (JSON), cached as they complete (a compaction
# completes as a commit).
_COMMIT_METADATA_ACTIONS = frozenset({Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT,
                                      Action.COMPACTION})


@dataclass(frozen=True)
class Timeline:
    """Every instant time on the active timeline in its latest state, oldest first."""

    instants: tuple[Instant, ...]
    # Times whose completed commit came from a compaction plan.
    compaction_times: frozenset[str] = field(default_factory=frozenset)
    # Times of replace commits that are clusterings (their requested file holds a plan); known
    # for pending ones (ActiveTimeline.load reads their requested files).
    clustering_times: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def from_file_names(cls, names: Iterable[str]) -> "Timeline":
        # A savepoint shares its instant time with the commit it saves (Hudi names it so), so
        # savepoints are tracked beside the one other instant a time can have.
        latest: dict[tuple[str, bool], Instant] = {}
        compactions: set[str] = set()
        for name in names:
            inst = Instant.parse(name)
            if inst is None:
                continue
            if inst.action is Action.COMPACTION:
                compactions.add(inst.time)
            slot = (inst.time, inst.action is Action.SAVEPOINT)
            cur = latest.get(slot)
            if cur is None or inst.state > cur.state:
                latest[slot] = inst
        return cls(tuple(sorted(latest.values())), frozenset(compactions))

    def with_instant(self, instant: Instant) -> "Timeline":
        """This timeline with ``instant`` (a new one, or a newer state of one) on it: what a
        listing taken right after its file was written would read, for the writer that wrote it."""
        # A time holds a savepoint beside one other instant (from_file_names): replace its twin.
        savepoint = instant.action is Action.SAVEPOINT
        rest = tuple(i for i in self.instants
                     if not (i.time == instant.time and (i.action is Action.SAVEPOINT) == savepoint))
        compactions = self.compaction_times | ({instant.time} if instant.action is Action.COMPACTION else set())
        return Timeline(tuple(sorted((*rest, instant))), compactions, self.clustering_times)

    def __iter__(self):
        return iter(self.instants)

    def __len__(self) -> int:
        return len(self.instants)

    def filter(self, *, actions: Iterable[Action] | None = None,
               states: Iterable[State] | None = None) -> "Timeline":
        acts = set(actions) if actions is not None else None
        sts = set(states) if states is not None else None
        return Timeline(tuple(i for i in self.instants
                              if (acts is None or i.action in acts) and (sts is None or i.state in sts)),
                        self.compaction_times, self.clustering_times)

    def completed(self) -> "Timeline":
        return self.filter(states=[State.COMPLETED])

    def pending(self) -> "Timeline":
        return self.filter(states=[State.REQUESTED, State.INFLIGHT])

    def write_timeline(self) -> "Timeline":
        """Instants that carry data: commits, delta commits, replace commits and compactions."""
        return self.filter(actions=WRITE_ACTIONS | {Action.COMPACTION})

    def completed_writes(self) -> "Timeline":
        return self.write_timeline().completed()

    def pending_compactions(self) -> "Timeline":
        return self.filter(actions=[Action.COMPACTION], states=[State.REQUESTED, State.INFLIGHT])

    def pending_clusterings(self) -> "Timeline":
        """Replace commits requested or inflight that are clusterings (a table service's, not a
        writer's: failed-write recovery leaves them alone, as Hudi's
        getInflightTimelineExcludeCompactionAndClustering does)."""
        return Timeline(tuple(i for i in self.pending() if i.action is Action.REPLACE_COMMIT
                              and i.time in self.clustering_times),
                        self.compaction_times, self.clustering_times)

    def pending_writes(self, actions: Iterable[Action] = WRITE_ACTIONS) -> "Timeline":
        """Writers' instants requested or inflight: ``actions`` pending, clusterings left out."""
        return Timeline(tuple(i for i in self.filter(actions=actions).pending()
                              if not (i.action is Action.REPLACE_COMMIT and i.time in self.clustering_times)),
                        self.compaction_times, self.clustering_times)

    def is_clustering(self, time: str) -> bool:
        return time in self.clustering_times

    def before_or_on(self, time: str) -> "Timeline":
        return Timeline(tuple(i for i in self.instants if i.time <= time), self.compaction_times,
                        self.clustering_times)

    def after(self, time: str) -> "Timeline":
        return Timeline(tuple(i for i in self.instants if i.time > time), self.compaction_times,
                        self.clustering_times)

    @cached_property
    def _by_time(self) -> dict[str, Instant]:
        """The instant of each time; where a savepoint shares it, the saved commit wins."""
        out: dict[str, Instant] = {}
        for i in self.instants:
            if i.action is not Action.SAVEPOINT or i.time not in out:
                out[i.time] = i
        return out

    def get(self, time: str) -> Instant | None:
        return self._by_time.get(time)

    def is_completed(self, time: str) -> bool:
        i = self._by_time.get(time)
        return i is not None and i.is_completed

    @cached_property
    def completed_write_times(self) -> frozenset[str]:
        return frozenset(i.time for i in self.completed_writes())

    @property
    def last(self) -> Instant | None:
        return self.instants[-1] if self.instants else None

    @property
    def first(self) -> Instant | None:
        return self.instants[0] if self.instants else None

    def is_compaction(self, time: str) -> bool:
        return time in self.compaction_times


@dataclass(frozen=True)
class Listing:
    """One listing of ``.hoodie``: the timeline it shows, and the names in it."""

    timeline: Timeline
    files: frozenset[str]
    folders: frozenset[str]


class ActiveTimeline:
    """Reads and changes ``.hoodie/`` of one table."""

    def __init__(self, storage: Storage, generator: InstantTimeGenerator = DEFAULT_GENERATOR, *,
                 archive_folder: str = layout.DEFAULT_ARCHIVE_FOLDER) -> None:
        self.storage = storage
        self.generator = generator
        # hoodie.archivelog.folder: the archived timeline's folder under .hoodie (Hudi's
        # HoodieTableMetaClient.getArchivePath; before 0.x's default "archived" it was .hoodie).
        self.archive_path = layout.archive_folder(archive_folder)
        self._metadata_cache: dict[str, CommitMetadata] = {}
        self._clustering_cache: dict[str, bool] = {}
        # Several writers allocate instant times under the table lock: otherwise one delayed
        # between listing the timeline and creating its file lands below a newer instant.
        self.allocation_guard: Callable[[], ContextManager] = contextlib.nullcontext
        self.allocation_exclusive = False  # True when every allocator takes allocation_guard
        # Called under the guard right before an instant's file is created: the guard still
        # holds (a lease that ran out while the timeline was read is no guard).
        self.allocation_check: Callable[[], None] = lambda: None

    def share_caches(self, other: "ActiveTimeline") -> None:
        """Read completed instants through ``other``'s caches (the files never change): a meta
        client made for another thread's work on the same table (its Iceberg publishing) then
        does not read again every commit this one read or wrote."""
        self._metadata_cache = other._metadata_cache
        self._clustering_cache = other._clustering_cache

    # --- reading ---------------------------------------------------------------------------

    def load(self) -> Timeline:
        return self.load_listing().timeline

    def load_listing(self) -> "Listing":
        """The timeline, with the names of the files and folders of ``.hoodie`` it was read from
        (what else that listing shows need not be asked for again)."""
        infos = self.storage.list(layout.METAFOLDER)
        files = frozenset(i.name for i in infos if not i.is_dir)
        return Listing(self._timeline_of(files), files, frozenset(i.name for i in infos if i.is_dir))

    def _timeline_of(self, names: Iterable[str]) -> Timeline:
        timeline = Timeline.from_file_names(names)
        replaces = [i for i in timeline.pending() if i.action is Action.REPLACE_COMMIT]
        if not replaces:
            return timeline
        return dataclasses.replace(timeline, clustering_times=frozenset(
            i.time for i in replaces if self._is_clustering(i.time)))

    def _is_clustering(self, time: str) -> bool:
        """Whether the replace commit ``time`` is a clustering (its requested file, which never
        changes, holds a plan): read once per instant."""
        known = self._clustering_cache.get(time)
        if known is None:
            req = Instant(time, Action.REPLACE_COMMIT, State.REQUESTED)
            try:
                data = self.storage.read(self.path(req))
            except FileNotFoundError:
                return False  # rolled back meanwhile
            known = self._clustering_cache[time] = clustering_plan_of(
                data, self.storage.uri(self.path(req))) is not None
        return known

    def pending_compaction_file_groups(self, timeline: Timeline) -> dict[tuple[str, str], str]:
        """(partition, file id) -> the compaction pending on ``timeline`` that works on it."""
        out: dict[tuple[str, str], str] = {}
        for inst in timeline.pending_compactions():
            req = inst.with_state(State.REQUESTED)
            for o in CompactionPlan.from_bytes(self.read(req), self.path(req)).operations:
                out[(o.partition_path, o.file_id)] = inst.time
        return out

    def pending_clustering_file_groups(self, timeline: Timeline) -> dict[tuple[str, str], str]:
        """(partition, file id) -> the clustering pending on ``timeline`` that rewrites it."""
        out: dict[tuple[str, str], str] = {}
        for inst in timeline.pending_clusterings():
            for fg in self.clustering_plan(inst.time).file_groups:
                out[fg] = inst.time
        return out

    def clustering_plan(self, time: str) -> ClusteringPlan:
        """The plan of the clustering ``time`` (requested, inflight or completed)."""
        req = Instant(time, Action.REPLACE_COMMIT, State.REQUESTED)
        plan = clustering_plan_of(self.read(req), self.storage.uri(self.path(req)))
        if plan is None:
            raise TimelineError(f"replace commit {time} is not a clustering (its requested file "
                                "holds no clustering plan)",
                                help="`lakehouse clustering show` lists the clusterings")
        return plan

    def state_times(self) -> dict[tuple[str, bool], dict[State, int]]:
        """When each instant entered each state (ns since the epoch, from its files' mtimes),
        keyed by (time, is savepoint): a savepoint shares its commit's time. Timeline layout 1
        records no completion time, so the files' own times are the record. (The inflight time
        of a write is when its phase-1 results were recorded: that file is rewritten then.)"""
        out: dict[tuple[str, bool], dict[State, int]] = {}
        for info in self.storage.list(layout.METAFOLDER):
            inst = None if info.is_dir else Instant.parse(info.name)
            if inst is not None and info.mtime_ns is not None:
                key = (inst.time, inst.action is Action.SAVEPOINT)
                out.setdefault(key, {})[inst.state] = info.mtime_ns
        return out

    def path(self, instant: Instant) -> str:
        return layout.timeline_file(instant.file_name)

    def read(self, instant: Instant) -> bytes:
        try:
            return self.storage.read(self.path(instant))
        except FileNotFoundError:
            raise InstantNotFoundError(f"{self.path(instant)} does not exist",
                                       help="reload the timeline; the instant may have been "
                                            "rolled back or archived") from None

    def commit_metadata(self, instant: Instant) -> CommitMetadata:
        """Commit metadata of a completed write (cached: completed files never change)."""
        if instant.is_completed:
            cached = self._metadata_cache.get(instant.time)
            if cached is not None:
                return cached
        data = self.read(instant)
        if instant.is_completed and not data.strip():
            # Requested and inflight files may be empty; a completed write always records what
            # it wrote. Read as "wrote nothing", an emptied one would hide its files from
            # incremental reads, rollback and clean, and its replaced file groups from reads.
            raise CorruptFileError(self.storage.uri(self.path(instant)),
                                   f"the completed {instant.action} file is empty; it must hold "
                                   "the instant's commit metadata (JSON)")
        meta = CommitMetadata.from_bytes(data, self.storage.uri(self.path(instant)))
        if instant.is_completed:
            self._metadata_cache[instant.time] = meta
        return meta

    def committed_file_sizes(self, instants: Iterable[Instant]) -> dict[str, int]:
        """The largest size the write stats of ``instants`` record for each file path: a log
        file only grows, so its last committed append tells the least it must hold."""
        sizes: dict[str, int] = {}
        for inst in instants:
            for st in self.commit_metadata(inst).write_stats():
                if st.path and st.file_size_in_bytes:
                    sizes[st.path] = max(sizes.get(st.path, 0), st.file_size_in_bytes)
        return sizes

    # --- changing --------------------------------------------------------------------------

    def new_instant_time(self, timeline: Timeline | None = None) -> str:
        timeline = timeline if timeline is not None else self.load()
        last = timeline.last
        return self.generator.next(after=last.time if last else None)

    def create_requested(self, action: Action, content: bytes = b"", *,
                         time: str | None = None,
                         before_create: Callable[[str], None] | None = None,
                         timeline: Timeline | None = None) -> Instant:
        """Put a new instant on the timeline (under :attr:`allocation_guard`); ``before_create``
        runs with the chosen time before its file exists (a writer starts its heartbeat there).
        ``timeline``: one the caller loaded under the allocation guard, which the first try
        takes its time after rather than listing the timeline again."""
        with self.allocation_guard():
            return self._create_requested(action, content, time, before_create, timeline)

    def _create_requested(self, action: Action, content: bytes, time: str | None,
                          before_create: Callable[[str], None] | None,
                          timeline: Timeline | None = None) -> Instant:
        """Put a new instant on the timeline; retries on a racing writer's identical time.

        The atomic create settles a race for the same file; a racer at the same time with another
        action creates a different file, so after creating, the timeline is checked for any other
        instant at this time, and on a clash this one is withdrawn and retried. Whoever checks
        last sees the other's file, so two instants never both keep one time.
        """
        for attempt in range(100):
            t = time or self.new_instant_time(timeline if attempt == 0 else None)
            inst = Instant(t, action, State.REQUESTED)
            if self.allocation_exclusive:
                self.allocation_check()
            if before_create is not None:
                before_create(t)
            try:
                self.storage.create(self.path(inst), content)
            except FileAlreadyExistsError:
                clash = True
            else:
                # Under an exclusive guard nobody else allocates: no other action can hold t.
                clash = not self.allocation_exclusive and self._other_instant_at(inst)
                if clash:
                    self.storage.delete(self.path(inst))
            if not clash:
                return inst
            if time is not None:
                raise TimelineError(f"instant {t} already exists",
                                    help="pick a new instant time")
            # Two racers that withdrew together should not meet again at the next millisecond.
            _time.sleep(random.uniform(0, 0.002 * min(attempt + 1, 10)))
        raise TimelineError("could not allocate a new instant time after 100 attempts",
                            help="check the clock and whether other writers are looping")

    def _other_instant_at(self, inst: Instant) -> bool:
        mine = inst.file_name
        for info in self.storage.list(layout.METAFOLDER):
            if info.is_dir or info.name == mine or not info.name.startswith(inst.time):
                continue
            other = Instant.parse(info.name)
            if other is not None and other.time == inst.time:
                return True
        return False

    def transition(self, instant: Instant, to: State, content: bytes = b"") -> Instant:
        """Move ``instant`` to the next state by creating that state's file atomically."""
        if to <= instant.state:
            raise TimelineError(f"cannot move {instant} back to {to.name}",
                                help="states only move requested -> inflight -> completed")
        nxt = instant.with_state(to)
        try:
            self.storage.create(self.path(nxt), content)
        except FileAlreadyExistsError:
            raise TimelineError(f"{self.path(nxt)} already exists: {instant.time} was moved to "
                                f"{to.name} by another process",
                                help="reload the timeline before acting on this instant") from None
        if nxt.is_completed and nxt.action in _COMMIT_METADATA_ACTIONS and content.strip():
            # What was just made durable need not be read back (by the Iceberg publish, the
            # next write's schema and field ids): a completed file never changes.
            try:
                self._metadata_cache[nxt.time] = CommitMetadata.from_bytes(content, self.storage.uri(self.path(nxt)))
            except Exception:  # noqa: BLE001 - read from the store when asked, as any other
                pass
        return nxt

    def delete_instant(self, time: str, action: Action, *, include_completed: bool = False) -> None:
        """Remove a (failed) instant's files; requested last, so a crash leaves it discoverable."""
        states = [State.COMPLETED] if include_completed else []
        for state in states + [State.INFLIGHT, State.REQUESTED]:
            self.storage.delete(self.path(Instant(time, action, state)))

    def overwrite(self, instant: Instant, content: bytes) -> None:
        """Replace a non-completed state file (used to record results on an inflight instant)."""
        if instant.is_completed:
            raise TimelineError(f"{instant} is completed and immutable",
                                help="completed instants never change")
        self.storage.write(self.path(instant), content)
