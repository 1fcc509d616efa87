"""The `hudi` PyPI package (hudi-rs 0.5.0) as an independent reader to compare against."""

from __future__ import annotations

import pyarrow as pa
import pytest

hudi = pytest.importorskip("hudi", reason="the hudi package (hudi-rs) is the reference reader")


def hudi_read(path, *, as_of: str | None = None, read_optimized: bool = False,
              incremental: tuple[str, str | None] | None = None) -> pa.Table | None:
    table = hudi.HudiTableBuilder.from_base_uri(str(path)).build()
    opts = hudi.HudiReadOptions(hudi_options={"hoodie.read.use.read_optimized.mode": "true"}
                                if read_optimized else None)
    if as_of is not None:
        opts = opts.with_as_of_timestamp(as_of)
    if incremental is not None:
        opts = opts.with_query_type(hudi.HudiQueryType.Incremental).with_start_timestamp(incremental[0])
        if incremental[1] is not None:
            opts = opts.with_end_timestamp(incremental[1])
    batches = table.read(opts)
    return pa.Table.from_batches(batches) if batches else None


def canonical(table: pa.Table | None, columns: list[str] | None = None) -> list[dict]:
    """Rows as sorted plain dicts, so two readers' results compare independent of order/types."""
    if table is None:
        return []
    if columns is not None:
        table = table.select([c for c in columns if c in table.column_names])
    rows = table.to_pylist()
    return sorted(rows, key=lambda r: repr(sorted(r.items(), key=lambda kv: kv[0])))


def assert_same_rows(ours: pa.Table, theirs: pa.Table | None, what: str) -> None:
    theirs_cols = theirs.column_names if theirs is not None else ours.column_names
    cols = [c for c in ours.column_names if c in theirs_cols]
    if theirs is not None:
        missing = set(theirs.column_names) - set(ours.column_names)
        assert not missing, f"{what}: hudi returns columns we do not: {missing}"
    a, b = canonical(ours, cols), canonical(theirs, cols)
    assert len(a) == len(b), f"{what}: {len(a)} rows here, {len(b)} from hudi"
    assert a == b, f"{what}: rows differ"
