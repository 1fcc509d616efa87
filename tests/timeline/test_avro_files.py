"""Avro timeline files: our schemas against Hudi's, our files against real Hudi files, and the
ways a damaged file fails."""

from __future__ import annotations

import io
import json
import random
from typing import Any

import fastavro
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakehouse.errors import CorruptFileError, SchemaError
from lakehouse.timeline.avro_files import (
    ActionInstant, AvroKind, CleanerPlan, CleanFileInfo, CleanMetadata, CleanPartitionMetadata,
    CompactionOperation, CompactionPlan, CompactionStrategy, InstantInfo, RequestedReplaceMetadata,
    RollbackMetadata, RollbackPartitionMetadata, RollbackPlan, RollbackRequest, deserialize,
    serialize)
from lakehouse.timeline.avro_schemas import parsed_schema, schema

ROLLBACK_TABLE = "sample_table/mor/parquet/v6_nonpartitioned_rollback"
OVERWRITE_TABLE = "sample_table/cow/v6_simplekeygen_nonhivestyle_overwritetable"
V8_TRIPS_TABLE = "quickstart_trips_table/mor/avro/v8_trips_8i3u1d"


# --- reference schemas -------------------------------------------------------------------------

def _normalized(node: Any) -> Any:
    """A Hudi .avsc without what readers ignore: ``avro.java.string`` and ``doc``. Dropping the
    annotation leaves ``{"type": "string"}``, which is the same schema as plain ``"string"``."""
    if isinstance(node, list):
        return [_normalized(n) for n in node]
    if isinstance(node, dict):
        node = {k: _normalized(v) for k, v in node.items() if k not in ("avro.java.string", "doc")}
        if set(node) == {"type"}:
            return node["type"]
        return node
    return node


def _reference(root, name: str) -> dict[str, Any]:
    return json.loads((root / f"{name}.avsc").read_text())


@pytest.mark.interop
@pytest.mark.parametrize("kind", list(AvroKind))
def test_schema_equals_hudi_reference(hudi_avro_schemas, kind):
    ref = _normalized(_reference(hudi_avro_schemas, kind.record_name))
    ours = schema(kind)
    assert ours == ref
    # Dict equality ignores key order; this also pins the order Java prints keys in, so the
    # embedded schemas can be diffed by eye against Hudi's.
    assert json.dumps(ours) == json.dumps(ref)


def test_schema_is_a_copy():
    s = schema(AvroKind.ROLLBACK_PLAN)
    s["fields"].clear()
    assert schema(AvroKind.ROLLBACK_PLAN)["fields"]


# --- sample records, one per kind, every field given -------------------------------------------

def _sample_models() -> dict[AvroKind, Any]:
    op = CompactionOperation("fg-1-0", "city=a", "20240101000000000",
                             "fg-1-0_0-1-2_20240101000000000.parquet",
                             (".fg-1-0_20240101000000000.log.1_0-1-2",),
                             {"TOTAL_LOG_FILES": 1.0}, None)
    part = CleanPartitionMetadata("city=a", "KEEP_LATEST_COMMITS", ("x.parquet",), ("x.parquet",),
                                  (), False)
    return {
        AvroKind.COMPACTION_PLAN: CompactionPlan(
            (op,), {"k": "v"}, 2, CompactionStrategy("C", {"p": "1"}, 1), True),
        AvroKind.CLEANER_PLAN: CleanerPlan(
            ActionInstant("20240101000000000", "commit", "COMPLETED"), "20240102000000000",
            "KEEP_LATEST_COMMITS", {"city=a": (CleanFileInfo("/t/city=a/x.parquet"),)},
            ("city=b",), 2, {"savepointed_timestamps": ""}, {"city=a": ("x.parquet",)}),
        AvroKind.CLEAN_METADATA: CleanMetadata(
            "20240103000000000", 12, 1, "20240101000000000", "20240102000000000",
            {"city=a": part}, 2, {"city=a": part}, {"k": "v"}),
        AvroKind.ROLLBACK_PLAN: RollbackPlan(
            InstantInfo("20240101000000000", "deltacommit"),
            (RollbackRequest("", "fg-1-0", "20240101000000000", ("a",), {"b": 3}),), 1),
        AvroKind.ROLLBACK_METADATA: RollbackMetadata(
            "20240103000000000", 5, 1, ("20240101000000000",),
            {"": RollbackPartitionMetadata("", ("a",), ("b",), {"c": 1}, {"d": 2})}, 1,
            (InstantInfo("20240101000000000", "deltacommit"),)),
        AvroKind.REQUESTED_REPLACE_METADATA: RequestedReplaceMetadata(
            "CLUSTER", _clustering_plan(), {"k": "v"}, 1),
    }


