"""The log file reader: block boundaries, and torn or corrupt stretches that never raise."""

from __future__ import annotations

import struct

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakehouse.log import (
    BlockType,
    HeaderKey,
    decode_avro_data_block,
    encode_avro_data_block,
    encode_block,
    encode_delete_block,
    encode_parquet_data_block,
    encode_rollback_command_block,
    iter_log_blocks,
    read_log_blocks,
    read_log_file,
)
from lakehouse.schema import arrow_to_avro_schema
from lakehouse.storage.local import LocalStorage

MAGIC = b"#HUDI#"
TABLE = pa.table({"_hoodie_record_key": ["a", "b"], "v": pa.array([1, None], pa.int64()),
                  "s": ["x", "yy"]})
SCHEMA = arrow_to_avro_schema(TABLE.schema, "t", with_meta_fields=True)


def sample_blocks() -> list[bytes]:
    return [
        encode_avro_data_block(TABLE, SCHEMA, "001"),
        encode_delete_block(["a"], ["p"], None, "002", SCHEMA),
        encode_rollback_command_block("003", "002"),
        encode_parquet_data_block(TABLE, SCHEMA, "004"),
        encode_block(BlockType.AVRO_DATA, {HeaderKey.INSTANT_TIME: "005"}, b"", {}),
    ]


BLOCKS = sample_blocks()
FILE = b"".join(BLOCKS)
BOUNDARIES = [0]
for _b in BLOCKS:
    BOUNDARIES.append(BOUNDARIES[-1] + len(_b))
# the torn-tail property below relies on block bodies without a stray magic
assert MAGIC not in b"".join(b[6:] for b in BLOCKS)


def assert_tiles(blocks, data: bytes) -> None:
    """Blocks cover the file without gaps or overlaps, and each holds its own bytes."""
    pos = 0
    for block in blocks:
        assert block.offset == pos and block.size > 0
        if block.block_type == BlockType.CORRUPT:
            assert block.content == data[pos:pos + block.size]
        pos += block.size
    assert pos == len(data)


def test_blocks_and_offsets():
    blocks = read_log_blocks(FILE, "f.log")
    assert [b.block_type for b in blocks] == [BlockType.AVRO_DATA, BlockType.DELETE,
                                             BlockType.COMMAND, BlockType.PARQUET_DATA,
                                             BlockType.AVRO_DATA]
    assert [b.offset for b in blocks] == BOUNDARIES[:-1]
    assert [b.instant_time for b in blocks] == ["001", "002", "003", "004", "005"]
    assert all(b.path == "f.log" for b in blocks)
    assert decode_avro_data_block(blocks[0]).column("s").to_pylist() == ["x", "yy"]
    assert_tiles(blocks, FILE)
    assert read_log_blocks(b"") == []


@pytest.mark.interop
def test_fixture_files_concatenated(hudi_fixtures):
    files = sorted((hudi_fixtures / "log_files").glob("*/.*.log.*"))
    data = b"".join(p.read_bytes() for p in files)
    blocks = read_log_blocks(data)
    assert len(blocks) == len(files) and BlockType.CORRUPT not in {b.block_type for b in blocks}
    assert [b.size for b in blocks] == [p.stat().st_size for p in files]


def test_read_log_file_through_storage(tmp_path):
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / ".f_1.log.1_0-0-0").write_bytes(FILE)
    blocks = read_log_file(LocalStorage(str(tmp_path)), "p/.f_1.log.1_0-0-0")
    assert len(blocks) == 5 and blocks[0].path == "p/.f_1.log.1_0-0-0"


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=len(FILE)))
def test_any_truncation_keeps_whole_blocks_and_at_most_one_corrupt(cut):
    data = FILE[:cut]
    blocks = read_log_blocks(data)
    whole = [i for i in range(len(BLOCKS)) if BOUNDARIES[i + 1] <= cut]
    good = [b for b in blocks if b.block_type != BlockType.CORRUPT]
    assert [b.offset for b in good] == [BOUNDARIES[i] for i in whole]
    assert all(data[b.offset:b.offset + b.size] == BLOCKS[i] for b, i in zip(good, whole))
    corrupt = [b for b in blocks if b.block_type == BlockType.CORRUPT]
    assert len(corrupt) == (0 if cut in BOUNDARIES else 1)
    if corrupt:
        assert blocks[-1] is corrupt[0] and corrupt[0].offset == BOUNDARIES[len(whole)]
    assert_tiles(blocks, data)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300), st.integers(min_value=0, max_value=len(FILE)),
       st.integers(min_value=0, max_value=len(FILE)))
