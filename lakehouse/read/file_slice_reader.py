"""Reading one file slice: its base file merged with the committed blocks of its log files.

Memory: the decoded log records a slice holds are bounded by ``hoodie.memory.merge.max.size``
(:class:`~lakehouse.config.MemoryConfig`). Past it the log files are read one at a time and the
held versions merged down to one per key, as Hudi's spillable map bounds its merged log records.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse.file_group.file_slice import BaseFile, FileSlice
from lakehouse.file_group.footer import read_footer
from lakehouse.config import MergeMode
from lakehouse.columns import DELETE, KEY, RECORD_KEY
from lakehouse.merge import (AFTER_CUT, IS_DELETED_FIELD, arrange_duplicate_base_keys, delete_flags,
                             drop_helpers, resolve)
from lakehouse.read.log_versions import visible_logs, with_helpers
from lakehouse.read.slice_context import SliceReadContext
from lakehouse.schema import conform_table
from lakehouse.storage.base import Storage
from lakehouse.storage.parquet import decode_dictionaries, iter_parquet, read_parquet, unreadable


def read_base_file(storage: Storage, path: str, schema: pa.Schema, columns: list[str] | None,
                   row_filter: pc.Expression | None = None, *, keep_dictionaries: bool = False,
                   copies: dict[str, str] | None = None, size: int | None = None) -> pa.Table:
    """A base file's rows in ``schema``'s types (``columns`` only, when given). With
    ``keep_dictionaries``, string columns of small dictionaries whose type the schema keeps stay
    dictionary-encoded (see :mod:`lakehouse.storage.parquet`): for a read that drops rows before
    :func:`~lakehouse.storage.parquet.decode_dictionaries` makes them plain."""
    keep_dictionaries = keep_dictionaries and row_filter is None
    table = next(iter_base_file(storage, path, schema, columns, None, keep_dictionaries=keep_dictionaries,
                                copies=copies, size=size))
    if row_filter is not None:
        table = table.filter(row_filter)
    return table


def iter_base_file(storage: Storage, path: str, schema: pa.Schema, columns: list[str] | None,
                   batch_rows: int | None, *, keep_dictionaries: bool = False,
                   copies: dict[str, str] | None = None, batch_bytes: int | None = None,
                   size: int | None = None) -> Iterator[pa.Table]:
    """:func:`read_base_file`'s rows ``batch_rows`` at a time, or about ``batch_bytes`` of
    memory at a time (both None: all at once, one table). ``size``: the file's, as listed."""
    try:
        with storage.open_input(path, size) as f:
            names = columns or schema.names
            if batch_rows is None and batch_bytes is None:
                yield _conform_base(read_parquet(f, names, keep_dictionaries=keep_dictionaries, copies=copies),
                                    schema, columns, keep_dictionaries)
                return
            for batch in iter_parquet(f, names, batch_rows, keep_dictionaries=keep_dictionaries, copies=copies,
                                      batch_bytes=batch_bytes):
                yield _conform_base(batch, schema, columns, keep_dictionaries)
    except (pa.ArrowInvalid, OSError) as e:
        if isinstance(e, FileNotFoundError):
            raise
        error = unreadable(storage, path, e)
        if error is e:
            raise
        raise error from e


def _conform_base(table: pa.Table, schema: pa.Schema, columns: list[str] | None, keep_dictionaries: bool) -> pa.Table:
    target = pa.schema([schema.field(c) for c in (columns or schema.names)])
    if keep_dictionaries and any(pa.types.is_dictionary(t) for t in table.schema.types):
        have = table.schema
        target = pa.schema([f.with_type(have.field(f.name).type)
                            if f.name in have.names and pa.types.is_dictionary(have.field(f.name).type)
                            and have.field(f.name).type.value_type == f.type else f for f in target])
    return conform_table(table, target, extra="ignore")


