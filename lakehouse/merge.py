"""Record merging under a table's merge mode, vectorised over Arrow.

All versions of the records being merged sit in one table with three helper columns: the record
key, an arrival sequence (base file first, then log blocks in order, then rows in order) and a
delete flag. The winner per key is then found with one sort, the same way for a reader merging
base and log files and for a writer pre-combining duplicates in a batch:

* commit-time ordering: the last arrival wins.
* event-time ordering: the highest ordering value wins, a tie goes to the later arrival. A delete
  without an ordering value (Hudi's ``IntWrapper(0)``) removes every earlier version whatever its
  ordering value; later versions may bring the record back.
* partial update: as event-time ordering, but a null field of the winner takes the value of the
  latest version below it that has one (PartialUpdateAvroPayload).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse.columns import DELETE, IS_DELETED, KEY, META_FIELDS, SEQ, UNCONDITIONAL
from lakehouse.config import MergeMode

RANK = "__lh_rank"
_ROW = "__lh_row"  # a version's row in the table being merged; never leaves resolve
AFTER_CUT = "__lh_after_cut"  # set on versions that follow an unconditional delete of their key
HELPER_COLUMNS = (KEY, SEQ, DELETE, UNCONDITIONAL, AFTER_CUT)
IS_DELETED_FIELD = IS_DELETED


@dataclass(frozen=True)
class MergeSpec:
    mode: MergeMode
    ordering_field: str | None

    @property
    def uses_ordering(self) -> bool:
        return self.mode is not MergeMode.COMMIT_TIME_ORDERING and self.ordering_field is not None


def _last_of_each_run(keys: pa.Array) -> np.ndarray:
    """Positions of the last element of every run of equal keys in a sorted array."""
    n = len(keys)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    if n == 1:
        return np.zeros(1, dtype=np.int64)
    differs = pc.not_equal(keys.slice(0, n - 1), keys.slice(1)).to_numpy(zero_copy_only=False)
    last = np.flatnonzero(differs)
    return np.append(last, n - 1)


def _forward_fill_in_groups(col: pa.Array, group_start: np.ndarray) -> pa.Array:
    """Fill nulls from the nearest earlier non-null value in the same group (sorted order)."""
    if col.null_count == 0:
        return col
    n = len(col)
    valid = ~col.is_null().to_numpy(zero_copy_only=False)
    idx = np.where(valid, np.arange(n), -1)
    np.maximum.accumulate(idx, out=idx)
    # A fill from before the group's first row would leak another key's value.
    idx = np.where(idx >= group_start, idx, np.arange(n))
    return col.take(pa.array(idx))


def resolve(versions: pa.Table, spec: MergeSpec, *, keep_deletes: bool = False) -> pa.Table:
    """The winning version of each key. Helper columns stay on the result.

    ``versions`` must carry KEY, SEQ and DELETE; UNCONDITIONAL is optional (default: deletes
    without an ordering value are unconditional).
    """
    if versions.num_rows == 0:
        return versions
    ordering = spec.ordering_field if spec.uses_ordering else None
    if ordering is not None and ordering not in versions.column_names:
        ordering = None
    if spec.mode is MergeMode.PARTIAL_UPDATE:
        return _resolve_partial(versions, ordering, keep_deletes)
    # Every other mode decides on a few columns (key, sequence, ordering value, delete flags)
    # and copies whole rows once, for the winners: a full-width filter of the versions a delete
    # cuts off, then a take of the survivors, cost a copy of every column twice.
    narrow = _deciding(versions, ordering)
    after = None
    if ordering is not None:
        narrow, after = _cut(narrow, ordering)
        narrow = narrow.append_column(RANK, _rank(narrow, ordering))
    sort_keys = _sort_keys(ordering)
    order = pc.sort_indices(narrow.select([k for k, _ in sort_keys]), sort_keys=sort_keys)
    last = _last_of_each_run(narrow.column(KEY).combine_chunks().take(order))
    winners_at = order.take(pa.array(last))
    if not keep_deletes:
        live = pc.invert(pc.fill_null(narrow.column(DELETE).combine_chunks().take(winners_at), False))
        winners_at = winners_at.filter(live)
    pick = narrow.column(_ROW).combine_chunks().take(winners_at)
    winners = versions.take(pick)
    if after is not None:
        winners = winners.append_column(AFTER_CUT, after.take(pick))
    return winners


def _deciding(versions: pa.Table, ordering: str | None) -> pa.Table:
    """The columns that decide a merge (key, sequence, delete flags, ordering value), in one
    chunk each, and each version's row in ``versions``."""
    decide = [c for c in (KEY, SEQ, DELETE, UNCONDITIONAL, ordering) if c and c in versions.column_names]
    row = pa.array(np.arange(versions.num_rows, dtype=np.int64))
    return versions.select(decide).combine_chunks().append_column(_ROW, row)


