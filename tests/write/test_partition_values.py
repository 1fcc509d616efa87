"""Partition values from data (issue 37): a value that would put files outside the table, into
``.hoodie`` or where readers lose rows is a typed error before any file is written, through the
Python API, the CLI and ingest, on MOR and COW (Spark: tests/spark); a value the rules allow is
read alike by lakehouse, hudi-rs and the model. The rules: lakehouse/partition_path.py."""

from __future__ import annotations

import os
import pathlib
import shutil
import tempfile

import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lakehouse
from lakehouse import cli
from lakehouse.errors import PartitionPathError
from lakehouse.iceberg import background
from lakehouse.sources.files import ingest
from tests.interop.hudi_oracle import hudi_read
from tests.model.oracle import Oracle
from tests.reliability.test_bad_input import snapshot

TYPES = ["MERGE_ON_READ", "COPY_ON_WRITE"]
# The issue's table: outside the table, into .hoodie, a path that is not the one recorded, a
# partition inside another (hudi-rs drops it), a name hudi-rs cannot list, names too long.
ISSUE_VALUES = ["../x", "../../escaped", ".hoodie", ".", "/abs", "a/b", "a\nb", "x\x00y", "y" * 300]
COLUMNS = ["id", "part", "ts", "v"]


def rows(ids, parts, ts=1) -> pa.Table:
    return pa.table({"id": list(ids), "part": pa.array(list(parts), pa.string()),
                     "ts": pa.array([ts] * len(ids), pa.int64()), "v": pa.array(range(len(ids)), pa.int64())})


def make(root: pathlib.Path, table_type: str, parts=("a", "b"), **kw) -> lakehouse.Table:
    """A default table under ``root/t`` holding 10 committed rows in ``parts``."""
    t = lakehouse.create_table(str(root / "t"), name="t", table_type=table_type, record_key="id",
                               partition_by="part", ordering_field="ts", schema=rows([], []).schema, **kw)
    if parts:
        t.upsert(rows([f"k{i}" for i in range(10)], [parts[i % len(parts)] for i in range(10)]))
    return t


def read_all(t: lakehouse.Table) -> list[dict]:
    return sorted(t.read(columns=COLUMNS).to_pylist(), key=lambda r: r["id"])


def hudi_rows(t: lakehouse.Table) -> list[dict]:
    h = hudi_read(t.storage.root)
    return [] if h is None else sorted(h.select(COLUMNS).to_pylist(), key=lambda r: r["id"])


@pytest.mark.parametrize("table_type", TYPES)
@pytest.mark.parametrize("value", ISSUE_VALUES, ids=repr)
def test_python_api_refuses_each_issue_value_before_any_file(tmp_path, reliability, table_type, value):
    shown = repr(value) if len(value) < 20 else f"{value[:3]!r} x{len(value)}"
    reliability.case("bad-input", f"A partition value {shown} ({'MOR' if table_type == 'MERGE_ON_READ' else 'COW'})",
                     outcome="rejected", detail="PartitionPathError naming the value and row, "
                     "before any file (upsert, insert, bulk_insert, delete, insert_overwrite)")
    t = make(tmp_path / "root", table_type)
    committed = read_all(t)
    before = snapshot(tmp_path)  # the table and the folder it sits in
    for op in ("upsert", "insert", "bulk_insert", "delete", "insert_overwrite"):
        with pytest.raises(PartitionPathError) as info:
            t.write(rows(["new", "k1"], ["a", value], ts=9), op)
        assert info.value.value == value and info.value.row == 1, op
        assert snapshot(tmp_path) == before, f"{op} wrote, changed or removed a file"
    assert read_all(t) == committed and hudi_rows(t) == committed


@pytest.mark.parametrize("table_type", TYPES)
def test_a_buffered_write_in_chunks_refuses_a_value_of_its_last_chunk_before_any_file(tmp_path, table_type):
    """A MOR bucket write larger than write.task.max.size is keyed chunk by chunk: every chunk is
    checked before the first file, and a nested path must keep the depth of earlier chunks."""
    t = make(tmp_path / "root", table_type, parts=())
    n = 60_000
    parts = ["x/1"] * (n - 1) + ["y"]
    before = snapshot(tmp_path)
    with pytest.raises(PartitionPathError) as info:
        t.write(rows([f"k{i}" for i in range(n)], parts), "upsert",
                options={"write.task.max.size": 1})  # 1 MB: ~16 chunks of this batch
    assert (info.value.value, info.value.row) == ("y", n - 1)
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("table_type", TYPES)
def test_cli_write_of_a_csv_refuses_each_issue_value(tmp_path, table_type):
    t = make(tmp_path / "root", table_type)
    committed = read_all(t)
    for i, value in enumerate(ISSUE_VALUES):
        src = tmp_path / f"in{i}.csv"  # beside the table's folder: written before the snapshot
        pcsv.write_csv(rows(["new"], [value], ts=9), src)
        assert pcsv.read_csv(src).column("part").to_pylist() == [value]  # CSV carries it
        before = snapshot(tmp_path / "root")
        res = CliRunner().invoke(cli.main, ["write", t.path, str(src)])
        assert res.exit_code == 1, (value, res.output)
        assert "Help:" in res.stderr and repr(value)[:40] in res.stderr, res.stderr
        assert snapshot(tmp_path / "root") == before, f"{value!r}: a file was written"
    assert read_all(t) == committed