def _clustering_plan() -> dict[str, Any]:
    slice_ = {"dataFilePath": "a.parquet", "deltaFilePaths": [], "fileId": "fg-1-0",
              "partitionPath": "p", "bootstrapFilePath": None, "version": 1}
    group = {"slices": [slice_], "metrics": {"m": 1.5}, "numOutputFileGroups": 1,
             "extraMetadata": None, "version": 1}
    return {"inputGroups": [group],
            "strategy": {"strategyClassName": "S", "strategyParams": {}, "version": 1},
            "extraMetadata": None, "version": 1, "preserveHoodieMetadata": True}


def _sample_records() -> dict[AvroKind, dict[str, Any]]:
    records = {k: m.to_avro() for k, m in _sample_models().items()}
    records[AvroKind.SAVEPOINT_METADATA] = {
        "savepointedBy": "me", "savepointedAt": 1_700_000_000, "comments": "c",
        "partitionMetadata": {"p": {"partitionPath": "p", "savepointDataFile": ["a.parquet"]}},
        "version": 1}
    records[AvroKind.ARCHIVED_META_ENTRY] = {
        "hoodieCleanMetadata": records[AvroKind.CLEAN_METADATA],
        "hoodieCleanerPlan": records[AvroKind.CLEANER_PLAN],
        "hoodieCompactionPlan": records[AvroKind.COMPACTION_PLAN],
        "hoodieRollbackMetadata": records[AvroKind.ROLLBACK_METADATA],
        "hoodieRequestedReplaceMetadata": records[AvroKind.REQUESTED_REPLACE_METADATA],
        "commitTime": "20240103000000000", "actionType": "clean", "actionState": "COMPLETED",
        "stateTransitionTime": "20240103000000001"}
    return records


def test_every_kind_has_a_sample():
    assert set(_sample_records()) == set(AvroKind)


@pytest.mark.parametrize("kind", list(AvroKind))
def test_serialize_writes_one_uncompressed_record(kind):
    record = _sample_records()[kind]
    data = serialize(kind, record)
    assert data.startswith(b"Obj\x01")
    reader = fastavro.reader(io.BytesIO(data))
    assert reader.codec == "null"
    assert reader.writer_schema["name"] == kind.full_name
    assert len(list(reader)) == 1
    back = deserialize(kind, data, "p")
    if kind is AvroKind.ARCHIVED_META_ENTRY:  # the sample leaves some fields to their defaults
        assert {k: back[k] for k in record} == record
    else:
        assert back == record


@pytest.mark.interop
@pytest.mark.parametrize("kind", list(AvroKind))
def test_our_file_reads_with_hudi_schema_as_reader(hudi_avro_schemas, kind):
    """What Java does: resolve the schema our file carries against Hudi's own."""
    data = serialize(kind, _sample_records()[kind])
    ref = fastavro.parse_schema(_reference(hudi_avro_schemas, kind.record_name))
    (via_ref,) = fastavro.reader(io.BytesIO(data), reader_schema=ref)
    assert via_ref == deserialize(kind, data, "p")


