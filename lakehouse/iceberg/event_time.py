"""Under event-time ordering, what a delta commit changes in what a read shows.

A record a commit ``t`` wrote may lose (a late record: an older ordering value than the version
a read shows now), and a delete may let an older version back (the two-level merge: the logs
among themselves, then against the base record, as Hudi's readers merge). So the snapshot view
decides, for ``t``'s keys, which version a read shows before and after ``t``:

- **the slice's log level** before ``t`` is kept between decisions: the slice's visible log
  versions folded to one per key (:func:`lakehouse.read.log_versions.fold`, in the deciding
  columns, with a key index), by the blocks they hold (a log block never changes; a new
  instant's block is a new block). After ``t`` it is that fold with ``t``'s versions folded in:
  the log-level merge is associative, so this equals folding all the slice's blocks at once.
  Only ``t``'s own blocks are decoded; a slice seen for the first time is folded from its logs;
- **the base level**: the base rows of ``t``'s keys from the publisher's kept key index and
  columns of the base file (:mod:`lakehouse.iceberg.key_index`);
- **the common case** (``t``'s record, the log-level winner and the base record all plain
  records with an ordering value): ``t``'s record is shown iff its ordering value is at least
  both others' (the later arrival wins a tie at either level), and then it is the only change;
  decided with a comparison per key;
- **every other key** (a delete or soft delete anywhere, a missing ordering value, a key a base
  file holds twice) goes through the reader's own merge (:func:`merge_logs_over_base`) over the
  kept fold, ``t``'s versions and the base rows, before and after ``t``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse.columns import COMMIT_TIME, DELETE, KEY, RECORD_KEY, SEQ
from lakehouse.file_group.file_slice import FileSlice
from lakehouse.iceberg import background, key_index, memo
from lakehouse.iceberg.key_index import KeyIndex
from lakehouse.merge import delete_flags
from lakehouse.read.file_slice_reader import merge_logs_over_base
from lakehouse.read.log_versions import BLOCK_SEQ, block_versions, decoded, fold, log_blocks
from lakehouse.read.slice_context import SliceReadContext
from lakehouse.storage.base import Storage

# The deciding columns (the ordering and delete columns join them: SliceReadContext.needed_columns).
NARROW = [RECORD_KEY, COMMIT_TIME]


@dataclass(frozen=True)
class Group:
    """One file group's part in a decision: its slice as of ``t`` and ``t``'s keys in it."""

    whole: FileSlice
    keys: pa.Array


@dataclass(frozen=True)
class Decision:
    changed: pa.Array  # keys whose shown version ``t`` changed
    mine: pa.Array  # of those, keys whose shown version is now ``t``'s own record
    older: pa.Array  # of those, keys an older version is shown for again
    # t's keys with versions in the slice's earlier logs: the only ones its row files can hold
    # (every row file of a slice is made of its log records).
    logged: pa.Array | None = None


class _Fold:
    """A slice's log versions folded to one per key, with its key index (kept in memo.ARROW).
    Grown by appending: a key's newest row is the one its index finds; rows a newer one
    replaced stay until they are as many as the live ones."""

    def __init__(self, rows: pa.Table, index: KeyIndex | None = None) -> None:
        self.rows = rows
        self.index = index if index is not None else KeyIndex(rows.column(KEY))
        self.nbytes = self.rows.nbytes + self.index.nbytes

    def appended(self, forget: np.ndarray, added: pa.Table) -> "_Fold":
        rows = pa.concat_tables([self.rows, added], promote_options="permissive")
        if rows.num_rows > 2 * (self.index.live + added.num_rows) + 1024 or rows.column(KEY).num_chunks > 16:
            live = np.sort(np.setdiff1d(self.index.order, forget))
            newest = self.rows.take(pa.array(live))
            return _Fold(pa.concat_tables([newest, added], promote_options="permissive").combine_chunks())
        return _Fold(rows, self.index.appended(forget, added.column(KEY), rows.column(KEY)))


@dataclass
class _Slice:
    """What one group's decision works on."""

    group: Group
    prior: _Fold | None  # the log level before t
    own: pa.Table | None  # t's versions (one per key: the caller checks)
    key: tuple  # memo key of the log level after t
    base_index: KeyIndex | None  # the base file's key index (kept in memo.ARROW)
    base_columns: pa.Table | None  # the base file in the deciding columns (kept too)

    @property
    def base_twice(self) -> bool:
        """The base file holds a key twice."""
        return self.base_index is not None and self.base_index.repeats

    def base_rows(self, keys: pa.Array) -> pa.Table | None:
        """The base rows of ``keys``, every one of a key the file holds twice."""
        if self.base_index is None:
            return None
        return self.base_columns.take(pa.array(self.base_index.positions(keys)))