class LogKeys:
    """A slice's log record keys, hashed once: which base rows some log record touches, and
    which log records need the merge (their key has another version, in the logs or the base
    file); the others (new keys, written once: most of a log) are final as they are."""

    def __init__(self, logs: list[pa.Table]) -> None:
        keys = pa.chunked_array([c for t in logs for c in t.column(KEY).chunks], pa.string()).combine_chunks()
        encoded = pc.dictionary_encode(keys, null_encoding="encode")
        self.values = encoded.dictionary
        self.at = encoded.indices.to_numpy()
        self.in_base = np.zeros(len(self.values), dtype=bool)

    def touched(self, base_keys: pa.ChunkedArray | pa.Array) -> pa.Array:
        """Which of ``base_keys`` some log record has (and remember them)."""
        pos = pc.index_in(base_keys, value_set=self.values)
        if isinstance(pos, pa.ChunkedArray):
            pos = pos.combine_chunks()
        self.in_base[pos.drop_null().to_numpy()] = True
        return pos.is_valid()

    def special(self) -> np.ndarray:
        """Per log record (in the order of the slice's log tables): does it need the merge."""
        repeated = np.bincount(self.at, minlength=len(self.values)) > 1
        return (repeated | self.in_base)[self.at]


@dataclass
class SliceParts:
    """One file slice read but not yet merged: ``done`` when it has no visible log records (its
    rows as they are), else its base and log versions carrying the merge helper columns."""

    done: pa.Table | None = None  # final rows: no logs, or the base records no log touches
    base: pa.Table | None = None  # base records some log block touches, with helpers
    logs: list[pa.Table] = field(default_factory=list)
    special: np.ndarray | None = None  # LogKeys.special of ``logs`` (set whenever there are logs)


def read_file_slice(fs: FileSlice, ctx: SliceReadContext) -> pa.Table:
    """The visible records of a file slice, projected to ``ctx.columns`` and filtered."""
    return merge_slices([collect_slice(fs, ctx)], ctx)


def collect_slice(fs: FileSlice, ctx: SliceReadContext) -> SliceParts:
    """Read a file slice's base file and committed log blocks (the I/O and decoding, which run
    in parallel across slices); :func:`merge_slices` merges them."""
    base_file, logs, pinned = _slice_inputs(fs, ctx)
    log_keys = LogKeys(logs) if logs else None
    if base_file is None:
        if not logs:
            return SliceParts(done=ctx.schema.empty_table().select(ctx.columns or ctx.schema.names))
        return SliceParts(logs=logs, special=log_keys.special())
    done, hit = next(_base_pieces(base_file, log_keys, pinned, ctx, None))
    parts = SliceParts(done=done, logs=logs)
    if logs:
        parts.base = _touched_base(hit, ctx)
        parts.special = log_keys.special()
    return parts


def iter_file_slice(fs: FileSlice, ctx: SliceReadContext, batch_rows: int) -> Iterator[pa.Table]:
    """:func:`read_file_slice`'s rows in pieces, holding about one batch of ``batch_rows`` base
    records beside the slice's log records (themselves bounded by the merge budget), as Hudi's
    merged record iterators stream a base file past its log records held in a map: the base
    records no log block touches go out batch by batch, the merge of the others comes last."""
    base_file, logs, pinned = _slice_inputs(fs, ctx)
    log_keys = LogKeys(logs) if logs else None
    hits: list[pa.Table] = []
    if base_file is not None:
        for done, hit in _base_pieces(base_file, log_keys, pinned, ctx,
                                      None if pinned is not None else batch_rows):
            if done.num_rows:
                yield done
            if hit is not None and hit.num_rows:
                hits.append(hit)
    if logs:
        base = _touched_base(_concat(hits), ctx) if hits else None
        yield merge_slices([SliceParts(base=base, logs=logs, special=log_keys.special())], ctx)


