"""pyiceberg as the independent reader of the published metadata, and the comparisons the tests
make between what it reads and what lakehouse (or hudi-rs, or an in-memory model) reads."""

from __future__ import annotations

import pyarrow as pa
import pytest

pytest.importorskip("pyiceberg", reason="pyiceberg is the reference Iceberg reader")

from pyiceberg.table import StaticTable  # noqa: E402

from lakehouse.config import IcebergConfig, IcebergView  # noqa: E402
from lakehouse.iceberg import SyncResult, sync_iceberg  # noqa: E402
from lakehouse.table import Table  # noqa: E402
from lakehouse.timeline.instant_time import parse_instant_time  # noqa: E402


def static_table(location: str | SyncResult) -> StaticTable:
    if isinstance(location, SyncResult):
        location = location.metadata_location
    return StaticTable.from_metadata(location)


def iceberg_read(location: str | SyncResult, snapshot_id: int | None = None,
                 row_filter: str | None = None) -> pa.Table:
    st = static_table(location)
    kw = {} if row_filter is None else {"row_filter": row_filter}
    return st.scan(snapshot_id=snapshot_id, **kw).to_arrow()


def _plain_type(t: pa.DataType) -> pa.DataType:
    """Arrow types up to string width and timezone spelling, which readers choose freely."""
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return pa.binary()
    if pa.types.is_timestamp(t) and t.tz is not None:
        return pa.timestamp(t.unit, tz="UTC")
    if pa.types.is_large_list(t) or pa.types.is_list(t):
        return pa.list_(pa.field("element", _plain_type(t.value_type)))
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _plain_type(f.type)) for f in t])
    if pa.types.is_map(t):
        return pa.map_(_plain_type(t.key_type), _plain_type(t.item_type))
    return t


def by_key(table: pa.Table | None) -> list[dict]:
    if table is None:
        return []
    return sorted(table.to_pylist(), key=lambda r: (r["_hoodie_record_key"], r["_hoodie_commit_time"]))


def assert_same_table(ice: pa.Table, ours: pa.Table, what: str) -> None:
    """Same columns in the same order, same types (up to width), same rows."""
    assert ice.column_names == ours.column_names, f"{what}: columns {ice.column_names} != {ours.column_names}"
    for a, b in zip(ice.schema, ours.schema):
        assert _plain_type(a.type) == _plain_type(b.type), f"{what}: column {a.name}: {a.type} != {b.type}"
    a, b = by_key(ice), by_key(ours)
    assert len(a) == len(b), f"{what}: {len(a)} rows from pyiceberg, {len(b)} from lakehouse"
    assert a == b, f"{what}: rows differ"


def shows_read_optimized(table: Table) -> bool:
    """Whether the table's Iceberg metadata shows its read-optimized view (a Merge-On-Read
    table published with hoodie.meta.sync.iceberg.view=read_optimized) rather than its snapshot."""
    return table.config.is_mor and \
        IcebergConfig.from_options(table.meta_client.options(None, "iceberg")).view is IcebergView.READ_OPTIMIZED


def view_read(table: Table, **kw) -> pa.Table:
    """What the table's Iceberg metadata shows, read by lakehouse."""
    return table.read(read_optimized=shows_read_optimized(table), **kw)


def daft_read(location: str | SyncResult) -> pa.Table:
    """The current snapshot as Daft reads it: by parquet field ids only (Daft ignores the name
    mapping), so it reads only files that carry the published schema's ids."""
    daft = pytest.importorskip("daft", reason="Daft is the Iceberg reader without name mapping (pip install -e '.[dev]')")
    return daft.read_iceberg(static_table(location)).to_arrow()


def sync_and_compare(table: Table, what: str, *, daft: bool = True) -> SyncResult:
    """Publish, then check pyiceberg's (and, for tables lakehouse wrote, Daft's) current read
    against lakehouse's read of the view the metadata shows."""
    res = sync_iceberg(table)
    assert res.metadata_location is not None
    ours = view_read(table)
    assert_same_table(iceberg_read(res), ours, what)
    if daft:
        assert_same_table(daft_read(res), ours, f"{what} (Daft)")
    return res


def assert_every_snapshot_is_its_instant(table: Table, location: str | SyncResult) -> dict[str, int]:
    """Each snapshot names one distinct completed instant, and time travel to it reads what
    lakehouse's read of the view as of that instant reads. Returns instant -> snapshot id."""
    st = static_table(location)
    completed = {i.time for i in table.timeline.completed_writes()}
    mapping: dict[str, int] = {}
    for snap in st.metadata.snapshots:
        inst = snap.summary["hudi.instant"]
        assert inst not in mapping, f"instant {inst} has two snapshots"
        assert inst in completed, f"snapshot {snap.snapshot_id} names {inst}, not a completed write"
        mapping[inst] = snap.snapshot_id
        assert_same_table(st.scan(snapshot_id=snap.snapshot_id).to_arrow(),
                          view_read(table, as_of=inst), f"snapshot of {inst}")
    # "As of a time" in Iceberg is "as of that instant" in Hudi: snapshots carry instant times.
    for inst, sid in mapping.items():
        ms = int(parse_instant_time(inst).timestamp() * 1000)
        if st.metadata.snapshot_by_id(sid).timestamp_ms == ms:
            assert st.snapshot_as_of_timestamp(ms).snapshot_id == sid
    current = st.metadata.current_snapshot_id
    if mapping:
        assert current == mapping[max(mapping, key=lambda i: st.metadata.snapshot_by_id(mapping[i]).sequence_number)]
    return mapping


# These tests drive sync_iceberg themselves; the post-commit publishing (tested in
# test_iceberg_hook.py) would otherwise have done each sync before they call it.
MANUAL_SYNC = {"hoodie.meta.sync.iceberg.enabled": "false"}


def published(table) -> None:
    """Wait for the table's background Iceberg publisher (hoodie.meta.sync.iceberg.async, on
    by default): the commits this process completed are then published."""
    from lakehouse.iceberg import background
    assert background.wait(table.storage.uri(), timeout=120), "the Iceberg publisher did not finish"