def _sort_keys(ordering: str | None) -> list[tuple[str, str]]:
    """Versions of a key in merge order, the winner last: by rank, ordering value and arrival
    under event-time ordering, by arrival alone otherwise."""
    if ordering is None:
        return [(KEY, "ascending"), (SEQ, "ascending")]
    return [(KEY, "ascending"), (RANK, "ascending"), (ordering, "ascending"), (SEQ, "ascending")]


def _unconditional(table: pa.Table, ordering: str) -> pa.ChunkedArray:
    """Deletes that remove every earlier version whatever its ordering value: those flagged so,
    or (no flag column) deletes without an ordering value."""
    uncond = (table.column(UNCONDITIONAL) if UNCONDITIONAL in table.column_names
              else pc.and_(table.column(DELETE), pc.is_null(table.column(ordering))))
    return pc.fill_null(uncond, False)


def _cut(table: pa.Table, ordering: str) -> tuple[pa.Table, pa.Array | None]:
    """``table`` without the versions an unconditional delete of their key cuts off (those that
    arrived before the key's last one), and, when a delete cut anything, an AFTER_CUT flag per
    row of the input (set on the versions that arrived after the cut)."""
    uncond = _unconditional(table, ordering)
    if not pc.any(uncond).as_py():
        return table, None
    cut = table.select([KEY, SEQ]).filter(uncond).group_by(KEY).aggregate([(SEQ, "max")])
    # Look each row's cut up by key (a hash join would have to carry every data column,
    # which Acero cannot do for nested types).
    idx = pc.index_in(table.column(KEY), value_set=cut.column(KEY))
    cut_seq = cut.column(f"{SEQ}_max").take(idx)
    seq = table.column(SEQ)
    keep = pc.or_kleene(pc.is_null(cut_seq), pc.greater_equal(seq, cut_seq))
    after = pc.fill_null(pc.greater(seq, cut_seq), False)
    if isinstance(after, pa.ChunkedArray):
        after = after.combine_chunks()
    return table.filter(keep), after


def _rank(table: pa.Table, ordering: str):
    """A cutting delete lowest, then versions without an ordering value, then the rest."""
    rank = pc.if_else(pc.is_valid(table.column(ordering)), pa.scalar(2, pa.int8()), pa.scalar(1, pa.int8()))
    uncond = _unconditional(table, ordering)
    if pc.any(uncond).as_py():
        # The cutting delete itself must lose to anything that arrives after it.
        rank = pc.if_else(uncond, pa.scalar(0, pa.int8()), rank)
    return rank


def _resolve_partial(versions: pa.Table, ordering: str | None, keep_deletes: bool) -> pa.Table:
    """Partial update: every version's fields take part, so the whole rows are sorted."""
    table = versions
    if ordering is not None:
        kept, after = _cut(_deciding(table, ordering), ordering)
        if after is not None:
            table = table.append_column(AFTER_CUT, after).take(kept.column(_ROW))
        table = table.append_column(RANK, _rank(table, ordering))

    order = pc.sort_indices(table, sort_keys=_sort_keys(ordering))
    table = table.take(order).combine_chunks()
    if RANK in table.column_names:
        table = table.drop_columns([RANK])
    keys = table.column(KEY).chunk(0) if table.column(KEY).num_chunks else pa.array([], pa.string())
    last = _last_of_each_run(keys)

    # A null field of the winner takes the value of the latest version below it that has one.
    starts = np.zeros(table.num_rows, dtype=np.int64)
    first = np.concatenate([[0], last[:-1] + 1])
    starts[first] = first
    np.maximum.accumulate(starts, out=starts)
    # Deleted versions break the chain: nothing before a delete may fill the record after it.
    dele = table.column(DELETE).chunk(0).to_numpy(zero_copy_only=False).astype(bool)
    group_first = starts.copy()
    if dele.any():
        brk = np.where(dele, np.arange(table.num_rows), -1)
        np.maximum.accumulate(brk, out=brk)
        starts = np.maximum(starts, brk)
        # Versions after a delete of their key must not inherit fields from older layers
        # either (the caller merges the base file under them).
        after_delete = pa.array(brk >= group_first)
        if AFTER_CUT in table.column_names:
            after_delete = pc.or_(pc.fill_null(table.column(AFTER_CUT), False), after_delete)
            table = table.drop_columns([AFTER_CUT])
        table = table.append_column(AFTER_CUT, after_delete)
    cols = []
    for name in table.column_names:
        col = table.column(name).chunk(0) if table.column(name).num_chunks else table.column(name)
        if name in HELPER_COLUMNS or name in (ordering, RANK):
            cols.append(col)
        else:
            cols.append(_forward_fill_in_groups(col, starts))
    table = pa.Table.from_arrays(cols, schema=table.schema)

    winners = _metadata_of_latest_arrival(table, table.take(pa.array(last)))
    if not keep_deletes:
        winners = winners.filter(pc.invert(pc.fill_null(winners.column(DELETE), False)))
    return winners