@pytest.mark.interop
@pytest.mark.parametrize("kind", [AvroKind.CLEANER_PLAN, AvroKind.CLEAN_METADATA,
                                  AvroKind.ARCHIVED_META_ENTRY])
def test_hudi_014_schema_resolves_both_ways(hudi_avro_schemas, kind):
    """0.14 lacks the trailing extraMetadata of 0.15: each reads the other's files."""
    old = fastavro.parse_schema(_reference(hudi_avro_schemas / "hudi-0.14", kind.record_name))
    record = _sample_records()[kind]
    (read_by_014,) = fastavro.reader(io.BytesIO(serialize(kind, record)), reader_schema=old)
    assert "extraMetadata" not in read_by_014 or kind is AvroKind.ARCHIVED_META_ENTRY

    buf = io.BytesIO()
    fastavro.writer(buf, old, [read_by_014])
    ours = deserialize(kind, buf.getvalue(), "old")
    if kind is AvroKind.ARCHIVED_META_ENTRY:
        assert ours["hoodieCleanerPlan"]["extraMetadata"] is None
        assert ours["hoodieCleanMetadata"]["extraMetadata"] is None
    else:
        assert ours["extraMetadata"] is None
        assert {k: v for k, v in ours.items() if k != "extraMetadata"} == read_by_014


# --- real Hudi files ---------------------------------------------------------------------------

def _hoodie(fixture_tables, table: str):
    return fixture_tables[table] / ".hoodie"


def _embedded_schema(data: bytes) -> dict[str, Any]:
    return json.loads(fastavro.reader(io.BytesIO(data)).metadata["avro.schema"])


def _rewrites_readable_by_hudi(model, data: bytes) -> None:
    """Our re-encoding reads back the same through us, and through the exact schema Hudi wrote."""
    ours = model.to_bytes()
    assert type(model).from_bytes(ours, "ours") == model
    hudi_schema = fastavro.parse_schema(_embedded_schema(data))
    (via_hudi,) = fastavro.reader(io.BytesIO(ours), reader_schema=hudi_schema)
    via_us = deserialize(model.KIND, ours, "ours")
    # A newer Hudi (the v8 plan) fills the fields it added with their defaults.
    assert {k: via_hudi[k] for k in via_us} == via_us
    assert all(via_hudi[k] is None for k in set(via_hudi) - set(via_us))


@pytest.mark.interop
def test_real_rollback_plan(fixture_tables):
    path = _hoodie(fixture_tables, ROLLBACK_TABLE) / "20250126040936578.rollback.requested"
    data = path.read_bytes()
    plan = RollbackPlan.from_bytes(data, str(path))
    root = "/opt/data/external_tables/v6_nonpartitioned_rollback"
    assert plan == RollbackPlan(
        instant_to_rollback=InstantInfo("20250126040826878", "deltacommit"),
        rollback_requests=(
            RollbackRequest("", "", "", (
                f"{root}/cd329d8f-0ce4-4654-84ab-2f769aae5034-0_1-33-44_20250126040826878.parquet",
            ), {}),
            RollbackRequest("", "0712b9f9-d2d5-4cae-bcf4-8fd7146af503-0", "20250126040823628", (), {
                f"file:{root}/.0712b9f9-d2d5-4cae-bcf4-8fd7146af503-0_20250126040823628"
                ".log.1_0-33-43": 11828}),
        ),
        version=1)
    _rewrites_readable_by_hudi(plan, data)


