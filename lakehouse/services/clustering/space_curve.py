"""The row order a sorted clustering writes (Hudi's layout optimization, SpaceCurveSortingHelper).

LINEAR sorts by the sort columns, the first most significant: a range filter on the first column
reads few files, on the others many. ZORDER sorts by a Z-order curve: each column's value becomes
a 64-bit coordinate and the coordinates' bits are interleaved, most significant first, so that
rows close in every column sit close together and files cover small boxes of the value space.

The coordinates (``hoodie.layout.optimize.curve.build.method``):

- DIRECT: from the values themselves, order-preserving (integers and times with the sign bit
  flipped, floats by their IEEE bits, strings and binaries by their first 8 bytes). A column
  whose values differ only in low bits then weighs little against one that spans its range.
- SAMPLE: from the values' ranks among the rows clustered, scaled to the same number of bits for
  every column, so each column weighs alike whatever its values (Hudi samples range boundaries;
  here every row is at hand and ranks are exact).

Nulls sort last on every column, as Hudi's curves place them.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse.config import CurveBuildMethod, LayoutStrategy
from lakehouse.errors import ConfigError

_SIGN = np.uint64(1 << 63)
_ALL = np.uint64(0xFFFFFFFFFFFFFFFF)


def row_order(table: pa.Table, columns: tuple[str, ...], layout: LayoutStrategy,
              method: CurveBuildMethod) -> np.ndarray:
    """The indices that put ``table``'s rows in the clustering's order."""
    missing = [c for c in columns if c not in table.column_names]
    if missing:
        raise ConfigError(f"the clustering sorts by {', '.join(missing)}, which the data does not have",
                          help="fix hoodie.clustering.plan.strategy.sort.columns and schedule again")
    if layout is LayoutStrategy.LINEAR or len(columns) == 1 and method is CurveBuildMethod.DIRECT:
        # Nulls last: Arrow's default placement (saying so is deprecated in pyarrow 25).
        keys = [(c, "ascending") for c in columns]
        return pc.sort_indices(table, sort_keys=keys).to_numpy()
    coords = [coordinate(table.column(c), method) for c in columns]
    words = interleave(coords)
    return np.lexsort(words[::-1])


def coordinate(values: pa.ChunkedArray | pa.Array, method: CurveBuildMethod) -> np.ndarray:
    """Each value's coordinate on the curve (uint64, order-preserving; nulls last)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if method is CurveBuildMethod.SAMPLE:
        return _rank_coordinate(values)
    t = values.type
    if pa.types.is_dictionary(t):
        return coordinate(values.cast(t.value_type), method)
    if pa.types.is_boolean(t):
        out = values.cast(pa.uint64()).fill_null(0).to_numpy().astype(np.uint64) << np.uint64(63)
    elif pa.types.is_integer(t) or pa.types.is_temporal(t):
        ints = values.cast(pa.int64()) if not pa.types.is_temporal(t) else values.view(_int_of(t)).cast(pa.int64())
        out = ints.fill_null(0).to_numpy().astype(np.int64).view(np.uint64) ^ _SIGN
    elif pa.types.is_floating(t) or pa.types.is_decimal(t):
        f = values.cast(pa.float64()).fill_null(0.0).to_numpy().astype(np.float64)
        bits = f.view(np.uint64)
        out = np.where(bits & _SIGN, ~bits & _ALL, bits | _SIGN).astype(np.uint64)
    elif pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) \
            or pa.types.is_large_binary(t):
        out = _prefix_bytes(values)
    else:
        raise ConfigError(f"a clustering cannot sort by a column of type {t}",
                          help="sort by numeric, temporal, string or binary columns")
    if values.null_count:
        out = np.where(values.is_null().to_numpy(zero_copy_only=False), _ALL, out)
    return out.astype(np.uint64)


def _int_of(t: pa.DataType) -> pa.DataType:
    return pa.int32() if t.bit_width == 32 else pa.int64()


def _rank_coordinate(values: pa.Array) -> np.ndarray:
    """Dense ranks (nulls last) spread over the whole coordinate range: a column with few
    distinct values gets as many leading bits as one with many."""
    ranks = pc.rank(values, sort_keys="ascending", tiebreaker="dense").to_numpy().astype(np.uint64)
    if not len(ranks):
        return ranks
    top = int(ranks.max())
    scaled = (ranks - np.uint64(1)) * np.uint64(1 << 32) // np.uint64(top)
    return scaled << np.uint64(32)


def _prefix_bytes(values: pa.Array) -> np.ndarray:
    """The first 8 bytes of each value, big-endian (shorter values padded with zeros)."""
    if pa.types.is_large_string(values.type) or pa.types.is_large_binary(values.type):
        values = values.cast(pa.binary() if pa.types.is_large_binary(values.type) else pa.string())
    n = len(values)
    if n == 0:
        return np.zeros(0, dtype=np.uint64)
    offsets = np.frombuffer(values.buffers()[1], dtype=np.int32, count=n + 1, offset=values.offset * 4)
    data = values.buffers()[2]
    data = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, np.uint8)
    starts = offsets[:-1].astype(np.int64)
    lengths = (offsets[1:] - offsets[:-1]).astype(np.int64)
    out = np.zeros(n, dtype=np.uint64)
    for i in range(8):
        has = lengths > i
        byte = np.zeros(n, dtype=np.uint64)
        byte[has] = data[starts[has] + i]
        out |= byte << np.uint64(56 - 8 * i)
    return out


def interleave(coords: list[np.ndarray]) -> np.ndarray:
    """The Z-order key of each row: the coordinates' bits interleaved, most significant first,
    as ``len(coords)`` uint64 words per row (the first word most significant)."""
    k = len(coords)
    n = len(coords[0]) if coords else 0
    words = np.zeros((k, n), dtype=np.uint64)
    one = np.uint64(1)
    for b in range(63, -1, -1):
        for j, c in enumerate(coords):
            g = (63 - b) * k + j  # the bit's place in the key, 0 the most significant
            bit = (c >> np.uint64(b)) & one
            words[g // 64] |= bit << np.uint64(63 - g % 64)
    return words
