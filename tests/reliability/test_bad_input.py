"""Bad input gets a typed error before any file is written (issue 8, item 5).

Every case snapshots the table folder (names, sizes and mtimes of every file and folder,
``.hoodie/`` included) before the call and checks it is identical after; where the path is not a
table, nothing may appear. Input that Hudi accepts by design (a null partition value, duplicate
keys in an insert, a widening type change) is checked for its documented result instead.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pyarrow as pa
import pytest
from click.testing import CliRunner

import lakehouse
from lakehouse.iceberg import background
from lakehouse import cli
from lakehouse.errors import (ConfigError, CorruptFileError, LakehouseError, RecordKeyError,
                              SchemaError, TableExistsError, TableNotFoundError)

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
TYPES = ["COPY_ON_WRITE", "MERGE_ON_READ"]
SHORT = {"COPY_ON_WRITE": "COW", "MERGE_ON_READ": "MOR"}
DROP = object()  # a column left out of the batch
OCC = {"hoodie.write.concurrency.mode": "OPTIMISTIC_CONCURRENCY_CONTROL"}


def snapshot(root) -> dict | None:
    """Every file and folder under ``root``: path -> (size, mtime_ns), None for folders, once
    the Iceberg publishing of earlier commits (in the background) is done."""
    background.wait_all()
    root = str(root)
    if not os.path.lexists(root):
        return None
    if not os.path.isdir(root):
        st = os.stat(root)
        return {".": (st.st_size, st.st_mtime_ns)}
    out: dict = {}
    for d, dirs, files in os.walk(root):
        for name in dirs:
            out[os.path.relpath(os.path.join(d, name), root) + "/"] = None
        for name in files:
            st = os.stat(os.path.join(d, name))
            out[os.path.relpath(os.path.join(d, name), root)] = (st.st_size, st.st_mtime_ns)
    return out


def expect_rejected(root, exc, call, *names: str) -> LakehouseError:
    """``call`` raises ``exc`` (a lakehouse error whose message names ``names`` and that says
    what to do) and leaves every file under ``root`` as it was."""
    before = snapshot(root)
    with pytest.raises(exc) as info:
        call()
    err = info.value
    assert isinstance(err, LakehouseError), f"{type(err).__name__} is not a LakehouseError"
    assert err.help and err.help.strip(), "the error says nothing about what to do"
    for n in names:
        assert n in err.message, f"{n!r} not named in: {err.message}"
    assert snapshot(root) == before, "a file was written, changed or removed before the error"
    return err


BASE = pa.table({
    "id": ["a", "b"], "p": ["x", "y"], "ts": pa.array([1, 1], pa.int64()),
    "v": pa.array([1.0, 2.0], pa.float64()), "n": pa.array([10, 20], pa.int64()),
    "i": pa.array([1, 2], pa.int32()), "f": pa.array([0.5, 1.5], pa.float32()),
    "s": ["q", "r"], "st": pa.array([{"n": 1}, {"n": 2}], pa.struct([("n", pa.int64())])),
    "l": pa.array([[1], [2]], pa.list_(pa.int64())),
})


def make(tmp_path, table_type="COPY_ON_WRITE", *, write=True, **kw) -> lakehouse.Table:
    """A table whose writes may leave columns out (most cases here send narrow batches; the
    default refusal of those is its own case below)."""
    kw.setdefault("partition_by", "p")
    kw["options"] = {"hoodie.write.set.null.for.missing.columns": True, **kw.get("options", {})}
    kw.setdefault("ordering_field", "ts")
    t = lakehouse.create_table(str(tmp_path / "t"), name="t", record_key=kw.pop("record_key", "id"),
                               table_type=table_type, **kw)
    if write:
        t.upsert(BASE)
    return t


def batch(count: int = 1, **cols) -> pa.Table:
    data = {"id": [f"k{j}" for j in range(count)], "p": ["x"] * count, "ts": pa.array([5] * count, pa.int64())}
    data.update(cols)
    return pa.table({k: v for k, v in data.items() if v is not DROP})


def col(table: lakehouse.Table, name: str) -> dict:
    got = table.read(columns=["id", name]).to_pylist()
    return {r["id"]: r[name] for r in got}


# --- record keys, partition values, ordering values ---------------------------------------

RECORD_CASES = [
    ("A null record key in an upsert", "upsert", {"id": ["c", None]}, RecordKeyError, ("'id'", "null")),
    ("A null record key in an insert", "insert", {"id": ["c", None]}, RecordKeyError, ("'id'", "null")),
    ("A null record key in a bulk insert", "bulk_insert", {"id": ["c", None]}, RecordKeyError,
     ("'id'", "null")),
    ("A null record key in a delete", "delete", {"id": ["a", None]}, RecordKeyError, ("'id'", "null")),
    ("An empty record key in an upsert", "upsert", {"id": ["c", ""]}, RecordKeyError, ("'id'", "empty")),
    ("A batch without the record key column", "upsert", {"id": DROP}, RecordKeyError, ("'id'",)),
    ("A delete without the record key column", "delete", {"id": DROP}, RecordKeyError, ("'id'",)),
    ("A batch without the partition column", "upsert", {"p": DROP}, RecordKeyError, ("'p'",)),
    ("An upsert without the ordering (precombine) field", "upsert", {"ts": DROP}, RecordKeyError,
     ("'ts'",)),
    ("A null ordering (precombine) value in an upsert", "upsert",
     {"ts": pa.array([5, None], pa.int64())}, RecordKeyError, ("'ts'", "null")),
    ("A null ordering (precombine) value in an insert", "insert",
     {"ts": pa.array([5, None], pa.int64())}, RecordKeyError, ("'ts'", "null")),
    ("A uint64 column no Avro type can hold", "upsert", {"u": pa.array([1, 2], pa.uint64())},
     SchemaError, ("'u'", "uint64")),
]


@pytest.mark.parametrize("table_type", TYPES)
@pytest.mark.parametrize("scenario,op,cols,exc,names", RECORD_CASES, ids=[c[0] for c in RECORD_CASES])
def test_bad_records_are_rejected(tmp_path, reliability, table_type, scenario, op, cols, exc, names):
    case = reliability.case("bad-input", f"{scenario} ({SHORT[table_type]})", outcome="rejected",
                            detail=f"{exc.__name__}: names {', '.join(names)}")
    t = make(tmp_path, table_type)
    expect_rejected(t.storage.root, exc, lambda: t.write(batch(2, **cols), op), *names)
    case.records_checked = t.read().num_rows
    assert case.records_checked == 2


def test_something_else_than_an_arrow_table_is_rejected(tmp_path, reliability):
    reliability.case("bad-input", "A list of dicts passed as the batch", outcome="rejected",
                     detail="SchemaError: expected a pyarrow.Table")
    t = make(tmp_path)
    expect_rejected(t.storage.root, SchemaError, lambda: t.upsert([{"id": "c", "p": "x", "ts": 1}]),
                    "pyarrow.Table")


def test_composite_key_with_every_part_null_is_rejected(tmp_path, reliability):
    reliability.case("bad-input", "A composite record key whose parts are all null", outcome="rejected",
                     detail="RecordKeyError: Hudi's ComplexKeyGenerator refuses it too")
    t = make(tmp_path, record_key="id,id2", write=False)
    t.upsert(batch(1, id2=["z"]))
    expect_rejected(t.storage.root, RecordKeyError,
                    lambda: t.upsert(batch(2, id=["c", None], id2=pa.array(["z", None]))), "id", "id2")


def test_composite_key_with_one_part_null_is_written_as_hudi_does(tmp_path, reliability):
    reliability.case("bad-input", "A composite record key with one null part", outcome="survived",
                     detail="accepted: the part is written as __null__, as Hudi's ComplexKeyGenerator")
    t = make(tmp_path, record_key="id,id2", write=False)
    t.upsert(batch(1, id=["c"], id2=pa.array([None], pa.string())))
    assert t.read(columns=["_hoodie_record_key"]).column(0).to_pylist() == ["id:c,id2:__null__"]


@pytest.mark.parametrize("table_type", TYPES)
@pytest.mark.parametrize("hive_style", [False, True])
def test_null_partition_value_goes_to_the_default_partition(tmp_path, reliability, table_type, hive_style):
    reliability.case("bad-input", f"A null or empty partition value{' (hive-style paths)' if hive_style else ''}"
                     f" ({SHORT[table_type]})", outcome="survived",
                     detail="accepted: written to __HIVE_DEFAULT_PARTITION__, as Hudi does")
    t = make(tmp_path, table_type, hive_style_partitioning=hive_style)
    t.upsert(batch(2, id=["c", "d"], p=pa.array([None, ""], pa.string())))
    part = ("p=" if hive_style else "") + "__HIVE_DEFAULT_PARTITION__"
    got = {r["id"]: r["_hoodie_partition_path"]
           for r in t.read(columns=["id", "_hoodie_partition_path"]).to_pylist()}
    assert got == {"a": ("p=x" if hive_style else "x"), "b": ("p=y" if hive_style else "y"),
                   "c": part, "d": part}
    assert os.path.isdir(os.path.join(t.storage.root, part))
    t.upsert(batch(1, id=["c"], p=pa.array([None], pa.string()), ts=pa.array([9], pa.int64())))
    assert sorted(col(t, "ts").items()) == [("a", 1), ("b", 1), ("c", 9), ("d", 5)]


# --- duplicate keys in one batch ----------------------------------------------------------

@pytest.mark.parametrize("table_type", TYPES)
@pytest.mark.parametrize("op", ["insert", "bulk_insert"])
@pytest.mark.parametrize("combine", [False, True])
def test_duplicate_keys_in_an_insert_follow_combine_before_insert(tmp_path, reliability, table_type, op,
                                                                  combine):
    what = "combined by ordering value" if combine else "kept, as Hudi does by default"
    reliability.case("bad-input", f"Duplicate keys in one {op.replace('_', ' ')} batch with "
                     f"hoodie.combine.before.insert={str(combine).lower()} ({SHORT[table_type]})",
                     outcome="survived", detail=f"accepted: duplicates {what}")
    t = make(tmp_path, table_type, write=False)
    dup = batch(3, id=["a", "a", "b"], ts=pa.array([7, 3, 1], pa.int64()), v=[7.0, 3.0, 1.0])
    t.write(dup, op, options={"hoodie.combine.before.insert": str(combine).lower()})
    got = sorted((r["id"], r["ts"], r["v"]) for r in t.read(columns=["id", "ts", "v"]).to_pylist())
    if combine:  # the higher ordering value wins though it came first
        assert got == [("a", 7, 7.0), ("b", 1, 1.0)]
    else:
        assert got == [("a", 3, 3.0), ("a", 7, 7.0), ("b", 1, 1.0)]


@pytest.mark.parametrize("table_type", TYPES)
def test_duplicate_keys_in_an_upsert_are_combined_by_ordering_value(tmp_path, reliability, table_type):
    reliability.case("bad-input", f"Duplicate keys in one upsert batch ({SHORT[table_type]})",
                     outcome="survived", detail="accepted: combined, the highest ordering value wins")
    t = make(tmp_path, table_type)
    t.upsert(batch(3, id=["a", "a", "c"], ts=pa.array([7, 3, 1], pa.int64()), v=[7.0, 3.0, 1.0]))
    got = sorted((r["id"], r["ts"], r["v"]) for r in t.read(columns=["id", "ts", "v"]).to_pylist())
    assert got == [("a", 7, 7.0), ("b", 1, 2.0), ("c", 1, 1.0)]


# --- schema changes -----------------------------------------------------------------------

SCHEMA_REJECTED = [
    ("A string column arriving as integers", {"s": pa.array([5, 6], pa.int64())}, "'s'"),
    ("An int32 column arriving as strings", {"i": ["x", "y"]}, "'i'"),
    ("An int64 column arriving as doubles (no Iceberg promotion)", {"n": [1.5, 2.5]}, "'n'"),
    ("A float column arriving as strings", {"f": ["x", "y"]}, "'f'"),
    ("A string column arriving as a struct", {"s": pa.array([{"n": 1}] * 2)}, "'s'"),
    ("A struct field changing type from int64 to string", {"st": pa.array([{"n": "z"}] * 2)}, "'st'"),
    ("A struct gaining a nested field", {"st": pa.array([{"n": 1, "m": 2}] * 2)}, "'st'"),
    ("A list element changing type from int64 to string", {"l": pa.array([["z"]] * 2)}, "'l'"),
]


@pytest.mark.parametrize("table_type", TYPES)
@pytest.mark.parametrize("scenario,cols,name", SCHEMA_REJECTED, ids=[c[0] for c in SCHEMA_REJECTED])
def test_incompatible_schema_change_is_rejected(tmp_path, reliability, table_type, scenario, cols, name):
    reliability.case("bad-input", f"{scenario} ({SHORT[table_type]})", outcome="rejected",
                     detail=f"SchemaError: names {name} and both types")
    t = make(tmp_path, table_type)
    schema = t.schema()
    expect_rejected(t.storage.root, SchemaError, lambda: t.upsert(batch(2, **cols)), name)
    assert t.schema() == schema


SCHEMA_ACCEPTED = [
    ("An int32 column widened to int64", "i", pa.array([2**40, 3], pa.int64()), pa.int64(),
     {"a": 1, "b": 2, "k0": 2**40, "k1": 3}),
    ("A float column widened to double", "f", pa.array([0.1, 0.2], pa.float64()), pa.float64(),
     {"a": 0.5, "b": 1.5, "k0": 0.1, "k1": 0.2}),
    ("An int64 column receiving int32 values (cast up, type kept)", "n", pa.array([3, 4], pa.int32()),
     pa.int64(), {"a": 10, "b": 20, "k0": 3, "k1": 4}),
    ("A double column receiving float values (cast up, type kept)", "v", pa.array([0.5, 0.25], pa.float32()),
     pa.float64(), {"a": 1.0, "b": 2.0, "k0": 0.5, "k1": 0.25}),
    ("A new nullable column", "extra", pa.array(["e0", "e1"]), pa.string(),
     {"a": None, "b": None, "k0": "e0", "k1": "e1"}),
    ("A batch without a data column, with hoodie.write.set.null.for.missing.columns", "v", DROP, pa.float64(),
     {"a": 1.0, "b": 2.0, "k0": None, "k1": None}),
]


@pytest.mark.parametrize("table_type", TYPES)
@pytest.mark.parametrize("scenario,name,values,type_after,expected", SCHEMA_ACCEPTED,
                         ids=[c[0] for c in SCHEMA_ACCEPTED])
def test_allowed_schema_evolution_is_written_and_readable(tmp_path, reliability, table_type, scenario,
                                                          name, values, type_after, expected):
    reliability.case("bad-input", f"{scenario} ({SHORT[table_type]})", outcome="survived",
                     detail=f"accepted: table column {name} is {type_after}, every row readable")
    t = make(tmp_path, table_type)
    t.upsert(batch(2, **{name: values}))
    assert t.schema().field(name).type == type_after
    assert col(t, name) == expected
    if table_type == "MERGE_ON_READ":  # compaction writes the evolved type into base files
        t.upsert(batch(1, id=["b"], p=["y"], ts=pa.array([9], pa.int64())))  # a log record
        t.compact(force=True)
        ro = t.read(read_optimized=True, columns=["id", name])
        assert ro.schema.field(name).type == type_after
        assert {r["id"]: r[name] for r in ro.to_pylist()} == {**expected, "b": None}


@pytest.mark.parametrize("table_type", TYPES)
def test_a_batch_without_a_table_column_is_refused_by_default(tmp_path, reliability, table_type):
    reliability.case("bad-input", f"An upsert without a data column ({SHORT[table_type]})",
                     outcome="rejected", detail="SchemaError naming the column (its updates would "
                     "erase it); hoodie.write.set.null.for.missing.columns=true writes nulls")
    t = make(tmp_path, table_type, options={"hoodie.write.set.null.for.missing.columns": False})
    full = {c: BASE.column(c).slice(0, 1) for c in BASE.column_names}
    expect_rejected(t.storage.root, SchemaError,
                    lambda: t.upsert(pa.table({c: a for c, a in full.items() if c != "v"})), "v")
    t.upsert(pa.table(full))  # every column: fine


# --- options ------------------------------------------------------------------------------

CREATE_OPTIONS = [
    ("A non-numeric max file size", {"hoodie.parquet.max.file.size": "big"}, "hoodie.parquet.max.file.size"),
    ("A negative max file size", {"hoodie.parquet.max.file.size": -5}, "hoodie.parquet.max.file.size"),
    ("A fractional max file size", {"hoodie.parquet.max.file.size": 1.5}, "hoodie.parquet.max.file.size"),
    ("A small-file limit above the max file size", {"hoodie.parquet.max.file.size": 10,
     "hoodie.parquet.small.file.limit": 20}, "hoodie.parquet.small.file.limit"),
    ("Zero commits retained by the cleaner", {"hoodie.cleaner.commits.retained": 0},
     "hoodie.cleaner.commits.retained"),
    ("Negative commits retained by the cleaner", {"hoodie.cleaner.commits.retained": -1},
     "hoodie.cleaner.commits.retained"),
    ("An unknown index type", {"hoodie.index.type": "FOO"}, "hoodie.index.type"),
    ("An unknown table type option", {"hoodie.table.type": "MERGE_ON_WRITE"}, "hoodie.table.type"),
    ("A misspelt cleaner option", {"hoodie.clean.commits.retained": 3}, "hoodie.clean.commits.retained"),
    ("A non-boolean combine flag", {"hoodie.combine.before.insert": "maybe"}, "hoodie.combine.before.insert"),
    ("A bloom false-positive rate above 1", {"hoodie.index.bloom.fpp": 2}, "hoodie.index.bloom.fpp"),
    ("A table version other than 6", {"hoodie.table.version": 7}, "hoodie.table.version"),
    ("A key generator class lakehouse does not know", {"hoodie.datasource.write.keygenerator.class":
     "com.example.MyKeyGen"}, "com.example.MyKeyGen"),
    ("An archival minimum at or above its maximum", {"hoodie.keep.min.commits": 30},
     "hoodie.keep.min.commits"),
    ("A record key option contradicting record_key", {"hoodie.table.recordkey.fields": "uuid"},
     "hoodie.table.recordkey.fields"),
    ("An ordering field option contradicting ordering_field", {"hoodie.table.precombine.field": "seq"},
     "hoodie.table.precombine.field"),
    ("A table name option contradicting name", {"hoodie.table.name": "other"}, "hoodie.table.name"),
    ("A zero merge memory budget", {"hoodie.memory.merge.max.size": 0}, "hoodie.memory.merge.max.size"),
]
RETRY_OPTIONS = [
    ("Negative conflict retries", {"hoodie.write.num.retries.on.conflict.failures": -1},
     "hoodie.write.num.retries.on.conflict.failures"),
    ("A first retry backoff above the longest", {"hoodie.write.commit.retry.min_wait_ms": 5000,
     "hoodie.write.commit.retry.max_wait_ms": 100}, "hoodie.write.commit.retry.min_wait_ms"),
    ("A zero total retry timeout", {"hoodie.write.commit.retry.total_timeout_ms": 0},
     "hoodie.write.commit.retry.total_timeout_ms"),
    ("A negative total retry timeout", {"hoodie.write.commit.retry.total_timeout_ms": -1},
     "hoodie.write.commit.retry.total_timeout_ms"),
    ("A negative lock wait", {"hoodie.write.lock.wait_time_ms": -1}, "hoodie.write.lock.wait_time_ms"),
    ("A negative pause between lock attempts", {"hoodie.write.lock.wait_time_ms_between_retry": -1},
     "hoodie.write.lock.wait_time_ms_between_retry"),
    ("A lock wait shorter than one pause between attempts", {"hoodie.write.lock.wait_time_ms": 50,
     "hoodie.write.lock.wait_time_ms_between_retry": 100}, "hoodie.write.lock.wait_time_ms"),
    ("A zero lock lease expiry", {"hoodie.write.lock.filesystem.expire": 0},
     "hoodie.write.lock.filesystem.expire"),
    ("A zero heartbeat interval", {"hoodie.client.heartbeat.interval_in_ms": 0},
     "hoodie.client.heartbeat.interval_in_ms"),
    ("Negative tolerable heartbeat misses", {"hoodie.client.heartbeat.tolerable.misses": -1},
     "hoodie.client.heartbeat.tolerable.misses"),
    ("An unknown concurrency mode", {"hoodie.write.concurrency.mode": "MULTI"},
     "hoodie.write.concurrency.mode"),
    ("A lock provider that is not a class path", {"hoodie.write.lock.provider": "nope"},
     "hoodie.write.lock.provider"),
    ("A lock provider class that does not exist (several writers)",
     {**OCC, "hoodie.write.lock.provider": "com.example.NoSuchLockProvider"}, "hoodie.write.lock.provider"),
    ("Eager rollback of failed writes with several writers",
     {**OCC, "hoodie.cleaner.policy.failed.writes": "EAGER"}, "hoodie.cleaner.policy.failed.writes"),
]


@pytest.mark.parametrize("scenario,options,name", CREATE_OPTIONS + RETRY_OPTIONS,
                         ids=[c[0] for c in CREATE_OPTIONS + RETRY_OPTIONS])
def test_bad_create_table_options_create_nothing(tmp_path, reliability, scenario, options, name):
    reliability.case("bad-input", f"{scenario} passed to create_table", outcome="rejected",
                     detail=f"ConfigError: names {name}; no folder created")
    path = tmp_path / "t"
    expect_rejected(tmp_path, ConfigError, lambda: lakehouse.create_table(
        str(path), name="t", record_key="id", ordering_field="ts", options=options), name)
    assert not path.exists()


def test_an_option_for_an_argument_left_at_its_default_is_used(tmp_path, reliability):
    """Users migrating from Hudi pass everything as hoodie.* options: an argument they did not
    give yields to the option (only an explicit, different argument is a conflict)."""
    reliability.case("bad-input", "hoodie.table.type as an option with table_type left at its default",
                     outcome="survived", detail="the option is used")
    t = lakehouse.create_table(str(tmp_path / "t"), name="t", record_key="id", ordering_field="ts",
                               options={"hoodie.table.type": "COPY_ON_WRITE", "hoodie.index.type": "BLOOM"})
    assert (t.config.table_type.value, t.config.index_type.value) == ("COPY_ON_WRITE", "BLOOM")


@pytest.mark.parametrize("scenario,options,name", RETRY_OPTIONS + [
    ("A write option", {"hoodie.parquet.max.file.size": 1}, "hoodie.parquet.max.file.size"),
    ("A misspelt lock option", {"hoodie.write.lock.wait_ms": 10}, "hoodie.write.lock.wait_ms"),
], ids=[c[0] for c in RETRY_OPTIONS] + ["write option", "misspelt"])
def test_bad_open_table_options_are_rejected(tmp_path, reliability, scenario, options, name):
    reliability.case("bad-input", f"{scenario} passed to open_table", outcome="rejected",
                     detail=f"ConfigError: names {name}")
    t = make(tmp_path)
    expect_rejected(tmp_path, ConfigError, lambda: lakehouse.open_table(t.path, options), name)


WRITE_OPTIONS = [
    ("A non-numeric max file size", {"hoodie.parquet.max.file.size": "big"}, "hoodie.parquet.max.file.size"),
    ("A negative max file size", {"hoodie.parquet.max.file.size": -1}, "hoodie.parquet.max.file.size"),
    ("A misspelt option", {"hoodie.clean.commits.retained": "3"}, "hoodie.clean.commits.retained"),
    ("An unknown log block format", {"hoodie.logfile.data.block.format": "orc"},
     "hoodie.logfile.data.block.format"),
    ("A concurrency option meant for every writer", {"hoodie.write.num.retries.on.conflict.failures": 2},
     "hoodie.write.num.retries.on.conflict.failures"),
    ("An option without the hoodie. prefix", {"parquet.max.file.size": 1000}, "parquet.max.file.size"),
]


@pytest.mark.parametrize("table_type", TYPES)
@pytest.mark.parametrize("scenario,options,name", WRITE_OPTIONS, ids=[c[0] for c in WRITE_OPTIONS])
def test_bad_write_options_are_rejected(tmp_path, reliability, table_type, scenario, options, name):
    reliability.case("bad-input", f"{scenario} passed to an upsert ({SHORT[table_type]})",
                     outcome="rejected", detail=f"ConfigError: names {name}")
    t = make(tmp_path, table_type)
    expect_rejected(t.storage.root, ConfigError, lambda: t.upsert(batch(1), options=options), name)


@pytest.mark.parametrize("value", ["FOO", "BLOOM"])
def test_table_level_option_passed_to_a_write_is_rejected(tmp_path, reliability, value):
    reliability.case("bad-input", f"A table setting given to one write (hoodie.index.type={value} "
                     "on a SIMPLE table)", outcome="rejected", detail="ConfigError before any file")
    t = make(tmp_path)
    expect_rejected(t.storage.root, ConfigError,
                    lambda: t.upsert(batch(1), options={"hoodie.index.type": value}), "hoodie.index.type")
    t.upsert(batch(1), options={"hoodie.index.type": "SIMPLE"})  # the stored value: fine


SERVICE_OPTIONS = [
    ("clean", "Zero commits retained", {"hoodie.cleaner.commits.retained": 0}, "hoodie.cleaner.commits.retained"),
    ("clean", "Negative commits retained", {"hoodie.cleaner.commits.retained": -3},
     "hoodie.cleaner.commits.retained"),
    ("clean", "A misspelt commits-retained key", {"hoodie.clean.commits.retained": 3},
     "hoodie.clean.commits.retained"),
    ("clean", "An unknown cleaner policy", {"hoodie.cleaner.policy": "KEEP_SOME"}, "hoodie.cleaner.policy"),
    ("clean", "Non-numeric hours retained", {"hoodie.cleaner.hours.retained": "a day"},
     "hoodie.cleaner.hours.retained"),
    ("compact", "Zero delta commits before a compaction", {"hoodie.compact.inline.max.delta.commits": 0},
     "hoodie.compact.inline.max.delta.commits"),
    ("compact", "A misspelt delta-commits key", {"hoodie.compact.max.delta.commits": 2},
     "hoodie.compact.max.delta.commits"),
    ("schedule_compaction", "An unknown trigger strategy",
     {"hoodie.compact.inline.trigger.strategy": "SOMETIMES"}, "hoodie.compact.inline.trigger.strategy"),
    ("schedule_compaction", "A negative compaction IO budget", {"hoodie.compaction.target.io": -1},
     "hoodie.compaction.target.io"),
    ("archive", "An archival minimum above its maximum", {"hoodie.keep.min.commits": 5,
     "hoodie.keep.max.commits": 4}, "hoodie.keep.min.commits"),
    ("clean", "A misspelt prefix on commits retained", {"hoodi.cleaner.commits.retained": 1},
     "hoodi.cleaner.commits.retained"),
    ("compact", "A storage option in the wrong place", {"s3.endpoint": "http://127.0.0.1:1"}, "s3.endpoint"),
]


@pytest.mark.parametrize("service,scenario,options,name", SERVICE_OPTIONS, ids=[c[1] for c in SERVICE_OPTIONS])
def test_bad_service_options_are_rejected(tmp_path, reliability, service, scenario, options, name):
    reliability.case("bad-input", f"{scenario} passed to table.{service} (MOR)", outcome="rejected",
                     detail=f"ConfigError: names {name}")
    t = make(tmp_path, "MERGE_ON_READ")
    t.upsert(batch(1, id=["a"]))  # a log file: there is something to compact
    call = {"clean": lambda: t.clean(options=options), "archive": lambda: t.archive(options),
            "compact": lambda: t.compact(force=True, options=options),
            "schedule_compaction": lambda: t.schedule_compaction(force=True, options=options)}[service]
    expect_rejected(t.storage.root, ConfigError, call, name)


# --- paths that are not tables -----------------------------------------------------------

def _not_a_table(tmp_path, kind: str) -> pathlib.Path:
    p = tmp_path / "target"
    if kind == "an empty folder":
        p.mkdir()
    elif kind == "a folder of unrelated files":
        p.mkdir()
        (p / "notes.txt").write_text("hello")
        (p / "data.parquet").write_bytes(b"PAR1")
    elif kind == "a file":
        p.write_text("not a folder")
    elif kind == "a .hoodie folder without hoodie.properties":
        (p / ".hoodie" / "archived").mkdir(parents=True)
    elif kind == "a path under a file":
        p.write_text("x")
        p = p / "sub"
    return p


NOT_TABLES = ["an empty folder", "a folder of unrelated files", "a file", "a path that does not exist",
              "a .hoodie folder without hoodie.properties", "a path under a file"]
CLI_COMMANDS = [["stats", "{p}"], ["read", "{p}"], ["write", "{p}", "{f}"], ["commit", "{p}", "20240101000000000"],
                ["rollback", "{p}"], ["timeline", "{p}"], ["iceberg-sync", "{p}"], ["clean", "run", "{p}"],
                ["clean", "plan", "{p}"], ["compaction", "schedule", "{p}"], ["compaction", "show", "{p}"],
                ["savepoint", "list", "{p}"], ["savepoint", "create", "{p}"]]


@pytest.mark.parametrize("kind", NOT_TABLES)
def test_a_path_that_is_not_a_table_is_rejected_everywhere(tmp_path, reliability, kind):
    reliability.case("bad-input", f"Opening {kind} as a table (API and every CLI command)",
                     outcome="rejected", detail="TableNotFoundError: names the path; CLI exit 3, no traceback")
    inputs = tmp_path / "in"
    inputs.mkdir()
    data = inputs / "rows.csv"
    data.write_text("id,p,ts\nk,x,1\n")
    p = _not_a_table(tmp_path, kind)
    err = expect_rejected(tmp_path, TableNotFoundError, lambda: lakehouse.open_table(str(p)), str(p))
    assert "not a table" in err.message
    before = snapshot(tmp_path)
    for args in CLI_COMMANDS:
        res = CliRunner().invoke(cli.main, [a.format(p=p, f=data) for a in args])
        lines = res.stderr.strip().splitlines()
        assert res.exit_code == cli.EXIT_TABLE_NOT_FOUND, (args, res.exit_code, res.stderr, res.exception)
        assert lines[0].startswith("error: ") and str(p) in lines[0], (args, res.stderr)
        assert "Traceback" not in res.output + res.stderr
    assert snapshot(tmp_path) == before


def test_a_corrupt_properties_file_is_named(tmp_path, reliability):
    reliability.case("bad-input", "A .hoodie folder whose hoodie.properties is empty", outcome="rejected",
                     detail="CorruptFileError: names .hoodie/hoodie.properties")
    (tmp_path / "t" / ".hoodie").mkdir(parents=True)
    (tmp_path / "t" / ".hoodie" / "hoodie.properties").write_text("")
    expect_rejected(tmp_path, CorruptFileError, lambda: lakehouse.open_table(str(tmp_path / "t")),
                    "hoodie.properties")


@pytest.mark.parametrize("kind", ["a file", "a path under a file"])
def test_create_table_on_a_file_creates_nothing(tmp_path, reliability, kind):
    reliability.case("bad-input", f"Creating a table at {kind} (API and CLI)", outcome="rejected",
                     detail="ConfigError: names the path; CLI exit 1, no traceback")
    p = _not_a_table(tmp_path, kind)
    expect_rejected(tmp_path, ConfigError, lambda: lakehouse.create_table(
        str(p), name="t", record_key="id", ordering_field="ts"), str(p))
    before = snapshot(tmp_path)
    res = CliRunner().invoke(cli.main, ["create", str(p), "--record-key", "id", "--ordering-field", "ts"])
    assert res.exit_code == cli.EXIT_LAKEHOUSE_ERROR, (res.stderr, res.exception)
    assert res.stderr.startswith("error: ") and str(p) in res.stderr.splitlines()[0]
    assert snapshot(tmp_path) == before


def test_create_table_over_an_existing_table_is_rejected(tmp_path, reliability):
    reliability.case("bad-input", "Creating a table where one exists", outcome="rejected",
                     detail="TableExistsError: names the path")
    t = make(tmp_path)
    expect_rejected(tmp_path, TableExistsError, lambda: lakehouse.create_table(
        t.path, name="t", record_key="id", ordering_field="ts"), t.path)


def test_cli_bad_option_is_one_line_and_no_traceback_in_a_real_process(tmp_path, reliability):
    reliability.case("bad-input", "A misspelt option and a missing table given to the CLI process",
                     outcome="rejected", detail="ConfigError exit 1 / TableNotFoundError exit 3, no traceback")
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    target = tmp_path / "t"
    res = subprocess.run([sys.executable, "-m", "lakehouse.cli", "create", str(target), "--record-key", "id",
                          "--ordering-field", "ts", "--option", "hoodie.clean.commits.retained=3"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 1, res.stderr
    assert res.stderr.splitlines()[0].startswith("error: ") and "hoodie.clean.commits.retained" in res.stderr
    assert "Traceback" not in res.stderr and not target.exists()
    res = subprocess.run([sys.executable, "-m", "lakehouse.cli", "clean", "run", str(target)],
                         capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 3 and str(target) in res.stderr.splitlines()[0]
    assert "Traceback" not in res.stderr and not target.exists()
