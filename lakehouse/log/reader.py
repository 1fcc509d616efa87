"""Reading a log file into its blocks, tolerating torn and corrupt ones as Hudi does.

A writer that crashes mid-append leaves a block whose length runs past the end of the file, or
whose reverse pointer does not match its length. Like Hudi's HoodieLogFileReader, such a stretch
becomes one CORRUPT block and reading resumes at the next ``#HUDI#`` magic (a later append may
have written whole blocks after the torn one). Reading never raises on bad bytes; decoding a
block's content is where :class:`~lakehouse.errors.CorruptFileError` comes from.

A CORRUPT block keeps the header of the torn block when that much of it was written (magic,
length, version, type and a whole header inside the torn stretch): its ``instant_time`` then says
whose block was torn. A torn block of a failed write is expected and skipped; one of a committed
instant is committed data the storage lost, which :func:`torn_committed_block` finds so that a
reader can say so instead of returning fewer records.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator

from lakehouse.errors import CorruptFileError
from lakehouse.log.block import LOG_FORMAT_VERSION, MAGIC, BlockType, HeaderKey, LogBlock
from lakehouse.storage.base import Storage

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_PREFIX = len(MAGIC) + 8  # magic and the block length field
# version, type, header count, content length, footer count, reverse pointer
_MIN_BLOCK_LENGTH = 4 + 4 + 4 + 8 + 4 + 8


class _Torn(Exception):
    """The bytes at this position are not a whole, well-formed block."""


def _read_metadata(data: bytes, pos: int, end: int) -> tuple[dict[HeaderKey | int, str], int]:
    if pos + 4 > end:
        raise _Torn
    (count,) = _I32.unpack_from(data, pos)
    pos += 4
    if count < 0:
        raise _Torn
    entries: dict[HeaderKey | int, str] = {}
    for _ in range(count):
        if pos + 8 > end:
            raise _Torn
        key, length = struct.unpack_from(">ii", data, pos)
        pos += 8
        if length < 0 or pos + length > end:
            raise _Torn
        try:
            value = data[pos:pos + length].decode("utf-8")
        except UnicodeDecodeError:
            raise _Torn from None
        pos += length
        # Keys newer than table version 6 (Hudi 1.x adds some) are kept as plain ordinals.
        entries[HeaderKey(key) if 0 <= key < len(HeaderKey) else key] = value
    return entries, pos


def _parse_block(data: bytes, offset: int, path: str) -> LogBlock:
    """The well-formed block at ``offset``; raises :class:`_Torn` otherwise."""
    n = len(data)
    if offset + _PREFIX > n or data[offset:offset + len(MAGIC)] != MAGIC:
        raise _Torn
    (block_length,) = _I64.unpack_from(data, offset + len(MAGIC))
    end = offset + _PREFIX + block_length
    if block_length < _MIN_BLOCK_LENGTH or end > n:
        raise _Torn
    (reverse_pointer,) = _I64.unpack_from(data, end - 8)
    if reverse_pointer != block_length + len(MAGIC):
        raise _Torn
    body_end = end - 8
    pos = offset + _PREFIX
    version, type_ordinal = struct.unpack_from(">ii", data, pos)
    pos += 8
    if version != LOG_FORMAT_VERSION or not 0 <= type_ordinal < len(BlockType):
        raise _Torn
    header, pos = _read_metadata(data, pos, body_end)
    if pos + 8 > body_end:
        raise _Torn
    (content_length,) = _I64.unpack_from(data, pos)
    pos += 8
    if content_length < 0 or pos + content_length > body_end:
        raise _Torn
    content = data[pos:pos + content_length]
    pos += content_length
    footer, pos = _read_metadata(data, pos, body_end)
    if pos != body_end:
        raise _Torn
    return LogBlock(block_type=BlockType(type_ordinal), header=header, footer=footer,
                    content=bytes(content), offset=offset, size=end - offset, path=path,
                    version=version)


def _salvage_header(data: bytes, offset: int, end: int) -> dict[HeaderKey | int, str]:
    """The header of the torn block at ``offset`` if all of it lies before ``end``, else {}."""
    pos = offset + _PREFIX
    if pos + 8 > end or data[offset:offset + len(MAGIC)] != MAGIC:
        return {}
    version, type_ordinal = struct.unpack_from(">ii", data, pos)
    if version != LOG_FORMAT_VERSION or not 0 <= type_ordinal < len(BlockType) \
            or type_ordinal == BlockType.CORRUPT:
        return {}
    try:
        header, _ = _read_metadata(data, pos + 8, end)
    except _Torn:
        return {}
    return header


def iter_log_blocks(data: bytes, path: str = "") -> Iterator[LogBlock]:
    """The blocks of a log file's bytes, in file order, CORRUPT ones included."""
    data = bytes(data)
    offset = 0
    while offset < len(data):
        try:
            block = _parse_block(data, offset, path)
        except _Torn:
            # Resync the way Hudi does: the corrupt stretch runs to the next magic or the end.
            nxt = data.find(MAGIC, offset + 1)
            end = len(data) if nxt < 0 else nxt
            yield LogBlock(block_type=BlockType.CORRUPT, header=_salvage_header(data, offset, end),
                           content=data[offset:end],
                           offset=offset, size=end - offset, path=path)
            offset = end
            continue
        yield block
        offset += block.size