def _slice_inputs(fs: FileSlice, ctx: SliceReadContext) -> tuple[BaseFile | None, list[pa.Table], pa.Array | None]:
    """A slice's base file (None when it has none or holds none of the pinned keys), its
    committed log versions with the merge helpers (held within the merge budget), and which base
    rows hold a pinned key (None: no keys pinned)."""
    base_file = fs.merged_base_file
    logs = visible_logs(fs.merged_log_files if ctx.read_logs else (), ctx)
    pinned = None if ctx.keys is None or ctx.key_of is not None else _pinned_rows(base_file, ctx)
    if pinned is not None and not pc.any(pinned).as_py():
        base_file = None  # holds none of the keys
    return base_file, logs, pinned


def _base_pieces(base_file: BaseFile, log_keys: LogKeys | None, pinned: pa.Array | None, ctx: SliceReadContext,
                 batch_rows: int | None) -> Iterator[tuple[pa.Table, pa.Table | None]]:
    """Per batch of the base file: its final rows (no log block touches them; deletes and the
    row filter applied, projected) and, with logs, the rows some log block touches (all needed
    columns, for the merge)."""
    out_cols = ctx.columns or ctx.schema.names
    # A read that drops rows (logs replacing base records, a filter, pinned keys) keeps
    # small-dictionary string columns as dictionaries until the rows it keeps are known: the
    # filters then copy their indices, not their strings, and only kept rows are made plain.
    drops = log_keys is not None or pinned is not None or ctx.row_filter is not None
    columns = None if ctx.columns is None and log_keys is None else ctx.needed_columns()
    for base in iter_base_file(ctx.storage, base_file.path, ctx.schema, columns, batch_rows,
                               keep_dictionaries=drops and ctx.key_of is None, copies=ctx.copies,
                               size=base_file.size):
        if pinned is not None:
            base = base.filter(pinned)
        hit = None
        if log_keys is not None:
            keys = ctx.record_keys(base)
            if pa.types.is_dictionary(keys.type):
                keys = keys.cast(keys.type.value_type)
            touched = log_keys.touched(keys)
            hit = decode_dictionaries(base.filter(touched))
            base = base.filter(pc.invert(touched))
        if IS_DELETED_FIELD in base.column_names:
            base = base.filter(pc.invert(delete_flags(base)))
        if ctx.row_filter is not None:
            base = base.filter(ctx.row_filter)
        yield decode_dictionaries(base.select(out_cols)), hit


def _touched_base(hit: pa.Table, ctx: SliceReadContext) -> pa.Table:
    return with_helpers(hit, ctx.record_keys(hit), 0, delete_flags(hit), pa.repeat(False, hit.num_rows))


def _pinned_rows(base_file, ctx: SliceReadContext) -> pa.Array | None:
    """Which rows of the base file hold one of ``ctx.keys``: all False, without reading the
    file, when its footer's key range and bloom filter rule every key out; else from its key
    column alone (the other columns are read only for a file that holds one)."""
    if base_file is None:
        return None
    if not read_footer(ctx.storage, base_file).might_contain(ctx.keys).any():
        return pa.array([], pa.bool_())
    keys = read_base_file(ctx.storage, base_file.path, ctx.schema, [RECORD_KEY], size=base_file.size).column(0)
    return pc.is_in(keys, value_set=ctx.keys).combine_chunks()


@dataclass(frozen=True)
class LogChanges:
    """What a slice's visible log records say, merged among themselves (no base file)."""

    rows: pa.Table  # the winning version of each key, deleted keys left out; helpers dropped
    keys: pa.Array  # every key a visible log record holds, deletes included