@pytest.mark.interop
def test_real_rollback_metadata(fixture_tables):
    hoodie = _hoodie(fixture_tables, ROLLBACK_TABLE)
    path = hoodie / "20250126040936578.rollback"
    data = path.read_bytes()
    meta = RollbackMetadata.from_bytes(data, str(path))
    root = "/opt/data/external_tables/v6_nonpartitioned_rollback"
    log = f"file:{root}/.0712b9f9-d2d5-4cae-bcf4-8fd7146af503-0_20250126040823628.log"
    assert meta == RollbackMetadata(
        start_rollback_time="20250126040936578", time_taken_in_millis=195, total_files_deleted=1,
        commits_rollback=("20250126040826878",),
        partition_metadata={"": RollbackPartitionMetadata(
            "",
            success_delete_files=(
                f"{root}/cd329d8f-0ce4-4654-84ab-2f769aae5034-0_1-33-44_20250126040826878.parquet",
            ),
            failed_delete_files=(),
            rollback_log_files={f"{log}.2_1-0-1": 105},  # the 105-byte command block file
            log_files_from_failed_commit={f"{log}.1_0-33-43": 11828})},
        version=1,
        instants_rollback=(InstantInfo("20250126040826878", "deltacommit"),))
    # The command block Hudi appended is there, with the size the metadata records.
    (block_file,) = meta.partition_metadata[""].rollback_log_files
    assert (hoodie.parent / block_file.rsplit("/", 1)[1]).stat().st_size == 105
    assert (hoodie / "20250126040936578.rollback.inflight").read_bytes() == b""
    _rewrites_readable_by_hudi(meta, data)


@pytest.mark.interop
@pytest.mark.parametrize("table", [OVERWRITE_TABLE,
                                   "sample_table/mor/parquet/"
                                   "v6_simplekeygen_nonhivestyle_overwritetable"])
def test_real_requested_replace_metadata(fixture_tables, table):
    (path,) = _hoodie(fixture_tables, table).glob("*.replacecommit.requested")
    data = path.read_bytes()
    meta = RequestedReplaceMetadata.from_bytes(data, str(path))
    # INSERT OVERWRITE leaves every field null, version included.
    assert meta == RequestedReplaceMetadata(None, None, {}, None)
    assert deserialize(AvroKind.REQUESTED_REPLACE_METADATA, data, str(path)) == {
        "operationType": None, "clusteringPlan": None, "extraMetadata": None, "version": None}
    _rewrites_readable_by_hudi(meta, data)


@pytest.mark.interop
def test_real_v8_compaction_plan(fixture_tables):
    """Layout 2, but the plan format is v6's plus one trailing field, which resolution drops."""
    (path,) = (_hoodie(fixture_tables, V8_TRIPS_TABLE) / "timeline").glob("*.compaction.requested")
    data = path.read_bytes()
    assert "missingSchedulePartitions" in json.dumps(_embedded_schema(data))
    plan = CompactionPlan.from_bytes(data, str(path))
    assert "missingSchedulePartitions" not in deserialize(AvroKind.COMPACTION_PLAN, data, "p")
    assert plan.version == 2
    assert plan.strategy is None and plan.preserve_hoodie_metadata is False
    assert plan.extra_metadata == {"_hoodie.spark.sql.writes.prepped": "true"}
    assert [op.partition_path for op in plan.operations] == [
        "city=chennai", "city=san_francisco", "city=sao_paulo"]
    first = plan.operations[0]
    fid = "6e1d5cc4-c487-487d-abbe-fe9b30b1c0cc-0"
    assert first == CompactionOperation(
        file_id=fid, partition_path="city=chennai", base_instant_time="20251220210108078",
        data_file_path=f"{fid}_2-986-2794_20251220210108078.parquet",
        delta_file_paths=(f".{fid}_20251220210127080.log.1_0-1072-3078",
                          f".{fid}_20251220210128625.log.1_0-1097-3150"),
        metrics={"TOTAL_LOG_FILES": 2.0, "TOTAL_IO_MB": 0.0, "TOTAL_IO_READ_MB": 0.0,
                 "TOTAL_LOG_FILES_SIZE": 2117.0, "TOTAL_IO_WRITE_MB": 0.0},
        bootstrap_file_path=None)
    # Version 2: names relative to the partition, and they are files of the table.
    for op in plan.operations:
        part = fixture_tables[V8_TRIPS_TABLE] / op.partition_path
        assert (part / op.data_file_path).is_file()
        assert all((part / name).is_file() for name in op.delta_file_paths)
    _rewrites_readable_by_hudi(plan, data)


