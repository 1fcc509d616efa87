"""Hudi log files: block framing, block contents and the tolerant reader."""

from lakehouse.log.block import (
    BlockType,
    HeaderKey,
    LogBlock,
    decode_avro_data_block,
    decode_delete_block,
    decode_parquet_data_block,
    encode_avro_data_block,
    encode_block,
    encode_delete_block,
    encode_parquet_data_block,
    encode_rollback_command_block,
)
from lakehouse.log.reader import iter_log_blocks, read_log_blocks, read_log_file

__all__ = [
    "BlockType",
    "HeaderKey",
    "LogBlock",
    "decode_avro_data_block",
    "decode_delete_block",
    "decode_parquet_data_block",
    "encode_avro_data_block",
    "encode_block",
    "encode_delete_block",
    "encode_parquet_data_block",
    "encode_rollback_command_block",
    "iter_log_blocks",
    "read_log_blocks",
    "read_log_file",
]
