"""Names of base files, log files and file ids: built and parsed here and nowhere else."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass

from lakehouse.storage import paths

BASE_FILE_EXT = ".parquet"

# A leading '.' marks a log file or a hidden file (Spark/Hadoop temporaries), never a base file.
_BASE_RE = re.compile(r"^([^_/.][^_/]*)_(\d+-\d+-\d+)_(\d{14,17})\.parquet$")
_LOG_RE = re.compile(r"^\.([^_/]+)_(\d{14,17})\.log\.(\d+)(?:_(\d+-\d+-\d+))?$")


def is_log_file(path: str) -> bool:
    """Whether the file at ``path`` is a log file (``.<file id>_<base instant>.log.<version>_<token>``),
    by its name: what a write stat names is a base file or a log file."""
    return ".log." in path.rpartition("/")[2]


def new_file_id_prefix() -> str:
    """A new file group's id without its ``-0`` (``FSUtils.createNewFileIdPfx``)."""
    return str(uuid.uuid4())


def new_file_id() -> str:
    return f"{new_file_id_prefix()}-0"


def bucket_file_id(bucket: int) -> str:
    """Bucket index file ids start with the zero-padded bucket number, as Hudi's do."""
    return f"{bucket:08d}-{str(uuid.uuid4())[9:]}-0"


def bucket_of_file_id(file_id: str) -> int | None:
    head = file_id[:8]
    return int(head) if head.isdigit() and file_id[8:9] == "-" else None


def write_token(task_partition: int = 0, stage_id: int = 0, attempt: int = 0) -> str:
    return f"{task_partition}-{stage_id}-{attempt}"


@dataclass(frozen=True, slots=True)
class BaseFileName:
    file_id: str
    write_token: str
    instant_time: str

    def __str__(self) -> str:
        return f"{self.file_id}_{self.write_token}_{self.instant_time}{BASE_FILE_EXT}"

    @classmethod
    def parse(cls, name: str) -> "BaseFileName | None":
        m = _BASE_RE.match(name)
        return cls(*m.groups()) if m else None


@dataclass(frozen=True, slots=True, order=True)
class LogFileName:
    file_id: str
    base_instant: str
    version: int
    write_token: str

    def __str__(self) -> str:
        return f".{self.file_id}_{self.base_instant}.log.{self.version}_{self.write_token}"

    @classmethod
    def parse(cls, name: str) -> "LogFileName | None":
        m = _LOG_RE.match(name)
        if not m:
            return None
        fid, base, version, token = m.groups()
        return cls(fid, base, int(version), token or "")

    @property
    def sort_key(self) -> tuple[int, str]:
        return (self.version, self.write_token)


def partition_metadata_content(commit_time: str, depth: int) -> bytes:
    return (f"#partition metadata\ncommitTime={commit_time}\npartitionDepth={depth}\n").encode()


def join(partition: str, name: str) -> str:
    """A file's path in its partition, checked to stay under the table root."""
    return paths.join(partition, name)
