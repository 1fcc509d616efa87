"""`lakehouse read` (lakehouse/cli/data.py): projections, filters, limits, output formats, time
travel, incremental and read-optimized reads, through the CLI as a user runs it."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest

from lakehouse.table import open_table
from tests.test_cli import batch, load, make_table, run, write_file


@pytest.fixture
def loaded(tmp_path):
    return load(make_table(tmp_path), tmp_path)


def test_read_filters_columns_and_limit(loaded, tmp_path):
    t, _ = loaded
    out = tmp_path / "o.jsonl"
    run("read", t, "--filter", "city = sf", "--filter", "fare >= 10", "--columns", "id,fare",
        "--output", out)
    got = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(r["id"] for r in got) == ["009", "011", "013", "015", "017", "019"]
    assert set(got[0]) == {"id", "fare"}
    run("read", t, "--filter", "id in 001, 002,\"003\"", "--filter", "id not in 002",
        "--output", out, "--sort", "id")
    assert [json.loads(line)["id"] for line in out.read_text().splitlines()] == ["001", "003"]
    run("read", t, "--filter", "at > 2024-06-01 00:17:00", "--output", out, "--sort", "id")
    assert [json.loads(line)["id"] for line in out.read_text().splitlines()] == ["018", "019"]
    run("read", t, "--filter", "id != 000", "--limit", "4", "--output", out)
    assert len(out.read_text().splitlines()) == 4


def test_read_unknown_column_is_a_lakehouse_error(loaded):
    t, _ = loaded
    res = run("read", t, "--columns", "id,nope", ok=False)
    assert res.exit_code == 1 and "nope" in res.stderr and "Help: columns are:" in res.stderr


@pytest.mark.parametrize("suffix", [".parquet", ".csv", ".jsonl"])
def test_read_output_formats(loaded, tmp_path, suffix):
    t, _ = loaded
    out = tmp_path / f"out{suffix}"
    res = run("read", t, "--output", out, "--no-meta")
    assert "wrote 20 of 20 rows" in res.stderr
    if suffix == ".parquet":
        back = pq.read_table(out)
    elif suffix == ".csv":
        back = pcsv.read_csv(out, convert_options=pcsv.ConvertOptions(column_types={"id": pa.string()}))
    else:
        back = pa.Table.from_pylist([json.loads(x) for x in out.read_text().splitlines()])
    assert back.num_rows == 20 and sorted(back.column("id").to_pylist())[0] == "000"
    assert not any(c.startswith("_hoodie") for c in back.column_names)


def test_read_prints_a_table(loaded):
    t, _ = loaded
    out = run("read", t, "--columns", "id,fare", "--sort", "id", "--limit", "3").stdout
    assert "000" in out and "002" in out and "003" not in out and "3 of 20 rows" in out
    assert "20 rows" in run("read", t, "--columns", "id").stdout  # default shows at most 20


def test_time_travel_and_incremental_reads(loaded, tmp_path):
    t, first = loaded
    second = run("write", t, write_file(batch([1, 2], ts=300, fare=1000.0), tmp_path / "u.parquet")).stdout.strip()
    third = run("write", t, write_file(batch([30]), tmp_path / "n.parquet")).stdout.strip()
    out = tmp_path / "o.jsonl"

    def ids_in(*args):
        run("read", t, "--output", out, "--sort", "id", *args)
        return [(r["id"], r["fare"]) for r in map(json.loads, out.read_text().splitlines())]

    assert ids_in("--as-of", first, "--filter", "id in 001,002") == [("001", 2.0), ("002", 3.0)]
    assert ids_in("--filter", "id in 001,002") == [("001", 1001.0), ("002", 1002.0)]
    assert ids_in("--changes-from", first) == [("001", 1001.0), ("002", 1002.0), ("030", 31.0)]
    assert ids_in("--changes-from", first, "--changes-to", second) == [("001", 1001.0), ("002", 1002.0)]
    assert ids_in("--changes-from", second) == [("030", 31.0)]
    assert ids_in("--changes-to", first, "--filter", "id = 005") == [("005", 6.0)]
    assert third > second > first


def test_read_optimized_skips_log_files(loaded, tmp_path):
    t, _ = loaded
    run("write", t, write_file(batch([1], ts=300, fare=1000.0), tmp_path / "u.parquet"))
    if open_table(str(t)).stats().log_files == 0:
        pytest.skip("the write path put this update in a base file")
    out = tmp_path / "o.jsonl"
    run("read", t, "--read-optimized", "--filter", "id = 001", "--output", out)
    assert json.loads(out.read_text())["fare"] == 2.0