@pytest.mark.parametrize("table_type", TYPES)
def test_ingest_refuses_each_issue_value_before_any_file(tmp_path, table_type):
    t = make(tmp_path / "root", table_type)
    committed = read_all(t)
    landing = tmp_path / "landing"
    landing.mkdir()
    for i, value in enumerate(ISSUE_VALUES):
        for f in landing.iterdir():
            f.unlink()
        pq.write_table(rows([f"new{i}"], [value], ts=9), landing / f"f{i}.parquet")
        before = snapshot(tmp_path / "root")
        with pytest.raises(PartitionPathError, match="nothing was written"):
            ingest(lakehouse.open_table(t.path), str(landing))
        assert snapshot(tmp_path / "root") == before, f"{value!r}: a file was written (a manifest?)"
    assert read_all(t) == committed


# --- values the rules allow: read alike by lakehouse, hudi-rs and the model ------------------

ALLOWED = [
    # Hudi's quickstart: region/country/city in one plain field, every path as deep.
    ("nested", {}, ("x/1", "y/2"), ["a/b", "c/d"]),
    # Url-encoded: '/', control characters and '%' become one folder, as Hudi encodes them.
    ("urlencode", {"options": {"hoodie.datasource.write.partitionpath.urlencode": True}}, ("a", "b"),
     ["a/b", "a\nb", "/abs", "x\x00y", "../x", "100%"]),
    # Behind 'part=' the dot names are plain folder names.
    ("hive", {"hive_style_partitioning": True}, ("a", "b"), [".", "..", ".hoodie", "a b", "é"]),
]


@pytest.mark.interop
@pytest.mark.parametrize("table_type", TYPES)
@pytest.mark.parametrize("case", ALLOWED, ids=lambda c: c[0])
def test_values_the_rules_allow_are_read_alike_by_lakehouse_hudi_and_the_model(tmp_path, table_type, case):
    _, kw, parts, values = case
    t = make(tmp_path / "root", table_type, parts=parts, **kw)
    model = Oracle("EVENT_TIME_ORDERING", "id", "ts")
    model.upsert(rows([f"k{i}" for i in range(10)], [parts[i % 2] for i in range(10)]).to_pylist(), "1")
    # k1 updated in its own partition (a non-global index keys records by partition too).
    batch = rows([f"n{i}" for i in range(len(values))] + ["k1"], values + [parts[1]], ts=9)
    t.upsert(batch)
    model.upsert(batch.to_pylist(), "2")
    want = sorted(({c: r[c] for c in COLUMNS} for r in model.rows()), key=lambda r: r["id"])
    assert read_all(t) == want
    assert hudi_rows(t) == want
    assert os.listdir(tmp_path / "root") == ["t"]


# --- any value: refused before writing, or read back by lakehouse and hudi-rs as the model -----

FRAGMENTS = ["..", ".", "/", ".hoodie", "a", "é", "\n", "\x00", "\x7f", "%2F", "=", "\\", " ", "\u2028",
             "y" * 130, "__HIVE_DEFAULT_PARTITION__"]
values = st.one_of(st.text(max_size=12), st.lists(st.sampled_from(FRAGMENTS), max_size=5).map("".join))


def _data_folders(root: str) -> set[str]:
    """Folders holding data files, relative to the table root."""
    out = set()
    for d, _, files in os.walk(root):
        rel = os.path.relpath(d, root).replace(os.sep, "/")
        if rel.split("/")[0] != ".hoodie" and any(f.endswith(".parquet") or ".log." in f for f in files):
            out.add("" if rel == "." else rel)
    return out


@pytest.mark.interop
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(TYPES), st.sampled_from([{}, {"hive_style_partitioning": True},
                                                {"options": {"hoodie.datasource.write.partitionpath.urlencode": True}}]),
       st.booleans(), st.lists(values, min_size=1, max_size=4))
def test_random_partition_values_are_refused_before_writing_or_read_back_as_the_model(table_type, kw, seeded, vals):
    tmp = pathlib.Path(tempfile.mkdtemp())
    try:
        t = make(tmp, table_type, parts=("a", "b") if seeded else (), **kw)
        model = Oracle("EVENT_TIME_ORDERING", "id", "ts")
        if seeded:
            model.upsert(rows([f"k{i}" for i in range(10)], [("a", "b")[i % 2] for i in range(10)]).to_pylist(), "1")
        batch = rows([f"n{i}" for i in range(len(vals))], vals, ts=9)
        before = snapshot(tmp)
        try:
            t.upsert(batch)
        except PartitionPathError as e:
            # A depth error names the path; an empty value's path is the default partition.
            assert (e.value in vals or (e.value == "__HIVE_DEFAULT_PARTITION__" and "" in vals)) and e.help
            assert snapshot(tmp) == before
        else:
            model.upsert(batch.to_pylist(), "2")
        want = sorted(({c: r[c] for c in COLUMNS} for r in model.rows()), key=lambda r: r["id"])
        assert read_all(t) == want
        assert hudi_rows(t) == want
        assert os.listdir(tmp) == ["t"], "a file or folder appeared beside the table"
        # Every data file sits in the folder its records' partition path names.
        recorded = set(t.read(columns=["_hoodie_partition_path"]).column(0).to_pylist())
        assert _data_folders(t.storage.root) == recorded
    finally:
        background.wait_all()  # its Iceberg publisher reads the table being removed
        shutil.rmtree(tmp, ignore_errors=True)