@pytest.mark.interop
def test_real_v8_metadata_table_compaction_plan_has_a_log_only_slice(fixture_tables):
    hoodie = _hoodie(fixture_tables, V8_TRIPS_TABLE) / "metadata" / ".hoodie" / "timeline"
    (path,) = hoodie.glob("*.compaction.requested")
    plan = CompactionPlan.from_bytes(path.read_bytes(), str(path))
    first = plan.operations[0]
    assert first.file_id == "partition-stats-0000-0" and first.partition_path == "partition_stats"
    assert first.data_file_path is None and len(first.delta_file_paths) == 7


# --- round trips through the typed classes ----------------------------------------------------

_texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
_opt_texts = st.none() | _texts
_ints = st.integers(-2**31, 2**31 - 1)
_longs = st.integers(-2**63, 2**63 - 1)
_doubles = st.floats(allow_nan=False)


def _tuples(s):
    return st.lists(s, max_size=3).map(tuple)


def _maps(s):
    return st.dictionaries(_texts, s, max_size=3)


_instant_info = st.builds(InstantInfo, _texts, _texts)
_clean_part = st.builds(CleanPartitionMetadata, _texts, _texts, _tuples(_texts), _tuples(_texts),
                        _tuples(_texts), st.booleans())
_MODELS = {
    CompactionPlan: st.builds(
        CompactionPlan,
        _tuples(st.builds(CompactionOperation, _texts, _texts, _texts, _opt_texts,
                          _tuples(_texts), _maps(_doubles), _opt_texts)),
        _maps(_texts), _ints,
        st.none() | st.builds(CompactionStrategy, _opt_texts, _maps(_texts), _ints),
        st.booleans()),
    RollbackPlan: st.builds(
        RollbackPlan, _instant_info,
        _tuples(st.builds(RollbackRequest, _texts, _opt_texts, _opt_texts, _tuples(_texts),
                          _maps(_longs))),
        _ints),
    RollbackMetadata: st.builds(
        RollbackMetadata, _texts, _longs, _ints, _tuples(_texts),
        _maps(st.builds(RollbackPartitionMetadata, _texts, _tuples(_texts), _tuples(_texts),
                        _maps(_longs), _maps(_longs))),
        _ints, _tuples(_instant_info)),
    CleanerPlan: st.builds(
        CleanerPlan, st.none() | st.builds(ActionInstant, _texts, _texts, _texts), _texts, _texts,
        _maps(_tuples(st.builds(CleanFileInfo, _texts, st.booleans()))), _tuples(_texts), _ints,
        _maps(_texts), _maps(_tuples(_texts))),
    CleanMetadata: st.builds(
        CleanMetadata, _texts, _longs, _ints, _texts, _texts, _maps(_clean_part), _ints,
        _maps(_clean_part), _maps(_texts)),
    RequestedReplaceMetadata: st.builds(
        RequestedReplaceMetadata, _opt_texts, st.none() | st.just(_clustering_plan()),
        _maps(_texts), st.none() | _ints),
}


@pytest.mark.parametrize("cls", list(_MODELS), ids=lambda c: c.__name__)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_typed_round_trip(cls, data):
    model = data.draw(_MODELS[cls])
    assert cls.from_avro(model.to_avro()) == model
    assert cls.from_bytes(model.to_bytes(), "p") == model


def test_models_normalize_lists_and_copy_maps():
    files = {"a": 1}
    req = RollbackRequest("p", "f", "t", ["x"], files)
    files["b"] = 2
    assert req.files_to_be_deleted == ("x",) and req.log_blocks_to_be_deleted == {"a": 1}
    plan = CleanerPlan(None, "", "KEEP_LATEST_COMMITS", {"p": [CleanFileInfo("x")]})
    assert CleanerPlan.from_bytes(plan.to_bytes(), "p") == plan