def decide(storage: Storage, ctx: SliceReadContext, groups: list[Group], t: str) -> list[Decision]:
    """The decision for each of ``groups`` (``ctx``: a read context as of ``t`` in
    :data:`NARROW` columns, under event-time ordering)."""
    ordering = ctx.spec.ordering_field
    out: list[Decision] = []
    slow: list[tuple[int, _Slice, pa.Array]] = []
    for i, g in enumerate(groups):
        background.pause()
        s = _slice(storage, ctx, g, t)
        fast_mine, slow_keys, prior_at = _fast(s, ordering)
        out.append(Decision(fast_mine, fast_mine, pa.array([], g.keys.type), _logged(s, g.keys)))
        if len(slow_keys):
            slow.append((i, s, slow_keys))
        else:
            _keep(s, prior_at, ctx)
    for i, s, keys in slow:
        d = _merged(s, keys, ctx, t)
        fast = out[i]
        out[i] = Decision(pa.concat_arrays([fast.changed, d.changed]), pa.concat_arrays([fast.mine, d.mine]),
                          d.older, fast.logged)
        _refold(s, ctx)
    return out


def _logged(s: _Slice, keys: pa.Array) -> pa.Array:
    if s.prior is None or not s.prior.rows.num_rows:
        return pa.array([], keys.type)
    return keys.filter(pa.array(s.prior.index.find(keys) >= 0))


def _slice(storage: Storage, ctx: SliceReadContext, g: Group, t: str) -> _Slice:
    target = pa.schema([ctx.schema.field(c) for c in ctx.needed_columns()])
    used = [(seq, b) for seq, b, gone in log_blocks(g.whole.merged_log_files, ctx, streaming=False)
            if decoded(b, gone, ctx)]
    prior_blocks = [(seq, b) for seq, b in used if b.instant_time != t]
    own_blocks = [(seq, b) for seq, b in used if b.instant_time == t]

    def key(blocks: list) -> tuple:
        # A block by its file, place and instant: a file a rollback deleted may be written
        # again under its name by a later instant.
        return ("log fold", str(target), ctx.spec, ctx.key_field,
                tuple((b.path, b.offset, b.size, b.instant_time) for _, b in blocks))

    def decode(blocks: list) -> list[pa.Table]:
        return [block_versions(seq, b, ctx, target) for seq, b in blocks]

    prior = memo.ARROW.get(key(prior_blocks)) if prior_blocks else None
    if prior is not None and own_blocks and prior.rows.num_rows and \
            pc.max(prior.rows.column(SEQ)).as_py() >= own_blocks[0][0] * BLOCK_SEQ:
        prior = None  # kept from a log in another order: fold afresh, in this log's order
    if prior is None and prior_blocks:
        prior = _Fold(fold(decode(prior_blocks), ctx))
        memo.ARROW.put(key(prior_blocks), prior)
    own = decode(own_blocks)
    own_rows = (own[0] if len(own) == 1 else pa.concat_tables(own, promote_options="permissive")) if own else None
    if own_rows is not None:
        own_rows = own_rows.filter(pc.is_in(own_rows.column(KEY), value_set=g.keys))
    index = columns = None
    base_file = g.whole.merged_base_file
    if base_file is not None:
        # The columns first: they are read with the keys in one open when neither is kept yet.
        columns = key_index.file_columns(storage, base_file.path, base_file.size, ctx.needed_columns())
        index = key_index.load(storage, base_file.path, base_file.size)
    return _Slice(g, prior, own_rows, key(used), index, columns)