def read_log_changes(fs: FileSlice, ctx: SliceReadContext) -> LogChanges:
    """The visible log records of ``fs`` (its own logs and a pending compaction's previous
    slice's) merged among themselves. Under commit-time ordering the last arrival wins and every
    log record arrives after the base file, so for each of these keys ``rows`` is what a
    snapshot read shows whatever the base file holds (the Iceberg snapshot view's files of a
    delta commit, lakehouse.iceberg.overlay)."""
    out_cols = ctx.columns or ctx.schema.names
    logs = visible_logs(fs.merged_log_files, ctx)
    if not logs:
        return LogChanges(ctx.schema.empty_table().select(out_cols), pa.array([], pa.string()))
    versions = _concat(logs)
    keys = pc.unique(versions.column(KEY).combine_chunks())
    if ctx.spec.mode is MergeMode.PARTIAL_UPDATE:
        rows = _merge_partial(versions, None, ctx)
    else:
        rows = resolve(versions, ctx.spec)
    # Deleted winners (delete blocks, soft deletes) are already left out by the merge.
    rows = drop_helpers(rows.drop_columns([c for c in (AFTER_CUT,) if c in rows.column_names]))
    return LogChanges(rows.select(out_cols), keys)


def merge_over_base_rows(fs: FileSlice, base: pa.Table | None, ctx: SliceReadContext) -> pa.Table:
    """What a snapshot read of ``fs`` shows for the keys of its visible log records (deleted keys
    absent), given ``base``: the rows of the slice's base file holding those keys, in
    ``ctx.needed_columns()``, read by the caller (one that keeps a base file's keys and decodes
    only a few columns: the Iceberg snapshot view, under event-time ordering)."""
    return merge_logs_over_base(visible_logs(fs.merged_log_files, ctx), base, ctx)


def merge_logs_over_base(logs: list[pa.Table], base: pa.Table | None, ctx: SliceReadContext) -> pa.Table:
    """:func:`merge_over_base_rows` given the slice's log versions (with the merge helpers, as
    :func:`lakehouse.read.log_versions.visible_logs` gives them, or folded)."""
    target = pa.schema([ctx.schema.field(c) for c in ctx.needed_columns()])
    out_cols = ctx.columns or ctx.schema.names
    base = conform_table(base, target, extra="ignore") if base is not None else target.empty_table()
    if not logs:
        return base.filter(pc.invert(delete_flags(base))).select(out_cols)
    log_keys = LogKeys(logs)
    touched = log_keys.touched(ctx.record_keys(base))
    # Base rows no visible log record touches are final as they are (a soft delete aside).
    untouched = base.filter(pc.invert(touched))
    parts = SliceParts(done=untouched.filter(pc.invert(delete_flags(untouched))).select(out_cols), logs=logs,
                       base=_touched_base(base.filter(touched), ctx), special=log_keys.special())
    return merge_slices([parts], ctx)


def _scoped(table: pa.Table, scope: int) -> pa.Table:
    """KEY made unique to one file slice: a key merges only with its own slice's versions (two
    file groups may hold one key: an insert does not look keys up)."""
    i = table.schema.get_field_index(KEY)
    return table.set_column(i, KEY, pc.binary_join_element_wise(
        pa.scalar(f"{scope}"), table.column(KEY), "\x00"))


def merge_slices(slices: list[SliceParts], ctx: SliceReadContext) -> pa.Table:
    """Merge the collected slices, all at once: one vectorised merge over every slice with log
    records instead of one per slice (whose fixed cost dominated snapshot reads of many small
    file groups)."""
    out_cols = ctx.columns or ctx.schema.names
    done = [s.done for s in slices if s.done is not None]
    work = [s for s in slices if s.logs]
    if not work:
        return _concat(done) if done else ctx.schema.empty_table().select(out_cols)
    scope = len(work) > 1
    bases = [_scoped(s.base, i) if scope else s.base for i, s in enumerate(work) if s.base is not None]
    base_touched = pa.concat_tables(bases, promote_options="permissive") if bases else None
    if ctx.spec.mode is MergeMode.PARTIAL_UPDATE:
        log_parts = [_scoped(t, i) if scope else t for i, s in enumerate(work) for t in s.logs]
        merged = _merge_partial(pa.concat_tables(log_parts, promote_options="permissive"), base_touched, ctx)
        merged = [merged]
    else:
        merged = _merge(work, base_touched, ctx, scope)
    result_parts = list(done)
    for m in merged:
        m = drop_helpers(m)
        if ctx.row_filter is not None:
            m = m.filter(ctx.row_filter)
        result_parts.append(m.select(out_cols))
    return _concat(result_parts)


