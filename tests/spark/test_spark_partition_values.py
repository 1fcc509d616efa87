"""Partition values from a DataFrame (issue 37): through write_dataframe and format("lakehouse"),
a value the rules refuse (lakehouse/partition_path.py) fails before any file is written, on MOR
and COW; one the rules allow lands where the Python writer puts it."""

from __future__ import annotations

import pytest

import lakehouse
from lakehouse.errors import PartitionPathError
from lakehouse.spark.write import write_dataframe
from tests.reliability.test_bad_input import snapshot
from tests.write.test_partition_values import ISSUE_VALUES, make, read_all, rows

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("table_type", ["MERGE_ON_READ", "COPY_ON_WRITE"])
def test_write_dataframe_refuses_each_issue_value_before_any_file(tmp_path, spark, table_type):
    t = make(tmp_path / "root", table_type)
    committed = read_all(t)
    before = snapshot(tmp_path)
    for value in ISSUE_VALUES:
        for op in ("upsert", "delete") if value == ISSUE_VALUES[0] else ("upsert",):
            df = spark.createDataFrame(rows(["new", "k1"], ["a", value], ts=9).to_pandas())
            with pytest.raises(PartitionPathError) as info:
                write_dataframe(t, df, op)
            assert info.value.value == value, (value, op)
            assert snapshot(tmp_path) == before, f"{value!r} ({op}): a file was written"
    assert read_all(lakehouse.open_table(t.path)) == committed


@pytest.mark.parametrize("table_type", ["MERGE_ON_READ", "COPY_ON_WRITE"])
def test_format_lakehouse_refuses_each_issue_value_before_any_file(tmp_path, spark, table_type):
    t = make(tmp_path / "root", table_type)
    committed = read_all(t)
    before = snapshot(tmp_path)
    for value in ISSUE_VALUES:
        # One partition of the DataFrame: its task checks the row before it stages anything.
        df = spark.createDataFrame(rows(["new"], [value], ts=9).to_pandas()).coalesce(1)
        with pytest.raises(Exception) as info:
            df.write.format("lakehouse").mode("append").save(t.path)
        text = str(info.value)
        assert "PartitionPathError" in text and repr(value)[:40] in text, (value, text[-2000:])
        assert snapshot(tmp_path) == before, f"{value!r}: a file or folder was written"
    assert read_all(lakehouse.open_table(t.path)) == committed


def test_a_value_the_rules_allow_lands_where_the_python_writer_puts_it(tmp_path, spark):
    kw = {"options": {"hoodie.datasource.write.partitionpath.urlencode": True}}
    values = ["a/b", "x\ny", "../up"]
    by_python = make(tmp_path / "py", "MERGE_ON_READ", **kw)
    by_python.upsert(rows(["n0", "n1", "n2"], values, ts=9))
    by_spark = make(tmp_path / "spark", "MERGE_ON_READ", **kw)
    write_dataframe(by_spark, spark.createDataFrame(rows(["n0", "n1"], values[:2], ts=9).to_pandas()))
    (spark.createDataFrame(rows(["n2"], values[2:], ts=9).to_pandas())
     .write.format("lakehouse").mode("append").save(by_spark.path))

    def located(t) -> list[tuple]:
        got = t.read(columns=["id", "part", "_hoodie_partition_path"]).to_pylist()
        return sorted((r["id"], r["part"], r["_hoodie_partition_path"]) for r in got)
    assert located(lakehouse.open_table(by_spark.path)) == located(by_python)
    assert {p for _, _, p in located(by_python)} >= {"a%2Fb", "x%0Ay", "..%2Fup"}