def read_log_blocks(data: bytes, path: str = "") -> list[LogBlock]:
    """All blocks of a log file's bytes; ``path`` only names the file in errors."""
    return list(iter_log_blocks(data, path))


def read_log_file(storage: Storage, path: str) -> list[LogBlock]:
    """All blocks of the log file at ``path`` in ``storage``."""
    return read_log_blocks(storage.read(path), path)


def torn_committed_block(blocks: list[LogBlock], is_committed: Callable[[str], bool],
                         committed_size: int | None = None) -> LogBlock | None:
    """The first CORRUPT block holding committed data, or None.

    A CORRUPT block holds committed data when its salvaged header names a committed instant that
    no rollback command block in ``blocks`` targets, or (its header torn too) when it starts
    before ``committed_size``: the bytes the committed write stats say this file holds (Hudi's
    ``logOffset`` + ``totalWriteBytes``; a lakehouse log file is written whole by one instant).
    A file shorter than ``committed_size`` lost committed bytes even when it ends on a block
    boundary: the returned block is then a zero-length CORRUPT block at the file's end.
    """
    rolled_back = {b.target_instant_time for b in blocks
                   if b.block_type is BlockType.COMMAND and b.target_instant_time}
    end = 0
    for b in blocks:
        end = b.offset + b.size
        if b.block_type is not BlockType.CORRUPT:
            continue
        t = b.instant_time
        if t is not None:
            if t not in rolled_back and is_committed(t):
                return b
        elif committed_size is not None and b.offset < committed_size:
            return b
    if committed_size is not None and end < committed_size:
        path = blocks[-1].path if blocks else ""
        return LogBlock(block_type=BlockType.CORRUPT, header={}, offset=end, size=0, path=path)
    return None


def check_committed_blocks(blocks: list[LogBlock], path: str, is_committed: Callable[[str], bool],
                           committed_size: int | None = None) -> None:
    """Raise :class:`CorruptFileError` naming ``path`` when a torn or missing stretch of the log
    file held committed data (see :func:`torn_committed_block`); a read must not go on with
    fewer records than were committed."""
    b = torn_committed_block(blocks, is_committed, committed_size)
    if b is None:
        return
    whose = f"of committed instant {b.instant_time}" if b.instant_time else "inside the committed bytes"
    if b.size == 0:
        reason = (f"the log file ends at byte {b.offset}, before the {committed_size} bytes its "
                  "committed write stats record: committed log blocks are missing")
    else:
        reason = (f"torn or corrupt log block at offset {b.offset} ({b.size} bytes) {whose}: "
                  "its records were committed and cannot be read")
    raise CorruptFileError(path, reason, help="restore the log file from a backup, or roll back "
                           "the instant that wrote it (`lakehouse rollback`) to drop its records "
                           "knowingly; reading on would silently lose committed records")