def test_null_collections_read_as_empty_and_write_as_empty():
    plan = CompactionPlan.from_avro({"operations": None, "extraMetadata": None, "version": 2})
    assert plan.operations == () and plan.extra_metadata == {}
    assert plan.to_avro()["operations"] == [] and plan.to_avro()["extraMetadata"] == {}


# --- failures ----------------------------------------------------------------------------------

def test_serialize_rejects_unknown_fields_and_bad_types():
    with pytest.raises(SchemaError, match="isBootstrap"):
        serialize(AvroKind.CLEANER_PLAN, {"policy": "P", "filePathsToBeDeletedPerPartition": {
            "p": [{"filePath": "x", "isBootstrap": False}]}})
    with pytest.raises(SchemaError, match="HoodieRollbackPlan"):
        serialize("rollback_plan", {"instantToRollback": {"commitTime": 1, "action": "x"}})
    with pytest.raises(ValueError):
        serialize("no_such_kind", {})


def test_serialize_fills_defaults():
    data = serialize("rollback_plan", {"instantToRollback": {"commitTime": "1", "action": "c"}})
    assert deserialize("rollback_plan", data, "p") == {
        "instantToRollback": {"commitTime": "1", "action": "c"}, "RollbackRequests": None,
        "version": 1}


def _assert_corrupt(kind, data: bytes, path: str = "/t/.hoodie/1.rollback.requested") -> str:
    with pytest.raises(CorruptFileError) as info:
        deserialize(kind, data, path)
    assert info.value.path == path
    assert str(info.value).startswith(path)
    return str(info.value)


@pytest.mark.parametrize("data, reason", [
    (b"", "empty"),
    (b'{"operationType": null}', "magic"),
    (b"Obj\x01", "unreadable"),
    (b"Obj\x01" + b"\xff" * 40, "unreadable"),
])
def test_garbage_is_corrupt(data, reason):
    assert reason in _assert_corrupt(AvroKind.ROLLBACK_PLAN, data)


def test_every_truncation_is_corrupt():
    data = _sample_models()[AvroKind.ROLLBACK_PLAN].to_bytes()
    for cut in range(len(data)):
        _assert_corrupt(AvroKind.ROLLBACK_PLAN, data[:cut])


def test_damaged_bytes_never_escape_as_other_errors():
    data = _sample_models()[AvroKind.CLEAN_METADATA].to_bytes()
    rnd = random.Random(7)
    for _ in range(500):
        damaged = bytearray(data)
        for _ in range(rnd.randint(1, 4)):
            damaged[rnd.randrange(len(damaged))] = rnd.randrange(256)
        try:
            deserialize(AvroKind.CLEAN_METADATA, bytes(damaged), "p")
        except CorruptFileError:
            pass  # a flip inside a string may still decode: both outcomes are fine


def test_wrong_record_is_corrupt():
    data = _sample_models()[AvroKind.CLEAN_METADATA].to_bytes()
    assert "HoodieCleanMetadata" in _assert_corrupt(AvroKind.ROLLBACK_PLAN, data)


def test_two_records_is_corrupt():
    record = _sample_records()[AvroKind.ROLLBACK_PLAN]
    buf = io.BytesIO()
    fastavro.writer(buf, parsed_schema(AvroKind.ROLLBACK_PLAN), [record, record])
    assert "2 records" in _assert_corrupt(AvroKind.ROLLBACK_PLAN, buf.getvalue())


def test_schema_valid_but_meaningless_is_corrupt():
    data = serialize(AvroKind.ROLLBACK_PLAN, {"instantToRollback": None})
    with pytest.raises(CorruptFileError, match="lacks a value"):
        RollbackPlan.from_bytes(data, "/t/.hoodie/1.rollback.requested")
