"""The row orders of sorted clustering (Hudi's SpaceCurveSortingHelper): coordinates keep each
column's order, and the Z-order key is the coordinates' bits interleaved."""

from __future__ import annotations

import datetime as dt
import random

import numpy as np
import pyarrow as pa
import pytest

from lakehouse.config import CurveBuildMethod, LayoutStrategy
from lakehouse.errors import ConfigError
from lakehouse.services.clustering.space_curve import coordinate, interleave, row_order


@pytest.mark.parametrize("values", [
    pa.array([5, -3, 0, None, 2**40, -2**40, 7], pa.int64()),
    pa.array([1.5, -0.0, -7.25, None, 3e10, -3e10, 0.001]),
    pa.array(["b", "", "abcdefghZ", None, "abcdefgh", "a", "zz"]),
    pa.array([dt.date(2024, 1, 2), dt.date(1969, 12, 31), None, dt.date(2000, 6, 1)]),
    pa.array([dt.datetime(2024, 1, 2, 3), dt.datetime(1960, 1, 1), None], pa.timestamp("us", "UTC")),
    pa.array([True, None, False]),
])
@pytest.mark.parametrize("method", list(CurveBuildMethod))
def test_coordinates_keep_each_columns_order_with_nulls_last(values, method):
    c = coordinate(values, method)
    py = values.to_pylist()
    order = sorted(range(len(py)), key=lambda i: (py[i] is None, py[i] if py[i] is not None else 0))
    coords = [int(c[i]) for i in order]
    assert coords == sorted(coords)
    if method is CurveBuildMethod.SAMPLE:
        return
    # DIRECT: unlike values get unlike coordinates, except strings past their first 8 bytes.
    for i in range(len(py)):
        for j in range(len(py)):
            if py[i] is not None and py[j] is not None and py[i] < py[j] and not isinstance(py[i], str):
                assert c[i] < c[j]


def test_interleave_matches_bit_strings():
    rng = np.random.default_rng(5)
    cols = [rng.integers(0, 2**63, 50, dtype=np.uint64) * np.uint64(2) + np.uint64(rng.integers(0, 2)) for _ in range(3)]
    words = interleave(cols)
    for r in range(50):
        bits = "".join(f"{int(c[r]):064b}"[b] for b in range(64) for c in cols)
        got = "".join(f"{int(words[w][r]):064b}" for w in range(3))
        assert got == bits


def test_z_order_visits_a_grid_quadrant_by_quadrant():
    t = pa.table({"x": [x for x in range(4) for _ in range(4)], "y": [y for _ in range(4) for y in range(4)]})
    rows = t.take(row_order(t, ("x", "y"), LayoutStrategy.ZORDER, CurveBuildMethod.DIRECT)).to_pylist()
    seen = [(r["x"] // 2, r["y"] // 2) for r in rows]
    assert seen == sorted(seen, key=lambda q: seen.index(q))  # quadrants are contiguous runs
    assert [q for i, q in enumerate(seen) if i % 4 == 0] == [(0, 0), (0, 1), (1, 0), (1, 1)]


def test_linear_order_is_a_plain_sort_and_unknown_columns_or_types_are_refused():
    rng = random.Random(2)
    t = pa.table({"a": [rng.randrange(5) for _ in range(100)], "b": [rng.random() for _ in range(100)]})
    got = t.take(row_order(t, ("a", "b"), LayoutStrategy.LINEAR, CurveBuildMethod.DIRECT)).to_pylist()
    assert got == sorted(t.to_pylist(), key=lambda r: (r["a"], r["b"]))
    with pytest.raises(ConfigError, match="nope"):
        row_order(t, ("nope",), LayoutStrategy.LINEAR, CurveBuildMethod.DIRECT)
    lists = pa.table({"l": pa.array([[1], [2]])})
    with pytest.raises(ConfigError, match="cannot sort by a column of type"):
        row_order(lists, ("l", "l"), LayoutStrategy.ZORDER, CurveBuildMethod.DIRECT)