def _merge(work: list[SliceParts], base: pa.Table | None, ctx: SliceReadContext, scope: bool) -> list[pa.Table]:
    """Logs over base records, for every mode but partial update. Most log records are the only
    version of their key and have no base record (inserts): they are final as they are and go
    out in one filter per slice (:class:`LogKeys`); only the others are merged, with their base
    records, keyed per slice."""
    fresh, special = [], []
    for i, s in enumerate(work):
        logs = _concat(s.logs)
        need = s.special  # set with the logs by collect_slice and iter_file_slice
        deleted = pc.fill_null(logs.column(DELETE), False).to_numpy()
        fresh.append(logs.filter(pa.array(~need & ~deleted)))
        if need.any():
            chosen = logs.filter(pa.array(need))
            special.append(_scoped(chosen, i) if scope else chosen)
    if not special:
        return fresh
    work_rows = resolve(pa.concat_tables(special, promote_options="permissive"), ctx.spec, keep_deletes=True)
    work_rows = work_rows.drop_columns([c for c in (AFTER_CUT,) if c in work_rows.column_names])
    live = pc.invert(pc.fill_null(work_rows.column(DELETE), False))
    if base is None or not base.num_rows:
        return [work_rows.filter(live), *fresh]
    # Two levels, as Hudi's readers and compactor merge: the log blocks among themselves first
    # (above: a delete without ordering value cuts off what came before it in the logs), then
    # that result against the base record by ordering value. So a lower-ordered re-insert after
    # an unconditional delete loses to the base record, exactly as Java Hudi and hudi-rs read it.
    over_base = pc.is_in(work_rows.column(KEY), value_set=base.column(KEY).combine_chunks())
    base, over, extra = arrange_duplicate_base_keys(base, work_rows.filter(over_base), ctx.duplicate_base_keys)
    second = resolve(pa.concat_tables([base, over], promote_options="permissive"), ctx.spec)
    if extra is not None:
        second = pa.concat_tables([second, extra], promote_options="permissive")
    rest = work_rows.filter(pc.and_(pc.invert(over_base), live))
    return [second, rest, *fresh]


def _merge_partial(logs: pa.Table, base: pa.Table | None, ctx: SliceReadContext) -> pa.Table:
    """Partial update: every log version takes part (a field may come from any of them)."""
    logs_merged = resolve(logs, ctx.spec, keep_deletes=True)
    if base is None:
        return logs_merged.filter(pc.invert(pc.fill_null(logs_merged.column(DELETE), False)))
    in_base = pc.is_in(logs_merged.column(KEY), value_set=base.column(KEY).combine_chunks())
    fresh = logs_merged.filter(pc.invert(pc.or_(in_base, pc.fill_null(logs_merged.column(DELETE), False))))
    logs_merged = logs_merged.filter(in_base)
    if AFTER_CUT in logs_merged.column_names:
        # A partial record re-inserted after a delete must not inherit the deleted fields.
        cut_keys = logs_merged.filter(pc.fill_null(logs_merged.column(AFTER_CUT), False)).column(KEY)
        base = base.filter(pc.invert(pc.is_in(base.column(KEY), value_set=cut_keys.combine_chunks())))
    after_cut = [c for c in (AFTER_CUT,) if c in logs_merged.column_names]
    merged = resolve(pa.concat_tables([base, logs_merged.drop_columns(after_cut)],
                                      promote_options="permissive"), ctx.spec)
    return pa.concat_tables([merged, fresh.drop_columns([c for c in after_cut if c in fresh.column_names])],
                            promote_options="permissive")


def _concat(tables: list[pa.Table]) -> pa.Table:
    return tables[0] if len(tables) == 1 else pa.concat_tables(tables, promote_options="permissive")
