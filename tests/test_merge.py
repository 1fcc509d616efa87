"""lakehouse.merge.resolve against a per-key model of Hudi's merge rules.

The model walks each key's versions in Python, one rule at a time, as the payload classes state
them; ``resolve`` decides on a few columns and copies whole rows once, so a wrong row mapping
(chunked input, rows a delete cuts off, the winners' take) shows up as a different winner or a
misplaced field.
"""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from lakehouse.columns import DELETE, KEY, SEQ, UNCONDITIONAL
from lakehouse.config import MergeMode
from lakehouse.merge import AFTER_CUT, MergeSpec, resolve

# (key, ordering value or None, delete, unconditional, payload)
version = st.tuples(st.sampled_from("abcde"), st.one_of(st.none(), st.integers(0, 4)), st.booleans(),
                    st.booleans(), st.integers(0, 10**6))


def _table(rows: list[tuple], chunk: int) -> pa.Table:
    t = pa.table({
        KEY: pa.array([r[0] for r in rows], pa.string()),
        "ts": pa.array([r[1] for r in rows], pa.int64()),
        "payload": pa.array([f"v{r[4]}" for r in rows], pa.string()),
        SEQ: pa.array(list(range(len(rows))), pa.int64()),
        DELETE: pa.array([r[2] for r in rows]),
        UNCONDITIONAL: pa.array([r[2] and r[3] for r in rows]),
    })
    batches = [t.slice(i, chunk) for i in range(0, t.num_rows, chunk)]
    return pa.concat_tables(batches)


def _model(rows: list[tuple], mode: MergeMode, keep_deletes: bool) -> tuple[dict, dict]:
    """Winner per key as (ordering, payload, delete), and AFTER_CUT per winner's key."""
    by_key: dict[str, list[tuple[int, tuple]]] = {}
    for seq, r in enumerate(rows):
        by_key.setdefault(r[0], []).append((seq, r))
    winners, after = {}, {}
    for k, vs in by_key.items():
        if mode is MergeMode.COMMIT_TIME_ORDERING:
            # OverwriteWithLatestAvroPayload: the last arrival, a delete included.
            seq, r = vs[-1]
        else:
            # DefaultHoodieRecordPayload: an unconditional delete (no ordering value) removes
            # every version before it; the rest compete on ordering value, a tie to the later.
            cuts = [s for s, r in vs if r[2] and r[3]]
            cut = max(cuts) if cuts else None
            alive = [(s, r) for s, r in vs if cut is None or s >= cut]

            def rank(item):
                s, r = item
                if r[2] and r[3]:
                    return (0, -1, s)
                return (1, -1, s) if r[1] is None else (2, r[1], s)
            seq, r = max(alive, key=rank)
            after[k] = cut is not None and seq > cut
        if r[2] and not keep_deletes:
            continue
        winners[k] = (r[1], f"v{r[4]}", r[2])
    return winners, after


@settings(max_examples=300, deadline=None)
@given(st.lists(version, min_size=1, max_size=40), st.integers(1, 7),
       st.sampled_from([MergeMode.EVENT_TIME_ORDERING, MergeMode.COMMIT_TIME_ORDERING]), st.booleans())
def test_resolve_matches_the_payload_rules(rows, chunk, mode, keep_deletes):
    """DefaultHoodieRecordPayload and OverwriteWithLatestAvroPayload, as the merge reads them."""
    out = resolve(_table(rows, chunk), MergeSpec(mode, "ts"), keep_deletes=keep_deletes)
    want, after = _model(rows, mode, keep_deletes)
    got = {k: (ts, p, d) for k, ts, p, d in zip(out.column(KEY).to_pylist(), out.column("ts").to_pylist(),
                                                out.column("payload").to_pylist(),
                                                out.column(DELETE).to_pylist())}
    assert got == want
    assert out.num_rows == len(want)  # one row per key
    any_cut = mode is MergeMode.EVENT_TIME_ORDERING and any(r[2] and r[3] for r in rows)
    assert (AFTER_CUT in out.column_names) == any_cut
    if any_cut:
        flags = dict(zip(out.column(KEY).to_pylist(), out.column(AFTER_CUT).to_pylist()))
        assert flags == {k: after[k] for k in want}


def test_resolve_keeps_every_column_and_its_type():
    rows = [("a", 1, False, False, 1), ("a", 3, False, False, 2), ("b", None, True, True, 3)]
    t = _table(rows, 2)
    out = resolve(t, MergeSpec(MergeMode.EVENT_TIME_ORDERING, "ts"), keep_deletes=True)
    assert out.schema.names == t.schema.names + [AFTER_CUT]
    assert [out.schema.field(n).type for n in t.schema.names] == list(t.schema.types)
    assert resolve(t.slice(0, 0), MergeSpec(MergeMode.EVENT_TIME_ORDERING, "ts")).num_rows == 0
