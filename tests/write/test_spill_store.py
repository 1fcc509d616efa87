"""The spill's local files (lakehouse.write.spill_store)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from lakehouse.write.spill_store import Spill


def test_the_spill_gives_each_group_its_rows_in_the_order_they_came():
    """Blocks of many groups (a chunk's rows in group order, as route_chunk makes them) and
    single parts go to runs of an eighth of the budget; a group reads back as its rows in the
    order added, across runs, whatever other groups came between."""
    rng = np.random.default_rng(11)
    expected: dict = {}
    with Spill(64 << 10) as sp:
        for chunk in range(12):
            n = 600
            grp = rng.integers(0, 40, n)
            t = pa.table({"g": grp, "v": np.arange(chunk * n, (chunk + 1) * n)})
            order = np.argsort(grp, kind="stable")
            t = t.take(pa.array(order))
            g = t.column("g").to_numpy()
            starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]]).tolist()
            ends = starts[1:] + [n]
            sp.add_block(t, [("k", int(g[a])) for a in starts], starts, ends)
            for a, b in zip(starts, ends):
                expected.setdefault(("k", int(g[a])), []).extend(t.column("v").to_pylist()[a:b])
            sp.add(("one", 0), pa.table({"g": [99], "v": [-chunk]}))
            expected.setdefault(("one", 0), []).append(-chunk)
        sp.finish()
        assert sorted(sp.groups) == sorted(expected)
        assert len({r for flat in sp.runs.values() for r in flat[0::3]}) > 3  # several runs
        for group, values in expected.items():
            assert sp.read(group).column("v").to_pylist() == values
            assert [v for b in sp.batches(group, ["v"]) for v in b.column(0).to_pylist()] == values