def _fast(s: _Slice, ordering: str) -> tuple[pa.Array, pa.Array, np.ndarray]:
    """(t's keys decided by comparison that t's record wins, the keys left to the merge, where
    each of t's versions is in the prior fold or -1)."""
    keys = s.group.keys
    own = s.own
    none = pa.array([], keys.type)
    if own is None or not own.num_rows or ordering not in own.column_names:
        return none, keys, np.zeros(0, dtype=np.int64)
    if len(pc.unique(own.column(KEY))) != own.num_rows:
        return none, keys, np.zeros(0, dtype=np.int64)  # a key twice in t: the merge orders them
    t_keys = own.column(KEY).combine_chunks()
    t_ord = own.column(ordering).combine_chunks()
    bad = pc.or_(pc.fill_null(own.column(DELETE).combine_chunks(), True), pc.is_null(t_ord))
    wins = pa.array(np.ones(len(t_keys), dtype=bool))
    prior_at = np.full(len(t_keys), -1, dtype=np.int64)
    if s.prior is not None and s.prior.rows.num_rows:
        prior_at = s.prior.index.find(t_keys)
        there = prior_at >= 0
        at = pa.array(np.where(there, prior_at, 0))
        rows = s.prior.rows
        l_ord = rows.column(ordering).take(at).combine_chunks()
        l_bad = pc.or_(pc.fill_null(rows.column(DELETE).take(at).combine_chunks(), True), pc.is_null(l_ord))
        bad = pc.or_(bad, pc.and_(pa.array(there), l_bad))
        beats = pc.fill_null(pc.greater_equal(t_ord, l_ord.cast(t_ord.type)), False)
        wins = pc.and_(wins, pc.or_(pa.array(~there), beats))
    if s.base_index is not None and s.base_columns.num_rows:
        if s.base_twice:
            return none, keys, prior_at
        b_pos = s.base_index.find(t_keys)
        there = b_pos >= 0
        at = pa.array(np.where(there, b_pos, 0))
        taken = s.base_columns.take(at)
        b_ord = taken.column(ordering).combine_chunks()
        b_bad = pc.or_(delete_flags(taken).combine_chunks(), pc.is_null(b_ord))
        bad = pc.or_(bad, pc.and_(pa.array(there), b_bad))
        beats = pc.fill_null(pc.greater_equal(t_ord, b_ord.cast(t_ord.type)), False)
        wins = pc.and_(wins, pc.or_(pa.array(~there), beats))
    bad = bad.to_numpy(zero_copy_only=False)
    wins = wins.to_numpy(zero_copy_only=False)
    # t's keys with no version of t here (none: the caller's keys are t's) go to the merge too.
    missing = pc.invert(pc.is_in(keys, value_set=t_keys))
    slow = pa.concat_arrays([t_keys.filter(pa.array(bad)), keys.filter(missing)])
    return t_keys.filter(pa.array(~bad & wins)), slow, prior_at


def _keep(s: _Slice, prior_at: np.ndarray, ctx: SliceReadContext) -> None:
    """Keep the log level after t: the prior fold with t's versions folded in. Every key here
    took the common path, where t's version wins the log level iff its ordering value is at
    least the prior winner's (ties go to t, the later arrival)."""
    own = s.own
    if own is None or not own.num_rows:
        return
    ordering = ctx.spec.ordering_field
    if s.prior is None or not s.prior.rows.num_rows:
        memo.ARROW.put(s.key, _Fold(own))
        return
    rows = s.prior.rows
    there = prior_at >= 0
    at = pa.array(np.where(there, prior_at, 0))
    l_ord = rows.column(ordering).take(at)
    t_ord = own.column(ordering).combine_chunks()
    loses = there & ~pc.fill_null(pc.greater_equal(t_ord, l_ord.cast(t_ord.type)), False) \
        .to_numpy(zero_copy_only=False)
    memo.ARROW.put(s.key, s.prior.appended(prior_at[there & ~loses], own.filter(pa.array(~loses))))


def _refold(s: _Slice, ctx: SliceReadContext) -> None:
    """Keep the log level after t for a slice some of whose keys took the merge: the prior fold
    and t's versions folded by the merge itself."""
    parts = [p for p in ((s.prior.rows if s.prior is not None else None), s.own) if p is not None and p.num_rows]
    if parts:
        memo.ARROW.put(s.key, _Fold(fold(parts, ctx)))


def _merged(s: _Slice, keys: pa.Array, ctx: SliceReadContext, t: str) -> Decision:
    """The reader's two-level merge before and after t, for ``keys``."""
    def pick(v: pa.Table | None) -> list[pa.Table]:
        if v is None:
            return []
        v = v.filter(pc.is_in(v.column(KEY), value_set=keys))
        return [v] if v.num_rows else []

    prior = pick(s.prior.rows if s.prior is not None else None)
    base = s.base_rows(keys)
    before = merge_logs_over_base(prior, base, ctx).select(NARROW)
    now = merge_logs_over_base(prior + pick(s.own), base, ctx).select(NARROW)
    return Decision(*_compare(before, now, t))


def _compare(before: pa.Table, now: pa.Table, t: str) -> tuple[pa.Array, pa.Array, pa.Array]:
    """Keys whose winner (key, commit time) differs between ``before`` and ``now``; of those,
    the ones ``t``'s own record wins now, and the ones an older record wins now."""
    joined = now.rename_columns([RECORD_KEY, "now"]).join(
        before.rename_columns([RECORD_KEY, "before"]), RECORD_KEY, join_type="full outer")
    same = pc.fill_null(pc.equal(joined.column("now"), joined.column("before")), False)
    changed = joined.filter(pc.invert(same))
    now_t = changed.column("now")
    mine = pc.fill_null(pc.equal(now_t, t), False)
    older = pc.and_(pc.is_valid(now_t), pc.invert(mine))
    keys = changed.column(RECORD_KEY).combine_chunks()
    return keys, keys.filter(mine.combine_chunks()), keys.filter(older.combine_chunks())