def test_arbitrary_bytes_never_raise(junk, at, upto):
    # garbage spliced anywhere, including a stray magic in it
    data = FILE[:at] + junk + MAGIC + junk[:upto % 17] + FILE[min(at, upto):]
    assert_tiles(read_log_blocks(data), data)
    assert_tiles(read_log_blocks(junk), junk)


def test_torn_block_followed_by_a_later_append():
    torn = BLOCKS[1][:-20]
    data = BLOCKS[0] + torn + BLOCKS[2]
    blocks = read_log_blocks(data)
    assert [b.block_type for b in blocks] == [BlockType.AVRO_DATA, BlockType.CORRUPT,
                                             BlockType.COMMAND]
    assert blocks[1].offset == len(BLOCKS[0]) and blocks[1].size == len(torn)
    assert blocks[2].target_instant_time == "002"


def test_garbage_before_the_first_block():
    data = b"garbage!" + FILE
    blocks = read_log_blocks(data)
    assert blocks[0].block_type == BlockType.CORRUPT and blocks[0].size == 8
    assert [b.offset for b in blocks[1:]] == [o + 8 for o in BOUNDARIES[:-1]]


def test_reverse_pointer_mismatch_is_corrupt():
    bad = bytearray(BLOCKS[2])
    bad[-1] ^= 1
    blocks = read_log_blocks(bytes(bad) + BLOCKS[0])
    assert [b.block_type for b in blocks] == [BlockType.CORRUPT, BlockType.AVRO_DATA]


def frame(body: bytes) -> bytes:
    """A block whose length and reverse pointer agree, around an arbitrary body."""
    length = len(body) + 8
    return MAGIC + struct.pack(">q", length) + body + struct.pack(">q", length + 6)


@pytest.mark.parametrize("body", [
    # header says 2 entries, holds 1: a truncated header inside consistent framing
    struct.pack(">iii", 1, 0, 2) + struct.pack(">ii", 0, 3) + b"001"
    + struct.pack(">q", 0) + struct.pack(">i", 0),
    # header entry longer than the block
    struct.pack(">iii", 1, 0, 1) + struct.pack(">ii", 0, 999) + b"001",
    # content length past the block
    struct.pack(">iii", 1, 3, 0) + struct.pack(">q", 100) + b"abc" + struct.pack(">i", 0),
    # bytes left over after the footer
    struct.pack(">iii", 1, 3, 0) + struct.pack(">q", 0) + struct.pack(">i", 0) + b"extra",
    # unknown log format version and block type
    struct.pack(">iii", 2, 3, 0) + struct.pack(">q", 0) + struct.pack(">i", 0),
    struct.pack(">iii", 1, 42, 0) + struct.pack(">q", 0) + struct.pack(">i", 0),
    # a header value that is not UTF-8
    struct.pack(">iii", 1, 3, 1) + struct.pack(">ii", 0, 2) + b"\xff\xfe"
    + struct.pack(">q", 0) + struct.pack(">i", 0),
    # negative header count
    struct.pack(">iii", 1, 3, -1) + struct.pack(">q", 0) + struct.pack(">i", 0),
])
def test_malformed_block_inside_valid_framing_is_corrupt(body):
    data = frame(body) + BLOCKS[2]
    blocks = read_log_blocks(data)
    assert [b.block_type for b in blocks] == [BlockType.CORRUPT, BlockType.COMMAND]
    assert blocks[0].size == len(data) - len(BLOCKS[2])


def test_tiny_and_negative_lengths():
    for length in (-1, 0, 31, 2**62):
        data = MAGIC + struct.pack(">q", length) + b"\x00" * 40
        (block,) = read_log_blocks(data)
        assert block.block_type == BlockType.CORRUPT and block.size == len(data)


def test_unknown_header_keys_are_kept_as_ordinals():
    data = encode_block(BlockType.COMMAND, {HeaderKey.INSTANT_TIME: "1", 8: "x"}, b"")
    (block,) = read_log_blocks(data)
    assert block.header == {HeaderKey.INSTANT_TIME: "1", 8: "x"}
    assert encode_block(block.block_type, block.header, block.content, block.footer) == data


def test_iter_log_blocks_is_lazy():
    it = iter_log_blocks(FILE)
    assert next(it).instant_time == "001"