def _metadata_of_latest_arrival(versions: pa.Table, winners: pa.Table) -> pa.Table:
    """Hudi's PartialUpdateAvroPayload.mergeDisorderRecordsWithMetadata: when a record arriving
    later carries a lower ordering value, the merged record keeps the older record's fields but
    takes the meta fields (commit time, sequence number, ...) of the record that arrived last,
    so incremental reads see the change. ``versions`` is sorted by key, ``winners`` has one row
    per key in the same order."""
    meta = [c for c in META_FIELDS if c in winners.column_names]
    if not meta or winners.num_rows == 0:
        return winners
    arrivals = versions.filter(pc.invert(pc.fill_null(versions.column(DELETE), False)))
    arrivals = arrivals.select([KEY, SEQ, *meta]).sort_by([(KEY, "ascending"), (SEQ, "ascending")])
    keys = arrivals.column(KEY).combine_chunks()
    latest = arrivals.take(pa.array(_last_of_each_run(keys)))
    # Winners that are deletes have no live version to take from: match by key.
    pos = pc.index_in(winners.column(KEY), value_set=latest.column(KEY).combine_chunks())
    found = pc.is_valid(pos)
    for c in meta:
        newer = latest.column(c).take(pos)
        col = pc.if_else(found, pc.coalesce(newer, winners.column(c)), winners.column(c))
        winners = winners.set_column(winners.schema.get_field_index(c), c, col)
    return winners


def drop_helpers(table: pa.Table) -> pa.Table:
    return table.drop_columns([c for c in HELPER_COLUMNS if c in table.column_names])


def delete_flags(table: pa.Table) -> pa.ChunkedArray:
    """Soft deletes: a true ``_hoodie_is_deleted`` marks the record as a delete."""
    if IS_DELETED_FIELD in table.column_names:
        return pc.fill_null(pc.cast(table.column(IS_DELETED_FIELD), pa.bool_()), False)
    return pa.chunked_array([pa.repeat(False, table.num_rows)], pa.bool_()) if table.num_rows \
        else pa.chunked_array([], pa.bool_())


def arrange_duplicate_base_keys(base: pa.Table, over: pa.Table, how: str
                                ) -> tuple[pa.Table, pa.Table, pa.Table | None]:
    """Base versions and the newer versions over them (KEY, SEQ, DELETE on both), arranged so
    that one :func:`resolve` of their concatenation gives Hudi's answer for a key a base file
    holds more than once (an insert with hoodie.combine.before.insert=false, a bulk insert of
    duplicates). Returns (base, over, passed): ``passed`` the copies to add to the result as
    they are.

    ``how="first"``: the newer version merges with the key's first copy in the file, later
    copies pass unmerged (a snapshot read: Spark's RecordMergingFileIterator and
    HoodieKeyBasedFileGroupRecordBuffer remove a log record from their map once used; hudi-rs
    0.5 does the same). ``how="each"``: it merges with every copy on its own, each keeping its
    place (HoodieMergeHandle.write, which looks each old record up without removing the new
    one: COW upserts and 0.14/0.15 compaction)."""
    n = base.num_rows
    if n == 0:
        return base, over, None
    keys = base.column(KEY).combine_chunks()
    if len(pc.unique(keys)) == n:
        return base, over, None
    pos = pa.array(np.arange(n, dtype=np.int64))
    firsts = pa.table({"k": keys, "i": pos}).group_by("k", use_threads=False).aggregate([("i", "min")])
    later = pc.not_equal(pos, firsts.column("i_min").take(pc.index_in(keys, value_set=firsts.column("k"))))
    if how == "first":
        passed = base.filter(later)
        passed = passed.filter(pc.invert(pc.fill_null(passed.column(DELETE), False)))
        return base.filter(pc.invert(later)), over, passed
    # "each": every later copy becomes a key of its own, with a copy of the newer version over it.
    own = pc.if_else(later, pc.binary_join_element_wise(keys, pc.cast(pos, pa.string()), "\x00"), keys)
    base = base.set_column(base.schema.get_field_index(KEY), KEY, own)
    idx = pc.index_in(keys.filter(later), value_set=over.column(KEY).combine_chunks())
    has = pc.is_valid(idx)
    copies = over.take(idx.filter(has))
    copies = copies.set_column(copies.schema.get_field_index(KEY), KEY, own.filter(later).filter(has))
    return base, pa.concat_tables([over, copies], promote_options="permissive"), None
