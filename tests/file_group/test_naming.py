"""Base and log file names: every name Apache Hudi wrote in the fixtures parses and rebuilds byte
for byte; ids and tokens have Hudi's shapes."""

from __future__ import annotations

import re
import uuid

import pytest

from lakehouse.file_group.naming import (BaseFileName, LogFileName, bucket_file_id,
                                         bucket_of_file_id, join, new_file_id,
                                         partition_metadata_content, write_token)
from lakehouse.properties import parse_properties

UUID_RE = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"


def _data_files(fixture_tables):
    for name, root in fixture_tables.items():
        for p in root.rglob("*"):
            if p.is_file() and ".hoodie" not in p.relative_to(root).parts:
                yield name, root, p


@pytest.mark.interop
def test_every_fixture_data_file_name_round_trips(fixture_tables):
    bases = logs = 0
    for name, root, p in _data_files(fixture_tables):
        if p.name.endswith(".parquet"):
            parsed = BaseFileName.parse(p.name)
            assert parsed is not None, p
            assert str(parsed) == p.name
            # Pieces as the spec describes them.
            assert re.fullmatch(UUID_RE + r"-\d+", parsed.file_id), p
            assert re.fullmatch(r"\d+-\d+-\d+", parsed.write_token), p
            assert re.fullmatch(r"\d{17}", parsed.instant_time), p
            bases += 1
        elif ".log." in p.name:
            parsed = LogFileName.parse(p.name)
            assert parsed is not None, p
            assert str(parsed) == p.name
            assert re.fullmatch(UUID_RE + r"-\d+", parsed.file_id), p
            assert parsed.version >= 1
            logs += 1
        else:
            # Nothing else in a table folder looks like a data file.
            assert BaseFileName.parse(p.name) is None and LogFileName.parse(p.name) is None, p
    assert bases >= 40 and logs >= 10


@pytest.mark.interop
def test_log_files_name_the_base_instant_of_their_slice(fixture_tables):
    # v6: a log's base instant is the instant of a base file of the same file group.
    for name, root, p in _data_files(fixture_tables):
        if "/v6_" not in name or ".log." not in p.name:
            continue
        log = LogFileName.parse(p.name)
        bases = [BaseFileName.parse(b.name) for b in p.parent.glob(f"{log.file_id}_*.parquet")]
        assert log.base_instant in {b.instant_time for b in bases}, p


def test_specific_names():
    b = BaseFileName.parse("84e82649-b1ee-4a25-a316-17cc6872616b-0_2-13-62_20250331030642808.parquet")
    assert b == BaseFileName("84e82649-b1ee-4a25-a316-17cc6872616b-0", "2-13-62", "20250331030642808")
    lg = LogFileName.parse(".0712b9f9-d2d5-4cae-bcf4-8fd7146af503-0_20250126040823628.log.2_1-0-1")
    assert lg == LogFileName("0712b9f9-d2d5-4cae-bcf4-8fd7146af503-0", "20250126040823628", 2, "1-0-1")
    # Log names of old Hudi versions carry no write token.
    old = LogFileName.parse(".f1-0_20190101120000.log.3")
    assert old == LogFileName("f1-0", "20190101120000", 3, "")


@pytest.mark.parametrize("name", [
    "f-0_0-1-2_20250101000000000.parquet.crc", ".f-0_0-1-2_20250101000000000.parquet",
    "f-0_0-1_20250101000000000.parquet", "f_0-0_0-1-2_20250101000000000.parquet",
    "f-0_0-1-2_2025.parquet", "f-0_0-1-2_20250101000000000.orc", ".hoodie_partition_metadata",
    "f-0_0-1-2_20250101000000000.log.1_0-1-2",
])
def test_not_base_file_names(name):
    assert BaseFileName.parse(name) is None


@pytest.mark.parametrize("name", [
    "f-0_20250101000000000.log.1_0-1-2", ".f-0_20250101000000000.log._0-1-2",
    ".f-0_20250101000000000.log.1_0-1", ".f-0_20250101000000000.log.1_0-1-2.cdc",
    ".f-0_20250101000000000.log.x_0-1-2", ".f_0-0_20250101000000000.log.1_0-1-2",
    ".f-0_2025.log.1_0-1-2",
])
def test_not_log_file_names(name):
    assert LogFileName.parse(name) is None


def test_log_versions_order_numerically():
    names = [LogFileName("f", "1" * 17, v, tok) for v, tok in
             [(10, "0-1-1"), (2, "1-1-1"), (2, "0-1-1"), (1, "5-5-5")]]
    ordered = sorted(names, key=lambda n: n.sort_key)
    assert [(n.version, n.write_token) for n in ordered] == [(1, "5-5-5"), (2, "0-1-1"),
                                                             (2, "1-1-1"), (10, "0-1-1")]


def test_new_file_ids_are_uuid_dash_zero():
    ids = {new_file_id() for _ in range(100)}
    assert len(ids) == 100
    for fid in ids:
        assert re.fullmatch(UUID_RE + "-0", fid)
        assert uuid.UUID(fid[:-2]).version == 4
        assert "_" not in fid  # '_' separates the parts of a file name


def test_write_token():
    assert write_token() == "0-0-0"
    assert write_token(3, 14, 1) == "3-14-1"


@pytest.mark.parametrize("bucket", [0, 1, 7, 255, 99_999_999])
def test_bucket_file_ids(bucket):
    fid = bucket_file_id(bucket)
    # Hudi: the 8-digit bucket, then the rest of a random UUID from its first '-', then '-0'.
    assert re.fullmatch(rf"{bucket:08d}-[0-9a-f]{{4}}-[0-9a-f]{{4}}-[0-9a-f]{{4}}-[0-9a-f]{{12}}-0", fid)
    assert bucket_of_file_id(fid) == bucket
    assert bucket_file_id(bucket) != fid
    # It is a valid file id in a file name.
    name = f"{fid}_0-0-0_20250101000000000.parquet"
    assert BaseFileName.parse(name).file_id == fid


@pytest.mark.parametrize("fid", ["abcdef01-1111-2222-3333-444455556666-0", "1234567-x", "",
                                 "123456789-1111-2222-3333-444455556666-0", "12345678"])
def test_not_bucket_file_ids(fid):
    assert bucket_of_file_id(fid) is None


def test_join():
    assert join("", "f") == "f"
    assert join("a/b", "f") == "a/b/f"


def test_partition_metadata_content_is_a_java_properties_file():
    props = parse_properties(partition_metadata_content("20250101000000000", 2).decode())
    assert props == {"commitTime": "20250101000000000", "partitionDepth": "2"}
